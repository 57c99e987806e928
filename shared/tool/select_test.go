package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// fake is a tool whose answers a test chooses, for the rules NewFunc
// refuses to build.
type fake struct {
	name, desc string
	confirm    tool.Confirmation
	exposure   tool.Exposure
}

func (f fake) Name() string                    { return f.name }
func (f fake) Title() string                   { return f.name }
func (f fake) Description() string             { return f.desc }
func (f fake) ModelDescription() string        { return f.desc }
func (f fake) Tags() []string                  { return nil }
func (f fake) InputSchema() json.RawMessage    { return json.RawMessage(`{"type":"object"}`) }
func (f fake) Confirmation() tool.Confirmation { return f.confirm }
func (f fake) Exposure() tool.Exposure         { return f.exposure }
func (f fake) Call(context.Context, tool.Request) (tool.Outcome, error) {
	return tool.Outcome{}, nil
}

const both = tool.ExposeMCP | tool.ExposeA2A

func TestDropReason(t *testing.T) {
	tests := []struct {
		name    string
		tool    fake
		surface tool.Exposure
		want    string
	}{
		{"served on MCP", fake{"ok", "Does", tool.ConfirmNone, tool.ExposeMCP}, tool.ExposeMCP, ""},
		{"served on A2A", fake{"ok", "Does", tool.ConfirmRequired, tool.ExposeA2A}, tool.ExposeA2A, ""},
		{"served on either", fake{"ok", "Does", tool.ConfirmNone, both}, tool.ExposeA2A, ""},
		{"MCP only, asked for A2A", fake{"ok", "Does", tool.ConfirmNone, tool.ExposeMCP}, tool.ExposeA2A, "not exposed over A2A (posture mcp)"},
		{"A2A only, asked for MCP", fake{"ok", "Does", tool.ConfirmNone, tool.ExposeA2A}, tool.ExposeMCP, "not exposed over MCP (posture a2a)"},
		{"no posture", fake{"ok", "Does", tool.ConfirmNone, tool.ExposeNone}, tool.ExposeMCP, "not exposed over MCP (posture none)"},
		{"cannot say whether gated", fake{"ok", "Does", tool.ConfirmUnknown, both}, tool.ExposeMCP, "cannot say whether it is gated; refused rather than served ungated"},
		{"invalid name", fake{"bad name", "Does", tool.ConfirmNone, both}, tool.ExposeMCP, "invalid name: must match ^[a-zA-Z0-9_-]{1,64}$"},
		{"empty name", fake{"", "Does", tool.ConfirmNone, both}, tool.ExposeA2A, "invalid name: must match ^[a-zA-Z0-9_-]{1,64}$"},
		{"empty description", fake{"ok", "", tool.ConfirmNone, both}, tool.ExposeMCP, tool.ReasonEmptyDescription},
		// Exposure is the ceiling: it is named whatever else is wrong.
		{"everything wrong: exposure first", fake{"bad name", "", tool.ConfirmUnknown, tool.ExposeNone}, tool.ExposeMCP, "not exposed over MCP (posture none)"},
		{"exposed but nothing else: the gate next", fake{"bad name", "", tool.ConfirmUnknown, both}, tool.ExposeA2A, "cannot say whether it is gated; refused rather than served ungated"},
		{"bad name and no description: the name", fake{"bad name", "", tool.ConfirmNone, both}, tool.ExposeA2A, "invalid name: must match ^[a-zA-Z0-9_-]{1,64}$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tool.DropReason(tt.tool, tt.surface); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	good := func(name string) fake { return fake{name, "Does " + name, tool.ConfirmNone, both} }
	gated := fake{"gate", "Gates", tool.ConfirmRequired, both}
	refuseGated := func(t tool.Tool) string {
		if t.Confirmation() == tool.ConfirmRequired {
			return "gated: nobody can approve it"
		}
		return ""
	}
	tests := []struct {
		name        string
		tools       []tool.Tool
		surface     tool.Exposure
		extra       func(tool.Tool) string
		wantServed  []string
		wantDropped []tool.Dropped
	}{
		{
			name:       "nothing dropped, order kept",
			tools:      []tool.Tool{good("b"), good("a"), gated},
			surface:    tool.ExposeMCP,
			wantServed: []string{"b", "a", "gate"},
		},
		{
			name:        "first claim wins",
			tools:       []tool.Tool{good("a"), fake{"a", "Another a", tool.ConfirmNone, both}, good("b")},
			surface:     tool.ExposeA2A,
			wantServed:  []string{"a", "b"},
			wantDropped: []tool.Dropped{{Name: "a", Reason: tool.ReasonNameTaken}},
		},
		{
			name:        "a dropped tool claims no name",
			tools:       []tool.Tool{fake{"a", "", tool.ConfirmNone, both}, good("a")},
			surface:     tool.ExposeMCP,
			wantServed:  []string{"a"},
			wantDropped: []tool.Dropped{{Name: "a", Reason: tool.ReasonEmptyDescription}},
		},
		{
			name:        "the surface decides",
			tools:       []tool.Tool{fake{"m", "M", tool.ConfirmNone, tool.ExposeMCP}, fake{"n", "N", tool.ConfirmNone, tool.ExposeA2A}},
			surface:     tool.ExposeA2A,
			wantServed:  []string{"n"},
			wantDropped: []tool.Dropped{{Name: "m", Reason: "not exposed over A2A (posture mcp)"}},
		},
		{
			name:        "extra drops what the shared rules serve",
			tools:       []tool.Tool{gated, good("a")},
			surface:     tool.ExposeA2A,
			extra:       refuseGated,
			wantServed:  []string{"a"},
			wantDropped: []tool.Dropped{{Name: "gate", Reason: "gated: nobody can approve it"}},
		},
		{
			name:        "a shared rule is reported before extra",
			tools:       []tool.Tool{fake{"gate", "", tool.ConfirmRequired, both}, fake{"gate", "Gates", tool.ConfirmRequired, tool.ExposeMCP}},
			surface:     tool.ExposeA2A,
			extra:       refuseGated,
			wantDropped: []tool.Dropped{{Name: "gate", Reason: tool.ReasonEmptyDescription}, {Name: "gate", Reason: "not exposed over A2A (posture mcp)"}},
		},
		{
			name:        "extra is reported before a taken name",
			tools:       []tool.Tool{good("gate"), gated},
			surface:     tool.ExposeMCP,
			extra:       refuseGated,
			wantServed:  []string{"gate"},
			wantDropped: []tool.Dropped{{Name: "gate", Reason: "gated: nobody can approve it"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served, dropped := tool.Select(tt.tools, tt.surface, tt.extra)
			var names []string
			for _, s := range served {
				names = append(names, s.Name())
			}
			if !slices.Equal(names, tt.wantServed) {
				t.Errorf("served: got %v, want %v", names, tt.wantServed)
			}
			if !slices.Equal(dropped, tt.wantDropped) {
				t.Errorf("dropped: got %+v, want %+v", dropped, tt.wantDropped)
			}
		})
	}
}

// The served set and the reasons for the rest, on the MCP surface, with no
// rule of the server's own.
func ExampleSelect() {
	served, dropped := tool.Select([]tool.Tool{
		fake{"status", "Shows the status", tool.ConfirmNone, tool.ExposeMCP | tool.ExposeA2A},
		fake{"relay", "Relays a message", tool.ConfirmNone, tool.ExposeA2A},
		fake{"unsure", "Cannot say", tool.ConfirmUnknown, tool.ExposeMCP},
		fake{"status", "Another status", tool.ConfirmNone, tool.ExposeMCP},
	}, tool.ExposeMCP, nil)
	for _, t := range served {
		fmt.Println("served:", t.Name())
	}
	for _, d := range dropped {
		fmt.Printf("dropped: %s: %s\n", d.Name, d.Reason)
	}
	// Output:
	// served: status
	// dropped: relay: not exposed over MCP (posture a2a)
	// dropped: unsure: cannot say whether it is gated; refused rather than served ungated
	// dropped: status: name already served by an earlier tool
}

// A tool served on MCP only is refused on A2A, and the reason names its
// posture.
func ExampleDropReason() {
	search := fake{"search", "Searches the index", tool.ConfirmNone, tool.ExposeMCP}
	fmt.Printf("mcp: %q\n", tool.DropReason(search, tool.ExposeMCP))
	fmt.Printf("a2a: %q\n", tool.DropReason(search, tool.ExposeA2A))
	// Output:
	// mcp: ""
	// a2a: "not exposed over A2A (posture mcp)"
}
