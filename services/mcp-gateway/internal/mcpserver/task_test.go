package mcpserver

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// TestTaskRequestRunsAsCall pins what a client asking for an MCP task
// (2025-11-25) gets while the gateway offers none: no tasks capability,
// and the call runs to its ordinary result, bounded like any other call.
// mcp-go v1.2.1's task support is not used: it cancels a task with the
// request that created it, keeps tasks without a TTL forever, and serves
// tasks/list and tasks/result of every session to a 2026-07-28 request.
func TestTaskRequestRunsAsCall(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	if caps := c.GetServerCapabilities(); caps.Tasks != nil {
		t.Errorf("capabilities: got tasks %+v, want none offered", caps.Tasks)
	}

	call := mcp.CallToolRequest{}
	call.Params.Name = "echo"
	call.Params.Arguments = map[string]any{"message": "as a task"}
	call.Params.Task = &mcp.TaskParams{}
	res, err := c.CallTool(t.Context(), call)
	if err != nil {
		t.Fatalf("a task-augmented call: got %v, want a result", err)
	}
	if cr := commandResult(t, res); cr.Output != "as a task\n" {
		t.Errorf("output: got %q, want the echo", cr.Output)
	}
}
