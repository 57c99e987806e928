package oidctest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// verify checks token's signature against the provider's published key
// set and returns its claims.
func verify(t *testing.T, p *oidctest.Provider, token string) map[string]any {
	t.Helper()
	var set jose.JSONWebKeySet
	getJSON(t, p.JWKSURL(), &set)
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("parsing the token: %v", err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		t.Fatalf("got %d published keys for kid %q, want 1", len(keys), jws.Signatures[0].Header.KeyID)
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		t.Fatalf("verifying the token: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("decoding claims: %v", err)
	}
	return claims
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("getting %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("getting %s: got status %d, want 200", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", u, err)
	}
}

func TestMetadata(t *testing.T) {
	tests := []struct {
		name      string
		cfg       oidctest.Config
		oidcPath  string // "" when OpenID discovery must be absent
		oauthPath string
	}{
		{"root issuer", oidctest.Config{}, "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"},
		{"issuer with a path", oidctest.Config{IssuerPath: "/realms/test"}, "/realms/test/.well-known/openid-configuration", "/.well-known/oauth-authorization-server/realms/test"},
		{"RFC 8414 only", oidctest.Config{NoOpenIDDiscovery: true}, "", "/.well-known/oauth-authorization-server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := oidctest.Start(t, tt.cfg)
			host := strings.TrimSuffix(p.Issuer(), tt.cfg.IssuerPath)
			var doc map[string]any
			getJSON(t, host+tt.oauthPath, &doc)
			if got, want := doc["issuer"], p.Issuer(); got != want {
				t.Errorf("got issuer %v, want %v", got, want)
			}
			if got, want := doc["registration_endpoint"], p.Issuer()+"/register"; got != want {
				t.Errorf("got registration_endpoint %v, want %v", got, want)
			}
			if got, want := doc["jwks_uri"], p.JWKSURL(); got != want {
				t.Errorf("got jwks_uri %v, want %v", got, want)
			}
			if got := doc["code_challenge_methods_supported"]; !slices.Contains(got.([]any), any("S256")) {
				t.Errorf("got code_challenge_methods_supported %v, want S256 among them", got)
			}
			resp, err := http.Get(host + "/.well-known/openid-configuration")
			if tt.cfg.IssuerPath != "" {
				resp, err = http.Get(p.Issuer() + "/.well-known/openid-configuration")
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got, want := resp.StatusCode == http.StatusOK, tt.oidcPath != ""; got != want {
				t.Errorf("got OpenID discovery status %d, want it served: %v", resp.StatusCode, want)
			}
		})
	}
}

func TestAuthorizationCode(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: []oidctest.User{
		{Subject: "alice", Groups: []string{"ops", "dev"}},
		{Subject: "bob", Groups: "readers", Claims: map[string]any{"team": "blue"}},
	}})
	tests := []struct {
		name       string
		flow       oidctest.CodeFlow
		wantSub    string
		wantGroups any
		wantAud    any
		wantScope  string
	}{
		{"default user", oidctest.CodeFlow{Resource: "http://127.0.0.1:9/mcp", Scopes: []string{"mcp:tools"}}, "alice", []any{"ops", "dev"}, []any{"http://127.0.0.1:9/mcp"}, "mcp:tools"},
		{"login hint", oidctest.CodeFlow{Resource: "http://127.0.0.1:9/mcp", LoginHint: "bob", Scopes: []string{"openid", "mcp:tools"}}, "bob", "readers", []any{"http://127.0.0.1:9/mcp"}, "openid mcp:tools"},
		{"no scope requested", oidctest.CodeFlow{Resource: "http://127.0.0.1:9/mcp"}, "alice", []any{"ops", "dev"}, []any{"http://127.0.0.1:9/mcp"}, "openid"},
		{"offline_access dropped", oidctest.CodeFlow{Resource: "http://127.0.0.1:9/mcp", Scopes: []string{"offline_access", "mcp:tools"}}, "alice", []any{"ops", "dev"}, []any{"http://127.0.0.1:9/mcp"}, "mcp:tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := verify(t, p, p.AuthorizationCode(t, tt.flow))
			if got := claims["sub"]; got != tt.wantSub {
				t.Errorf("got sub %v, want %v", got, tt.wantSub)
			}
			if got, want := claims["iss"], p.Issuer(); got != want {
				t.Errorf("got iss %v, want %v", got, want)
			}
			if got := claims["groups"]; !equalJSON(got, tt.wantGroups) {
				t.Errorf("got groups %v, want %v", got, tt.wantGroups)
			}
			if got := claims["aud"]; !equalJSON(got, tt.wantAud) {
				t.Errorf("got aud %v, want %v", got, tt.wantAud)
			}
			if got := claims["scope"]; got != tt.wantScope {
				t.Errorf("got scope %v, want %v", got, tt.wantScope)
			}
			if claims["azp"] == nil || claims["azp"] != claims["client_id"] {
				t.Errorf("got azp %v and client_id %v, want the same client id", claims["azp"], claims["client_id"])
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestClientCredentials(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Users: []oidctest.User{{Subject: "robot", Groups: "bots"}}})
	p.AddClient("robot", "s3cret")
	claims := verify(t, p, p.ClientCredentials(t, "robot", "s3cret", "http://127.0.0.1:9/mcp", "mcp:tools"))
	for k, want := range map[string]any{"sub": "robot", "aud": []any{"http://127.0.0.1:9/mcp"}, "scope": "mcp:tools", "groups": "bots"} {
		if got := claims[k]; !equalJSON(got, want) {
			t.Errorf("got %s %v, want %v", k, got, want)
		}
	}
}

func TestRegistrationRefusals(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{})
	tests := []struct {
		name, body, wantError string
	}{
		{"no redirect URIs", `{"client_name":"x"}`, "invalid_redirect_uri"},
		{"relative redirect URI", `{"redirect_uris":["/cb"]}`, "invalid_redirect_uri"},
		{"unknown auth method", `{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"tls_client_auth"}`, "invalid_client_metadata"},
		{"not JSON", `{`, "invalid_client_metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(p.Issuer()+"/register", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error string }
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != http.StatusBadRequest || e.Error != tt.wantError {
				t.Errorf("got %d %q, want 400 %q", resp.StatusCode, e.Error, tt.wantError)
			}
		})
	}
}

func TestRotateKey(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{})
	old := p.Key()
	k := p.RotateKey()
	var set jose.JSONWebKeySet
	getJSON(t, p.JWKSURL(), &set)
	if len(set.Keys) != 1 || set.Keys[0].KeyID != k.ID {
		t.Fatalf("got %d keys, first %q, want only the new kid %q", len(set.Keys), set.Keys[0].KeyID, k.ID)
	}
	if old.ID == k.ID {
		t.Errorf("got the same kid %q after rotation, want a new one", k.ID)
	}
	claims := verify(t, p, p.Mint(p.Claims("aud")))
	if got := claims["aud"]; got != "aud" {
		t.Errorf("got aud %v, want aud", got)
	}
}

func TestStopStart(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{})
	p.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	if resp, err := hc.Get(p.JWKSURL()); err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d from a stopped provider, want a refused connection", resp.StatusCode)
	}
	p.Start()
	var set jose.JSONWebKeySet
	getJSON(t, p.JWKSURL(), &set)
	if got, want := p.JWKSHits(), int64(1); got != want {
		t.Errorf("got %d key set hits, want %d", got, want)
	}
}
