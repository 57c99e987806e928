package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Static checks the one shared bearer token of a gateway without OAuth
// (expose.agent.mcp.auth_token_env) and hands next the static [Caller]
// after authorize has seen it; an authorize error is a 403 carrying its
// message. An empty token checks nothing: anyone reaching the port is the
// static caller. The comparison is constant-time over digests, so neither
// the token's content nor its length leaks through timing; the header is
// removed before next runs, so nothing downstream can forward it.
func Static(next http.Handler, token string, authorize func(*Caller) error) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" {
			scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway"`)
				http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
				return
			}
		}
		c := &Caller{Subject: StaticSubject, Static: true}
		if authorize != nil {
			if err := authorize(c); err != nil {
				http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
				return
			}
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
	})
}
