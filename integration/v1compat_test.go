package integration_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fiskv1test"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestV1AgentCompat drives fiskfleet's operator CLI and the gateway's
// remote_tools against a stand-in for one of Fisk AI's own v1 agents, which
// omits exit_code when it is 0 and output when it is empty, sends
// must_understand as a boolean and lists only the v1 family in its card.
func TestV1AgentCompat(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	v1 := fiskv1test.Start(t, b.ns.Connect(t), "legacy")
	bin := fleettest.A2AAgent(t)
	run := func(t *testing.T, args ...string) fleettest.Result {
		t.Helper()
		return fleettest.Run(t, b.home.Env(), bin, append(args, "--context", fleetContext, "--timeout", "20s")...)
	}

	t.Run("a2a-agent discover", func(t *testing.T) {
		r := run(t, "discover", "legacy")
		if r.ExitCode != 0 {
			t.Fatalf("exit code: got %d, want 0\nstderr:\n%s", r.ExitCode, r.Stderr)
		}
		for _, want := range []string{"agent legacy version 1.4.2", "TOOL (4)", "silent_fail"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("discover: got\n%s\nwant it to contain %q", r.Stdout, want)
			}
		}
	})

	calls := []struct {
		name     string
		args     []string
		wantExit int
		want     tool.CommandResult
	}{
		{name: "exit 0 with output", args: []string{"echo", `{"message":"hi"}`}, want: tool.CommandResult{Command: "fiskv1 echo -- hi", Output: "hi\n"}},
		{name: "exit 0 without output", args: []string{"true"}, want: tool.CommandResult{Command: "fiskv1 true"}},
		{name: "non-zero exit", args: []string{"fail"}, wantExit: 3, want: tool.CommandResult{Command: "fiskv1 fail", ExitCode: 3, Output: "boom\n"}},
		{name: "non-zero exit without output", args: []string{"silent_fail"}, wantExit: 1, want: tool.CommandResult{Command: "fiskv1 silent_fail", ExitCode: 1}},
	}
	for _, tt := range calls {
		t.Run("a2a-agent call "+tt.name, func(t *testing.T) {
			r := run(t, append([]string{"call", "legacy"}, tt.args...)...)
			if r.ExitCode != tt.wantExit {
				t.Fatalf("exit code: got %d, want %d\nstdout:\n%s\nstderr:\n%s", r.ExitCode, tt.wantExit, r.Stdout, r.Stderr)
			}
			if got := decodeJSON[tool.CommandResult](t, "call output", r.Stdout); got != tt.want {
				t.Errorf("result: got %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("gateway remote_tools", func(t *testing.T) {
		gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, "", "legacy"))
		c := connectMCP(t, gw.URL, nil)
		names := listNames(t, c)
		// echo is local too, so the v1 agent's echo is prefixed.
		for _, want := range []string{"legacy_echo", "true", "silent_fail", "legacy_fail"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list: got %v, want %s", names, want)
			}
		}
		// The v1 agent's card promises no command result, so its tools
		// declare no output schema, where the local commands do.
		list, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range list.Tools {
			declares := tl.OutputSchema.Type != "" || len(tl.RawOutputSchema) > 0
			switch tl.Name {
			case "legacy_echo", "true", "silent_fail", "legacy_fail":
				if declares {
					t.Errorf("%s: declares an output schema its v1 agent never promised", tl.Name)
				}
			case "echo":
				if !declares {
					t.Errorf("the local echo declares no output schema")
				}
			}
		}
		for _, tt := range []struct {
			name string
			args map[string]any
			want tool.CommandResult
		}{
			{"legacy_echo", map[string]any{"message": "via mcp"}, tool.CommandResult{Command: "fiskv1 echo -- via mcp", Output: "via mcp\n"}},
			{"true", nil, tool.CommandResult{Command: "fiskv1 true"}},
			{"legacy_fail", nil, tool.CommandResult{Command: "fiskv1 fail", ExitCode: 3, Output: "boom\n"}},
			{"silent_fail", nil, tool.CommandResult{Command: "fiskv1 silent_fail", ExitCode: 1}},
		} {
			if got := mcpCommandResult(t, tt.name, callMCP(t, c, tt.name, tt.args)); got != tt.want {
				t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
			}
		}
	})
	if v1.Calls.Load() < 8 {
		t.Errorf("calls the v1 agent answered: got %d, want at least 8", v1.Calls.Load())
	}
}
