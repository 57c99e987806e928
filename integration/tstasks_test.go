package integration_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// TestTSClientTasks drives the gateway's MCP tasks with the official
// TypeScript SDK client (integration/tsclient/tasks.mjs), on a local tool
// and on a remote one of an a2a-agent: the SDK sees the capability and
// each tool's task support, callToolStream creates a task, polls it to
// completed and fetches the ticker's output, which tasks/result gives again;
// tasks/cancel of a running spawn kills its process group, the
// SIGTERM-ignoring grandchild included, locally or through the A2A cancel.
func TestTSClientTasks(t *testing.T) {
	t.Parallel()
	ts := findTSClient(t)
	ts.script = filepath.Join(filepath.Dir(ts.script), "tasks.mjs")
	f := startStreamFleet(t)
	env := os.Environ()

	for _, name := range []string{"ticker", "demo_ticker"} {
		t.Run("stream "+name, func(t *testing.T) {
			var got struct {
				Capability  bool     `json:"capability"`
				TaskSupport string   `json:"taskSupport"`
				TaskID      string   `json:"taskId"`
				Seen        []string `json:"seen"`
				Text        string   `json:"text"`
				IsError     bool     `json:"isError"`
				Status      string   `json:"status"`
				TTL         int64    `json:"ttl"`
				AgainText   string   `json:"againText"`
				Listed      []string `json:"listed"`
			}
			ts.run(t, env, f.gw.URL, &got, "stream", name)
			if !got.Capability || got.TaskSupport != "optional" {
				t.Errorf("advertised: got capability %t, taskSupport %q, want the capability and optional", got.Capability, got.TaskSupport)
			}
			if len(got.Seen) < 3 || got.Seen[0] != "created:working" || !slices.Contains(got.Seen, "status:working") || got.Seen[len(got.Seen)-1] != "result" {
				t.Errorf("callToolStream messages: got %v, want created, working polls, then the result", got.Seen)
			}
			if got.IsError || !strings.Contains(got.Text, `tick 15 of 15\n`) || got.AgainText != got.Text {
				t.Errorf("result: got %q (isError %t), again %q, want the 15 ticks twice", got.Text, got.IsError, got.AgainText)
			}
			if got.Status != "completed" || got.TTL != 60000 || !slices.Contains(got.Listed, got.TaskID) {
				t.Errorf("tasks/get and tasks/list afterwards: got %+v, want completed, ttl 60000 and the task listed", got)
			}
		})
	}

	for _, name := range []string{"spawn", "demo_spawn"} {
		t.Run("cancel "+name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			var got struct {
				TaskID      string `json:"taskId"`
				Before      string `json:"before"`
				Cancelled   string `json:"cancelled"`
				After       string `json:"after"`
				ResultError string `json:"resultError"`
				AgainError  string `json:"againError"`
			}
			ts.run(t, env, f.gw.URL, &got, "cancel", name, pidfile)
			if got.Before != "working" || got.Cancelled != "cancelled" || got.After != "cancelled" {
				t.Errorf("statuses: got %+v, want working, then cancelled", got)
			}
			if !strings.Contains(got.ResultError, "has no result") || !strings.Contains(got.AgainError, "already cancelled") {
				t.Errorf("after the cancel: got tasks/result %q and tasks/cancel %q, want both refused", got.ResultError, got.AgainError)
			}
			grandchild := fisktest.WaitPIDFile(t, pidfile)
			fisktest.WaitFor(t, 3*a2a.HeartbeatInterval, "the cancelled task's process group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
		})
	}
	f.agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
}
