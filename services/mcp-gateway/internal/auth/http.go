package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Middleware wraps next so that only requests with a valid access token
// reach it. The token comes from the Authorization header alone ("Bearer",
// any case; never a query or body parameter).
//
// A refusal never reaches next:
//   - no token: 401 with WWW-Authenticate: Bearer resource_metadata="…"
//     and scope="…" when scopes are configured, and no error, as RFC 6750
//     asks of a request that carried no credentials;
//   - a token that fails a check: 401 with error="invalid_token" and an
//     error_description naming the check;
//   - a valid token lacking a required scope: 403 with
//     error="insufficient_scope" and the scope to ask for;
//   - authorize (may be nil), called with the verified caller, returning
//     an error: 403 with the error's text as the body and no challenge,
//     since another token or scope would not change the policy's answer
//     (insufficient_scope would send an MCP client into a pointless
//     step-up authorization).
//
// The body is a short plain-text line saying which check failed. Every
// refusal is logged with its reason and, when the token's signature
// verified, its sub; never the token.
//
// next gets the request with the [Caller] in its context ([CallerFrom])
// and without the Authorization header, so nothing downstream can forward
// the token. authorize may fill in the caller's Roles.
func (v *Verifier) Middleware(next http.Handler, authorize func(*Caller) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := bearer(r)
		var (
			c   *Caller
			sub string
		)
		if err == nil {
			c, sub, err = v.verify(r.Context(), token)
		}
		if err != nil {
			v.refuse(w, r, err, sub)
			return
		}
		serve(next, w, r, c, authorize, v.log)
	})
}

// Static wraps next with the shared-token check of a gateway without
// OAuth: the request must carry "Authorization: Bearer <token>", compared
// in constant time over digests so neither the token's content nor its
// length leaks through timing. An empty token checks nothing. Either way
// next gets the one caller, Subject [StaticSubject], in the request's
// context and no Authorization header; authorize works as in
// [Verifier.Middleware].
func Static(next http.Handler, token string, authorize func(*Caller) error) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" {
			scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				slog.Default().InfoContext(r.Context(), "refusing a request", "status", http.StatusUnauthorized, "reason", "no or wrong shared bearer token")
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway"`)
				http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
				return
			}
		}
		serve(next, w, r, &Caller{Subject: StaticSubject, Static: true}, authorize, slog.Default())
	})
}

// serve runs the policy hook, then next with c in the context and the
// Authorization header gone.
func serve(next http.Handler, w http.ResponseWriter, r *http.Request, c *Caller, authorize func(*Caller) error, log *slog.Logger) {
	if authorize != nil {
		if err := authorize(c); err != nil {
			log.InfoContext(r.Context(), "refusing a request by policy", "status", http.StatusForbidden, "sub", c.Subject, "error", err)
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
	}
	next.ServeHTTP(w, withoutAuthorization(WithCaller(r.Context(), c), r))
}

// withoutAuthorization returns r with ctx and without its Authorization
// header, leaving r itself as it came (a handler must not change its
// request). Only the header map is copied, and only when it holds the
// header: most requests of a gateway without authentication carry none,
// and a full Clone of every request was the largest allocation of the
// gateway's handler chain before the call is read.
func withoutAuthorization(ctx context.Context, r *http.Request) *http.Request {
	r = r.WithContext(ctx)
	if _, ok := r.Header["Authorization"]; ok {
		h := r.Header.Clone()
		delete(h, "Authorization")
		r.Header = h
	}
	return r
}

// bearer returns the request's bearer token. An Authorization header with
// another scheme counts as none; a Bearer one without a token, with more
// than one, or twice, is malformed.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", ErrNoToken
	case len(values) > 1:
		return "", fmt.Errorf("%w: more than one Authorization header", ErrMalformed)
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the Authorization scheme is not Bearer", ErrNoToken)
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", fmt.Errorf("%w: the Authorization header holds no single bearer token", ErrMalformed)
	}
	return token, nil
}

// refuse answers a refused request and logs why.
func (v *Verifier) refuse(w http.ResponseWriter, r *http.Request, err error, sub string) {
	s := sentinel(err)
	status, params := http.StatusUnauthorized, []string{}
	switch s {
	case ErrNoToken:
	case ErrScope:
		status = http.StatusForbidden
		params = append(params, `error="insufficient_scope"`)
	default:
		params = append(params, `error="invalid_token"`, `error_description="`+quotable(s.Error())+`"`)
	}
	if len(v.cfg.Auth.Scopes) > 0 {
		params = append(params, `scope="`+quotable(strings.Join(v.cfg.Auth.Scopes, " "))+`"`)
	}
	params = append(params, `resource_metadata="`+quotable(v.metadataURL)+`"`)
	args := []any{"status", status, "reason", s.Error(), "error", err}
	if sub != "" {
		args = append(args, "sub", sub)
	}
	v.log.InfoContext(r.Context(), "refusing a request", args...)
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	body := "unauthorized: " + s.Error()
	if status == http.StatusForbidden {
		body = "forbidden: " + s.Error() + ": the token must carry scope " + strings.Join(v.cfg.Auth.Scopes, " ")
	}
	http.Error(w, body, status)
}

// quotable drops what cannot stand in a quoted auth-param value (RFC 6750
// restricts error_description further, to printable ASCII without " and \).
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
}

// MetadataURL is the absolute URL of the resource's RFC 9728 metadata,
// as 401 challenges name it: scheme://host/.well-known/oauth-protected-resource
// followed by the resource's path.
func (v *Verifier) MetadataURL() string { return v.metadataURL }

// MetadataHandler serves the RFC 9728 protected resource metadata: the
// resource, its one authorization server (the issuer), the configured
// scopes and bearer_methods_supported ["header"]. It is public (no token)
// and readable cross-origin, as browser-based MCP clients need. Mount it
// at every path of [Verifier.MetadataPaths].
func (v *Verifier) MetadataHandler() http.Handler {
	doc, err := json.Marshal(struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
	}{v.cfg.Resource, []string{v.cfg.Auth.Issuer}, v.cfg.Auth.Scopes, []string{"header"}})
	if err != nil {
		panic(fmt.Sprintf("auth: encoding protected resource metadata: %v", err))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Write(doc)
	})
}
