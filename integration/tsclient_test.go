package integration_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// tsSDKDir is where `make tools` installs the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in the Makefile), relative to the
// workspace root; it runs on the Node of the conformance suite.
const tsSDKDir = "bin/npm/node_modules/@modelcontextprotocol/sdk"

// tsClient runs integration/tsclient/stream.mjs, the official TypeScript
// SDK's client, against the gateway.
type tsClient struct {
	node, sdk, script string
}

// findTSClient returns the installed SDK client. Like the conformance
// suite, a missing install skips tb on a developer's machine and fails it
// when CI is set.
func findTSClient(tb testing.TB) tsClient {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	c := tsClient{
		node:   filepath.Join(root, conformanceNode),
		sdk:    filepath.Join(root, tsSDKDir),
		script: filepath.Join(root, "integration", "tsclient", "stream.mjs"),
	}
	fisktest.RequireInstalled(tb, "the MCP TypeScript SDK", c.node, filepath.Join(c.sdk, "package.json"))
	return c
}

// run runs one scenario of the script against url and decodes the JSON
// object it prints into out.
func (c tsClient) run(tb testing.TB, env []string, url string, out any, args ...string) {
	tb.Helper()
	res := fleettest.Run(tb, env, c.node, append([]string{c.script, c.sdk, url}, args...)...)
	if res.ExitCode != 0 {
		tb.Fatalf("the TypeScript client (%s) exited %d:\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
	}
	if err := json.Unmarshal([]byte(res.Stdout), out); err != nil {
		tb.Fatalf("decoding the TypeScript client's answer %q: %v", res.Stdout, err)
	}
}

// TestTSClientProgressAndAbort drives the gateway with the official
// TypeScript SDK client: a call with onprogress on the local ticker and on
// the remote demo_ticker hears several progress notifications before the
// result, and aborting (AbortSignal) a call of the remote demo_spawn kills
// the remote process group, its SIGTERM-ignoring grandchild included.
func TestTSClientProgressAndAbort(t *testing.T) {
	t.Parallel()
	ts := findTSClient(t)
	f := startStreamFleet(t)
	env := os.Environ()

	for _, name := range []string{"ticker", "demo_ticker"} {
		t.Run("progress "+name, func(t *testing.T) {
			var got struct {
				NotesBeforeResult []struct {
					Progress float64 `json:"progress"`
					Message  string  `json:"message"`
				} `json:"notesBeforeResult"`
				IsError bool   `json:"isError"`
				Text    string `json:"text"`
			}
			ts.run(t, env, f.gw.URL, &got, "progress", name)
			if got.IsError || !strings.Contains(got.Text, `tick 15 of 15\n`) {
				t.Fatalf("result: got %q (isError %t), want the 15 ticks", got.Text, got.IsError)
			}
			if len(got.NotesBeforeResult) < 3 {
				t.Fatalf("onprogress calls before the result: got %d, want several", len(got.NotesBeforeResult))
			}
			prev := 0.0
			for i, n := range got.NotesBeforeResult {
				if n.Progress <= prev {
					t.Errorf("notification %d: got progress %v after %v, want it to grow", i, n.Progress, prev)
				}
				prev = n.Progress
				if !strings.HasPrefix(n.Message, "tick ") {
					t.Errorf("notification %d: got message %q, want ticker lines", i, n.Message)
				}
			}
		})
	}

	t.Run("abort demo_spawn", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		var got struct {
			Aborted bool   `json:"aborted"`
			Error   string `json:"error"`
		}
		ts.run(t, env, f.gw.URL, &got, "abort", "demo_spawn", pidfile)
		if !got.Aborted {
			t.Fatalf("the aborted call: got %+v, want it rejected as aborted", got)
		}
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		fisktest.WaitFor(t, 3*a2a.HeartbeatInterval+15*time.Second, "the agent to kill the aborted command's group", func() bool { return fisktest.ProcessGone(grandchild) })
		f.agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
	})
}
