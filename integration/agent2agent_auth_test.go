package integration_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// a2aPost posts one JSON-RPC request of method to url with token (none
// when empty) and returns the HTTP status, headers and body.
func a2aPost(tb testing.TB, url, token, method string, params any) (int, http.Header, []byte) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if err != nil {
		tb.Fatal(err)
	}
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// a2aCallParams is SendMessage's params calling tool with args.
func a2aCallParams(tool string, args map[string]any, immediate bool) map[string]any {
	p := map[string]any{"message": map[string]any{"messageId": "m-" + tool, "role": "ROLE_USER",
		"parts": []any{map[string]any{"data": map[string]any{"tool": tool, "arguments": args}}}}}
	if immediate {
		p["configuration"] = map[string]any{"returnImmediately": true}
	}
	return p
}

// a2aAnswer is the part of a JSON-RPC answer these tests read.
type a2aAnswer struct {
	Result struct {
		Task    *a2aWireTask `json:"task"`
		Message *struct {
			Parts []map[string]any `json:"parts"`
		} `json:"message"`
		// GetTask and CancelTask answer the task itself.
		a2aWireTask
		// GetExtendedAgentCard answers the card.
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type a2aWireTask struct {
	ID     string `json:"id"`
	Status struct {
		State   string `json:"state"`
		Message *struct {
			Parts []map[string]any `json:"parts"`
		} `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		Parts []map[string]any `json:"parts"`
	} `json:"artifacts"`
}

func (t a2aWireTask) statusText() string {
	if t.Status.Message == nil || len(t.Status.Message.Parts) == 0 {
		return ""
	}
	s, _ := t.Status.Message.Parts[0]["text"].(string)
	return s
}

func decodeA2A(tb testing.TB, b []byte) a2aAnswer {
	tb.Helper()
	var a a2aAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		tb.Fatalf("decoding %s: %v", b, err)
	}
	return a
}

// TestAgent2AgentOAuth: with expose.agent.mcp.auth, the Agent2Agent
// endpoint wants the same tokens as /mcp (401 naming the scheme without
// one), the public card names the provider and lists no skill, each role
// gets an extended card of exactly its tools and cannot call outside
// them, and the token never travels on NATS.
func TestAgent2AgentOAuth(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	b.startAgents(t, 1, b.demoAgent(t, "demo", 2))
	op := oidctest.Start(t, oidctest.Config{Users: oauthUsers})

	// Every message on the bus, to look for the tokens in.
	var mu sync.Mutex
	var seen [][]byte
	spy := b.ns.Connect(t)
	if _, err := spy.Subscribe(">", func(m *nats.Msg) {
		var rec bytes.Buffer
		rec.WriteString(m.Subject + "\n")
		for k, vs := range m.Header {
			rec.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
		rec.Write(m.Data)
		mu.Lock()
		seen = append(seen, rec.Bytes())
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	policy := map[string]any{"roles": map[string]any{
		"readers":   map[string]any{"match": []string{"dev"}, "include": map[string]any{"tools": []string{"echo", "demo_echo"}}},
		"operators": map[string]any{"match": []string{"sre"}},
	}}
	gw := oauthGateway{policy: policy, natsContext: fleetContext, mcp: map[string]any{"agent2agent": map[string]any{}},
		extra: map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}}}.start(t, b.home.Env(), op)
	base := strings.TrimSuffix(gw.URL, "/mcp")
	endpoint := base + "/a2a"

	t.Run("no token", func(t *testing.T) {
		status, h, body := a2aPost(t, endpoint, "", "GetExtendedAgentCard", map[string]any{})
		if status != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer ") ||
			!strings.Contains(h.Get("WWW-Authenticate"), `resource_metadata="`+base+"/.well-known/oauth-protected-resource/mcp") {
			t.Errorf("without a token: got %d %q %s, want 401 with the Bearer challenge of /mcp", status, h.Get("WWW-Authenticate"), body)
		}
		var card struct {
			Skills          []any                     `json:"skills"`
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
			Security        []map[string][]string     `json:"security"`
		}
		if err := json.Unmarshal(getBody(t, base+"/.well-known/agent-card.json"), &card); err != nil {
			t.Fatal(err)
		}
		oidc := card.SecuritySchemes["oidc"]
		want := op.Issuer() + "/.well-known/openid-configuration"
		if len(card.Skills) != 0 || oidc["openIdConnectUrl"] != want || oidc["type"] != "openIdConnect" || len(card.Security) != 1 {
			t.Errorf("the public card: got skills %v, schemes %v, security %v, want no skills and an OpenID Connect scheme at %s", card.Skills, card.SecuritySchemes, card.Security, want)
		}
	})

	alice := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "alice"})
	bob := op.AuthorizationCode(t, oidctest.CodeFlow{Resource: gw.URL, LoginHint: "bob"})
	skills := func(token string) []string {
		t.Helper()
		status, _, body := a2aPost(t, endpoint, token, "GetExtendedAgentCard", map[string]any{})
		a := decodeA2A(t, body)
		if status != http.StatusOK || a.Error != nil {
			t.Fatalf("GetExtendedAgentCard: got %d %s", status, body)
		}
		var ids []string
		for _, s := range a.Result.Skills {
			ids = append(ids, s.ID)
		}
		slices.Sort(ids)
		return ids
	}

	t.Run("extended cards", func(t *testing.T) {
		if got := skills(alice); !slices.Equal(got, []string{"demo_echo", "echo"}) {
			t.Errorf("alice's (readers) extended card: got %v, want exactly echo and demo_echo", got)
		}
		got := skills(bob)
		for _, want := range []string{"deploy", "demo_echo", "echo", "restart", "ticker"} {
			if !slices.Contains(got, want) {
				t.Errorf("bob's (operators) extended card: got %v, want %s among them", got, want)
			}
		}
	})

	t.Run("calls within and outside the grant", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "restarted")
		_, _, body := a2aPost(t, endpoint, alice, "SendMessage", a2aCallParams("restart", map[string]any{"marker": marker}, false))
		a := decodeA2A(t, body)
		if a.Result.Message == nil || !strings.Contains(a.Result.Message.Parts[0]["text"].(string), `there is no tool "restart" here`) {
			t.Errorf("alice's restart: got %s, want the answer of an unknown tool", body)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("alice's restart: got its marker written, want the command not run")
		}
		for _, c := range []struct{ who, token, tool string }{{"alice", alice, "echo"}, {"alice", alice, "demo_echo"}, {"bob", bob, "demo_echo"}} {
			_, _, body := a2aPost(t, endpoint, c.token, "SendMessage", a2aCallParams(c.tool, map[string]any{"message": "from " + c.who}, false))
			a := decodeA2A(t, body)
			if a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(body), "from "+c.who) {
				t.Errorf("%s's %s: got %s, want a completed task with its output", c.who, c.tool, body)
			}
		}
		// A task is its caller's: bob cannot read alice's.
		_, _, body = a2aPost(t, endpoint, alice, "SendMessage", a2aCallParams("echo", map[string]any{"message": "mine"}, false))
		id := decodeA2A(t, body).Result.Task.ID
		_, _, body = a2aPost(t, endpoint, bob, "GetTask", map[string]any{"id": id})
		if a := decodeA2A(t, body); a.Error == nil || a.Error.Code != -32001 {
			t.Errorf("bob reading alice's task: got %s, want task not found", body)
		}
	})

	t.Run("the token stays off NATS", func(t *testing.T) {
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		calls := 0
		for _, m := range seen {
			if bytes.Contains(m, []byte(alice)) || bytes.Contains(m, []byte(bob)) {
				t.Errorf("a NATS message carries a caller's token:\n%.300s", m)
			}
			if bytes.Contains(m, []byte("from bob")) {
				calls++
			}
		}
		if calls == 0 {
			t.Errorf("got %d messages on the bus, none of bob's remote call: the check above saw nothing", len(seen))
		}
	})
}

// approvalIDPattern finds the operator approval id in a task's status.
var approvalIDPattern = regexp.MustCompile(`awaiting operator approval \(id ([A-Za-z0-9]+)\)`)

// TestAgent2AgentOperatorApproval: a gated tool called by an Agent2Agent
// client waits in input-required, naming the approval id, and does not
// run until an operator approves from another process (the real
// `a2a-agent approvals` command); a denied call is rejected and never
// runs.
func TestAgent2AgentOperatorApproval(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	b.startAgents(t, 1, b.demoAgent(t, "demo", 2))
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"agent2agent": map[string]any{}},
		Extra:           map[string]any{"approvals": map[string]any{"operator": true, "timeout": "1m"}},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	endpoint := strings.TrimSuffix(gw.URL, "/mcp") + "/a2a"
	operator := func(args ...string) fleettest.Result {
		return fleettest.Run(t, b.home.Env(), fleettest.A2AAgent(t), append(args, "--context", fleetContext)...)
	}
	// waiting starts a deploy and returns its task id and approval id
	// once it waits for the operator.
	waiting := func(marker string) (task, approval string) {
		t.Helper()
		_, _, body := a2aPost(t, endpoint, "", "SendMessage", a2aCallParams("deploy", map[string]any{"service": "web", "marker": marker}, true))
		a := decodeA2A(t, body)
		if a.Result.Task == nil {
			t.Fatalf("deploy: got %s, want a task", body)
		}
		task = a.Result.Task.ID
		fisktest.WaitFor(t, 15*time.Second, "the deploy to wait for an operator", func() bool {
			_, _, body := a2aPost(t, endpoint, "", "GetTask", map[string]any{"id": task})
			got := decodeA2A(t, body).Result.a2aWireTask
			if m := approvalIDPattern.FindStringSubmatch(got.statusText()); got.Status.State == "TASK_STATE_INPUT_REQUIRED" && m != nil {
				approval = m[1]
				return true
			}
			return false
		})
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("deploy: got its marker written while it waits, want it not run")
		}
		return task, approval
	}
	settled := func(task string) a2aWireTask {
		t.Helper()
		var got a2aWireTask
		fisktest.WaitFor(t, 15*time.Second, "the task to end", func() bool {
			_, _, body := a2aPost(t, endpoint, "", "GetTask", map[string]any{"id": task})
			got = decodeA2A(t, body).Result.a2aWireTask
			return got.Status.State != "TASK_STATE_INPUT_REQUIRED" && got.Status.State != "TASK_STATE_WORKING"
		})
		return got
	}

	t.Run("approved", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "deployed")
		task, id := waiting(marker)
		if r := operator("approvals", "approve", id, "--as", "olivia"); r.ExitCode != 0 {
			t.Fatalf("a2a-agent approvals approve %s: exit %d\n%s%s", id, r.ExitCode, r.Stdout, r.Stderr)
		}
		got := settled(task)
		if got.Status.State != "TASK_STATE_COMPLETED" || len(got.Artifacts) != 1 || got.Artifacts[0].Parts[0]["data"].(map[string]any)["exit_code"] != float64(0) {
			t.Errorf("the approved deploy: got %+v, want completed with exit code 0", got)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the approved deploy: got no marker (%v), want it run", err)
		}
	})

	t.Run("denied", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "deployed")
		task, id := waiting(marker)
		if r := operator("approvals", "deny", id, "--as", "olivia", "--reason", "not today"); r.ExitCode != 0 {
			t.Fatalf("a2a-agent approvals deny %s: exit %d\n%s%s", id, r.ExitCode, r.Stdout, r.Stderr)
		}
		got := settled(task)
		if got.Status.State != "TASK_STATE_REJECTED" || len(got.Artifacts) != 0 {
			t.Errorf("the denied deploy: got %+v, want rejected with no result", got)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the denied deploy: got its marker written, want it never run")
		}
	})
}

// TestAgent2AgentGatewayFleet: gateways of a fleet (tasks in the
// JetStream bucket of a three-server cluster) behind Debian's haproxy
// with integration/examples/haproxy.cfg. An Agent2Agent task created on
// one gateway is read and cancelled through the other, the command's
// process group is gone, and the first gateway then reports it
// cancelled; a blocking call through the balancer completes.
func TestAgent2AgentGatewayFleet(t *testing.T) {
	bin := requireHAProxy(t)
	cluster := natstest.StartJetStreamCluster(t, 3)
	home := fleettest.NewHome(t)
	home.AddClusterContext(t, "fleet", cluster.Servers, nil)
	// The example balances three gateways.
	gws := newFleetGateways(t, 3, "fleet", map[string]any{"agent2agent": map[string]any{}})
	for _, g := range gws {
		g.start(t, home.Env())
	}
	lb := startHAProxy(t, bin, gws)
	endpoint := func(addr string) string { return "http://" + addr + "/a2a" }

	_, _, body := a2aPost(t, endpoint(lb.addr), fleetToken, "SendMessage", a2aCallParams("echo", map[string]any{"message": "through haproxy"}, false))
	if a := decodeA2A(t, body); a.Result.Task == nil || a.Result.Task.Status.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(body), "through haproxy") {
		t.Errorf("a call through haproxy: got %s, want a completed task", body)
	}

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	_, _, body = a2aPost(t, endpoint(gws[0].addr), fleetToken, "SendMessage", a2aCallParams("spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, true))
	a := decodeA2A(t, body)
	if a.Result.Task == nil {
		t.Fatalf("spawn on %s: got %s, want a task", gws[0].name, body)
	}
	id := a.Result.Task.ID
	grandchild := fisktest.WaitPIDFile(t, pidfile)

	_, _, body = a2aPost(t, endpoint(gws[1].addr), fleetToken, "GetTask", map[string]any{"id": id})
	if got := decodeA2A(t, body).Result.a2aWireTask; got.Status.State != "TASK_STATE_WORKING" {
		t.Fatalf("GetTask of %s's task on %s: got %s, want it working", gws[0].name, gws[1].name, body)
	}
	_, _, body = a2aPost(t, endpoint(gws[1].addr), fleetToken, "CancelTask", map[string]any{"id": id})
	if got := decodeA2A(t, body).Result.a2aWireTask; got.Status.State != "TASK_STATE_CANCELED" {
		t.Fatalf("CancelTask of %s's task on %s: got %s, want it canceled", gws[0].name, gws[1].name, body)
	}
	fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
	_, _, body = a2aPost(t, endpoint(gws[0].addr), fleetToken, "GetTask", map[string]any{"id": id})
	if got := decodeA2A(t, body).Result.a2aWireTask; got.Status.State != "TASK_STATE_CANCELED" {
		t.Errorf("GetTask on %s, which ran it: got %s, want it canceled", gws[0].name, body)
	}
}
