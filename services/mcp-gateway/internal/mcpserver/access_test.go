package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// testCallers stands in for the OAuth verifier's tokens: the bearer value
// is looked up here. The verifier is tested with its package; what these
// tests cover is what the gateway does with the caller it establishes.
var testCallers = map[string]auth.Caller{
	"alice":   {Subject: "alice", Groups: []string{"readers"}},
	"bob":     {Subject: "bob", Groups: []string{"writers"}},
	"carol":   {Subject: "carol", Groups: []string{"readers", "writers"}},
	"dave":    {Subject: "dave", Groups: []string{"admins"}},
	"mallory": {Subject: "mallory", Groups: []string{"guests"}},
	"erin":    {Subject: "erin", Groups: []string{"batch"}},
	"frank":   {Subject: "frank", Groups: []string{"admins"}},
	"rita":    {Subject: "rita", Groups: []string{"remote"}},
	"paul":    {Subject: "paul", Groups: []string{"admins"}},
	"connie":  {Subject: "connie", Groups: []string{"remote", "conflict"}},
	"bert":    {Subject: "bert", Groups: []string{"broken"}},
}

// testAuthenticate is a Config.Authenticate: "Authorization: Bearer NAME"
// names a caller of testCallers (401 otherwise), authorize decides (403
// with its message on error), and the caller travels in the context.
func testAuthenticate(next http.Handler, authorize func(*auth.Caller) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		known, found := testCallers[name]
		if !ok || !found {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		c := known // a copy: authorize sets its roles
		c.Groups = slices.Clone(known.Groups)
		if err := authorize(&c); err != nil {
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		r.Header.Del("Authorization")
		next.ServeHTTP(w, r.WithContext(auth.WithCaller(r.Context(), &c)))
	})
}

// bearer is the transport option sending token as the bearer.
func bearer(token string) []transport.StreamableHTTPCOption {
	return []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}
}

// counted is an in-process tool that counts its runs and answers
// {"tool": NAME}.
type counted struct {
	tool.Tool
	runs atomic.Int32
}

func newCounted(tb testing.TB, name string, tags []string, confirm tool.Confirmation, remote bool) *counted {
	tb.Helper()
	c := &counted{}
	t, err := tool.NewFunc(tool.FuncSpec{
		Name: name, Description: "A counted tool", Tags: tags,
		Exposure: tool.ExposeMCP, Confirmation: confirm, Remote: remote,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			c.runs.Add(1)
			return tool.Outcome{JSON: json.RawMessage(`{"tool":"` + name + `"}`)}, nil
		},
	})
	if err != nil {
		tb.Fatalf("building %s: %v", name, err)
	}
	c.Tool = t
	return c
}

// accessPolicy is the policy of the visibility tests:
//
//   - reader: local tools tagged read (so no remote tool, whatever its
//     tags);
//   - writer: *_files and peer_read by name, less anything tagged read
//     (a remote tool's tags select nothing, so peer_read stays);
//   - admin: everything.
func accessPolicy() *policy.Policy {
	return policy.New(&config.Policy{Roles: map[string]*config.Role{
		"reader": {Match: []string{"readers"}, Include: config.Filter{Tags: []string{"read"}}},
		"writer": {
			Match:   []string{"writers"},
			Include: config.Filter{Tools: []string{"*_files", "peer_read"}},
			Exclude: config.Filter{Tags: []string{"read"}},
		},
		"admin": {Match: []string{"admins"}},
	}})
}

// accessTools are the local tools of the visibility tests, and the peer's.
type accessTools struct {
	ls, rm, echo, deploy, peerRead, peerAdmin *counted
}

func newAccessTools(tb testing.TB) *accessTools {
	return &accessTools{
		ls:        newCounted(tb, "ls_files", []string{"read"}, tool.ConfirmNone, false),
		rm:        newCounted(tb, "rm_files", []string{"write"}, tool.ConfirmNone, false),
		echo:      newCounted(tb, "echo_back", nil, tool.ConfirmNone, false),
		deploy:    newCounted(tb, "deploy_app", []string{"write"}, tool.ConfirmRequired, false),
		peerRead:  newCounted(tb, "peer_read", []string{"read"}, tool.ConfirmNone, true),
		peerAdmin: newCounted(tb, "peer_admin", []string{"read"}, tool.ConfirmNone, true),
	}
}

func (a *accessTools) local() []tool.Tool {
	return []tool.Tool{a.ls, a.rm, a.echo, a.deploy}
}

// startAccessServer serves the access tools, the peer's as source
// "peer", behind testAuthenticate and pol.
func startAccessServer(tb testing.TB, cfg Config, a *accessTools) (*Server, string) {
	tb.Helper()
	cfg.Authenticate = testAuthenticate
	s, url := startServer(tb, cfg, a.local())
	if err := s.SetTools("peer", []tool.Tool{a.peerRead, a.peerAdmin}); err != nil {
		tb.Fatalf("adding the peer's tools: %v", err)
	}
	return s, url
}

// listNames returns the tool names c sees, sorted.
func listNames(tb testing.TB, c *client.Client) []string {
	tb.Helper()
	res, err := c.ListTools(tb.Context(), mcp.ListToolsRequest{})
	if err != nil {
		tb.Fatalf("listing tools: %v", err)
	}
	var got []string
	for _, t := range res.Tools {
		got = append(got, t.Name)
	}
	slices.Sort(got)
	return got
}

func TestPolicyToolsList(t *testing.T) {
	_, url := startAccessServer(t, Config{Policy: accessPolicy()}, newAccessTools(t))
	tests := []struct {
		caller string
		want   []string
	}{
		{caller: "alice", want: []string{"ls_files"}},
		{caller: "bob", want: []string{"peer_read", "rm_files"}},
		{caller: "carol", want: []string{"ls_files", "peer_read", "rm_files"}},
		{caller: "dave", want: []string{"deploy_app", "echo_back", "ls_files", "peer_admin", "peer_read", "rm_files"}},
	}
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.caller, func(t *testing.T) {
					c := connect(t, url, e, bearer(tt.caller))
					if got := listNames(t, c); !slices.Equal(got, tt.want) {
						t.Errorf("got tools %v, want %v", got, tt.want)
					}
				})
			}
		})
	}
}

func TestPolicyCallRefused(t *testing.T) {
	a := newAccessTools(t)
	_, url := startAccessServer(t, Config{Policy: accessPolicy()}, a)
	accept := func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true}), nil
	}
	tests := []struct {
		name   string
		caller string
		tool   *counted
		// wantRun is whether the call is inside the caller's grant.
		wantRun bool
		// wantAsked is whether the gated tool's approval is asked.
		wantAsked bool
	}{
		{name: "local tool outside the grant", caller: "alice", tool: a.rm},
		{name: "untagged local tool outside the grant", caller: "bob", tool: a.echo},
		{name: "local tool excluded by tag", caller: "bob", tool: a.ls},
		{name: "remote tool with a granted tag", caller: "alice", tool: a.peerRead},
		{name: "remote tool not named", caller: "carol", tool: a.peerAdmin},
		{name: "gated tool outside the grant is not asked", caller: "carol", tool: a.deploy},
		{name: "local tool inside the grant", caller: "alice", tool: a.ls, wantRun: true},
		{name: "remote tool by name", caller: "bob", tool: a.peerRead, wantRun: true},
		{name: "gated tool inside the grant is asked", caller: "dave", tool: a.deploy, wantRun: true, wantAsked: true},
	}
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					el := &elicitor{fn: accept}
					c := connect(t, url, e, bearer(tt.caller), client.WithElicitationHandler(el))
					before := tt.tool.runs.Load()
					res, err := tryCall(t.Context(), c, tt.tool.Name(), nil)
					ran := tt.tool.runs.Load() - before
					if calls, _ := el.seen(); (calls > 0) != tt.wantAsked {
						t.Errorf("got %d elicitations, want asked %t", calls, tt.wantAsked)
					}
					if tt.wantRun {
						if err != nil {
							t.Fatalf("calling %s: %v", tt.tool.Name(), err)
						}
						if res.IsError || ran != 1 {
							t.Errorf("got %q (error %t) and %d runs, want one run", resultText(res), res.IsError, ran)
						}
						return
					}
					if ran != 0 {
						t.Errorf("got %d runs of %s, want none", ran, tt.tool.Name())
					}
					checkRefused(t, c, tt.tool.Name(), res, err)
				})
			}
		})
	}
}

// checkRefused checks the answer (res, err) to a call of name outside
// the caller's grant. The gateway's own refusal is in-band, naming
// expose.agent.mcp.policy; mcp-go (v1.2.1) also applies the tools/list
// filter at call time and answers a filtered tool with the -32602 "not
// found" of a tool that does not exist before the gateway sees the call.
// Either way the answer must not tell the tool apart from one that exists
// for nobody, and an in-band refusal must name the key to look at.
func checkRefused(tb testing.TB, c *client.Client, name string, res *mcp.CallToolResult, err error) {
	tb.Helper()
	if err == nil {
		text := resultText(res)
		if !res.IsError || !strings.Contains(text, "expose.agent.mcp.policy") || !strings.Contains(text, name) {
			tb.Errorf("got %q (error %t), want an in-band refusal naming %s and expose.agent.mcp.policy", text, res.IsError, name)
		}
		return
	}
	const nowhere = "no_tool_of_anyone"
	_, nerr := tryCall(tb.Context(), c, nowhere, nil)
	if nerr == nil {
		tb.Fatalf("got a result for %s, want an error", nowhere)
	}
	if got, want := err.Error(), strings.ReplaceAll(nerr.Error(), nowhere, name); got != want {
		tb.Errorf("got error %q for %s, want the one of a tool that exists nowhere, %q", got, name, want)
	}
}

// postInitialize POSTs a 2025-11-25 initialize to url with header
// "Authorization: Bearer token" and returns the status and body.
func postInitialize(tb testing.TB, url, token string) (int, string) {
	tb.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + mcp.LATEST_LEGACY_PROTOCOL_VERSION +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	return rawDo(tb, http.MethodPost, url, token, "", body)
}

// rawDo sends one request to url with the bearer token, the session id
// (when not empty) and body (POST only), and returns the status and body.
func rawDo(tb testing.TB, method, url, token, session, body string) (int, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		tb.Fatalf("building the request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		// An event stream: its status is the answer.
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPolicyNoRoleForbidden(t *testing.T) {
	_, url := startAccessServer(t, Config{Policy: accessPolicy()}, newAccessTools(t))
	code, body := postInitialize(t, url, "mallory")
	if code != http.StatusForbidden {
		t.Fatalf("got HTTP %d %q, want 403", code, body)
	}
	for _, want := range []string{"expose.agent.mcp.policy", "groups claim", "guests"} {
		if !strings.Contains(body, want) {
			t.Errorf("got body %q, want it to contain %q", body, want)
		}
	}
	if code, body := postInitialize(t, url, "alice"); code != http.StatusOK {
		t.Errorf("got HTTP %d %q for a caller with a role, want 200", code, body)
	}
}

func TestSessionBoundToCaller(t *testing.T) {
	_, url := startAccessServer(t, Config{Policy: accessPolicy()}, newAccessTools(t))
	a := connect(t, url, legacyEra, bearer("alice"))
	id := a.GetSessionId()
	if id == "" {
		t.Fatal("got no session id for the legacy client, want one")
	}
	listBody := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
	tests := []struct {
		name   string
		method string
		body   string
	}{
		{name: "POST", method: http.MethodPost, body: listBody},
		{name: "GET", method: http.MethodGet},
		{name: "DELETE", method: http.MethodDelete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// carol's roles are a superset of alice's: binding is by
			// subject, not by what the caller may do.
			for _, other := range []string{"bob", "carol"} {
				if code, body := rawDo(t, tt.method, url, other, id, tt.body); code != http.StatusNotFound {
					t.Errorf("got HTTP %d %q for %s on alice's session, want 404", code, body, other)
				}
			}
		})
	}
	t.Run("the owner still works", func(t *testing.T) {
		if got, want := listNames(t, a), []string{"ls_files"}; !slices.Equal(got, want) {
			t.Errorf("got tools %v, want %v", got, want)
		}
		if code, body := rawDo(t, http.MethodPost, url, "alice", id, listBody); code != http.StatusOK || !strings.Contains(body, "ls_files") {
			t.Errorf("got HTTP %d %q for alice on her own session, want 200 with her tools", code, body)
		}
	})
	t.Run("another caller's session of its own", func(t *testing.T) {
		b := connect(t, url, legacyEra, bearer("bob"))
		if b.GetSessionId() == id {
			t.Fatal("got alice's session id for bob, want a new one")
		}
		if code, _ := rawDo(t, http.MethodPost, url, "alice", b.GetSessionId(), listBody); code != http.StatusNotFound {
			t.Errorf("got HTTP %d for alice on bob's session, want 404", code)
		}
		if got, want := listNames(t, b), []string{"peer_read", "rm_files"}; !slices.Equal(got, want) {
			t.Errorf("got tools %v, want %v", got, want)
		}
	})
}

// slowTool blocks each run until release is closed, counting the runs in
// progress per caller subject and the most seen at once.
type slowTool struct {
	tool.Tool
	release chan struct{}
	mu      sync.Mutex // guards running and most
	running map[string]int
	most    map[string]int
}

func newSlowTool(tb testing.TB) *slowTool {
	tb.Helper()
	st := &slowTool{release: make(chan struct{}), running: map[string]int{}, most: map[string]int{}}
	t, err := tool.NewFunc(tool.FuncSpec{
		Name: "slow", Description: "Blocks until released", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		Call: func(ctx context.Context, _ tool.Request) (tool.Outcome, error) {
			sub := "?"
			if c := auth.CallerFrom(ctx); c != nil {
				sub = c.Subject
			}
			st.mu.Lock()
			st.running[sub]++
			st.most[sub] = max(st.most[sub], st.running[sub])
			st.mu.Unlock()
			defer func() {
				st.mu.Lock()
				st.running[sub]--
				st.mu.Unlock()
			}()
			select {
			case <-st.release:
				return tool.Outcome{JSON: json.RawMessage(`{"done":true}`)}, nil
			case <-ctx.Done():
				return tool.Outcome{}, ctx.Err()
			}
		},
	})
	if err != nil {
		tb.Fatalf("building slow: %v", err)
	}
	st.Tool = t
	return st
}

func (st *slowTool) counts(sub string) (running, most int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.running[sub], st.most[sub]
}

func TestPolicyShare(t *testing.T) {
	pol := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"batch": {Match: []string{"batch"}, MaxConcurrentTools: 1},
		"admin": {Match: []string{"admins"}},
	}})
	const erinCalls = 5 // more than the gateway's slots
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			slow := newSlowTool(t)
			s, url := startServer(t, Config{MaxConcurrent: 4, Policy: pol, Authenticate: testAuthenticate}, []tool.Tool{slow})
			erin := connect(t, url, e, bearer("erin"))
			frank := connect(t, url, e, bearer("frank"))

			results := make(chan *mcp.CallToolResult, erinCalls+1)
			call := func(c *client.Client) {
				res, err := tryCall(t.Context(), c, "slow", nil)
				if err != nil {
					t.Errorf("calling slow: %v", err)
				}
				results <- res
			}
			for range erinCalls {
				go call(erin)
			}
			fisktest.WaitFor(t, 5*time.Second, "erin's calls to arrive", func() bool { return s.core.InFlight() == erinCalls })
			fisktest.WaitFor(t, 5*time.Second, "one of erin's calls to run", func() bool { r, _ := slow.counts("erin"); return r == 1 })

			// frank has no share: his call runs while erin's wait, on a
			// gateway slot her waiting calls do not hold.
			go call(frank)
			fisktest.WaitFor(t, 5*time.Second, "frank's call to run beside erin's", func() bool { r, _ := slow.counts("frank"); return r == 1 })
			if got := s.core.Running(); got != 2 {
				t.Errorf("got %d gateway slots taken, want 2 (one run each): a call waiting for its share holds none", got)
			}
			if got := s.core.SharesInUse("erin"); got != 1 {
				t.Errorf("got erin's share %d in use, want 1", got)
			}
			if got := s.core.SharesInUse("frank"); got != 0 {
				t.Errorf("got frank's share %d in use, want 0: his role has no share", got)
			}

			close(slow.release)
			for range erinCalls + 1 {
				if res := <-results; res == nil || res.IsError {
					t.Errorf("got %+v, want every call to run once released", res)
				}
			}
			if _, most := slow.counts("erin"); most != 1 {
				t.Errorf("got erin at most %d calls at once, want 1 (her share)", most)
			}
			if got := s.core.SharesInUse("erin"); got != 0 {
				t.Errorf("got erin's share %d in use after her calls ended, want 0", got)
			}
			if got := s.core.Running(); got != 0 {
				t.Errorf("got %d gateway slots taken after every call, want 0", got)
			}
		})
	}
}

// TestPolicyShareCanceledWait shows a call canceled while it waits for its
// share is answered and leaves nothing held.
func TestPolicyShareCanceledWait(t *testing.T) {
	pol := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"batch": {Match: []string{"batch"}, MaxConcurrentTools: 1},
	}})
	slow := newSlowTool(t)
	s, url := startServer(t, Config{MaxConcurrent: 4, Policy: pol, Authenticate: testAuthenticate}, []tool.Tool{slow})
	erin := connect(t, url, legacyEra, bearer("erin"))

	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := tryCall(t.Context(), erin, "slow", nil)
		if err != nil {
			t.Errorf("calling slow: %v", err)
		}
		first <- res
	}()
	fisktest.WaitFor(t, 5*time.Second, "erin's first call to run", func() bool { r, _ := slow.counts("erin"); return r == 1 })

	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() {
		_, err := tryCall(ctx, erin, "slow", nil)
		second <- err
	}()
	fisktest.WaitFor(t, 5*time.Second, "erin's second call to wait", func() bool { return s.core.InFlight() == 2 })
	cancel()
	if err := <-second; err == nil {
		t.Error("got a result for the canceled call, want the client's cancellation error")
	}
	fisktest.WaitFor(t, 5*time.Second, "the canceled call to leave", func() bool { return s.core.InFlight() == 1 })
	if _, most := slow.counts("erin"); most != 1 {
		t.Errorf("got erin at most %d calls at once, want 1", most)
	}
	close(slow.release)
	if res := <-first; res == nil || res.IsError {
		t.Fatalf("got %+v, want the first call to finish", res)
	}
	fisktest.WaitFor(t, 5*time.Second, "erin's share to be free", func() bool { return s.core.SharesInUse("erin") == 0 })
	// A new call gets the slot at once: nothing of the canceled wait is
	// left holding it.
	if res := callTool(t, erin, "slow", nil); res.IsError {
		t.Errorf("got %q, want the next call to run", resultText(res))
	}
}

func TestStaticCallerPolicy(t *testing.T) {
	a := newAccessTools(t)
	withDefault := policy.New(&config.Policy{Roles: map[string]*config.Role{
		config.DefaultRole: {Include: config.Filter{Tools: []string{"echo_back", "peer_*"}}, Exclude: config.Filter{Tools: []string{"peer_admin"}}},
		"admin":            {Match: []string{"admins"}},
	}})
	withoutDefault := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"reader": {Match: []string{"readers"}, Include: config.Filter{Tags: []string{"read"}}},
	}})
	tests := []struct {
		name    string
		pol     *policy.Policy
		want    []string
		refused *counted
	}{
		{name: "default role", pol: withDefault, want: []string{"echo_back", "peer_read"}, refused: a.ls},
		{name: "no default role", pol: withoutDefault, want: []string{"deploy_app", "echo_back", "ls_files", "peer_admin", "peer_read", "rm_files"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := startServer(t, Config{AuthToken: "tok", Policy: tt.pol}, a.local())
			if err := s.SetTools("peer", []tool.Tool{a.peerRead, a.peerAdmin}); err != nil {
				t.Fatalf("adding the peer's tools: %v", err)
			}
			if code, _ := postInitialize(t, url, "wrong"); code != http.StatusUnauthorized {
				t.Errorf("got HTTP %d for a wrong static token, want 401", code)
			}
			for _, e := range eras {
				t.Run(e.name, func(t *testing.T) {
					c := connect(t, url, e, bearer("tok"))
					if got := listNames(t, c); !slices.Equal(got, tt.want) {
						t.Errorf("got tools %v, want %v", got, tt.want)
					}
					if tt.refused == nil {
						return
					}
					before := tt.refused.runs.Load()
					res, err := tryCall(t.Context(), c, tt.refused.Name(), nil)
					if ran := tt.refused.runs.Load() - before; ran != 0 {
						t.Errorf("got %d runs of %s, want none", ran, tt.refused.Name())
					}
					checkRefused(t, c, tt.refused.Name(), res, err)
				})
			}
		})
	}
}

// TestRemoteVia: a remote tool's call is made over the connection the
// caller's role names (RemoteVia, handed to the tool as tool.Remote.Via),
// a local one's never, and a role whose connection cannot be had is
// refused in-band.
func TestRemoteVia(t *testing.T) {
	pol := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"remote":   {Match: []string{"remote"}, NATSContext: "ctx-remote"},
		"conflict": {Match: []string{"conflict"}, NATSContext: "ctx-other"},
		"broken":   {Match: []string{"broken"}, NATSContext: "ctx-broken"},
		"admin":    {Match: []string{"admins"}},
	}})
	var mu sync.Mutex // guards asked
	var asked []string
	remoteVia := func(name string) (any, error) {
		mu.Lock()
		asked = append(asked, name)
		mu.Unlock()
		if name == "ctx-broken" {
			return nil, errors.New("nats context ctx-broken: connecting: no servers available")
		}
		return "via " + name, nil
	}
	takeAsked := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := asked
		asked = nil
		return out
	}
	probe := func(name string, remote bool) (tool.Tool, *atomic.Int32) {
		var runs atomic.Int32
		pt, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Description: "Reports the context it ran with", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone, Remote: remote,
			Call: func(_ context.Context, req tool.Request) (tool.Outcome, error) {
				runs.Add(1)
				v, _ := req.Remote.Via.(string)
				b, _ := json.Marshal(map[string]string{"via": v})
				return tool.Outcome{JSON: b}, nil
			},
		})
		if err != nil {
			t.Fatalf("building %s: %v", name, err)
		}
		return pt, &runs
	}
	localProbe, localRuns := probe("local_probe", false)
	peerProbe, peerRuns := probe("peer_probe", true)
	s, url := startServer(t, Config{Policy: pol, Authenticate: testAuthenticate, RemoteVia: remoteVia}, []tool.Tool{localProbe})
	if err := s.SetTools("peer", []tool.Tool{peerProbe}); err != nil {
		t.Fatalf("adding the peer's tools: %v", err)
	}

	tests := []struct {
		name      string
		caller    string
		tool      string
		runs      *atomic.Int32
		wantAsked []string
		// wantVia is the probe's answer; empty with wantErr.
		wantVia string
		wantErr []string
	}{
		{name: "remote tool through the role's context", caller: "rita", tool: "peer_probe", runs: peerRuns, wantAsked: []string{"ctx-remote"}, wantVia: "via ctx-remote"},
		{name: "local tool not through it", caller: "rita", tool: "local_probe", runs: localRuns, wantVia: ""},
		{name: "role without a context uses the gateway's", caller: "paul", tool: "peer_probe", runs: peerRuns, wantVia: ""},
		{name: "an error refuses the call", caller: "bert", tool: "peer_probe", runs: peerRuns, wantAsked: []string{"ctx-broken"}, wantErr: []string{"peer_probe was not run"}},
		{name: "roles naming different contexts are refused", caller: "connie", tool: "peer_probe", runs: peerRuns, wantErr: []string{"conflict, remote", "nats_context", "expose.agent.mcp.policy"}},
		{name: "conflicting roles still run local tools", caller: "connie", tool: "local_probe", runs: localRuns, wantVia: ""},
	}
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := connect(t, url, e, bearer(tt.caller))
					takeAsked()
					before := tt.runs.Load()
					res := callTool(t, c, tt.tool, nil)
					ran := tt.runs.Load() - before
					if got := takeAsked(); !slices.Equal(got, tt.wantAsked) {
						t.Errorf("got RemoteVia asked for %q, want %q", got, tt.wantAsked)
					}
					if tt.wantErr != nil {
						if !res.IsError || ran != 0 {
							t.Fatalf("got %q (error %t) and %d runs, want an in-band refusal and no run", resultText(res), res.IsError, ran)
						}
						for _, want := range tt.wantErr {
							if !strings.Contains(resultText(res), want) {
								t.Errorf("got %q, want it to contain %q", resultText(res), want)
							}
						}
						return
					}
					if res.IsError || ran != 1 {
						t.Fatalf("got %q (error %t) and %d runs, want one run", resultText(res), res.IsError, ran)
					}
					var got struct{ Via string }
					if err := json.Unmarshal([]byte(resultText(res)), &got); err != nil || got.Via != tt.wantVia {
						t.Errorf("got %q (%v), want via %q", resultText(res), err, tt.wantVia)
					}
				})
			}
		})
	}
}

// TestAdmitRefusesInBand drives the call path directly, as mcp-go's
// handler does once a call gets past its own lookup: a caller outside
// its grant gets the in-band refusal, the tool never runs, and a gated
// tool is refused before its approval (which, for this caller that
// cannot elicit, would have let it run unasked under confirm auto).
func TestAdmitRefusesInBand(t *testing.T) {
	a := newAccessTools(t)
	pol := accessPolicy()
	var asked atomic.Int32
	s, _ := startAccessServer(t, Config{Policy: pol, RemoteVia: func(string) (any, error) {
		asked.Add(1)
		return nil, nil
	}}, a)
	callerCtx := func(name string) context.Context {
		c := testCallers[name]
		c.Groups = slices.Clone(c.Groups)
		if err := pol.Authorize(&c); err != nil {
			t.Fatalf("authorizing %s: %v", name, err)
		}
		return auth.WithCaller(t.Context(), &c)
	}
	tests := []struct {
		name    string
		ctx     context.Context
		tool    *counted
		wantRun bool
		// wantText is in the refusal.
		wantText []string
	}{
		{name: "local tool outside the grant", ctx: callerCtx("alice"), tool: a.rm, wantText: []string{"rm_files is not available to you", "expose.agent.mcp.policy", "(reader)"}},
		{name: "gated tool outside the grant", ctx: callerCtx("alice"), tool: a.deploy, wantText: []string{"deploy_app is not available to you"}},
		{name: "remote tool by tag only", ctx: callerCtx("alice"), tool: a.peerRead, wantText: []string{"peer_read is not available to you"}},
		{name: "several roles named", ctx: callerCtx("carol"), tool: a.echo, wantText: []string{"(reader, writer)"}},
		{name: "no caller gets nothing", ctx: t.Context(), tool: a.ls, wantText: []string{"ls_files is not available to you"}},
		{name: "inside the grant runs", ctx: callerCtx("bob"), tool: a.rm, wantRun: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.tool.runs.Load()
			req := mcp.CallToolRequest{}
			req.Params.Name = tt.tool.Name()
			res := s.CallTool(tt.ctx, tt.tool.Name(), req, nil)
			ran := tt.tool.runs.Load() - before
			if tt.wantRun {
				if res.IsError || ran != 1 {
					t.Errorf("got %q (error %t) and %d runs, want one run", resultText(res), res.IsError, ran)
				}
				return
			}
			if ran != 0 {
				t.Errorf("got %d runs, want none", ran)
			}
			if !res.IsError {
				t.Fatalf("got %q, want an in-band refusal", resultText(res))
			}
			for _, want := range tt.wantText {
				if !strings.Contains(resultText(res), want) {
					t.Errorf("got %q, want it to contain %q", resultText(res), want)
				}
			}
			for _, leak := range []string{"admin", "writers", "readers"} {
				if strings.Contains(resultText(res), leak) {
					t.Errorf("got %q, want it not to mention %q", resultText(res), leak)
				}
			}
		})
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("got RemoteVia asked %d times, want never for refused calls and roles without a context", n)
	}
}

// TestResponseOnAnotherCallersSession shows the session binding covers
// the client's answers to server requests too: bob, holding dave's
// session id and a token of his own, cannot answer the approval form of
// dave's gated call. mcp-go numbers its server requests from 1 across the
// server, so the request id is no secret.
func TestResponseOnAnotherCallersSession(t *testing.T) {
	a := newAccessTools(t)
	_, url := startAccessServer(t, Config{Policy: accessPolicy(), ApprovalTimeout: approvalTimeout}, a)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	asked := make(chan struct{}, 1)
	el := &elicitor{fn: func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		asked <- struct{}{}
		select {
		case <-stuck:
		case <-ctx.Done():
		}
		return nil, errors.New("the human never answered")
	}}
	dave := connect(t, url, legacyEra, bearer("dave"), client.WithElicitationHandler(el))
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := tryCall(t.Context(), dave, "deploy_app", nil)
		done <- res
	}()
	select {
	case <-asked:
	case <-time.After(5 * time.Second):
		t.Fatal("got no approval form within 5s")
	}
	for id := 1; id <= 10; id++ {
		body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"result":{"action":"accept","content":{"approve":true}}}`
		if code, resp := rawDo(t, http.MethodPost, url, "bob", dave.GetSessionId(), body); code != http.StatusNotFound {
			t.Errorf("got HTTP %d %q for bob's answer %d on dave's session, want 404", code, resp, id)
		}
	}
	// dave's call ends: run on bob's answer, or denied when the
	// approval times out.
	if res := <-done; res != nil && !res.IsError {
		t.Errorf("got %q, want dave's deploy_app denied", resultText(res))
	}
	if n := a.deploy.runs.Load(); n != 0 {
		t.Errorf("got deploy_app run %d times on bob's answer, want never", n)
	}
}
