package mcpserver

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// fleetMember is one gateway of a test fleet: a server whose tasks and
// approvals live in the bucket it shares with the others.
type fleetMember struct {
	s   *Server
	url string
}

// startFleet starts n gateways of one identity on srv's JetStream, each
// with its own connection, store and fleet membership, as n processes
// would have. cfg is every member's config.
func startFleet(tb testing.TB, srv *natstest.Server, n int, cfg Config, tools []tool.Tool) []fleetMember {
	tb.Helper()
	var out []fleetMember
	for i := range n {
		nc := srv.Connect(tb)
		js, err := jetstream.New(nc)
		if err != nil {
			tb.Fatal(err)
		}
		store, err := tasks.NewKV(tb.Context(), js, tasks.KVConfig{Max: 16})
		if err != nil {
			tb.Fatal(err)
		}
		c := cfg
		c.Instance = "gw" + string(rune('a'+i))
		f, err := tasks.NewFleet(nc, store, tasks.FleetConfig{Identity: "demo", Instance: c.Instance, InstanceTTL: 3 * time.Second})
		if err != nil {
			tb.Fatal(err)
		}
		c.TaskStore, c.TaskCanceller, c.ApprovalBucket = store, f, store.Bucket()
		s, url := startServer(tb, c, tools)
		if err := f.Start(tb.Context(), s.Tasks()); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(f.Stop)
		out = append(out, fleetMember{s: s, url: url})
	}
	return out
}

// TestFleetApprovalRetryOnAnotherGateway: a 2026-07-28 client's approval
// asked by one gateway is honoured by another, once: the command runs,
// and the same answer replayed to either gateway is refused.
func TestFleetApprovalRetryOnAnotherGateway(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	g := startFleet(t, natstest.StartJetStream(t), 2, Config{}, app.Tools())
	marker := filepath.Join(t.TempDir(), "deployed")
	args := map[string]any{"service": "web", "marker": marker}
	yes := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}

	res := modernCall(t, g[0].url, "deploy", args, "", nil)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("asking through the first gateway: got %v, want input_required with a requestState", res)
	}
	res = modernCall(t, g[1].url, "deploy", args, state, yes)
	if res["isError"] == true || !exists(marker) {
		t.Fatalf("the retry through the second gateway: got %v, want deploy to run", res)
	}
	for i, m := range g {
		res := modernCall(t, m.url, "deploy", args, state, yes)
		text, _ := json.Marshal(res["content"])
		if res["isError"] != true || !bytes.Contains(text, []byte("unknown or was already used")) {
			t.Errorf("the answer replayed to gateway %d: got %s, want it refused as used", i, text)
		}
	}
}

// TestFleetTaskThroughAnotherGateway: a caller's task created through one
// gateway is listed, polled and its result read through another, in a new
// session; another caller finds nothing; a task running on one gateway is
// cancelled through the other, its process group killed.
func TestFleetTaskThroughAnotherGateway(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	g := startFleet(t, natstest.StartJetStream(t), 2, Config{Authenticate: testAuthenticate}, app.Tools())
	onA := connect(t, g[0].url, legacyEra, bearer("alice"))
	onB := connect(t, g[1].url, legacyEra, bearer("alice"))
	bobOnB := connect(t, g[1].url, legacyEra, bearer("bob"))

	task := createTask(t, onA, "echo", map[string]any{"message": "from a"}, map[string]any{})
	if got := waitTask(t, onB, task.TaskId); got.Status != mcp.TaskStatusCompleted {
		t.Fatalf("polled through the other gateway: got %q, want completed", got.Status)
	}
	res, _ := taskResult(t, onB, task.TaskId)
	if cr := commandResult(t, res); cr.Output != "from a\n" {
		t.Errorf("the result through the other gateway: got %q, want the echo", cr.Output)
	}
	list, err := onB.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].TaskId != task.TaskId {
		t.Errorf("tasks/list through the other gateway: got %+v, %v, want the one task", list, err)
	}
	for _, method := range []mcp.MCPMethod{mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel} {
		if e := rpcError(t, bobOnB, string(method), map[string]any{"taskId": task.TaskId}); !strings.Contains(e.Message, "not found") {
			t.Errorf("%s by another caller: got %q, want not found", method, e.Message)
		}
	}

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	running := createTask(t, onA, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	pid := fisktest.WaitPIDFile(t, pidfile)
	cancelled, err := onB.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: running.TaskId}})
	if err != nil || cancelled.Status != mcp.TaskStatusCancelled {
		t.Fatalf("cancelling through the other gateway: got %+v, %v, want cancelled", cancelled, err)
	}
	if !fisktest.ProcessGone(pid) {
		t.Error("the cancel through the other gateway answered while the command still ran, want it killed first")
	}

	// The session that made the task ends; the caller's task stays.
	if err := onA.Close(); err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, onB, task.TaskId); got.Status != mcp.TaskStatusCompleted {
		t.Errorf("after the creating session ended: got %q, want the task kept for its caller", got.Status)
	}
}

// TestFleetTaskFailsWithItsGateway: a task whose gateway is gone without
// a goodbye (its heartbeats stop) is failed by a live one, naming the
// dead gateway, within the instance ttl.
func TestFleetTaskFailsWithItsGateway(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	srv := natstest.StartJetStream(t)
	g := startFleet(t, srv, 2, Config{Authenticate: testAuthenticate}, app.Tools())
	onA := connect(t, g[0].url, legacyEra, bearer("alice"))
	onB := connect(t, g[1].url, legacyEra, bearer("alice"))
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	task := createTask(t, onA, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	fisktest.WaitPIDFile(t, pidfile)

	// Gateway a's fleet membership goes silent, as a killed process's
	// would; its instance key stays behind.
	stopHeartbeats(t, g[0].s)
	var got mcp.Task
	fisktest.WaitFor(t, 3*time.Second+time.Second, "the silent gateway's task to fail", func() bool {
		got = getTask(t, onB, task.TaskId)
		return got.Status == mcp.TaskStatusFailed
	})
	if !strings.Contains(got.StatusMessage, "gwa") {
		t.Errorf("statusMessage: got %q, want it to name the gateway gwa", got.StatusMessage)
	}
}

// stopHeartbeats silences the fleet membership of s without a goodbye.
func stopHeartbeats(tb testing.TB, s *Server) {
	tb.Helper()
	f, ok := s.cfg.TaskCanceller.(*tasks.Fleet)
	if !ok {
		tb.Fatal("the server has no fleet")
	}
	f.Silence()
}
