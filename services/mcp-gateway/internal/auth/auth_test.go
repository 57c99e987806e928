package auth_test

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// scope is the scope the gateways under test require.
const scope = "mcp:tools"

// users are the provider's: alice's groups are a list, bob's a string,
// carol has none.
var users = []oidctest.User{
	{Subject: "alice", Groups: []string{"ops", "dev"}},
	{Subject: "bob", Groups: "readers"},
	{Subject: "carol"},
}

// gateway is a protected resource under test: a verifier in front of a
// handler that records what reached it.
type gateway struct {
	p        *oidctest.Provider
	v        *auth.Verifier
	url      string // base URL
	resource string // url + "/mcp"
	logs     *logBuffer

	mu      sync.Mutex
	callers []*auth.Caller
	headers []http.Header
}

// logBuffer collects a verifier's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startGateway runs a gateway on 127.0.0.1 whose verifier trusts p, with
// scope required; edit adjusts the verifier's config, authorize is the
// policy hook.
func startGateway(t testing.TB, p *oidctest.Provider, edit func(*auth.Config), authorize func(*auth.Caller) error) *gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{p: p, url: "http://" + ln.Addr().String(), logs: &logBuffer{}}
	g.resource = g.url + "/mcp"
	cfg := auth.Config{
		Auth:     config.Auth{Issuer: p.Issuer(), Scopes: []string{scope}},
		Resource: g.resource,
		Logger:   slog.New(slog.NewTextHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	g.v, err = auth.NewVerifier(t.Context(), cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	t.Cleanup(g.v.Close)
	mux := http.NewServeMux()
	g.v.Mount(mux)
	mux.Handle("/mcp", g.v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.callers = append(g.callers, auth.CallerFrom(r.Context()))
		g.headers = append(g.headers, r.Header.Clone())
		g.mu.Unlock()
		io.WriteString(w, "ok")
	}), authorize))
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return g
}

// reached counts the requests that got through to the handler.
func (g *gateway) reached() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.callers)
}

// call sends a POST to /mcp with the given Authorization header (none
// when empty).
func (g *gateway) call(t testing.TB, authorization string) (status int, challenge, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.resource, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("calling the gateway: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// waitReady polls until the verifier knows the issuer's keys.
func (g *gateway) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !g.v.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("verifier not ready after 10s; logs:\n%s", g.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// valid is a token the gateway accepts, for the provider's first user.
func (g *gateway) valid() map[string]any { return g.p.Claims(g.resource, scope) }

// unsigned makes a token with alg none, kid of the provider's key.
func unsigned(t testing.TB, p *oidctest.Provider, claims map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims(claims))
	tok.Header["kid"] = p.Key().ID
	s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hmacWithPublicKey makes an HS256 token whose secret is the provider's
// public key in PEM, the classic algorithm confusion attack.
func hmacWithPublicKey(t testing.TB, p *oidctest.Provider, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(p.Key().Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claims))
	tok.Header["kid"] = p.Key().ID
	s, err := tok.SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func with(c map[string]any, k string, v any) map[string]any {
	c = maps(c)
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

func maps(c map[string]any) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

func TestMetadata(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	if got, want := g.v.MetadataURL(), g.url+"/.well-known/oauth-protected-resource/mcp"; got != want {
		t.Errorf("got MetadataURL %s, want %s", got, want)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		t.Run(path, func(t *testing.T) {
			resp, err := http.Get(g.url + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("got status %d without a token, want 200", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			var doc map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"resource":                 g.resource,
				"authorization_servers":    []any{p.Issuer()},
				"scopes_supported":         []any{scope},
				"bearer_methods_supported": []any{"header"},
			}
			if !equalJSON(doc, want) {
				t.Errorf("got metadata %v, want %v", doc, want)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestNoToken(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	for _, header := range []string{"", "Basic YWxpY2U6c2VjcmV0"} {
		status, challenge, body := g.call(t, header)
		if status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: got status %d, want 401", header, status)
		}
		want := `Bearer scope="` + scope + `", resource_metadata="` + g.v.MetadataURL() + `"`
		if challenge != want {
			t.Errorf("Authorization %q: got challenge %s, want %s", header, challenge, want)
		}
		if !strings.Contains(body, auth.ErrNoToken.Error()) {
			t.Errorf("Authorization %q: got body %q, want it to say %q", header, body, auth.ErrNoToken)
		}
	}
	// A token anywhere but the Authorization header is no token.
	token := p.Mint(g.valid())
	resp, err := http.Post(g.resource+"?access_token="+token, "application/x-www-form-urlencoded", strings.NewReader("access_token="+token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(got, "error=") {
		t.Errorf("token in query and body: got %d %s, want 401 without error", resp.StatusCode, got)
	}
	if n := g.reached(); n != 0 {
		t.Errorf("got %d requests through, want none", n)
	}
}

func TestRefusals(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	other := oidctest.NewKey(t)
	now := time.Now()
	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"malformed", "not.a.jwt", auth.ErrMalformed},
		{"two segments", "abc.def", auth.ErrMalformed},
		{"expired", p.Mint(with(g.valid(), "exp", now.Add(-2*time.Hour).Unix())), auth.ErrExpired},
		{"no exp", p.Mint(with(g.valid(), "exp", nil)), auth.ErrExpired},
		{"not yet valid", p.Mint(with(g.valid(), "nbf", now.Add(time.Hour).Unix())), auth.ErrNotYetValid},
		{"issued in the future", p.Mint(with(g.valid(), "iat", now.Add(time.Hour).Unix())), auth.ErrNotYetValid},
		{"wrong issuer", p.Mint(with(g.valid(), "iss", "http://127.0.0.1:1")), auth.ErrIssuer},
		{"issuer with trailing slash", p.Mint(with(g.valid(), "iss", p.Issuer()+"/")), auth.ErrIssuer},
		{"no issuer", p.Mint(with(g.valid(), "iss", nil)), auth.ErrIssuer},
		{"wrong audience", p.Mint(with(g.valid(), "aud", g.url+"/other")), auth.ErrAudience},
		{"no audience", p.Mint(with(g.valid(), "aud", nil)), auth.ErrAudience},
		{"bad signature", p.MintWith(other.Renamed(p.Key().ID), nil, g.valid()), auth.ErrSignature},
		{"unknown key", p.MintWith(other, nil, g.valid()), auth.ErrUnknownKey},
		{"alg none", unsigned(t, p, g.valid()), auth.ErrAlgorithm},
		{"HS256 keyed with the public key", hmacWithPublicKey(t, p, g.valid()), auth.ErrAlgorithm},
		{"missing sub", p.Mint(with(g.valid(), "sub", nil)), auth.ErrSubject},
		{"empty sub", p.Mint(with(g.valid(), "sub", "")), auth.ErrSubject},
		{"ID token typ", p.MintWith(p.Key(), map[string]any{"typ": "id_token+jwt"}, g.valid()), auth.ErrTokenType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := g.v.Verify(t.Context(), tt.token); !errors.Is(err, tt.want) {
				t.Errorf("Verify: got error %v, want %v", err, tt.want)
			}
			status, challenge, body := g.call(t, "Bearer "+tt.token)
			if status != http.StatusUnauthorized {
				t.Errorf("got status %d, want 401", status)
			}
			want := `Bearer error="invalid_token", error_description="` + tt.want.Error() + `", scope="` + scope + `", resource_metadata="` + g.v.MetadataURL() + `"`
			if challenge != want {
				t.Errorf("got challenge %s, want %s", challenge, want)
			}
			if !strings.Contains(body, tt.want.Error()) {
				t.Errorf("got body %q, want it to name %q", body, tt.want)
			}
			if strings.Contains(g.logs.String(), tt.token) {
				t.Errorf("the log holds the token")
			}
		})
	}
	if n := g.reached(); n != 0 {
		t.Errorf("got %d requests through, want none", n)
	}
	if logs := g.logs.String(); !strings.Contains(logs, "sub=alice") || !strings.Contains(logs, "reason=\"token expired\"") {
		t.Errorf("got logs without the reason and sub of a verified but expired token:\n%s", logs)
	}
}

func TestAlgorithmAllowlist(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, func(c *auth.Config) { c.Auth.Algorithms = []string{"ES256"} }, nil)
	g.waitReady(t)
	status, challenge, _ := g.call(t, "Bearer "+p.Mint(g.valid()))
	if status != http.StatusUnauthorized || !strings.Contains(challenge, auth.ErrAlgorithm.Error()) {
		t.Errorf("got %d %s for RS256 with only ES256 allowed, want 401 naming %q", status, challenge, auth.ErrAlgorithm)
	}
}

func TestConfigRefusals(t *testing.T) {
	tests := []struct {
		name string
		cfg  auth.Config
	}{
		{"no issuer", auth.Config{Resource: "http://127.0.0.1:1/mcp"}},
		{"no resource", auth.Config{Auth: config.Auth{Issuer: "http://127.0.0.1:1"}}},
		{"relative resource", auth.Config{Auth: config.Auth{Issuer: "http://127.0.0.1:1"}, Resource: "/mcp"}},
		{"HMAC", auth.Config{Auth: config.Auth{Issuer: "http://127.0.0.1:1", Algorithms: []string{"HS256"}}, Resource: "http://127.0.0.1:1/mcp"}},
		{"none", auth.Config{Auth: config.Auth{Issuer: "http://127.0.0.1:1", Algorithms: []string{"none"}}, Resource: "http://127.0.0.1:1/mcp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := auth.NewVerifier(t.Context(), tt.cfg)
			if err == nil {
				v.Close()
			}
			if !errors.Is(err, auth.ErrInvalidConfig) {
				t.Errorf("got error %v, want %v", err, auth.ErrInvalidConfig)
			}
		})
	}
}

func TestInsufficientScope(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	for _, claims := range []map[string]any{
		p.Claims(g.resource),
		p.Claims(g.resource, "openid", "mcp:other"),
	} {
		token := p.Mint(claims)
		if c, err := g.v.Verify(t.Context(), token); !errors.Is(err, auth.ErrScope) || c == nil || c.Subject != "alice" {
			t.Errorf("Verify: got %+v, %v, want alice and %v", c, err, auth.ErrScope)
		}
		status, challenge, body := g.call(t, "Bearer "+token)
		if status != http.StatusForbidden {
			t.Errorf("got status %d, want 403", status)
		}
		want := `Bearer error="insufficient_scope", scope="` + scope + `", resource_metadata="` + g.v.MetadataURL() + `"`
		if challenge != want {
			t.Errorf("got challenge %s, want %s", challenge, want)
		}
		if !strings.Contains(body, auth.ErrScope.Error()) || !strings.Contains(body, scope) {
			t.Errorf("got body %q, want it to name %q and %s", body, auth.ErrScope, scope)
		}
	}
	if n := g.reached(); n != 0 {
		t.Errorf("got %d requests through, want none", n)
	}
}

func TestAccepted(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	tests := []struct {
		name   string
		claims map[string]any
		header string // scheme as sent
		want   auth.Caller
	}{
		{"groups list", g.valid(), "Bearer", auth.Caller{Subject: "alice", ClientID: "test-client", Groups: []string{"ops", "dev"}, Scopes: []string{scope}}},
		{"groups string", with(with(g.valid(), "sub", "bob"), "groups", "readers"), "bearer", auth.Caller{Subject: "bob", ClientID: "test-client", Groups: []string{"readers"}, Scopes: []string{scope}}},
		{"groups of other types", with(with(g.valid(), "groups", []any{"a", 7, "b"}), "azp", nil), "BEARER", auth.Caller{Subject: "alice", ClientID: "test-client", Groups: []string{"a", "b"}, Scopes: []string{scope}}},
		{"groups not strings", with(g.valid(), "groups", map[string]any{"x": 1}), "Bearer", auth.Caller{Subject: "alice", ClientID: "test-client", Scopes: []string{scope}}},
		{"scp list, client_id only", with(with(with(g.valid(), "scope", nil), "scp", []any{"openid", scope}), "azp", nil), "Bearer", auth.Caller{Subject: "alice", ClientID: "test-client", Groups: []string{"ops", "dev"}, Scopes: []string{"openid", scope}}},
		{"azp over client_id", with(g.valid(), "azp", "other-client"), "Bearer", auth.Caller{Subject: "alice", ClientID: "other-client", Groups: []string{"ops", "dev"}, Scopes: []string{scope}}},
		{"audience list", with(g.valid(), "aud", []string{"x", g.resource}), "Bearer", auth.Caller{Subject: "alice", ClientID: "test-client", Groups: []string{"ops", "dev"}, Scopes: []string{scope}}},
		{"expired within leeway", with(g.valid(), "exp", time.Now().Add(-20*time.Second).Unix()), "Bearer", auth.Caller{Subject: "alice", ClientID: "test-client", Groups: []string{"ops", "dev"}, Scopes: []string{scope}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := g.reached()
			status, _, body := g.call(t, tt.header+" "+p.Mint(tt.claims))
			if status != http.StatusOK {
				t.Fatalf("got %d %q, want 200", status, body)
			}
			g.mu.Lock()
			c, h := g.callers[before], g.headers[before]
			g.mu.Unlock()
			if c == nil || !equalJSON(*c, tt.want) {
				t.Errorf("got caller %+v, want %+v", c, tt.want)
			}
			if _, ok := h["Authorization"]; ok {
				t.Errorf("got an Authorization header downstream, want none")
			}
		})
	}
	t.Run("typ JWT and no typ", func(t *testing.T) {
		for _, typ := range []any{"JWT", "application/at+jwt", nil} {
			if _, err := g.v.Verify(t.Context(), p.MintWith(p.Key(), map[string]any{"typ": typ}, g.valid())); err != nil {
				t.Errorf("typ %v: got %v, want the token accepted", typ, err)
			}
		}
	})
}

func TestAuthorizeHook(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	denied := errors.New("expose.agent.mcp.policy: no role matches groups [readers]")
	g := startGateway(t, p, nil, func(c *auth.Caller) error {
		if slices.Contains(c.Groups, "ops") {
			c.Roles = []string{"operator"}
			return nil
		}
		return denied
	})
	g.waitReady(t)
	status, challenge, body := g.call(t, "Bearer "+p.Mint(with(with(g.valid(), "sub", "bob"), "groups", "readers")))
	if status != http.StatusForbidden || challenge != "" || !strings.Contains(body, denied.Error()) {
		t.Errorf("got %d, challenge %q, body %q; want 403, no challenge, body naming %q", status, challenge, body, denied)
	}
	if n := g.reached(); n != 0 {
		t.Fatalf("got %d requests through, want none", n)
	}
	if status, _, _ := g.call(t, "Bearer "+p.Mint(g.valid())); status != http.StatusOK {
		t.Fatalf("got status %d for an operator, want 200", status)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if got := g.callers[0].Roles; !slices.Equal(got, []string{"operator"}) {
		t.Errorf("got roles %v, want [operator]", got)
	}
}

func TestKeyRotation(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, func(c *auth.Config) { c.RefreshUnknownKIDEvery = time.Hour }, nil)
	g.waitReady(t)
	old := p.Mint(g.valid())
	if _, err := g.v.Verify(t.Context(), old); err != nil {
		t.Fatalf("token of the first key: got %v, want accepted", err)
	}
	p.RotateKey()
	if _, err := g.v.Verify(t.Context(), p.Mint(g.valid())); err != nil {
		t.Fatalf("token of the new key: got %v, want accepted without a restart", err)
	}
	if _, err := g.v.Verify(t.Context(), old); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("token of the withdrawn key: got %v, want %v", err, auth.ErrUnknownKey)
	}
}

func TestUnknownKIDRateLimit(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	const every = 300 * time.Millisecond
	g := startGateway(t, p, func(c *auth.Config) { c.RefreshUnknownKIDEvery = every }, nil)
	g.waitReady(t)
	if _, err := g.v.Verify(t.Context(), p.Mint(g.valid())); err != nil {
		t.Fatal(err)
	}
	bogus := p.MintWith(oidctest.NewKey(t), nil, g.valid())
	hits := p.JWKSHits()
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if _, err := g.v.Verify(t.Context(), bogus); !errors.Is(err, auth.ErrUnknownKey) {
					t.Errorf("got %v, want %v", err, auth.ErrUnknownKey)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// One refetch at once, then at most one per period.
	if got, limit := p.JWKSHits()-hits, int64(1+elapsed/every); got > limit || got < 1 {
		t.Errorf("got %d key set fetches for 200 unknown-kid tokens in %s, want 1 to %d", got, elapsed, limit)
	}
	if elapsed > 5*time.Second {
		t.Errorf("200 unknown-kid tokens took %s, want them refused without waiting", elapsed)
	}
}

func TestIssuerDown(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	token := p.Mint(g.valid())
	if _, err := g.v.Verify(t.Context(), token); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if status, _, body := g.call(t, "Bearer "+p.Mint(g.valid())); status != http.StatusOK {
		t.Errorf("issuer down, token of a cached key: got %d %q, want 200", status, body)
	}
	if _, err := g.v.Verify(t.Context(), p.MintWith(oidctest.NewKey(t), nil, g.valid())); !errors.Is(err, auth.ErrUnknownKey) {
		t.Errorf("issuer down, unknown key: got %v, want %v", err, auth.ErrUnknownKey)
	}
	if _, err := g.v.Verify(t.Context(), token); err != nil {
		t.Errorf("issuer down, after a failed refetch: got %v, want the cached key still used", err)
	}
}

func TestIssuerDownAtStart(t *testing.T) {
	tests := []struct {
		name    string
		jwksURL bool
	}{
		{"discovery", false},
		{"jwks_url configured", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := oidctest.Start(t, oidctest.Config{Users: users})
			p.Stop()
			g := startGateway(t, p, func(c *auth.Config) {
				if tt.jwksURL {
					c.Auth.JWKSURL = p.JWKSURL()
				}
			}, nil)
			token := p.Mint(g.valid())
			status, challenge, _ := g.call(t, "Bearer "+token)
			if status != http.StatusUnauthorized || !strings.Contains(challenge, auth.ErrUnavailable.Error()) {
				t.Errorf("before the issuer is up: got %d %s, want 401 naming %q", status, challenge, auth.ErrUnavailable)
			}
			p.Start()
			deadline := time.Now().Add(10 * time.Second)
			for {
				status, _, _ := g.call(t, "Bearer "+token)
				if status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("got %d 10s after the issuer came up, want 200; logs:\n%s", status, g.logs)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name      string
		cfg       oidctest.Config
		issuer    func(p *oidctest.Provider) string
		jwksURL   bool
		wantReady bool
	}{
		{"OpenID discovery", oidctest.Config{}, nil, false, true},
		{"RFC 8414 with issuer path", oidctest.Config{IssuerPath: "/realms/test", NoOpenIDDiscovery: true}, nil, false, true},
		{"OpenID discovery with issuer path", oidctest.Config{IssuerPath: "/realms/test"}, nil, false, true},
		{"jwks_url configured", oidctest.Config{NoOpenIDDiscovery: true}, nil, true, true},
		{"metadata names another issuer", oidctest.Config{}, func(p *oidctest.Provider) string { return p.Issuer() + "/" }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := oidctest.Start(t, tt.cfg)
			g := startGateway(t, p, func(c *auth.Config) {
				if tt.issuer != nil {
					c.Auth.Issuer = tt.issuer(p)
				}
				if tt.jwksURL {
					c.Auth.JWKSURL = p.JWKSURL()
				}
			}, nil)
			if !tt.wantReady {
				deadline := time.Now().Add(5 * time.Second)
				for !strings.Contains(g.logs.String(), "names issuer") {
					if time.Now().After(deadline) {
						t.Fatalf("no discovery refusal logged; logs:\n%s", g.logs)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if _, err := g.v.Verify(t.Context(), p.Mint(g.valid())); !errors.Is(err, auth.ErrUnavailable) {
					t.Errorf("got %v, want %v", err, auth.ErrUnavailable)
				}
				return
			}
			g.waitReady(t)
			if _, err := g.v.Verify(t.Context(), p.Mint(g.valid())); err != nil {
				t.Errorf("got %v, want the token accepted", err)
			}
			if tt.jwksURL && p.MetadataHits() != 0 {
				t.Errorf("got %d metadata fetches with jwks_url set, want none", p.MetadataHits())
			}
		})
	}
}

func TestProviderFlows(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: append(slices.Clone(users), oidctest.User{Subject: "robot", Groups: "bots"})})
	p.AddClient("robot", "s3cret")
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	tests := []struct {
		name       string
		token      func() string
		wantSub    string
		wantGroups []string
	}{
		{"authorization code with PKCE", func() string {
			return p.AuthorizationCode(t, oidctest.CodeFlow{Resource: g.resource, Scopes: []string{"openid", scope}, LoginHint: "bob"})
		}, "bob", []string{"readers"}},
		{"client credentials", func() string { return p.ClientCredentials(t, "robot", "s3cret", g.resource, scope) }, "robot", []string{"bots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := g.reached()
			if status, challenge, body := g.call(t, "Bearer "+tt.token()); status != http.StatusOK {
				t.Fatalf("got %d %s %q, want 200", status, challenge, body)
			}
			g.mu.Lock()
			c := g.callers[before]
			g.mu.Unlock()
			if c.Subject != tt.wantSub || !slices.Equal(c.Groups, tt.wantGroups) || c.ClientID == "" || !slices.Contains(c.Scopes, scope) {
				t.Errorf("got caller %+v, want sub %s, groups %v, a client id and scope %s", c, tt.wantSub, tt.wantGroups, scope)
			}
		})
	}
	t.Run("token for another resource", func(t *testing.T) {
		token := p.AuthorizationCode(t, oidctest.CodeFlow{Resource: "http://127.0.0.1:1/mcp", Scopes: []string{scope}})
		if _, err := g.v.Verify(t.Context(), token); !errors.Is(err, auth.ErrAudience) {
			t.Errorf("got %v, want %v", err, auth.ErrAudience)
		}
	})
}

func TestStatic(t *testing.T) {
	tests := []struct {
		name, token, header string
		wantStatus          int
	}{
		{"no token configured", "", "", http.StatusOK},
		{"no token configured, header sent", "", "Bearer whatever", http.StatusOK},
		{"right token", "s3cret", "Bearer s3cret", http.StatusOK},
		{"scheme in any case", "s3cret", "bEaReR s3cret", http.StatusOK},
		{"wrong token", "s3cret", "Bearer nope", http.StatusUnauthorized},
		{"no header", "s3cret", "", http.StatusUnauthorized},
		{"basic", "s3cret", "Basic s3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *auth.Caller
			var sawAuth bool
			var other string
			h := auth.Static(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, sawAuth = auth.CallerFrom(r.Context()), r.Header.Get("Authorization") != ""
				other = r.Header.Get("Mcp-Method")
			}), tt.token, nil)
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			req.Header.Set("Mcp-Method", "tools/call")
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("got status %d, want %d", rec.Code, tt.wantStatus)
			}
			// The request handed in is left as it came: a handler must not
			// change it.
			if req.Header.Get("Authorization") != tt.header || req.Header.Get("Mcp-Method") != "tools/call" || auth.CallerFrom(req.Context()) != nil {
				t.Errorf("the request handed in was changed: headers %v, caller %v", req.Header, auth.CallerFrom(req.Context()))
			}
			if tt.wantStatus != http.StatusOK {
				if got != nil || rec.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("got caller %v and challenge %q, want no caller and a challenge", got, rec.Header().Get("WWW-Authenticate"))
				}
				return
			}
			if got == nil || got.Subject != auth.StaticSubject || sawAuth || other != "tools/call" {
				t.Errorf("got caller %v, Authorization downstream %v, Mcp-Method %q; want %s, none and the request's", got, sawAuth, other, auth.StaticSubject)
			}
		})
	}
	t.Run("authorize refuses", func(t *testing.T) {
		h := auth.Static(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("the handler was reached")
		}), "", func(*auth.Caller) error { return errors.New("no default role") })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "no default role") {
			t.Errorf("got %d %q, want 403 naming the policy error", rec.Code, rec.Body.String())
		}
	})
}

func TestMalformedHeaders(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: users})
	g := startGateway(t, p, nil, nil)
	g.waitReady(t)
	token := p.Mint(g.valid())
	tests := []struct {
		name    string
		headers []string
	}{
		{"empty bearer", []string{"Bearer "}},
		{"two tokens", []string{"Bearer " + token + " " + token}},
		{"two headers", []string{"Bearer " + token, "Bearer " + token}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			for _, h := range tt.headers {
				req.Header.Add("Authorization", h)
			}
			rec := httptest.NewRecorder()
			g.v.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				t.Error("the handler was reached")
			}), nil).ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
				t.Errorf("got %d %s, want 401 invalid_token", rec.Code, rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	p := oidctest.Start(f, oidctest.Config{Users: users})
	// Every refusal is logged: a long fuzz run would pile them up.
	g := startGateway(f, p, func(c *auth.Config) { c.Logger = slog.New(slog.DiscardHandler) }, nil)
	g.waitReady(f)
	// Seeds are never a valid token, nor a few edits from one: the
	// signed seed is for another audience, and no mutation can re-sign it.
	signed := p.Mint(with(g.valid(), "aud", "http://127.0.0.1:1/other"))
	for _, seed := range []string{
		"", "Bearer", "Bearer ", "bearer x", "Bearer a.b.c", "Bearer " + signed[:len(signed)-4] + "AAAA",
		"Bearer " + signed, "Bearer " + strings.Replace(signed, ".", "..", 1), "Basic " + signed,
		"Bearer " + unsigned(f, p, g.valid()), "Bearer " + hmacWithPublicKey(f, p, g.valid()),
		"Bearer eyJhbGciOiJSUzI1NiJ9.e30.", "Bearer \x00\xff",
	} {
		f.Add(seed)
	}
	h := g.v.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		f.Error("a fuzzed Authorization header got through")
	}), nil)
	f.Fuzz(func(t *testing.T, header string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header["Authorization"] = []string{header}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusForbidden {
			t.Errorf("Authorization %q: got status %d, want 401 or 403", header, rec.Code)
		}
	})
}

// TestNestedRolesClaim: the policy claim may name roles nested as
// Keycloak nests them (realm_access.roles, resource_access.CLIENT.roles),
// in tokens the provider issues through its real flows; a top-level claim
// whose name holds dots (a namespaced claim) is still read whole.
func TestNestedRolesClaim(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: []oidctest.User{{
		Subject: "kc-user",
		Claims: map[string]any{
			"realm_access":              map[string]any{"roles": []any{"offline_access", "ops"}},
			"resource_access":           map[string]any{"fiskfleet": map[string]any{"roles": "deployer"}, "account": map[string]any{"roles": []any{"view-profile"}}},
			"https://example.com/roles": []any{"auditor"},
		},
	}}})
	tests := []struct {
		claim string
		want  []string
	}{
		{"realm_access.roles", []string{"offline_access", "ops"}},
		{"resource_access.fiskfleet.roles", []string{"deployer"}},
		{"https://example.com/roles", []string{"auditor"}},
		{"realm_access", nil},
		{"realm_access.roles.first", nil},
		{"resource_access.nobody.roles", nil},
	}
	for _, tt := range tests {
		t.Run(tt.claim, func(t *testing.T) {
			g := startGateway(t, p, func(c *auth.Config) { c.Claim = tt.claim }, nil)
			g.waitReady(t)
			token := p.AuthorizationCode(t, oidctest.CodeFlow{Resource: g.resource, Scopes: []string{"openid", scope}, LoginHint: "kc-user"})
			c, err := g.v.Verify(t.Context(), token)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if c.Subject != "kc-user" || !slices.Equal(c.Groups, tt.want) {
				t.Errorf("claim %s: got caller %s with groups %q, want %q", tt.claim, c.Subject, c.Groups, tt.want)
			}
		})
	}
}
