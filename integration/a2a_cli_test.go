package integration_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestA2AAgentServeRefuses runs `a2a-agent serve` with configs that cannot
// be served: it exits non-zero at once, naming the key to add or fix.
func TestA2AAgentServeRefuses(t *testing.T) {
	b := newBus(t)
	base := b.demoAgent(t, "refused", 0)
	tests := []struct {
		name   string
		change func(*fleettest.Agent)
		want   []string
	}{
		{"no expose.agent.a2a", func(a *fleettest.Agent) { a.A2A = nil }, []string{"expose.agent.a2a.serve_tools"}},
		{"serve_tools left out", func(a *fleettest.Agent) { a.A2A = &fleettest.A2A{MaxConcurrentTools: 2} }, []string{"expose.agent.a2a.serve_tools"}},
		{"no application_path", func(a *fleettest.Agent) { a.ApplicationPath = "" }, []string{"application_path"}},
		{"no nats_context", func(a *fleettest.Agent) { a.NATSContext = "" }, []string{"nats_context"}},
		{"no identity", func(a *fleettest.Agent) { a.Identity = "" }, []string{"identity"}},
		{"nats_context not found", func(a *fleettest.Agent) { a.NATSContext = "nosuch" }, []string{"nats_context", "nosuch"}},
		{"application_path not a fisk app", func(a *fleettest.Agent) { a.ApplicationPath = "/bin/true" }, []string{"application_path"}},
		{"unknown key", func(a *fleettest.Agent) { a.Extra = map[string]any{"serve_tools": true} }, []string{"serve_tools"}},
		{"nothing left to serve", func(a *fleettest.Agent) { a.IncludeTools = []string{"nomatch*"} }, []string{"no tool left to serve", "include"}},
		{"only gated tools left", func(a *fleettest.Agent) {
			a.IncludeTools = []string{"deploy", "restart"}
			a.ConfirmTags = []string{tool.TagReadWrite}
		}, []string{"no tool left to serve", "confirm_tags"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := base
			tt.change(&a)
			cfg := fleettest.WriteAgentConfig(t, a)
			r := fleettest.Run(t, b.home.Env(), fleettest.A2AAgent(t), "serve", "--config", cfg)
			if r.ExitCode == 0 {
				t.Fatalf("exit code: got 0, want non-zero\nstderr:\n%s", r.Stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr: got\n%s\nwant it to name %q", r.Stderr, want)
				}
			}
			if strings.Contains(r.Stderr, fleettest.A2AServingLog) {
				t.Errorf("stderr: got %q, want no serving", fleettest.A2AServingLog)
			}
			if r.Elapsed > 15*time.Second {
				t.Errorf("refusal took %s, want it at once", r.Elapsed)
			}
		})
	}
}

// TestA2AAgentClientCommands drives `discover`, `call` and `info` against a
// running `serve`, as an operator would.
func TestA2AAgentClientCommands(t *testing.T) {
	b := newBus(t)
	agent := b.demoAgent(t, "cli", 2)
	b.startAgents(t, 1, agent)
	bin := fleettest.A2AAgent(t)
	run := func(t *testing.T, args ...string) fleettest.Result {
		t.Helper()
		return fleettest.Run(t, b.home.Env(), bin, append(args, "--context", fleetContext, "--timeout", "20s")...)
	}
	wantTools := []string{"echo", "sleep", "ticker", "fail", "flood", "spawn", "restart", "cluster_node_status", "getenv"}

	t.Run("discover table", func(t *testing.T) {
		r := run(t, "discover", "cli")
		if r.ExitCode != 0 {
			t.Fatalf("exit code: got %d, want 0\nstderr:\n%s", r.ExitCode, r.Stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if !strings.HasPrefix(lines[0], "agent cli version 0.0.0") {
			t.Errorf("first line: got %q, want the agent and its version", lines[0])
		}
		header := -1
		for i, l := range lines {
			if strings.HasPrefix(l, "TOOL (9)") && strings.Contains(l, "DESCRIPTION") {
				header = i
			}
		}
		if header < 0 {
			t.Fatalf("table header: got\n%s\nwant a TOOL (9) / DESCRIPTION header", r.Stdout)
		}
		rows := lines[header+1:]
		if len(rows) != len(wantTools) {
			t.Fatalf("rows: got %d\n%s\nwant %d", len(rows), r.Stdout, len(wantTools))
		}
		for i, name := range wantTools {
			if f := strings.Fields(rows[i]); len(f) < 2 || f[0] != name {
				t.Errorf("row %d: got %q, want tool %s and its description", i, rows[i], name)
			}
		}
		if !strings.Contains(r.Stdout, "Prints a message") {
			t.Errorf("table: want the first line of echo's description")
		}
	})

	t.Run("discover json", func(t *testing.T) {
		r := run(t, "discover", "cli", "--json")
		if r.ExitCode != 0 {
			t.Fatalf("exit code: got %d, want 0\nstderr:\n%s", r.ExitCode, r.Stderr)
		}
		card := decodeJSON[a2a.AgentCard](t, "discover --json", r.Stdout)
		if card.Name != "cli" {
			t.Errorf("card name: got %q, want cli", card.Name)
		}
		var names []string
		for _, d := range card.Tools {
			names = append(names, d.Name)
			if !json.Valid(d.InputSchema) || d.Description == "" {
				t.Errorf("tool %s: got description %q schema %s, want both", d.Name, d.Description, d.InputSchema)
			}
		}
		if strings.Join(names, ",") != strings.Join(wantTools, ",") {
			t.Errorf("card tools: got %v, want %v", names, wantTools)
		}
	})

	tests := []struct {
		name       string
		args       []string
		wantExit   int
		wantResult *tool.CommandResult // the CommandResult JSON on stdout
		wantStdout string
		wantStderr string
	}{
		{
			name:       "echo",
			args:       []string{"call", "cli", "echo", `{"message":"hi"}`},
			wantResult: &tool.CommandResult{Command: fleettest.FiskDemo(t) + " echo -- hi", ExitCode: 0, Output: "hi\n"},
		},
		{
			name:       "no input is {}",
			args:       []string{"call", "cli", "cluster_node_status"},
			wantResult: &tool.CommandResult{Command: fleettest.FiskDemo(t) + " cluster node status", Output: "node n1: status ok\n"},
		},
		{
			name:       "non-zero exit is mirrored",
			args:       []string{"call", "cli", "fail", `{"code":7}`},
			wantExit:   7,
			wantResult: &tool.CommandResult{Command: fleettest.FiskDemo(t) + " fail --code=7", ExitCode: 7, Output: "about to fail\nfailing with exit code 7\n"},
		},
		{
			name:       "exit codes past 125 are capped",
			args:       []string{"call", "cli", "fail", `{"code":200}`},
			wantExit:   125,
			wantResult: &tool.CommandResult{Command: fleettest.FiskDemo(t) + " fail --code=200", ExitCode: 200, Output: "about to fail\nfailing with exit code 200\n"},
		},
		{
			name:       "unknown tool",
			args:       []string{"call", "cli", "nosuch"},
			wantExit:   1,
			wantStdout: `error: unknown tool "nosuch"`,
		},
		{
			name:       "gated tool is unknown",
			args:       []string{"call", "cli", "deploy", `{"service":"web","marker":"/nonexistent/m"}`},
			wantExit:   1,
			wantStdout: `error: unknown tool "deploy"`,
		},
		{
			name:       "bad input is in-band",
			args:       []string{"call", "cli", "echo", `{"message":"hi","bogus":true}`},
			wantExit:   1,
			wantStdout: "error: ",
		},
		{
			name:       "input not JSON",
			args:       []string{"call", "cli", "echo", `{message}`},
			wantExit:   1,
			wantStderr: "input is not valid JSON",
		},
		{
			name:       "nobody serves the identity",
			args:       []string{"call", "cli-absent", "echo", `{"message":"hi"}`},
			wantExit:   1,
			wantStderr: "agent unavailable",
		},
	}
	for _, tt := range tests {
		t.Run("call "+tt.name, func(t *testing.T) {
			r := run(t, tt.args...)
			if r.ExitCode != tt.wantExit {
				t.Errorf("exit code: got %d, want %d\nstdout:\n%s\nstderr:\n%s", r.ExitCode, tt.wantExit, r.Stdout, r.Stderr)
			}
			if tt.wantResult != nil {
				got := decodeJSON[tool.CommandResult](t, "call output", r.Stdout)
				if got != *tt.wantResult {
					t.Errorf("result: got %+v, want %+v", got, *tt.wantResult)
				}
			}
			if !strings.Contains(r.Stdout, tt.wantStdout) {
				t.Errorf("stdout: got %q, want it to contain %q", r.Stdout, tt.wantStdout)
			}
			if !strings.Contains(r.Stderr, tt.wantStderr) {
				t.Errorf("stderr: got %q, want it to contain %q", r.Stderr, tt.wantStderr)
			}
		})
	}

	t.Run("NATS_CONTEXT selects the context", func(t *testing.T) {
		r := fleettest.Run(t, b.home.Env("NATS_CONTEXT="+fleetContext), bin, "call", "cli", "echo", `{"message":"from env"}`)
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, `"output": "from env\n"`) {
			t.Errorf("got exit %d stdout %q stderr %q, want the echo", r.ExitCode, r.Stdout, r.Stderr)
		}
	})

	t.Run("info", func(t *testing.T) {
		cfg := fleettest.WriteAgentConfig(t, agent)
		r := fleettest.Run(t, b.home.Env(), bin, "info", "--config", cfg)
		if r.ExitCode != 0 {
			t.Fatalf("exit code: got %d, want 0\nstderr:\n%s", r.ExitCode, r.Stderr)
		}
		for _, want := range []string{"SERVED (9)", "DROPPED", "deploy", "gated", "destroy", "ai:deny", "noop", "empty description", "impact:ro"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("info: got\n%s\nwant it to contain %q", r.Stdout, want)
			}
		}
	})
}

// TestA2AAgentServeSIGTERM stops `serve` with SIGTERM while a call runs:
// the call is answered, and the process exits 0 soon after.
func TestA2AAgentServeSIGTERM(t *testing.T) {
	b := newBus(t)
	proc := b.startAgents(t, 1, b.demoAgent(t, "terminated", 2))[0]

	type result struct {
		reply *a2a.ToolReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := b.client.CallTool(ctx, "terminated", "sleep", json.RawMessage(`{"duration":"1500ms"}`))
		done <- result{r, err}
	}()
	// The micro stats count the request once the serving goroutine has
	// handed it to a worker: the command is running.
	nc := b.ns.Connect(t)
	fisktest.WaitFor(t, 15*time.Second, "the call to be running", func() bool { return natstest.EndpointRequests(t, nc, "terminated", "tool") == 1 })

	signalled := time.Now()
	proc.Signal(t, syscall.SIGTERM)
	code := proc.Wait(t, 15*time.Second)
	exited := time.Since(signalled)

	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the call in flight was not answered")
	}
	if r.err != nil {
		t.Fatalf("call in flight: %v", r.err)
	}
	if pid, ok := servedBy(r.reply); !ok || pid != proc.PID {
		t.Errorf("call in flight: got %+v, want the sleep's result from pid %d", r.reply, proc.PID)
	}
	if code != 0 {
		t.Errorf("exit code: got %d, want 0\n%s", code, proc.Stderr())
	}
	if exited > 10*time.Second {
		t.Errorf("exit took %s after SIGTERM, want prompt (the call had at most 1.5s left)", exited)
	}
	for _, want := range []string{"stopping: draining in-flight calls", "stopped"} {
		if !strings.Contains(proc.Stderr(), want) {
			t.Errorf("log: want %q in\n%s", want, proc.Stderr())
		}
	}
}
