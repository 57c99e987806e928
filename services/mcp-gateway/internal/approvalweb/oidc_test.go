package approvalweb

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// oidcSite is a page signing in at a real OpenID provider: alice is in
// group ops (role ops, approve: true), bob in group dev (role dev, which
// may run tools but not approve), carol in no group of the policy.
type oidcSite struct {
	*site
	provider *oidctest.Provider
}

func serveOIDCPage(tb testing.TB, f *fleet) *oidcSite {
	tb.Helper()
	op := oidctest.Start(tb, oidctest.Config{Users: []oidctest.User{
		{Subject: "alice", Groups: []string{"ops"}},
		{Subject: "bob", Groups: []string{"dev"}},
		{Subject: "carol", Groups: []string{"sales"}},
	}})
	// The page's address must be known before its client is registered.
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	tb.Cleanup(srv.Close)
	redirect := srv.URL + "/approvals/callback"
	id, secret := registerClient(tb, op, redirect)

	pol := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"ops": {Match: []string{"ops"}, Approve: true},
		"dev": {Match: []string{"dev"}},
	}})
	hc := &http.Client{Timeout: 10 * time.Second}
	s := servePageOn(tb, f, srv, Config{OIDC: &OIDC{Issuer: op.Issuer(), ClientID: id, ClientSecret: secret, RedirectURL: redirect, Policy: pol, HTTPClient: hc}})
	handler := mount(s.page.Handler())
	h.Store(&handler)
	return &oidcSite{site: s, provider: op}
}

// servePageOn is servePage on a server already running.
func servePageOn(tb testing.TB, f *fleet, srv *httptest.Server, cfg Config) *site {
	tb.Helper()
	s := &site{logs: &fisktest.Buffer{}, srv: srv}
	cfg.NATS = f.ns.Connect(tb)
	cfg.Logger = newTestLogger(tb, s.logs)
	var err error
	if s.page, err = New(cfg); err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = s.page.Close() })
	return s
}

// registerClient registers the page as a confidential client of op
// through its RFC 7591 endpoint, as an operator registers it at theirs.
func registerClient(tb testing.TB, op *oidctest.Provider, redirect string) (id, secret string) {
	tb.Helper()
	var meta struct {
		RegistrationEndpoint string `json:"registration_endpoint"`
	}
	resp, err := http.Get(op.Issuer() + "/.well-known/openid-configuration")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil {
		tb.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{
		"redirect_uris":              []string{redirect},
		"token_endpoint_auth_method": "client_secret_basic",
		"grant_types":                []string{"authorization_code"},
		"client_name":                "fiskfleet approvals page",
	})
	reg, err := http.Post(meta.RegistrationEndpoint, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer reg.Body.Close()
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.NewDecoder(reg.Body).Decode(&out); err != nil || out.ClientID == "" || out.ClientSecret == "" {
		tb.Fatalf("registering the page's client: %d %v %+v", reg.StatusCode, err, out)
	}
	return out.ClientID, out.ClientSecret
}

// oidcSignIn runs the authorization code flow as a browser does, all over
// HTTP, and returns the page it lands on.
func (b *browser) oidcSignIn(user string) response {
	b.tb.Helper()
	resp := b.get("/approvals/signin?login_hint=" + url.QueryEscape(user))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.body, "Signed in as <strong>"+user+"</strong>") {
		b.tb.Fatalf("signing in as %s: got %d %q, want 200 and signed in", user, resp.StatusCode, resp.body)
	}
	return b.get("/approvals")
}

func TestOIDCSignIn(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := serveOIDCPage(t, f)
	c := f.ask(t, deploy())

	t.Run("approver role acts", func(t *testing.T) {
		b := newBrowser(t, s.srv.URL)
		if resp := b.get("/approvals"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.body, `href="/approvals/signin"`) {
			t.Fatalf("before signing in: got %d, want 401 and a sign-in link", resp.StatusCode)
		}
		page := b.oidcSignIn("alice")
		if page.StatusCode != http.StatusOK || !strings.Contains(page.body, `<strong id="who">alice</strong> (roles ops)`) {
			t.Fatalf("got %d %q, want the list for alice with role ops", page.StatusCode, page.body)
		}
		b.listed(c, true)
		resp := b.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
		if got := flash(resp.body); !strings.HasPrefix(got, "Approved") {
			t.Errorf("got message %q, want approved", got)
		}
		d, err := c.wait(t)
		if err != nil || !d.Approved() || d.Approver != "alice" {
			t.Errorf("got %s by %q (%v), want approved by alice, the ID token's subject", d.Outcome, d.Approver, err)
		}
	})

	for _, user := range []string{"bob", "carol"} {
		t.Run(user+" may not act", func(t *testing.T) {
			c := f.ask(t, deploy())
			b := newBrowser(t, s.srv.URL)
			page := b.oidcSignIn(user)
			if page.StatusCode != http.StatusForbidden || !strings.Contains(page.body, "Not an approver") {
				t.Fatalf("got %d %q, want 403 not an approver", page.StatusCode, page.body)
			}
			if strings.Contains(page.body, c.req.Command) || strings.Contains(page.body, c.req.ID) {
				t.Errorf("the page shows a non-approver the pending requests")
			}
			resp := b.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("answering: got %d, want 403", resp.StatusCode)
			}
			if got := b.get("/approvals/pending.json").StatusCode; got != http.StatusForbidden {
				t.Errorf("pending.json: got %d, want 403", got)
			}
			if !f.pendingAt(c) {
				t.Fatalf("a non-approver's answer reached the broker")
			}
		})
	}

	t.Run("callback elsewhere refused", func(t *testing.T) {
		// Stop at the redirect back to the page, and replay it from a
		// browser that did not start the sign-in.
		b := newBrowser(t, s.srv.URL)
		var callback string
		b.c.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
			if r.URL.Path == "/approvals/callback" {
				callback = r.URL.String()
				return http.ErrUseLastResponse
			}
			return nil
		}
		b.get("/approvals/signin?login_hint=alice")
		if callback == "" {
			t.Fatal("the flow never came back to the callback")
		}
		other := newBrowser(t, s.srv.URL)
		resp := other.get(callback)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, "another browser") {
			t.Errorf("replayed callback: got %d %q, want 400 naming another browser", resp.StatusCode, flash(resp.body))
		}
		// The state is used up: the browser that started cannot use it either.
		b.c.CheckRedirect = nil
		if resp := b.get(callback); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("callback used twice: got %d, want 400", resp.StatusCode)
		}
		u, _ := url.Parse(s.srv.URL + "/approvals")
		for _, c := range other.c.Jar.Cookies(u) {
			if c.Name == sessionCookie {
				t.Errorf("the replayed callback made a session")
			}
		}
	})
}

func TestIDTokenChecks(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := serveOIDCPage(t, f)
	o := s.page.oidc
	fisktest.WaitFor(t, 10*time.Second, "the issuer's keys", o.verifier.Ready)
	l := &login{nonce: "nonce-1"}
	idToken := func(edit func(map[string]any)) string {
		c := s.provider.Claims(o.cfg.ClientID)
		c["sub"], c["nonce"], c["azp"] = "alice", "nonce-1", o.cfg.ClientID
		c["groups"] = []string{"ops"}
		edit(c)
		return s.provider.MintWith(s.provider.Key(), map[string]any{"typ": "JWT"}, c)
	}
	tests := []struct {
		name    string
		token   string
		wantErr string
	}{
		{name: "valid", token: idToken(func(map[string]any) {})},
		{name: "wrong nonce", token: idToken(func(c map[string]any) { c["nonce"] = "nonce-2" }), wantErr: "nonce"},
		{name: "no nonce", token: idToken(func(c map[string]any) { delete(c, "nonce") }), wantErr: "nonce"},
		{name: "another client's", token: idToken(func(c map[string]any) { c["aud"] = "other-client" }), wantErr: "audience"},
		{name: "issued to another party", token: idToken(func(c map[string]any) { c["aud"] = []string{o.cfg.ClientID, "x"}; c["azp"] = "x" }), wantErr: "azp"},
		{name: "expired", token: idToken(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), wantErr: "expired"},
		{name: "another issuer", token: idToken(func(c map[string]any) { c["iss"] = "http://127.0.0.1:1" }), wantErr: "issuer"},
		{name: "signed by another key", token: s.provider.MintWith(oidctest.NewKey(t), nil, s.provider.Claims(o.cfg.ClientID)), wantErr: "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := o.identify(t.Context(), tokenResponse{IDToken: tt.token}, l)
			if tt.wantErr == "" {
				if err != nil || c.Subject != "alice" || len(c.Groups) != 1 || c.Groups[0] != "ops" {
					t.Errorf("got %+v, %v, want alice in ops", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error about %s", err, tt.wantErr)
			}
		})
	}
}
