package audit_test

import (
	"fmt"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// TestEndingSpellings holds every ending to the words the services use for
// it today: the log line's outcome, the calls metric's outcome label, and
// the audit record's result and error class. The strings are spelled out
// rather than taken from the constants, so a change to any of them shows
// here as the change of a log, series or record it is.
func TestEndingSpellings(t *testing.T) {
	tests := []struct {
		end                        audit.Ending
		log, metric, result, class string
		final                      bool
	}{
		{audit.Ending(0), "", "error", "error", "", true},

		// Both services.
		{audit.EndOK, "ok", "ok", "ok", "", true},
		{audit.EndTimeout, "timeout", "timeout", "timeout", "timeout", true},
		{audit.EndToolError, "error", "error", "error", "tool_error", true},
		{audit.EndCallerGone, "canceled", "canceled", "canceled", "caller_gone", true},

		// The A2A agent (services/a2a-agent/internal/server).
		{audit.EndA2AExit, "exit", "exit_nonzero", "failed", "exit_nonzero", true},
		{audit.EndA2ACanceled, "canceled", "canceled", "canceled", "canceled_by_caller", true},
		{audit.EndA2AInterrupted, "error", "error", "canceled", "stopping", true},
		{audit.EndA2ARunError, "error", "error", "error", "run_error", true},
		{audit.EndA2AStartError, "error", "error", "error", "start", true},
		{audit.EndA2AInvalid, "error", "error", "invalid", "invalid_input", true},
		{audit.EndA2ADenied, "denied", "error", "denied", "approval_denied", true},
		{audit.EndA2AStopping, "error", "error", "refused", "stopping", true},
		{audit.EndA2ARefusedStopping, "stopping", "canceled", "refused", "stopping", true},
		{audit.EndA2AUnknownTool, "unknown tool", "error", "unknown_tool", "unknown_tool", true},

		// The MCP gateway (services/mcp-gateway/internal/mcpserver:
		// call.go, access.go and rate.go name them, metrics.go and
		// audit.go map them).
		{audit.EndMCPExitNonzero, "ok", "exit_nonzero", "failed", "exit_nonzero", true},
		{audit.EndMCPInvalid, "invalid", "error", "invalid", "invalid_input", true},
		{audit.EndMCPUnknownTool, "unknown_tool", "error", "unknown_tool", "unknown_tool", true},
		{audit.EndMCPDenied, "denied", "denied", "denied", "approval_denied", true},
		{audit.EndMCPRefused, "refused", "denied", "refused", "refused_gated", true},
		{audit.EndMCPApprovalRequested, "approval_requested", "error", "error", "", false},
		{audit.EndMCPCanceledWaiting, "canceled_waiting", "busy", "canceled", "canceled_waiting", true},
		{audit.EndMCPFailed, "failed", "error", "error", "start", true},
		{audit.EndMCPRefusedByPolicy, "refused_by_policy", "error", "refused", "refused_by_policy", true},
		{audit.EndMCPRefusedRate, "refused_rate", "error", "refused", "refused_rate", true},
	}
	if got, want := len(tests), audit.NumEndings; got != want {
		t.Errorf("the table holds %d endings, the package defines %d: add the new ones", got, want)
	}
	seen := map[audit.Ending]bool{}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.end, tt.log), func(t *testing.T) {
			if seen[tt.end] {
				t.Fatalf("ending %d is in the table twice", tt.end)
			}
			seen[tt.end] = true
			if got := tt.end.String(); got != tt.log {
				t.Errorf("log: got %q, want %q", got, tt.log)
			}
			if got := tt.end.Metric(); got != tt.metric {
				t.Errorf("metric: got %q, want %q", got, tt.metric)
			}
			if got := tt.end.Result(); got != tt.result {
				t.Errorf("result: got %q, want %q", got, tt.result)
			}
			if got := tt.end.Class(); got != tt.class {
				t.Errorf("class: got %q, want %q", got, tt.class)
			}
			if got := tt.end.Final(); got != tt.final {
				t.Errorf("final: got %t, want %t", got, tt.final)
			}
		})
	}
}

// TestEndingOutOfRange: a value no constant names reads as the zero
// value, an error, whatever vocabulary asks.
func TestEndingOutOfRange(t *testing.T) {
	for _, e := range []audit.Ending{audit.NumEndings, audit.NumEndings + 1, 255} {
		if got := [4]string{e.String(), e.Metric(), e.Result(), e.Class()}; got != [4]string{"", "error", "error", ""} {
			t.Errorf("Ending(%d): got %q, want the zero value's", e, got)
		}
	}
}

// A command that exits non-zero, in each service's words.
func ExampleEnding() {
	for _, e := range []audit.Ending{audit.EndA2AExit, audit.EndMCPExitNonzero} {
		fmt.Printf("log %s, metric %s, audit %s/%s\n", e, e.Metric(), e.Result(), e.Class())
	}
	// Output:
	// log exit, metric exit_nonzero, audit failed/exit_nonzero
	// log ok, metric exit_nonzero, audit failed/exit_nonzero
}
