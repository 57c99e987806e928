package integration_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// mcpTask sends a task-augmented tools/call through c's transport (mcp-go's
// client has no call that returns the CreateTaskResult) and returns the
// task created.
func mcpTask(tb testing.TB, c *client.Client, id, name string, args map[string]any) mcp.Task {
	tb.Helper()
	resp, err := c.GetTransport().SendRequest(tb.Context(), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(id),
		Method:  string(mcp.MethodToolsCall),
		Params:  map[string]any{"name": name, "arguments": args, "task": map[string]any{"ttl": 60000}},
	})
	if err != nil {
		tb.Fatalf("tools/call %s as a task: %v", name, err)
	}
	if resp.Error != nil {
		tb.Fatalf("tools/call %s as a task: got error %q, want a task", name, resp.Error.Message)
	}
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
		tb.Fatalf("tools/call %s as a task: got %s, want a CreateTaskResult", name, resp.Result)
	}
	return created.Task
}

// TestMCPTaskRemote runs remote tools of an a2a-agent (on a real NATS
// server) as MCP tasks through the gateway: demo_echo's tasks/result is
// what a plain call answers, and tasks/cancel of a running demo_spawn
// sends the A2A cancel, so the agent kills the remote process group, its
// SIGTERM-ignoring grandchild included, and logs the call as canceled.
func TestMCPTaskRemote(t *testing.T) {
	t.Parallel()
	f := startStreamFleet(t)
	c := connectLegacyMCP(t, f.gw.URL)

	t.Run("result", func(t *testing.T) {
		args := map[string]any{"message": "remote task"}
		task := mcpTask(t, c, "echo-task", "demo_echo", args)
		res, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
		if err != nil {
			t.Fatalf("tasks/result: %v", err)
		}
		plain := callMCP(t, c, "demo_echo", args)
		if got, want := mcpText(&mcp.CallToolResult{Content: res.Content}), mcpText(plain); got != want || res.IsError {
			t.Errorf("tasks/result: got %q (error %t), want the plain call's %q", got, res.IsError, want)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		task := mcpTask(t, c, "spawn-task", "demo_spawn", map[string]any{"duration": "1m", "pidfile": pidfile})
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		start := time.Now()
		res, err := c.CancelTask(t.Context(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: task.TaskId}})
		if err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		answered := time.Since(start)
		if res.Status != mcp.TaskStatusCancelled {
			t.Errorf("tasks/cancel: got %+v, want cancelled", res.Task)
		}
		// The command would run a minute and the gateway stays connected:
		// only the A2A cancel can stop it this soon.
		fisktest.WaitFor(t, 3*a2a.HeartbeatInterval, "the agent to kill the cancelled task's process group", func() bool { return fisktest.ProcessGone(grandchild) })
		t.Logf("tasks/cancel answered in %s; the remote grandchild was gone %s after the cancel",
			answered.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		f.agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
		if _, err := c.TaskResult(t.Context(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}}); err == nil || !strings.Contains(err.Error(), "no result") {
			t.Errorf("tasks/result of the cancelled task: got %v, want an error saying it has no result", err)
		}
		if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "after"})); cr.Output != "after\n" {
			t.Errorf("a call after the cancel: got %q, want the echo", cr.Output)
		}
	})
}
