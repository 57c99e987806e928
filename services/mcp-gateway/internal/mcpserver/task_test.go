package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// rawIDs numbers the requests the tests send through a client's transport,
// apart from the client's own numbers.
var rawIDs atomic.Int64

// rawRequest sends method with params through c's transport, as is: mcp-go's
// client has no call that returns a CreateTaskResult, and never sends the
// malformed params the hostile cases need.
func rawRequest(tb testing.TB, ctx context.Context, c *client.Client, method string, params any) *transport.JSONRPCResponse {
	tb.Helper()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(fmt.Sprintf("raw-%d", rawIDs.Add(1))),
		Method:  method,
		Params:  params,
	})
	if err != nil {
		tb.Fatalf("%s: %v", method, err)
	}
	return resp
}

// createTask calls name as a task with the task parameter task and
// returns the task created, failing the test on an error.
func createTask(tb testing.TB, c *client.Client, name string, args any, task any) mcp.Task {
	tb.Helper()
	resp := rawRequest(tb, tb.Context(), c, string(mcp.MethodToolsCall), map[string]any{"name": name, "arguments": args, "task": task})
	if resp.Error != nil {
		tb.Fatalf("calling %s as a task: got error %d %q, want a task", name, resp.Error.Code, resp.Error.Message)
	}
	var created struct {
		Task    *mcp.Task `json:"task"`
		Content any       `json:"content"`
	}
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task == nil || created.Content != nil {
		tb.Fatalf("calling %s as a task: got %s, want a CreateTaskResult", name, resp.Result)
	}
	return *created.Task
}

// rpcError sends method with params and returns the JSON-RPC error it
// must get.
func rpcError(tb testing.TB, c *client.Client, method string, params any) *mcp.JSONRPCErrorDetails {
	tb.Helper()
	resp := rawRequest(tb, tb.Context(), c, method, params)
	if resp.Error == nil {
		tb.Fatalf("%s %v: got result %s, want an error", method, params, resp.Result)
	}
	return resp.Error
}

func getTask(tb testing.TB, c *client.Client, id string) mcp.Task {
	tb.Helper()
	res, err := c.GetTask(tb.Context(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	if err != nil {
		tb.Fatalf("tasks/get %s: %v", id, err)
	}
	return res.Task
}

// taskResult fetches a task's result as the CallToolResult it holds.
func taskResult(tb testing.TB, c *client.Client, id string) (*mcp.CallToolResult, json.RawMessage) {
	tb.Helper()
	resp := rawRequest(tb, tb.Context(), c, string(mcp.MethodTasksResult), map[string]any{"taskId": id})
	if resp.Error != nil {
		tb.Fatalf("tasks/result %s: got error %q, want the result", id, resp.Error.Message)
	}
	res, err := mcp.ParseCallToolResult((*json.RawMessage)(&resp.Result))
	if err != nil {
		tb.Fatalf("tasks/result %s: decoding %s: %v", id, resp.Result, err)
	}
	return res, resp.Result
}

// waitTask polls tasks/get until the task is finished. It polls faster
// than the interval the gateway suggests, to keep the tests short.
func waitTask(tb testing.TB, c *client.Client, id string) mcp.Task {
	tb.Helper()
	var last mcp.Task
	fisktest.WaitFor(tb, 30*time.Second, "task "+id+" to finish", func() bool {
		last = getTask(tb, c, id)
		return last.Status.IsTerminal()
	})
	return last
}

// TestTaskAdvertised: a client of the session-based era is offered tasks
// (the capability, and execution.taskSupport optional on every tool); a
// client of the 2026-07-28 revision is offered none, and a task parameter
// on its call is ignored: the call is answered as any other.
func TestTaskAdvertised(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())

	legacy := connect(t, url, legacyEra, nil)
	caps := legacy.GetServerCapabilities().Tasks
	if caps == nil || caps.List == nil || caps.Cancel == nil || caps.Requests == nil || caps.Requests.Tools == nil || caps.Requests.Tools.Call == nil {
		t.Errorf("legacy capabilities: got tasks %+v, want list, cancel and tools/call", caps)
	}
	tools, err := legacy.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Execution == nil || tl.Execution.TaskSupport != mcp.TaskSupportOptional {
			t.Errorf("legacy tools/list %s: got execution %+v, want taskSupport optional", tl.Name, tl.Execution)
		}
	}

	modern := connect(t, url, modernEra, nil)
	tools, err = modern.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Execution != nil {
			t.Errorf("modern tools/list %s: got execution %+v, want none", tl.Name, tl.Execution)
		}
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "echo"
	call.Params.Arguments = map[string]any{"message": "as a task"}
	call.Params.Task = &mcp.TaskParams{}
	res, err := modern.CallTool(t.Context(), call)
	if err != nil {
		t.Fatalf("a modern task-augmented call: got %v, want a result", err)
	}
	if cr := commandResult(t, res); cr.Output != "as a task\n" {
		t.Errorf("modern output: got %q, want the echo", cr.Output)
	}
	if _, err := modern.GetTask(t.Context(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: "task-x"}}); err == nil {
		t.Error("modern tasks/get: got an answer, want an error (no tasks without a session)")
	}
}

// TestTaskRunsToCompletion: a task's tasks/result is the result a plain
// call gets, plus the related-task _meta; tasks/get shows working while the
// command runs, then completed; tasks/list shows the session's tasks; the
// call is counted in the metrics like any call.
func TestTaskRunsToCompletion(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	metrics := ops.NewMetrics("mcp-gateway", "demo")
	_, url := startServer(t, Config{Metrics: metrics}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	args := map[string]any{"message": "as a task"}
	task := createTask(t, c, "echo", args, map[string]any{})
	if !strings.HasPrefix(task.TaskId, tasks.IDPrefix) || task.TTL == nil || *task.TTL != config.DefaultTaskRetention.Milliseconds() || task.PollInterval == nil {
		t.Errorf("created: got %+v, want an id, the default retention as ttl and a poll interval", task)
	}
	if task.Status != mcp.TaskStatusWorking && task.Status != mcp.TaskStatusCompleted {
		t.Errorf("created: got status %q, want working (or already completed)", task.Status)
	}
	got, raw := taskResult(t, c, task.TaskId)
	plain := callTool(t, c, "echo", args)
	if a, b := mustJSON(t, got.Content), mustJSON(t, plain.Content); string(a) != string(b) {
		t.Errorf("tasks/result content: got %s, want the plain call's %s", a, b)
	}
	if a, b := mustJSON(t, got.StructuredContent), mustJSON(t, plain.StructuredContent); string(a) != string(b) {
		t.Errorf("tasks/result structuredContent: got %s, want the plain call's %s", a, b)
	}
	if !strings.Contains(string(raw), `"io.modelcontextprotocol/related-task":{"taskId":"`+task.TaskId+`"}`) {
		t.Errorf("tasks/result: got %s, want the related-task _meta", raw)
	}
	if s := getTask(t, c, task.TaskId); s.Status != mcp.TaskStatusCompleted || s.StatusMessage != "" {
		t.Errorf("tasks/get after the result: got %+v, want completed", s)
	}

	ticker := createTask(t, c, "ticker", map[string]any{"every": "100ms", "count": 10}, map[string]any{"ttl": 60000})
	if ticker.Status != mcp.TaskStatusWorking || *ticker.TTL != 60000 {
		t.Errorf("ticker created: got %+v, want working with the ttl asked", ticker)
	}
	if s := getTask(t, c, ticker.TaskId); s.Status != mcp.TaskStatusWorking {
		t.Errorf("tasks/get while the ticker runs: got %q, want working", s.Status)
	}
	if s := waitTask(t, c, ticker.TaskId); s.Status != mcp.TaskStatusCompleted {
		t.Errorf("tasks/get once done: got %+v, want completed", s)
	}
	res, _ := taskResult(t, c, ticker.TaskId)
	if cr := commandResult(t, res); !strings.HasSuffix(cr.Output, "tick 10 of 10\n") {
		t.Errorf("ticker output: got %q, want 10 ticks", cr.Output)
	}

	list, err := c.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 2 || list.Tasks[0].TaskId != task.TaskId || list.Tasks[1].TaskId != ticker.TaskId {
		t.Errorf("tasks/list: got %+v, want the two tasks, oldest first", list.Tasks)
	}

	if got := callsCounted(t, metrics, "echo", ops.OutcomeOK); got != 2 {
		t.Errorf("calls_total{tool=echo,outcome=ok}: got %v, want 2 (the task and the plain call)", got)
	}
	if got := callsCounted(t, metrics, "ticker", ops.OutcomeOK); got != 1 {
		t.Errorf("calls_total{tool=ticker,outcome=ok}: got %v, want 1", got)
	}
}

// callsCounted reads fiskfleet_calls_total for tool and outcome on the MCP
// surface.
func callsCounted(tb testing.TB, m *ops.Metrics, tool, outcome string) float64 {
	tb.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "fiskfleet_calls_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tool"] == tool && labels["outcome"] == outcome && labels["surface"] == ops.SurfaceMCP {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestTaskCancelKillsProcessGroup: tasks/cancel of a running spawn kills
// its process group (the SIGTERM-ignoring grandchild too) before it is
// answered, frees the slot (a call queued behind it then runs), and leaves
// a cancelled task without a result that cannot be cancelled again.
func TestTaskCancelKillsProcessGroup(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{MaxConcurrent: 1}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	task := createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	grandchild := fisktest.WaitPIDFile(t, pidfile)

	queued := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := tryCall(t.Context(), c, "echo", map[string]any{"message": "queued"})
		if err != nil {
			res = mcp.NewToolResultError(err.Error())
		}
		queued <- res
	}()
	fisktest.WaitFor(t, 10*time.Second, "the plain call to wait for the slot", func() bool { return s.core.InFlight() == 2 })
	select {
	case res := <-queued:
		t.Fatalf("the queued call: got %q before the cancel, want it waiting for the slot", resultText(res))
	default:
	}

	start := time.Now()
	res, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	t.Logf("tasks/cancel answered in %s", time.Since(start).Round(time.Millisecond))
	if res.Status != mcp.TaskStatusCancelled || !strings.Contains(res.StatusMessage, "tasks/cancel") {
		t.Errorf("tasks/cancel: got %+v, want cancelled", res.Task)
	}
	// The answer waits for the call to return, which it does once the
	// killed group has closed the output pipe: the grandchild is dying by
	// then, and gone (a zombie at most) a moment later.
	fisktest.WaitFor(t, 2*time.Second, "the grandchild to be gone once tasks/cancel is answered", func() bool { return fisktest.ProcessGone(grandchild) })
	select {
	case res := <-queued:
		if cr := commandResult(t, res); cr.Output != "queued\n" {
			t.Errorf("the queued call: got %q, want its echo", cr.Output)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call did not run within 10s of the cancel")
	}

	if s := getTask(t, c, task.TaskId); s.Status != mcp.TaskStatusCancelled {
		t.Errorf("tasks/get after the cancel: got %q, want cancelled", s.Status)
	}
	if e := rpcError(t, c, string(mcp.MethodTasksResult), map[string]any{"taskId": task.TaskId}); e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, "has no result") {
		t.Errorf("tasks/result of a cancelled task: got %d %q, want -32602 saying it has no result", e.Code, e.Message)
	}
	if e := rpcError(t, c, string(mcp.MethodTasksCancel), map[string]any{"taskId": task.TaskId}); e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, "already cancelled") {
		t.Errorf("a second tasks/cancel: got %d %q, want -32602 saying it is already cancelled", e.Code, e.Message)
	}
}

// TestTaskCountsAgainstMaxConcurrent: with one slot, a second task waits
// (its command does not start) while the first runs, and starts once the
// first is cancelled.
func TestTaskCountsAgainstMaxConcurrent(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{MaxConcurrent: 1}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.pid"), filepath.Join(dir, "second.pid")
	a := createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": first}, map[string]any{})
	fisktest.WaitPIDFile(t, first)
	b := createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": second}, map[string]any{})
	if b.Status != mcp.TaskStatusWorking || exists(second) {
		t.Fatalf("second task: got %q, pidfile written %t, want working and not started (the only slot is taken)", b.Status, exists(second))
	}
	cancelled := time.Now()
	if _, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: a.TaskId}}); err != nil {
		t.Fatalf("cancelling the first task: %v", err)
	}
	pid := fisktest.WaitPIDFile(t, second)
	// The second command wrote its pidfile as it started: only after the
	// first was cancelled, though it was created long before.
	if st, err := os.Stat(second); err != nil || st.ModTime().Before(cancelled) {
		t.Errorf("the second task's command started at %v, want after the first's cancel at %v (%v)", st.ModTime(), cancelled, err)
	}
	if _, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: b.TaskId}}); err != nil {
		t.Fatalf("cancelling the second task: %v", err)
	}
	fisktest.WaitFor(t, 2*time.Second, "the second task's grandchild to be gone after its cancel", func() bool { return fisktest.ProcessGone(pid) })
}

// TestTaskToolTimeout: tool_timeout ends a task like a call: the task
// fails with the timeout named, and tasks/result carries the same in-band
// error a plain call gets.
func TestTaskToolTimeout(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Timeout: 500 * time.Millisecond}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	task := createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	pid := fisktest.WaitPIDFile(t, pidfile)
	want := "spawn did not finish within the tool timeout of 500ms (expose.agent.mcp.tool_timeout); its process group was killed"
	if s := waitTask(t, c, task.TaskId); s.Status != mcp.TaskStatusFailed || s.StatusMessage != want {
		t.Errorf("tasks/get: got %+v, want failed with %q", s, want)
	}
	res, _ := taskResult(t, c, task.TaskId)
	if !res.IsError || resultText(res) != want {
		t.Errorf("tasks/result: got %q (error %t), want %q", resultText(res), res.IsError, want)
	}
	fisktest.WaitFor(t, 10*time.Second, "the timed-out task's grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
}

// TestTaskApprovalFirst: a gated tool called as a task is approved on the
// tools/call request, before anything runs and before the task is handed
// to the client; a declined answer, or a client that cannot answer under
// confirm_over_mcp always, gives a failed task holding the denial, and the
// command never runs.
func TestTaskApprovalFirst(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{ApprovalTimeout: approvalTimeout}, app.Tools())
	_, strict := startServer(t, Config{Confirm: config.ConfirmAlways}, app.Tools())

	t.Run("approved", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "deployed")
		var sawMarker atomic.Bool
		el := &elicitor{fn: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			sawMarker.Store(exists(marker))
			return answer(mcp.ElicitationResponseActionAccept, map[string]any{approvalKey: true}), nil
		}}
		c := connect(t, url, legacyEra, nil, client.WithElicitationHandler(el))
		task := createTask(t, c, "deploy", map[string]any{"service": "web", "marker": marker}, map[string]any{})
		if n, req := el.seen(); n != 1 || !strings.Contains(req.Params.Message, "--marker") {
			t.Fatalf("elicitations before the task was handed out: got %d (%q), want the one approval form", n, req.Params.Message)
		}
		if sawMarker.Load() {
			t.Error("the command ran before it was approved")
		}
		if s := waitTask(t, c, task.TaskId); s.Status != mcp.TaskStatusCompleted {
			t.Errorf("tasks/get: got %+v, want completed", s)
		}
		if !exists(marker) {
			t.Error("got no marker after the approval, want deploy to have run")
		}
	})

	denials := []struct {
		name   string
		url    string
		el     *elicitor
		reason string
	}{
		{"declined", url, &elicitor{fn: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return answer(mcp.ElicitationResponseActionDecline, nil), nil
		}}, "deploy was not run: the human did not approve it (declined)"},
		{"answered no", url, &elicitor{fn: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return answer(mcp.ElicitationResponseActionAccept, map[string]any{approvalKey: false}), nil
		}}, "deploy was not run: the human did not approve it (answered no)"},
		{"cannot elicit", strict, nil, "needs a human's approval, but this client cannot answer an elicitation form"},
	}
	for _, tt := range denials {
		t.Run(tt.name, func(t *testing.T) {
			var opts []client.ClientOption
			if tt.el != nil {
				opts = append(opts, client.WithElicitationHandler(tt.el))
			}
			c := connect(t, tt.url, legacyEra, nil, opts...)
			marker := filepath.Join(t.TempDir(), "deployed")
			task := createTask(t, c, "deploy", map[string]any{"service": "web", "marker": marker}, map[string]any{})
			if task.Status != mcp.TaskStatusFailed || !strings.Contains(task.StatusMessage, tt.reason) {
				t.Errorf("created: got %+v, want failed with %q", task, tt.reason)
			}
			res, _ := taskResult(t, c, task.TaskId)
			if !res.IsError || !strings.Contains(resultText(res), tt.reason) {
				t.Errorf("tasks/result: got %q, want the denial %q", resultText(res), tt.reason)
			}
			if exists(marker) {
				t.Error("got the marker, want deploy never to run")
			}
		})
	}
}

// TestTaskRetention: a finished task is dropped once its ttl (at most
// task_retention) has passed since it finished, and beyond max_tasks the
// oldest finished task makes room; with every task kept still running, a
// new one is refused with an error naming max_tasks.
func TestTaskRetention(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})

	t.Run("time", func(t *testing.T) {
		_, url := startServer(t, Config{TaskRetention: 400 * time.Millisecond}, app.Tools())
		c := connect(t, url, legacyEra, nil)
		long := createTask(t, c, "echo", map[string]any{"message": "kept"}, map[string]any{"ttl": 3_600_000})
		short := createTask(t, c, "echo", map[string]any{"message": "brief"}, map[string]any{"ttl": 100})
		if *long.TTL != 400 || *short.TTL != 100 {
			t.Errorf("ttls granted: got %d and %d, want 400 (the retention) and 100 (asked)", *long.TTL, *short.TTL)
		}
		fisktest.WaitFor(t, 10*time.Second, "both results to be dropped", func() bool {
			list, err := c.ListTasks(t.Context(), mcp.ListTasksRequest{})
			return err == nil && len(list.Tasks) == 0
		})
		for _, id := range []string{long.TaskId, short.TaskId} {
			if e := rpcError(t, c, string(mcp.MethodTasksResult), map[string]any{"taskId": id}); !strings.Contains(e.Message, "not found") {
				t.Errorf("tasks/result of a dropped task: got %q, want not found", e.Message)
			}
		}
	})

	t.Run("count", func(t *testing.T) {
		_, url := startServer(t, Config{MaxTasks: 2, MaxConcurrent: 2}, app.Tools())
		c := connect(t, url, legacyEra, nil)
		var ids []string
		for i := range 3 {
			task := createTask(t, c, "echo", map[string]any{"message": fmt.Sprint(i)}, map[string]any{})
			waitTask(t, c, task.TaskId)
			ids = append(ids, task.TaskId)
		}
		if e := rpcError(t, c, string(mcp.MethodTasksGet), map[string]any{"taskId": ids[0]}); !strings.Contains(e.Message, "not found") {
			t.Errorf("the oldest task beyond max_tasks: got %q, want it dropped", e.Message)
		}
		for _, id := range ids[1:] {
			if res, _ := taskResult(t, c, id); res.IsError {
				t.Errorf("a newer task: got %q, want its result kept", resultText(res))
			}
		}

		dir := t.TempDir()
		var running []string
		for i := range 2 {
			pidfile := filepath.Join(dir, fmt.Sprintf("%d.pid", i))
			running = append(running, createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{}).TaskId)
			fisktest.WaitPIDFile(t, pidfile)
		}
		e := rpcError(t, c, string(mcp.MethodToolsCall), map[string]any{"name": "echo", "arguments": map[string]any{"message": "one too many"}, "task": map[string]any{}})
		if !strings.Contains(e.Message, "expose.agent.mcp.max_tasks") {
			t.Errorf("a task beyond max_tasks, all running: got %d %q, want an error naming expose.agent.mcp.max_tasks", e.Code, e.Message)
		}
		// A plain call is no task, and still runs once a slot is free.
		for _, id := range running {
			if _, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}}); err != nil {
				t.Fatal(err)
			}
		}
		if cr := commandResult(t, callTool(t, c, "echo", map[string]any{"message": "plain"})); cr.Output != "plain\n" {
			t.Errorf("a plain call: got %q, want the echo", cr.Output)
		}
	})
}

// TestTaskSessionIsolation: another session can neither see, fetch nor
// cancel a session's task; and a session's end cancels its running tasks.
func TestTaskSessionIsolation(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	owner := connect(t, url, legacyEra, nil)
	other := connect(t, url, legacyEra, nil)

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	task := createTask(t, owner, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	pid := fisktest.WaitPIDFile(t, pidfile)

	for _, method := range []mcp.MCPMethod{mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel} {
		e := rpcError(t, other, string(method), map[string]any{"taskId": task.TaskId})
		if e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, "not found") {
			t.Errorf("%s from another session: got %d %q, want -32602 not found", method, e.Code, e.Message)
		}
	}
	list, err := other.ListTasks(t.Context(), mcp.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 0 {
		t.Errorf("tasks/list from another session: got %+v (%v), want none", list, err)
	}
	if got := getTask(t, owner, task.TaskId); got.Status != mcp.TaskStatusWorking {
		t.Errorf("the owner's task after the other session's attempts: got %q, want still working", got.Status)
	}

	// Ending the owner's session (DELETE) cancels its task: nobody could
	// fetch the result any more.
	if err := owner.Close(); err != nil {
		t.Fatalf("closing the owner's session: %v", err)
	}
	fisktest.WaitFor(t, 10*time.Second, "the ended session's command to be killed", func() bool { return fisktest.ProcessGone(pid) })
	fisktest.WaitFor(t, 10*time.Second, "the ended session's tasks to be dropped", func() bool { return s.Tasks().Count(t.Context()) == 0 })
}

// TestTaskHostileInput: malformed task parameters and task ids are refused
// with -32602, a huge ttl is lowered to the retention, a denied tool stays
// unknown as a task, and none of it leaves a task or its room behind.
func TestTaskHostileInput(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{MaxTasks: 1, TaskRetention: time.Minute}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	call := func(task any) map[string]any {
		return map[string]any{"name": "echo", "arguments": map[string]any{"message": "x"}, "task": task}
	}
	refused := []struct {
		name   string
		method mcp.MCPMethod
		params any
		want   string
	}{
		{"negative ttl", mcp.MethodToolsCall, call(map[string]any{"ttl": -5}), "params.task.ttl must be a positive whole number"},
		{"zero ttl", mcp.MethodToolsCall, call(map[string]any{"ttl": 0}), "params.task.ttl must be a positive whole number"},
		{"fractional ttl", mcp.MethodToolsCall, call(map[string]any{"ttl": 1.5}), "params.task.ttl must be a positive whole number"},
		{"string ttl", mcp.MethodToolsCall, call(map[string]any{"ttl": "forever"}), "params.task.ttl must be a positive whole number"},
		{"ttl beyond int64", mcp.MethodToolsCall, call(map[string]any{"ttl": json.Number("99999999999999999999999")}), "params.task.ttl must be a positive whole number"},
		{"task not an object", mcp.MethodToolsCall, call("please"), "params.task must be an object"},
		{"unknown task", mcp.MethodTasksGet, map[string]any{"taskId": "task-00000000000000000000000000000000"}, "not found"},
		{"task id a number", mcp.MethodTasksResult, map[string]any{"taskId": 7}, "needs params.taskId"},
		{"no task id", mcp.MethodTasksCancel, map[string]any{}, "needs params.taskId"},
		{"huge task id", mcp.MethodTasksGet, map[string]any{"taskId": strings.Repeat("x", 100_000)}, "not found"},
		{"cursor never issued", mcp.MethodTasksList, map[string]any{"cursor": "abc"}, "unknown cursor"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			e := rpcError(t, c, string(tt.method), tt.params)
			if e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, tt.want) {
				t.Errorf("got %d %q, want -32602 containing %q", e.Code, e.Message, tt.want)
			}
			if len(e.Message) > 1024 {
				t.Errorf("got a %d-byte message, want the hostile value clipped", len(e.Message))
			}
		})
	}

	t.Run("denied tool", func(t *testing.T) {
		// destroy is ai:deny in the demo: it is not served at all.
		e := rpcError(t, c, string(mcp.MethodToolsCall), map[string]any{"name": "destroy", "arguments": map[string]any{}, "task": map[string]any{}})
		if e.Code != mcp.INVALID_PARAMS || !strings.Contains(e.Message, "not found") {
			t.Errorf("a denied tool as a task: got %d %q, want -32602 tool not found", e.Code, e.Message)
		}
	})

	if n := s.Tasks().Count(t.Context()); n != 0 {
		t.Fatalf("tasks kept after the refusals: got %d, want 0", n)
	}
	// The one room of max_tasks 1 is free: the refusals gave it back.
	task := createTask(t, c, "echo", map[string]any{"message": "x"}, map[string]any{"ttl": int64(1) << 62})
	if *task.TTL != time.Minute.Milliseconds() {
		t.Errorf("a huge ttl: got %d, want it lowered to the retention %d", *task.TTL, time.Minute.Milliseconds())
	}
	res, _ := taskResult(t, c, task.TaskId)
	if cr := commandResult(t, res); cr.Output != "x\n" {
		t.Errorf("the task after the refusals: got %q, want the echo", cr.Output)
	}
}

// TestTaskAbandonedDuringApproval: a client that goes away while its human
// has not answered yet leaves a cancelled task, and the gated command
// never runs.
func TestTaskAbandonedDuringApproval(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	asked := make(chan struct{}, 1)
	el := &elicitor{fn: func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		asked <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	c := connect(t, url, legacyEra, nil, client.WithElicitationHandler(el))
	marker := filepath.Join(t.TempDir(), "deployed")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId("abandoned"),
			Method:  string(mcp.MethodToolsCall),
			Params:  map[string]any{"name": "deploy", "arguments": map[string]any{"service": "web", "marker": marker}, "task": map[string]any{}},
		})
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the approval form was not sent within 10s")
	}
	cancel()
	<-done

	var list *mcp.ListTasksResult
	fisktest.WaitFor(t, 10*time.Second, "the abandoned task to be cancelled", func() bool {
		var err error
		list, err = c.ListTasks(t.Context(), mcp.ListTasksRequest{})
		return err == nil && len(list.Tasks) == 1 && list.Tasks[0].Status == mcp.TaskStatusCancelled
	})
	if msg := list.Tasks[0].StatusMessage; msg != errTaskRequestEnded.Error() {
		t.Errorf("statusMessage: got %q, want %q", msg, errTaskRequestEnded)
	}
	if exists(marker) {
		t.Error("got the marker, want deploy never to run")
	}
}

// TestTaskEndsWithServer: closing the server cancels its tasks, killing
// their process groups.
func TestTaskEndsWithServer(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	c := connect(t, url, legacyEra, nil)
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	createTask(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile}, map[string]any{})
	pid := fisktest.WaitPIDFile(t, pidfile)
	s.Close()
	fisktest.WaitFor(t, 2*time.Second, "the closed server's task command to be killed", func() bool { return fisktest.ProcessGone(pid) })
}

// TestTaskProgress: a task asked with a progress token reports its
// command's output as notifications/progress while it runs, on the
// session's standing event stream, since the request that created it has
// been answered.
func TestTaskProgress(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	c := connect(t, url, legacyEra, []transport.StreamableHTTPCOption{transport.WithContinuousListening()})
	var log progressLog
	log.listen(c)

	resp := rawRequest(t, t.Context(), c, string(mcp.MethodToolsCall), map[string]any{
		"name":      "ticker",
		"arguments": map[string]any{"every": "50ms", "count": 20},
		"task":      map[string]any{},
		"_meta":     map[string]any{"progressToken": "task-progress"},
	})
	if resp.Error != nil {
		t.Fatalf("creating the task: %q", resp.Error.Message)
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
		t.Fatalf("creating the task: got %s, want a CreateTaskResult", resp.Result)
	}
	waitTask(t, c, created.Task.TaskId)
	res, _ := taskResult(t, c, created.Task.TaskId)
	cr := commandResult(t, res)
	fisktest.WaitFor(t, 5*time.Second, "progress notifications of the task", func() bool { return len(log.of("task-progress")) >= 2 })
	for i, n := range log.of("task-progress") {
		if n.message == "" || !strings.Contains(cr.Output, n.message) {
			t.Errorf("notification %d: got message %q, want a piece of the output", i, n.message)
		}
	}
}

// TestTaskStatusNotification: the session that created a task hears its
// end as notifications/tasks/status on its standing event stream; another
// session hears nothing of it.
func TestTaskStatusNotification(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	type heard struct {
		mu    sync.Mutex
		notes []map[string]any
	}
	listen := func(c *client.Client) *heard {
		h := &heard{}
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method != string(mcp.MethodNotificationTasksStatus) {
				return
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.notes = append(h.notes, n.Params.AdditionalFields)
		})
		return h
	}
	listening := []transport.StreamableHTTPCOption{transport.WithContinuousListening()}
	owner := connect(t, url, legacyEra, listening)
	other := connect(t, url, legacyEra, listening)
	ownerHeard, otherHeard := listen(owner), listen(other)

	task := createTask(t, owner, "echo", map[string]any{"message": "x"}, map[string]any{})
	fisktest.WaitFor(t, 10*time.Second, "notifications/tasks/status of the finished task", func() bool {
		ownerHeard.mu.Lock()
		defer ownerHeard.mu.Unlock()
		for _, n := range ownerHeard.notes {
			if n["taskId"] == task.TaskId && n["status"] == string(mcp.TaskStatusCompleted) {
				return true
			}
		}
		return false
	})
	// A plain call on the other session, answered after the task ended:
	// had a notification been sent its way, it would have come first.
	callTool(t, other, "echo", map[string]any{"message": "y"})
	otherHeard.mu.Lock()
	defer otherHeard.mu.Unlock()
	if len(otherHeard.notes) != 0 {
		t.Errorf("another session heard %v, want nothing of this task", otherHeard.notes)
	}
}
