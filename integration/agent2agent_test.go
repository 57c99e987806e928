package integration_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// agent2agentFleet is a gateway (identity gw, the demo app served
// locally, expose.agent.mcp.agent2agent on) importing the tools of one
// `a2a-agent serve` on identity demo.
type agent2agentFleet struct {
	*bus
	agent *fleettest.Process
	gw    *gatewayProcess
	// base is the gateway's base URL, where its card is.
	base string
}

func startAgent2AgentFleet(tb testing.TB, mcpExtra map[string]any) *agent2agentFleet {
	tb.Helper()
	b := newBus(tb)
	agent := b.startAgents(tb, 1, b.demoAgent(tb, "demo", 2))[0]
	m := map[string]any{"agent2agent": map[string]any{}}
	for k, v := range mcpExtra {
		m[k] = v
	}
	cfg := fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     fleetContext,
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             m,
		Extra:           map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}},
	})
	gw := startGateway(tb, b.home.Env(), cfg)
	return &agent2agentFleet{bus: b, agent: agent, gw: gw, base: strings.TrimSuffix(gw.URL, "/mcp")}
}

// a2aClient resolves the card at base (path, when set, is the card's
// path) and returns the a2a-go client of its endpoint.
func a2aClient(tb testing.TB, base, path string) (*a2aclient.Client, *a2a.AgentCard) {
	tb.Helper()
	var opts []agentcard.ResolveOption
	if path != "" {
		opts = append(opts, agentcard.WithPath(path))
	}
	card, err := agentcard.DefaultResolver.Resolve(tb.Context(), base, opts...)
	if err != nil {
		tb.Fatalf("resolving the agent card of %s: %v", base, err)
	}
	c, err := a2aclient.NewFromCard(tb.Context(), card)
	if err != nil {
		tb.Fatalf("a client of the card: %v", err)
	}
	tb.Cleanup(func() { _ = c.Destroy() })
	return c, card
}

// callMessage is a message calling tool with args.
func callMessage(tool string, args map[string]any) *a2a.SendMessageRequest {
	data := map[string]any{"tool": tool}
	if args != nil {
		data["arguments"] = args
	}
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(data))}
}

// resultEnvelope returns the task's result artifact's envelope and text.
func resultEnvelope(tb testing.TB, t *a2a.Task) (map[string]any, string) {
	tb.Helper()
	if len(t.Artifacts) != 1 || len(t.Artifacts[0].Parts) != 2 {
		tb.Fatalf("task %s: got artifacts %+v, want one with a DataPart and a TextPart", t.ID, t.Artifacts)
	}
	env, ok := t.Artifacts[0].Parts[0].Data().(map[string]any)
	if !ok {
		tb.Fatalf("task %s: the first part is %T, want the envelope as a DataPart", t.ID, t.Artifacts[0].Parts[0].Content)
	}
	return env, t.Artifacts[0].Parts[1].Text()
}

func skillIDs(card *a2a.AgentCard) []string {
	var ids []string
	for _, s := range card.Skills {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestAgent2AgentGoClient drives the gateway's Agent2Agent surface with
// the a2a-go client (protocol 1.0): the card lists the tools as skills
// (gated ones say so, ai:deny ones are absent), a call's task holds the
// result envelope, a non-zero exit is a completed task, a message naming
// no tool or an unknown one is answered in-band, a long command streams
// its output line by line, a task is read back and cancelled (the
// command's process group is gone), and a remote identity's tool is
// called through its own card.
func TestAgent2AgentGoClient(t *testing.T) {
	t.Parallel()
	f := startAgent2AgentFleet(t, nil)
	c, card := a2aClient(t, f.base, "")

	t.Run("card", func(t *testing.T) {
		ids := skillIDs(card)
		for _, want := range []string{"echo", "ticker", "deploy", "demo_echo", "demo_ticker"} {
			if !slices.Contains(ids, want) {
				t.Errorf("skills: got %v, want %s among them", ids, want)
			}
		}
		if slices.Contains(ids, "destroy") || slices.Contains(ids, "demo_destroy") {
			t.Errorf("skills: got %v, want no ai:deny tool", ids)
		}
		for _, s := range card.Skills {
			if s.ID == "deploy" && (!slices.Contains(s.Tags, "gated") || !strings.Contains(s.Description, "operator approves")) {
				t.Errorf("the gated deploy skill: got tags %v and %q, want it marked gated", s.Tags, s.Description)
			}
		}
		if !card.Capabilities.Streaming || card.SupportedInterfaces[0].URL != f.base+"/a2a" {
			t.Errorf("card: got streaming %v at %s, want streaming at %s/a2a", card.Capabilities.Streaming, card.SupportedInterfaces[0].URL, f.base)
		}
	})

	t.Run("send", func(t *testing.T) {
		res, err := c.SendMessage(t.Context(), callMessage("echo", map[string]any{"message": "hello"}))
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage: got %#v, want a completed task", res)
		}
		env, text := resultEnvelope(t, task)
		if text != "hello\n" || env["output"] != "hello\n" || env["exit_code"] != float64(0) {
			t.Errorf("result: got %v and %q, want exit 0 and hello", env, text)
		}
		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("GetTask: got %+v, %v, want the completed task", got, err)
		}
		if _, text := resultEnvelope(t, got); text != "hello\n" {
			t.Errorf("GetTask's output: got %q", text)
		}
	})

	t.Run("non-zero exit", func(t *testing.T) {
		res, err := c.SendMessage(t.Context(), callMessage("fail", map[string]any{"code": 4}))
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a.Task)
		env, _ := resultEnvelope(t, task)
		if task.Status.State != a2a.TaskStateCompleted || env["exit_code"] != float64(4) {
			t.Errorf("got %v with %v, want completed with exit code 4", task.Status.State, env)
		}
	})

	t.Run("how to call", func(t *testing.T) {
		for name, req := range map[string]*a2a.SendMessageRequest{
			"text only": {Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("please echo hello"))},
			"unknown":   callMessage("no_such_tool", nil),
			"denied":    callMessage("destroy", nil),
		} {
			res, err := c.SendMessage(t.Context(), req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m, ok := res.(*a2a.Message)
			if !ok || len(m.Parts) != 1 || !strings.Contains(m.Parts[0].Text(), `DataPart {"tool": NAME, "arguments": {...}}`) {
				t.Errorf("%s: got %#v, want a message saying how to call", name, res)
			}
		}
	})

	t.Run("stream", func(t *testing.T) {
		var chunks []string
		var final a2a.TaskState
		for ev, err := range c.SendStreamingMessage(t.Context(), callMessage("ticker", map[string]any{"every": "50ms", "count": 6})) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			switch e := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				if e.Artifact.ID == "output" {
					chunks = append(chunks, e.Artifact.Parts[0].Text())
				}
			case *a2a.TaskStatusUpdateEvent:
				final = e.Status.State
			}
		}
		if final != a2a.TaskStateCompleted {
			t.Errorf("the stream's last status: got %v, want completed", final)
		}
		if len(chunks) < 3 || !strings.HasSuffix(strings.Join(chunks, ""), "tick 6 of 6\n") {
			t.Errorf("output chunks: got %q, want the ticks as they came", chunks)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		req := callMessage("spawn", map[string]any{"duration": "1m", "pidfile": pidfile})
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := c.SendMessage(t.Context(), req)
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a.Task)
		if task.Status.State != a2a.TaskStateWorking {
			t.Fatalf("got %v, want working at once", task.Status.State)
		}
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		got, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("CancelTask: got %+v, %v, want canceled", got, err)
		}
		fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
		if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); err == nil || !strings.Contains(err.Error(), "cannot be canceled") && !strings.Contains(err.Error(), "already") {
			t.Errorf("a second cancel: got %v, want task not cancelable", err)
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		_, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "task-00000000000000000000000000000000"})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("GetTask of an unknown id: got %v, want task not found", err)
		}
	})

	t.Run("remote identity", func(t *testing.T) {
		dc, dcard := a2aClient(t, f.base+"/a2a/demo", "/.well-known/agent-card.json")
		ids := skillIDs(dcard)
		if !slices.Contains(ids, "demo_echo") || slices.Contains(ids, "echo") {
			t.Errorf("the demo card's skills: got %v, want demo's tools only", ids)
		}
		res, err := dc.SendMessage(t.Context(), callMessage("demo_echo", map[string]any{"message": "via demo"}))
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a.Task)
		if _, text := resultEnvelope(t, task); text != "via demo\n" {
			t.Errorf("demo_echo: got %q", text)
		}
		res, err = dc.SendMessage(t.Context(), callMessage("echo", map[string]any{"message": "x"}))
		if _, isMessage := res.(*a2a.Message); err != nil || !isMessage {
			t.Errorf("a local tool at demo's endpoint: got %#v, %v, want the how-to message", res, err)
		}
	})
}

// TestAgent2AgentMalformed sends what no client should: each gets the
// protocol's error code, and nothing runs.
func TestAgent2AgentMalformed(t *testing.T) {
	t.Parallel()
	f := startAgent2AgentFleet(t, nil)
	tests := []struct {
		name string
		body string
		code float64
	}{
		{"not json", `{"jsonrpc": "2.0",`, -32700},
		{"no method", `{"jsonrpc": "2.0", "id": 1}`, -32600},
		{"wrong version", `{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}`, -32600},
		{"unknown method", `{"jsonrpc": "2.0", "id": 1, "method": "message/explode", "params": {}}`, -32601},
		{"params not an object", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": [1]}`, -32602},
		{"no message", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}`, -32602},
		{"unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "task-00000000000000000000000000000000"}}`, -32001},
		{"push", `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {}}`, -32003},
		{"follow-up", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "task-1", "parts": [{"data": {"tool": "echo"}}]}}}`, -32004},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(f.base+"/a2a", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var got struct {
				Error struct {
					Code    float64 `json:"code"`
					Message string  `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &got); err != nil || got.Error.Code != tt.code || got.Error.Message == "" {
				t.Errorf("got %s, want error %v with a message", b, tt.code)
			}
		})
	}
	t.Run("oversized", func(t *testing.T) {
		big := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"pad": "` + strings.Repeat("x", 5<<20) + `"}}`
		resp, err := http.Post(f.base+"/a2a", "application/json", bytes.NewReader([]byte(big)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over the cap: got %d, want 413", resp.StatusCode)
		}
	})
}

// TestAgent2AgentOff: without expose.agent.mcp.agent2agent the routes
// are not served.
func TestAgent2AgentOff(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, ""))
	base := strings.TrimSuffix(gw.URL, "/mcp")
	for _, path := range []string{"/.well-known/agent-card.json", "/a2a", "/a2a/demo/.well-known/agent-card.json"} {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		get, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed || get.StatusCode != http.StatusNotFound {
			t.Errorf("%s: got POST %d, GET %d, want 404", path, resp.StatusCode, get.StatusCode)
		}
	}
}

// TestAgent2AgentRate: a call over its caller's rate
// (expose.agent.mcp.policy.roles.*.rate and tool_rates; here the one
// caller of a gateway without authentication, role default) is refused
// before any task exists with HTTP 429, Retry-After and the JSON-RPC
// error -32029 naming the key, while the caller's other tools still run.
func TestAgent2AgentRate(t *testing.T) {
	t.Parallel()
	f := startAgent2AgentFleet(t, map[string]any{"policy": map[string]any{"roles": map[string]any{
		"default": map[string]any{"rate": "10/m", "tool_rates": map[string]any{"echo": "1/m"}},
	}}})
	send := func(tool string, args map[string]any) (*http.Response, []byte) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
			"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"data": map[string]any{"tool": tool, "arguments": args}}}},
		}})
		resp, err := http.Post(f.base+"/a2a", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, b := send("echo", map[string]any{"message": "once"}); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "TASK_STATE_COMPLETED") {
		t.Fatalf("the first echo: got %d %s, want a completed task", resp.StatusCode, b)
	}
	resp, b := send("echo", map[string]any{"message": "twice"})
	var got struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				RetryAfterSeconds int `json:"retryAfterSeconds"`
			} `json:"data"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &got)
	if resp.StatusCode != http.StatusTooManyRequests || got.Error.Code != -32029 || !strings.Contains(got.Error.Message, "tool_rates") ||
		got.Error.Data.RetryAfterSeconds < 1 || resp.Header.Get("Retry-After") != strconv.Itoa(got.Error.Data.RetryAfterSeconds) {
		t.Fatalf("the second echo in a minute: got %d (Retry-After %q) %s, want 429 with -32029 naming tool_rates and the retry time", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if resp, b := send("fail", map[string]any{"code": 0}); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "TASK_STATE_COMPLETED") {
		t.Errorf("another tool: got %d %s, want it run: the refused echo is not charged to the caller's rate", resp.StatusCode, b)
	}
}
