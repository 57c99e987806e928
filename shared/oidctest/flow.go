package oidctest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// CodeFlow is what [Provider.AuthorizationCode] asks for, as an MCP client
// would.
type CodeFlow struct {
	// Resource is the RFC 8707 resource parameter, sent on both the
	// authorization and the token request; it becomes the token's aud.
	Resource string
	// Scopes are requested; empty sends no scope parameter, and the
	// provider grants "openid".
	Scopes []string
	// LoginHint names the user who logs in; empty means the first.
	LoginHint string
}

// AuthorizationCode gets an access token the way an MCP client does, all
// over HTTP: it reads the provider's metadata, registers a public client
// (RFC 7591), authorizes with PKCE S256 following the redirects through
// the automatic login, and redeems the code at the token endpoint.
func (p *Provider) AuthorizationCode(tb testing.TB, flow CodeFlow) string {
	tb.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	var meta struct {
		AuthorizationEndpoint string `json:"authorization_endpoint"`
		TokenEndpoint         string `json:"token_endpoint"`
		RegistrationEndpoint  string `json:"registration_endpoint"`
	}
	metaURL, _ := url.Parse(p.issuer)
	metaURL.Path = "/.well-known/oauth-authorization-server" + metaURL.Path
	getJSON(tb, hc, metaURL.String(), &meta)

	const redirectURI = "http://127.0.0.1/oidctest-callback"
	body, _ := json.Marshal(map[string]any{
		"redirect_uris":              []string{redirectURI},
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code"},
		"client_name":                "oidctest flow",
	})
	resp, err := hc.Post(meta.RegistrationEndpoint, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("oidctest: registering a client: %v", err)
	}
	var reg registration
	decodeJSON(tb, resp, http.StatusCreated, &reg)

	verifier := randomID() + randomID()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {reg.ClientID},
		"redirect_uri":          {redirectURI},
		"state":                 {randomID()},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
	}
	if len(flow.Scopes) > 0 {
		q.Set("scope", strings.Join(flow.Scopes, " "))
	}
	if flow.Resource != "" {
		q.Set("resource", flow.Resource)
	}
	if flow.LoginHint != "" {
		q.Set("login_hint", flow.LoginHint)
	}
	var final *url.URL
	browser := &http.Client{
		Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), redirectURI) {
				final = req.URL
				return http.ErrUseLastResponse
			}
			if len(via) > 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	resp, err = browser.Get(meta.AuthorizationEndpoint + "?" + q.Encode())
	if err != nil {
		tb.Fatalf("oidctest: authorizing: %v", err)
	}
	resp.Body.Close()
	if final == nil {
		tb.Fatalf("oidctest: authorizing: got status %d without a redirect to the client, want a redirect with a code", resp.StatusCode)
	}
	if e := final.Query().Get("error"); e != "" {
		tb.Fatalf("oidctest: authorizing: got error %q (%s), want a code", e, final.Query().Get("error_description"))
	}
	if got, want := final.Query().Get("state"), q.Get("state"); got != want {
		tb.Fatalf("oidctest: authorizing: got state %q, want %q", got, want)
	}
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {final.Query().Get("code")},
		"redirect_uri":  {redirectURI},
		"client_id":     {reg.ClientID},
		"code_verifier": {verifier},
	}
	if flow.Resource != "" {
		form.Set("resource", flow.Resource)
	}
	return redeem(tb, hc, meta.TokenEndpoint, form, nil)
}

// ClientCredentials gets an access token for a client added with
// [Provider.AddClient] through the token endpoint, for resource (its aud)
// and scopes.
func (p *Provider) ClientCredentials(tb testing.TB, id, secret, resource string, scopes ...string) string {
	tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if resource != "" {
		form.Set("resource", resource)
	}
	return redeem(tb, &http.Client{Timeout: 10 * time.Second}, p.issuer+"/oauth/token", form, func(r *http.Request) {
		r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	})
}

// redeem posts form to the token endpoint and returns the access token.
func redeem(tb testing.TB, hc *http.Client, endpoint string, form url.Values, auth func(*http.Request)) string {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatalf("oidctest: building the token request: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if auth != nil {
		auth(req)
	}
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatalf("oidctest: requesting a token: %v", err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	decodeJSON(tb, resp, http.StatusOK, &tok)
	if tok.AccessToken == "" || !strings.EqualFold(tok.TokenType, "Bearer") {
		tb.Fatalf("oidctest: token response: got token type %q and %d bytes of token, want a Bearer token", tok.TokenType, len(tok.AccessToken))
	}
	return tok.AccessToken
}

func getJSON(tb testing.TB, hc *http.Client, u string, v any) {
	tb.Helper()
	resp, err := hc.Get(u)
	if err != nil {
		tb.Fatalf("oidctest: getting %s: %v", u, err)
	}
	decodeJSON(tb, resp, http.StatusOK, v)
}

func decodeJSON(tb testing.TB, resp *http.Response, status int, v any) {
	tb.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("oidctest: reading %s: %v", resp.Request.URL, err)
	}
	if resp.StatusCode != status {
		tb.Fatalf("oidctest: %s %s: got status %d (%s), want %d", resp.Request.Method, resp.Request.URL, resp.StatusCode, body, status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		tb.Fatalf("oidctest: decoding %s: %v", resp.Request.URL, fmt.Errorf("%w in %s", err, body))
	}
}
