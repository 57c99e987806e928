package integration_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// oauthUsers are the users of the tests' OpenID provider: alice and bob
// each match one role of oauthPolicy, carol none.
var oauthUsers = []oidctest.User{
	{Subject: "alice", Groups: []string{"dev"}},
	{Subject: "bob", Groups: []string{"sre"}},
	{Subject: "carol", Groups: []string{"guest"}},
}

// oauthPolicy is the tests' expose.agent.mcp.policy: developers read
// (tools tagged impact:ro), SREs operate everything.
var oauthPolicy = map[string]any{"roles": map[string]any{
	"readers":   map[string]any{"match": []string{"dev"}, "include": map[string]any{"tags": []string{"impact:ro"}}},
	"operators": map[string]any{"match": []string{"sre"}},
}}

// policyKey is what every refusal by the policy names.
const policyKey = "expose.agent.mcp.policy"

// oauthGateway is a gateway on the fiskdemo app that accepts the access
// tokens of an [oidctest.Provider].
type oauthGateway struct {
	// auth adds keys to expose.agent.mcp.auth, whose issuer is the
	// provider's.
	auth map[string]any
	// policy is expose.agent.mcp.policy; nil for none.
	policy map[string]any
	// natsContext is nats_context, for remote_tools in extra.
	natsContext string
	// extra adds top-level keys, such as remote_tools.
	extra map[string]any
	// mcp adds keys to expose.agent.mcp, such as agent2agent.
	mcp map[string]any
}

// start runs `mcp-gateway serve --port 0` on g in env and waits until it
// is ready: it serves before it has the issuer's keys, and a token sent
// before them would be refused.
func (g oauthGateway) start(tb testing.TB, env []string, op *oidctest.Provider) *gatewayProcess {
	tb.Helper()
	auth := map[string]any{"issuer": op.Issuer()}
	for k, v := range g.auth {
		auth[k] = v
	}
	mcpCfg := map[string]any{"auth": auth}
	for k, v := range g.mcp {
		mcpCfg[k] = v
	}
	if g.policy != nil {
		mcpCfg["policy"] = g.policy
	}
	cfg := fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     g.natsContext,
		MCP:             mcpCfg,
		Extra:           g.extra,
	})
	gw := startGateway(tb, env, cfg)
	waitReady(tb, gw.URL)
	return gw
}

// waitReady waits until the gateway at mcpURL answers /readyz with 200.
func waitReady(tb testing.TB, mcpURL string) {
	tb.Helper()
	ready := strings.TrimSuffix(mcpURL, "/mcp") + "/readyz"
	hc := &http.Client{Timeout: 2 * time.Second}
	fisktest.WaitFor(tb, 10*time.Second, "the gateway to be ready at "+ready, func() bool {
		resp, err := hc.Get(ready)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// rawResponse is an HTTP answer read whole.
type rawResponse struct {
	status int
	header http.Header
	body   string
}

// rawMCP posts body to the gateway's /mcp with the token (none when
// empty) and the extra headers, as a client that knows nothing of MCP
// would.
func rawMCP(tb testing.TB, mcpURL, token string, header map[string]string, body string) rawResponse {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, mcpURL, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return doRaw(tb, req)
}

// rawStatus sends a bodiless request to the gateway's /mcp and returns
// its status without reading the answer, which for a GET that is let
// through is an event stream that does not end.
func rawStatus(tb testing.TB, method, mcpURL, token string, header map[string]string) int {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), method, mcpURL, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, mcpURL, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func rawGet(tb testing.TB, u string) rawResponse {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return doRaw(tb, req)
}

func doRaw(tb testing.TB, req *http.Request) rawResponse {
	tb.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the answer to %s %s: %v", req.Method, req.URL, err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// initializeBody is a legacy-era initialize request.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + mcp.LATEST_LEGACY_PROTOCOL_VERSION + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// oauthClient is an initialised mcp-go client of mcpURL sending token,
// on the era the options pick.
func oauthClient(tb testing.TB, mcpURL, token string, copts []client.ClientOption) *client.Client {
	tb.Helper()
	headers := map[string]string{"Authorization": "Bearer " + token}
	return newMCPClient(tb, mcpURL, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers)}, copts, nil)
}

// TestOAuthGateway drives a gateway that is an OAuth 2.1 protected
// resource with a per-caller policy: the real binary, a real OpenID
// provider, tokens from the provider's authorization code flow, raw HTTP
// and mcp-go clients of both protocol eras.
func TestOAuthGateway(t *testing.T) {
	t.Parallel()
	op := oidctest.Start(t, oidctest.Config{Users: oauthUsers})
	gw := oauthGateway{policy: oauthPolicy}.start(t, os.Environ(), op)
	base := strings.TrimSuffix(gw.URL, "/mcp")
	wantMetadataURL := base + "/.well-known/oauth-protected-resource/mcp"

	t.Run("metadata without a token", func(t *testing.T) {
		for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
			t.Run(path, func(t *testing.T) {
				r := rawGet(t, base+path)
				if r.status != http.StatusOK {
					t.Fatalf("status: got %d (%s), want 200", r.status, r.body)
				}
				var doc struct {
					Resource             string   `json:"resource"`
					AuthorizationServers []string `json:"authorization_servers"`
				}
				if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
					t.Fatalf("decoding %q: %v", r.body, err)
				}
				if doc.Resource != gw.URL {
					t.Errorf("resource: got %q, want %q", doc.Resource, gw.URL)
				}
				if want := []string{op.Issuer()}; !slices.Equal(doc.AuthorizationServers, want) {
					t.Errorf("authorization_servers: got %v, want %v", doc.AuthorizationServers, want)
				}
			})
		}
	})

	t.Run("no token is 401 naming the metadata", func(t *testing.T) {
		r := rawMCP(t, gw.URL, "", nil, initializeBody)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("status: got %d (%s), want 401", r.status, r.body)
		}
		challenge := r.header.Get("WWW-Authenticate")
		if want := `resource_metadata="` + wantMetadataURL + `"`; !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, want) {
			t.Errorf("WWW-Authenticate: got %q, want a Bearer challenge with %s", challenge, want)
		}
		if strings.Contains(challenge, "error=") {
			t.Errorf("WWW-Authenticate: got %q, want no error for a request without credentials", challenge)
		}
	})

	t.Run("a token for another resource is 401 invalid_token", func(t *testing.T) {
		other := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: "http://127.0.0.1:1/mcp", LoginHint: "alice"})
		r := rawMCP(t, gw.URL, other, nil, initializeBody)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("status: got %d (%s), want 401", r.status, r.body)
		}
		if challenge := r.header.Get("WWW-Authenticate"); !strings.Contains(challenge, `error="invalid_token"`) || !strings.Contains(challenge, wantMetadataURL) {
			t.Errorf("WWW-Authenticate: got %q, want error=\"invalid_token\" and the metadata URL", challenge)
		}
	})

	t.Run("a caller in no role is 403 naming the policy", func(t *testing.T) {
		carol := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "carol"})
		r := rawMCP(t, gw.URL, carol, nil, initializeBody)
		if r.status != http.StatusForbidden {
			t.Fatalf("status: got %d (%s), want 403", r.status, r.body)
		}
		if !strings.Contains(r.body, policyKey) {
			t.Errorf("body: got %q, want it to name %s", r.body, policyKey)
		}
		// Another token would not help: no challenge sends the client
		// into a new authorization.
		if challenge := r.header.Get("WWW-Authenticate"); challenge != "" {
			t.Errorf("WWW-Authenticate: got %q, want none", challenge)
		}
	})

	alice := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "alice"})
	bob := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "bob"})
	wantClaims(t, "alice's token", alice, map[string]any{"sub": "alice", "aud": gw.URL})
	wantClaims(t, "bob's token", bob, map[string]any{"sub": "bob", "aud": gw.URL})

	// Every served tool: the demo app's commands but destroy (ai:deny)
	// and noop (no description). The readers get those tagged impact:ro.
	wantBob := []string{"cluster_node_status", "deploy", "echo", "fail", "flood", "getenv", "restart", "sleep", "spawn", "ticker"}
	wantAlice := slices.DeleteFunc(slices.Clone(wantBob), func(n string) bool { return n == "deploy" || n == "restart" })

	eras := []struct {
		name    string
		opts    []client.ClientOption
		modern  bool
		version string
	}{
		{name: "2026-07-28", modern: true},
		{name: "legacy", opts: []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}, version: mcp.LATEST_LEGACY_PROTOCOL_VERSION},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ca := oauthClient(t, gw.URL, alice, era.opts)
			cb := oauthClient(t, gw.URL, bob, era.opts)
			for _, c := range []*client.Client{ca, cb} {
				v := c.ProtocolVersion()
				if era.modern != mcp.IsModernProtocol(v) || (era.version != "" && v != era.version) {
					t.Fatalf("protocol version: got %q, want the %s era", v, era.name)
				}
			}

			t.Run("tools/list per caller", func(t *testing.T) {
				if got := listNames(t, ca); !slices.Equal(got, wantAlice) {
					t.Errorf("alice's tools/list: got %v, want %v", got, wantAlice)
				}
				if got := listNames(t, cb); !slices.Equal(got, wantBob) {
					t.Errorf("bob's tools/list: got %v, want %v", got, wantBob)
				}
			})

			t.Run("a call outside the grant is answered as an unknown tool", func(t *testing.T) {
				marker := filepath.Join(t.TempDir(), "restarted")
				requireHiddenAsUnknown(t, ca, "restart", map[string]any{"marker": marker})
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("alice's restart: got marker %s written, want the command not run", marker)
				}
				cr := mcpCommandResult(t, "bob's restart", callMCP(t, cb, "restart", map[string]any{"marker": marker}))
				if cr.ExitCode != 0 || cr.Output != "restarted\n" {
					t.Errorf("bob's restart: got exit %d output %q, want exit 0 and restarted", cr.ExitCode, cr.Output)
				}
				if _, err := os.Stat(marker); err != nil {
					t.Errorf("bob's restart: got no marker (%v), want the command run", err)
				}
				cr = mcpCommandResult(t, "alice's echo", callMCP(t, ca, "echo", map[string]any{"message": "read"}))
				if cr.Output != "read\n" {
					t.Errorf("alice's echo: got %q, want %q", cr.Output, "read\n")
				}
			})

			if era.modern {
				return
			}
			t.Run("a session belongs to its caller", func(t *testing.T) {
				id := ca.GetSessionId()
				if id == "" {
					t.Fatal("alice's legacy client: got no session id, want one")
				}
				header := map[string]string{server.HeaderKeySessionID: id, mcp.HeaderProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION}
				const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
				if r := rawMCP(t, gw.URL, alice, header, list); r.status != http.StatusOK {
					t.Fatalf("alice's session with alice's token: got status %d (%s), want 200", r.status, r.body)
				}
				if r := rawMCP(t, gw.URL, bob, header, list); r.status != http.StatusNotFound {
					t.Errorf("alice's session with bob's token: got status %d (%s), want 404", r.status, r.body)
				}
				// Nor may bob open its stream or end it.
				for _, method := range []string{http.MethodGet, http.MethodDelete} {
					if got := rawStatus(t, method, gw.URL, bob, header); got != http.StatusNotFound {
						t.Errorf("%s of alice's session with bob's token: got status %d, want 404", method, got)
					}
				}
				if r := rawMCP(t, gw.URL, alice, header, list); r.status != http.StatusOK {
					t.Errorf("alice's session after bob's attempts: got status %d (%s), want 200", r.status, r.body)
				}
				if got := listNames(t, ca); !slices.Equal(got, wantAlice) {
					t.Errorf("alice's client after bob's attempts: got tools %v, want %v", got, wantAlice)
				}
			})
		})
	}

	t.Run("the log names callers, never tokens", func(t *testing.T) {
		out := gw.Output()
		for _, re := range []string{
			`tool call.*tool=restart.*outcome=refused_by_policy.*sub=alice`,
			`tool call.*tool=restart.*outcome=ok.*sub=bob`,
			`refusing a request by policy.*sub=carol`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("gateway log: got\n%s\nwant a line matching %s", out, re)
			}
		}
		for name, tok := range map[string]string{"alice": alice, "bob": bob} {
			if found := leakedParts(out, tok); len(found) > 0 {
				t.Errorf("gateway log: got %s of %s's token in it, want none", strings.Join(found, ", "), name)
			}
		}
	})
}

// TestOAuthExample serves examples/oauth.yaml as written, but for its
// issuer, which becomes a provider running here under the same path: the
// gateway names the configured resource (not its listen URL) in its
// metadata and challenges, the metadata at the resource's path, accepts
// tokens for that resource only with the required scope, and narrows each
// caller's tools by the example's policy.
func TestOAuthExample(t *testing.T) {
	t.Parallel()
	const (
		example  = "examples/oauth.yaml"
		issuer   = "https://login.example.com/realms/ops"
		resource = "https://mcp.example.com/mcp"
		scope    = "fiskfleet"
	)
	for _, mode := range []config.Mode{config.ModeMCP, config.ModeInfo} {
		c, warnings, err := config.LoadFor(example, mode)
		if err != nil {
			t.Fatalf("loading %s for %s: %v", example, mode, err)
		}
		if len(warnings) > 0 {
			t.Errorf("loading %s for %s: got warnings %v, want none", example, mode, warnings)
		}
		a := c.Expose.Agent.MCP.Auth
		if a == nil || a.Issuer != issuer || a.Resource != resource || !slices.Equal(a.Scopes, []string{scope}) {
			t.Fatalf("expose.agent.mcp.auth: got %+v, want issuer %s, resource %s, scopes [%s]", a, issuer, resource, scope)
		}
	}

	op := oidctest.Start(t, oidctest.Config{Users: oauthUsers, IssuerPath: "/realms/ops"})
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fleettest.WriteFile(t, t.TempDir(), "oauth.yaml", strings.Replace(string(text), issuer, op.Issuer(), 1))
	// application_path is a name: the demo app's directory goes first on
	// PATH.
	env := append(os.Environ(), "PATH="+filepath.Dir(fleettest.FiskDemo(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	gw := startGateway(t, env, cfg)
	waitReady(t, gw.URL)
	base := strings.TrimSuffix(gw.URL, "/mcp")

	r := rawGet(t, base+"/.well-known/oauth-protected-resource/mcp")
	var doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil || r.status != http.StatusOK {
		t.Fatalf("metadata: got status %d %q (%v), want 200 and a document", r.status, r.body, err)
	}
	if doc.Resource != resource || !slices.Equal(doc.AuthorizationServers, []string{op.Issuer()}) || !slices.Equal(doc.ScopesSupported, []string{scope}) {
		t.Errorf("metadata: got %+v, want resource %s, authorization_servers [%s], scopes_supported [%s]", doc, resource, op.Issuer(), scope)
	}

	tests := []struct {
		name      string
		flow      oidctest.CodeFlow
		status    int    // of a raw initialize
		challenge string // in WWW-Authenticate
	}{
		{"no scope", oidctest.CodeFlow{Resource: resource, LoginHint: "bob"}, http.StatusForbidden, `error="insufficient_scope"`},
		{"the listen URL as resource", oidctest.CodeFlow{Resource: gw.URL, LoginHint: "bob", Scopes: []string{scope}}, http.StatusUnauthorized, `error="invalid_token"`},
		{"resource and scope", oidctest.CodeFlow{Resource: resource, LoginHint: "bob", Scopes: []string{scope}}, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawMCP(t, gw.URL, op.AuthorizationCode(t, tt.flow), nil, initializeBody)
			if r.status != tt.status {
				t.Fatalf("initialize: got status %d (%s), want %d", r.status, r.body, tt.status)
			}
			challenge := r.header.Get("WWW-Authenticate")
			if tt.challenge == "" {
				if challenge != "" {
					t.Errorf("WWW-Authenticate: got %q, want none", challenge)
				}
				return
			}
			for _, want := range []string{tt.challenge, `scope="` + scope + `"`, `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`} {
				if !strings.Contains(challenge, want) {
					t.Errorf("WWW-Authenticate: got %q, want %s in it", challenge, want)
				}
			}
		})
	}

	t.Run("the policy", func(t *testing.T) {
		alice := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: resource, LoginHint: "alice", Scopes: []string{scope}})
		bob := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: resource, LoginHint: "bob", Scopes: []string{scope}})
		wantBob := []string{"cluster_node_status", "deploy", "echo", "fail", "flood", "getenv", "restart", "sleep", "spawn", "ticker"}
		wantAlice := slices.DeleteFunc(slices.Clone(wantBob), func(n string) bool { return n == "deploy" || n == "restart" })
		if got := listNames(t, oauthClient(t, gw.URL, alice, nil)); !slices.Equal(got, wantAlice) {
			t.Errorf("alice's tools/list: got %v, want %v", got, wantAlice)
		}
		if got := listNames(t, oauthClient(t, gw.URL, bob, nil)); !slices.Equal(got, wantBob) {
			t.Errorf("bob's tools/list: got %v, want %v", got, wantBob)
		}
	})
}

// wantClaims decodes the payload of a JWT, without verifying it (the
// gateway does that), and checks the given claims.
func wantClaims(tb testing.TB, what, token string, want map[string]any) {
	tb.Helper()
	claims := jwtClaims(tb, what, token)
	for k, v := range want {
		got := claims[k]
		if list, ok := got.([]any); ok && len(list) == 1 {
			got = list[0]
		}
		if got != v {
			tb.Errorf("%s: got claim %s %v, want %v", what, k, claims[k], v)
		}
	}
}

func jwtClaims(tb testing.TB, what, token string) map[string]any {
	tb.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		tb.Fatalf("%s: got %d dot-separated parts, want a JWT's 3", what, len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		tb.Fatalf("%s: decoding the payload: %v", what, err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		tb.Fatalf("%s: decoding the claims %s: %v", what, payload, err)
	}
	return claims
}

// leakedParts names what of token (the whole, or one of its three
// dot-separated parts) occurs in s.
func leakedParts(s, token string) []string {
	var found []string
	if strings.Contains(s, token) {
		found = append(found, "the token")
	}
	for i, p := range strings.Split(token, ".") {
		if p != "" && strings.Contains(s, p) {
			found = append(found, []string{"the header", "the payload", "the signature"}[i])
		}
	}
	return found
}

// natsRecorder keeps every message a subscription on ">" receives.
type natsRecorder struct {
	nc  *nats.Conn
	sub *nats.Subscription

	mu   sync.Mutex // guards msgs
	msgs []*nats.Msg
}

func recordNATS(tb testing.TB, nc *nats.Conn) *natsRecorder {
	tb.Helper()
	r := &natsRecorder{nc: nc}
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.msgs = append(r.msgs, m)
	})
	if err != nil {
		tb.Fatalf("subscribing to >: %v", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	r.sub = sub
	return r
}

// settle publishes a marker and waits until the recorder has it: every
// message the server routed before is recorded then.
func (r *natsRecorder) settle(tb testing.TB) []*nats.Msg {
	tb.Helper()
	subject := "oauth-test.settle." + nats.NewInbox()[len(nats.InboxPrefix):]
	if err := r.nc.Publish(subject, nil); err != nil {
		tb.Fatal(err)
	}
	fisktest.WaitFor(tb, 10*time.Second, "the recorder to see "+subject, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.ContainsFunc(r.msgs, func(m *nats.Msg) bool { return m.Subject == subject })
	})
	if n, _ := r.sub.Dropped(); n != 0 {
		tb.Fatalf("recorder: got %d messages dropped, want none", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// TestOAuthNoTokenPassthrough proves the MCP access token never leaves
// the gateway: a caller with a real token calls a local and a remote tool,
// and the token, whole or any of its parts, is in no NATS message (subject,
// reply, headers, payload), no log of the gateway or the agent, and no
// environment variable a command sees, locally or on the agent.
func TestOAuthNoTokenPassthrough(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	rec := recordNATS(t, b.ns.Connect(t, nats.Name("recorder")))
	agent := b.startAgents(t, 1, b.demoAgent(t, "demo", 2))[0]
	op := oidctest.Start(t, oidctest.Config{Users: oauthUsers})
	gw := oauthGateway{
		natsContext: fleetContext,
		extra:       map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}},
	}.start(t, b.home.Env(), op)
	token := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "alice"})
	c := oauthClient(t, gw.URL, token, nil)

	type call struct {
		name   string
		args   map[string]any
		output string // "" checks only for leaks
	}
	tests := []call{
		{name: "echo", args: map[string]any{"message": "local"}, output: "local\n"},
		{name: "demo_echo", args: map[string]any{"message": "remote"}, output: "remote\n"},
	}
	// Where a careless gateway or agent would put a bearer token for a
	// command to see (getenv's one input is the flag name).
	for _, v := range []string{"AUTHORIZATION", "HTTP_AUTHORIZATION", "MCP_TOKEN", "TOKEN", "ACCESS_TOKEN", "BEARER_TOKEN"} {
		tests = append(tests, call{name: "getenv", args: map[string]any{"name": v}}, call{name: "demo_getenv", args: map[string]any{"name": v}})
	}
	var outputs []string
	for _, tt := range tests {
		cr := mcpCommandResult(t, tt.name, callMCP(t, c, tt.name, tt.args))
		if tt.output != "" && cr.Output != tt.output {
			t.Errorf("%s: got output %q, want %q", tt.name, cr.Output, tt.output)
		}
		if found := leakedParts(cr.Output, token); len(found) > 0 {
			t.Errorf("%s %v: got %s of the token in the output %q, want none", tt.name, tt.args, strings.Join(found, ", "), cr.Output)
		}
		outputs = append(outputs, cr.Output)
	}
	t.Logf("getenv outputs: %q", outputs[2:])

	msgs := rec.settle(t)
	var remoteCalls int
	for _, m := range msgs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", m.Subject, m.Reply)
		for k, vs := range m.Header {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		b.Write(m.Data)
		if found := leakedParts(b.String(), token); len(found) > 0 {
			t.Errorf("NATS message on %s: got %s of the token in it, want none:\n%s", m.Subject, strings.Join(found, ", "), b.String())
		}
		if m.Subject == natsbus.ToolSubject("demo") || m.Subject == natsbus.StreamSubject("demo") {
			remoteCalls++
		}
	}
	// The recorder saw the traffic the test is about: every remote call's
	// request went over this server.
	var want int
	for _, tt := range tests {
		if strings.HasPrefix(tt.name, "demo_") {
			want++
		}
	}
	if remoteCalls != want {
		t.Errorf("NATS messages: got %d calls to demo among %d messages, want %d", remoteCalls, len(msgs), want)
	}
	t.Logf("checked %d NATS messages", len(msgs))

	for _, p := range []*fleettest.Process{gw.Process, agent} {
		if found := leakedParts(p.Output(), token); len(found) > 0 {
			t.Errorf("log of %s: got %s of the token in it, want none", p.Name, strings.Join(found, ", "))
		}
	}
	if !regexp.MustCompile(`tool call.*tool=demo_echo.*sub=alice`).MatchString(gw.Output()) {
		t.Errorf("gateway log: got\n%s\nwant the remote call logged with sub=alice", gw.Output())
	}
}

// TestTSClientOAuthFlow runs the official TypeScript SDK's OAuth client
// (integration/tsclient/oauth.mjs) against the gateway, from nothing to a
// tool call: 401, protected resource metadata, authorization server
// metadata, dynamic client registration, authorization with PKCE and the
// resource parameter through the provider's login, the token, then
// initialize, tools/list and tools/call. Against a gateway with a policy,
// logging in the user a login_hint names; against one that requires a
// scope, which the SDK must learn from the gateway and ask for; and as a
// caller the policy refuses, whom the SDK must tell so.
func TestTSClientOAuthFlow(t *testing.T) {
	t.Parallel()
	ts := findTSClient(t)
	ts.script = filepath.Join(filepath.Dir(ts.script), "oauth.mjs")
	allTools := []string{"cluster_node_status", "deploy", "echo", "fail", "flood", "getenv", "restart", "sleep", "spawn", "ticker"}
	tests := []struct {
		name      string
		gateway   oauthGateway
		loginHint string // "" logs in the provider's first user
		wantSub   string
		wantScope string // in the authorization request and the token; "" for none
		// refused is a caller the policy refuses: the flow succeeds, and
		// the SDK reports the gateway's 403.
		refused bool
	}{
		// bob is not the provider's first user: the login_hint the
		// script adds to the authorization request picks him.
		{name: "policy", gateway: oauthGateway{policy: oauthPolicy}, loginHint: "bob", wantSub: "bob"},
		{name: "required scope", gateway: oauthGateway{auth: map[string]any{"scopes": []string{"fiskfleet"}}}, wantSub: "alice", wantScope: "fiskfleet"},
		{name: "a caller in no role", gateway: oauthGateway{policy: oauthPolicy}, loginHint: "carol", wantSub: "carol", refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op := oidctest.Start(t, oidctest.Config{Users: oauthUsers})
			gw := tt.gateway.start(t, os.Environ(), op)
			metadataBefore := op.MetadataHits()
			got := runOAuthScript(t, ts, gw.URL, tt.loginHint)

			lastStatus := http.StatusOK
			if tt.refused {
				lastStatus = http.StatusForbidden
			}
			if got.FirstConnect != "unauthorized" {
				t.Errorf("first connect: got %q, want unauthorized (the SDK's UnauthorizedError)", got.FirstConnect)
			}
			issuer, _ := url.Parse(op.Issuer())
			steps := []struct {
				what   string
				match  func(oauthRequest) bool
				status int
			}{
				{"the first request to /mcp", func(r oauthRequest) bool { return r.URL == gw.URL }, http.StatusUnauthorized},
				{"the protected resource metadata", func(r oauthRequest) bool {
					return r.Method == "GET" && strings.HasPrefix(r.URL, strings.TrimSuffix(gw.URL, "/mcp")+"/.well-known/oauth-protected-resource")
				}, http.StatusOK},
				{"the authorization server metadata", func(r oauthRequest) bool {
					return r.Method == "GET" && strings.HasPrefix(r.URL, "http://"+issuer.Host+"/.well-known/")
				}, http.StatusOK},
				{"the dynamic registration", func(r oauthRequest) bool { return r.Method == "POST" && r.URL == op.Issuer()+"/register" }, http.StatusCreated},
				{"the token request", func(r oauthRequest) bool { return r.Method == "POST" && r.URL == op.Issuer()+"/oauth/token" }, http.StatusOK},
				{"a request to /mcp with the token", func(r oauthRequest) bool {
					return r.Method == "POST" && r.URL == gw.URL && r.Status != http.StatusUnauthorized
				}, lastStatus},
			}
			at := 0
			for _, s := range steps {
				i := slices.IndexFunc(got.Requests[at:], s.match)
				if i < 0 {
					t.Errorf("requests: got none for %s after request %d, want one (%+v)", s.what, at, got.Requests)
					continue
				}
				if r := got.Requests[at+i]; r.Status != s.status {
					t.Errorf("%s: got %s %s status %d, want %d", s.what, r.Method, r.URL, r.Status, s.status)
				}
				at += i + 1
			}

			if !got.Registered || got.ClientID == "" {
				t.Errorf("registration: got registered %t with client id %q, want a registered client", got.Registered, got.ClientID)
			}
			authz, err := url.Parse(got.AuthorizationURL)
			if err != nil {
				t.Fatalf("authorization URL %q: %v", got.AuthorizationURL, err)
			}
			q := authz.Query()
			for k, want := range map[string]string{
				"response_type":         "code",
				"client_id":             got.ClientID,
				"code_challenge_method": "S256",
				"resource":              gw.URL,
			} {
				if q.Get(k) != want {
					t.Errorf("authorization URL %s: got %s %q, want %q", got.AuthorizationURL, k, q.Get(k), want)
				}
			}
			if len(q.Get("code_challenge")) != 43 {
				t.Errorf("authorization URL: got code_challenge %q, want a base64url SHA-256 (43 characters)", q.Get("code_challenge"))
			}
			if tt.wantScope != "" && !slices.Contains(strings.Fields(q.Get("scope")), tt.wantScope) {
				t.Errorf("authorization URL: got scope %q, want %s in it", q.Get("scope"), tt.wantScope)
			}
			if got.Hops < 2 {
				t.Errorf("authorization: got %d redirects to the client, want several through the provider's login", got.Hops)
			}
			if !strings.EqualFold(got.TokenType, "bearer") {
				t.Errorf("token type: got %q, want Bearer", got.TokenType)
			}
			// The provider issued the token to the client it registered,
			// for the gateway, to the user who logged in.
			for k, want := range map[string]any{"client_id": got.ClientID, "aud": gw.URL, "sub": tt.wantSub} {
				v := got.Claims[k]
				if list, ok := v.([]any); ok && len(list) == 1 {
					v = list[0]
				}
				if v != want {
					t.Errorf("token claim %s: got %v, want %v", k, got.Claims[k], want)
				}
			}
			if scope, _ := got.Claims["scope"].(string); tt.wantScope != "" && !slices.Contains(strings.Fields(scope), tt.wantScope) {
				t.Errorf("token claim scope: got %q, want %s in it", scope, tt.wantScope)
			}
			if op.MetadataHits() <= metadataBefore {
				t.Errorf("provider metadata requests: got %d, want more than %d", op.MetadataHits(), metadataBefore)
			}
			if tt.refused {
				// The 403 itself is in the requests checked above.
				if !strings.Contains(got.ConnectError, policyKey) {
					t.Errorf("the SDK's error: got %q, want the gateway's refusal naming %s", got.ConnectError, policyKey)
				}
				return
			}
			if got.ConnectError != "" {
				t.Fatalf("connecting with the token: got %q, want a connection", got.ConnectError)
			}
			if !slices.Equal(got.Tools, allTools) {
				t.Errorf("tools/list: got %v, want %v", got.Tools, allTools)
			}
			var cr struct {
				Output string `json:"output"`
			}
			if err := json.Unmarshal([]byte(got.Text), &cr); got.IsError || err != nil || cr.Output != "over oauth\n" {
				t.Errorf("echo: got %q (isError %t), want a command result with output %q", got.Text, got.IsError, "over oauth\n")
			}
			if re := regexp.MustCompile(`tool call.*tool=echo.*sub=` + tt.wantSub); !re.MatchString(gw.Output()) {
				t.Errorf("gateway log: got\n%s\nwant a line matching %s", gw.Output(), re)
			}
		})
	}
}

// oauthRequest is an HTTP request the TypeScript SDK made, as oauth.mjs
// reports it.
type oauthRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	Status int    `json:"status"`
}

// oauthReport is what oauth.mjs prints.
type oauthReport struct {
	ClientID         string         `json:"clientId"`
	Registered       bool           `json:"registered"`
	FirstConnect     string         `json:"firstConnect"`
	AuthorizationURL string         `json:"authorizationURL"`
	Hops             int            `json:"hops"`
	ProtocolVersion  string         `json:"protocolVersion"`
	Claims           map[string]any `json:"claims"`
	TokenType        string         `json:"tokenType"`
	Requests         []oauthRequest `json:"requests"`
	Tools            []string       `json:"tools"`
	Text             string         `json:"text"`
	IsError          bool           `json:"isError"`
	ConnectError     string         `json:"connectError"`
}

// runOAuthScript runs oauth.mjs against the gateway at mcpURL, logging in
// loginHint ("" for the provider's first user).
func runOAuthScript(tb testing.TB, ts tsClient, mcpURL, loginHint string) oauthReport {
	tb.Helper()
	var got oauthReport
	var args []string
	if loginHint != "" {
		args = append(args, loginHint)
	}
	ts.run(tb, os.Environ(), mcpURL, &got, args...)
	tb.Logf("requests of the SDK (protocol version %s): %+v", got.ProtocolVersion, got.Requests)
	return got
}

// claudeCodeBin is where `make tools` installs Claude Code (the
// @anthropic-ai/claude-code package, pinned in the Makefile), relative to
// the workspace root.
const claudeCodeBin = "bin/npm/node_modules/.bin/claude"

// claudeCode is the installed Claude Code CLI.
type claudeCode struct{ bin string }

// findClaudeCode returns the Claude Code `make tools` installed. A missing
// install skips tb on a developer's machine and fails it when CI is set.
func findClaudeCode(tb testing.TB) claudeCode {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(root, claudeCodeBin)
	fisktest.RequireInstalled(tb, "Claude Code", bin)
	return claudeCode{bin: bin}
}

// run runs claude with args in home, its HOME and configuration, with
// nothing that would make it prompt, update itself or reach anything but
// the MCP server, and fails tb unless it exits 0.
func (c claudeCode) run(tb testing.TB, home string, args ...string) fleettest.Result {
	tb.Helper()
	env := []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		// Non-interactive, and no traffic but to the MCP server: no
		// auto-update, telemetry or error reporting.
		"CI=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"NO_COLOR=1",
	}
	r := fleettest.Run(tb, env, c.bin, args...)
	if r.ExitCode != 0 {
		tb.Fatalf("claude %s: exit %d\nstdout:\n%s\nstderr:\n%s", args[0], r.ExitCode, r.Stdout, r.Stderr)
	}
	return r
}

// TestClaudeCodeWithToken adds the gateway to the real Claude Code CLI
// and reads Claude Code's own health check of the server (`claude mcp
// list` and `claude mcp get`): with an access token in a header, obtained
// elsewhere, as a non-interactive setup does, it is connected; with a
// token for another resource it failed on the gateway's 401, which the
// gateway logs with the token's sub; without a token, as the gateway's own
// add line has it, Claude Code finds the provider through the gateway's
// metadata and reports that it needs authentication.
func TestClaudeCodeWithToken(t *testing.T) {
	t.Parallel()
	cc := findClaudeCode(t)
	if v := cc.run(t, t.TempDir(), "--version").Stdout; !strings.HasPrefix(v, claudeCodeVersion+" ") {
		t.Errorf("claude --version: got %q, want %s, the version `make tools` pins", v, claudeCodeVersion)
	}
	op := oidctest.Start(t, oidctest.Config{Users: append(slices.Clone(oauthUsers), oidctest.User{Subject: "mallory", Groups: []string{"dev"}})})
	gw := oauthGateway{policy: oauthPolicy}.start(t, os.Environ(), op)
	server := regexp.QuoteMeta("demo: " + gw.URL + " (HTTP) - ")

	tests := []struct {
		name   string
		token  string         // "" adds the server without a header
		list   *regexp.Regexp // a line of `claude mcp list`
		status string         // the end of the Status line of `claude mcp get demo`
		// refusals matches every line the gateway logs refusing the
		// health checks; nil wants none.
		refusals *regexp.Regexp
		// mcpLog is in Claude Code's own log of the server.
		mcpLog string
	}{
		{
			name:   "a valid token",
			token:  op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "alice"}),
			list:   regexp.MustCompile(`(?m)^` + server + `(✔|✓) Connected$`),
			status: "Connected",
			mcpLog: "Successfully connected",
		},
		{
			name:   "a token for another resource",
			token:  op.AuthorizationCode(t, oidctest.CodeFlow{Resource: "http://127.0.0.1:1/mcp", LoginHint: "mallory"}),
			list:   regexp.MustCompile(`(?m)^` + server + `✘ Failed to connect .*HTTP 401.*wrong audience`),
			status: "Failed to connect",
			// The token's signature verifies, so the refusal names whose
			// token it was.
			refusals: regexp.MustCompile(`msg="refusing a request" status=401 reason="wrong audience" .* sub=mallory$`),
		},
		{
			name:     "no token",
			list:     regexp.MustCompile(`(?m)^` + server + `! Needs authentication$`),
			status:   "Needs authentication",
			refusals: regexp.MustCompile(`msg="refusing a request" status=401 reason="no bearer token in the Authorization header" error="[^"]*"$`),
			// Claude Code found the provider from the gateway's 401 and
			// protected resource metadata.
			mcpLog: "Saving discovery state (authServer: " + op.Issuer(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			logged := len(gw.Output())
			args := []string{"mcp", "add", "--scope", "user", "--transport", "http", "demo", gw.URL}
			if tt.token != "" {
				args = append(args, "--header", "Authorization: Bearer "+tt.token)
			}
			cc.run(t, home, args...)
			list := cc.run(t, home, "mcp", "list")
			if !tt.list.MatchString(list.Stdout) {
				t.Errorf("claude mcp list: got\n%s%s\nwant a line matching %s", list.Stdout, list.Stderr, tt.list)
			}
			// `claude mcp get` shows the header in clear: only its status
			// line goes into a failure message.
			get := cc.run(t, home, "mcp", "get", "demo")
			status := regexp.MustCompile(`(?m)^\s*Status: (.*)$`).FindStringSubmatch(get.Stdout)
			if status == nil || !strings.HasSuffix(status[1], tt.status) {
				t.Errorf("claude mcp get demo: got status %q, want one ending in %q", status, tt.status)
			}
			mcpLog := claudeMCPLog(home)
			if tt.mcpLog != "" && !strings.Contains(mcpLog, tt.mcpLog) {
				t.Errorf("Claude Code's MCP log: got\n%s\nwant %q in it", mcpLog, tt.mcpLog)
			}

			during := gw.Output()[logged:]
			refusals := regexp.MustCompile(`(?m)^.*msg="refusing a request.*$`).FindAllString(during, -1)
			switch {
			case tt.refusals == nil && len(refusals) > 0:
				t.Errorf("gateway log during the health checks: got refusals\n%s\nwant none", strings.Join(refusals, "\n"))
			case tt.refusals != nil && len(refusals) == 0:
				t.Errorf("gateway log during the health checks: got\n%s\nwant the refusals logged", during)
			}
			for _, r := range refusals {
				if tt.refusals != nil && !tt.refusals.MatchString(r) {
					t.Errorf("gateway log: got refusal %q, want it to match %s", r, tt.refusals)
				}
			}
			if tt.token != "" {
				if found := leakedParts(during, tt.token); len(found) > 0 {
					t.Errorf("gateway log: got %s of the token in it, want none", strings.Join(found, ", "))
				}
			}
		})
	}
}

// claudeCodeVersion is the version of Claude Code the Makefile's tools
// target installs.
const claudeCodeVersion = "2.1.332"

// claudeMCPLog returns the MCP server logs Claude Code wrote under home.
func claudeMCPLog(home string) string {
	files, _ := filepath.Glob(filepath.Join(home, ".cache", "claude-cli-nodejs", "*", "mcp-logs-demo", "*.jsonl"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}
