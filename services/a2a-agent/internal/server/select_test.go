package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func TestSelect(t *testing.T) {
	ok := func(name string) tool.FuncSpec {
		return tool.FuncSpec{Name: name, Description: "Does " + name, Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone}
	}
	tests := []struct {
		name string
		// tool is the candidate, built per test; it is served after a
		// tool named "keep" that is always served.
		tool       func(testing.TB) tool.Tool
		wantReason string // empty: served
	}{
		{
			name:       "served",
			tool:       func(tb testing.TB) tool.Tool { return funcTool(tb, ok("fine")) },
			wantReason: "",
		},
		{
			name: "served on both surfaces",
			tool: func(tb testing.TB) tool.Tool {
				s := ok("both")
				s.Exposure = tool.ExposeMCP | tool.ExposeA2A
				return funcTool(tb, s)
			},
		},
		{
			name: "MCP only",
			tool: func(tb testing.TB) tool.Tool {
				s := ok("mcponly")
				s.Exposure = tool.ExposeMCP
				return funcTool(tb, s)
			},
			wantReason: "not exposed over A2A (posture mcp)",
		},
		{
			name:       "no posture at all",
			tool:       func(testing.TB) tool.Tool { return &fakeTool{name: "nowhere", desc: "x", confirm: tool.ConfirmNone} },
			wantReason: "not exposed over A2A (posture none)",
		},
		{
			name:       "cannot say whether gated",
			tool:       func(testing.TB) tool.Tool { return &fakeTool{name: "unsure", desc: "x", exposure: tool.ExposeA2A} },
			wantReason: "cannot say whether it is gated",
		},
		{
			name: "gated",
			tool: func(tb testing.TB) tool.Tool {
				s := ok("gated")
				s.Confirmation = tool.ConfirmRequired
				return funcTool(tb, s)
			},
			wantReason: "gated (ai:confirm or confirm_tags)",
		},
		{
			name: "invalid name with a space",
			tool: func(testing.TB) tool.Tool {
				return &fakeTool{name: "bad name", desc: "x", confirm: tool.ConfirmNone, exposure: tool.ExposeA2A}
			},
			wantReason: "invalid name",
		},
		{
			name: "invalid name with a subject token",
			tool: func(testing.TB) tool.Tool {
				return &fakeTool{name: "a.>", desc: "x", confirm: tool.ConfirmNone, exposure: tool.ExposeA2A}
			},
			wantReason: "invalid name",
		},
		{
			name: "empty name",
			tool: func(testing.TB) tool.Tool {
				return &fakeTool{desc: "x", confirm: tool.ConfirmNone, exposure: tool.ExposeA2A}
			},
			wantReason: "invalid name",
		},
		{
			name: "empty description",
			tool: func(tb testing.TB) tool.Tool {
				s := ok("mute")
				s.Description = ""
				return funcTool(tb, s)
			},
			wantReason: "empty description",
		},
		{
			name: "tags alone are a description",
			tool: func(tb testing.TB) tool.Tool {
				s := ok("tagged")
				s.Description = ""
				s.Tags = []string{"impact:ro"}
				return funcTool(tb, s)
			},
		},
		{
			name:       "name already served",
			tool:       func(tb testing.TB) tool.Tool { return funcTool(tb, ok("keep")) },
			wantReason: "name already served",
		},
		{
			// Exposure is checked first: it is the ceiling the others sit under.
			name:       "several reasons: exposure wins",
			tool:       func(testing.TB) tool.Tool { return &fakeTool{name: "bad name"} },
			wantReason: "not exposed over A2A",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keep := funcTool(t, ok("keep"))
			cand := tt.tool(t)
			served, dropped := server.Select([]tool.Tool{keep, cand}, false)
			if tt.wantReason == "" {
				if got, want := len(served), 2; got != want {
					t.Fatalf("served: got %d tools, want %d (dropped %v)", got, want, dropped)
				}
				if len(dropped) != 0 {
					t.Errorf("dropped: got %v, want none", dropped)
				}
				return
			}
			if got, want := len(served), 1; got != want || served[0] != keep {
				t.Fatalf("served: got %d tools, want only keep", got)
			}
			if got, want := len(dropped), 1; got != want {
				t.Fatalf("dropped: got %v, want one entry", dropped)
			}
			if got, want := dropped[0].Name, cand.Name(); got != want {
				t.Errorf("dropped name: got %q, want %q", got, want)
			}
			if got, want := dropped[0].Reason, tt.wantReason; !strings.Contains(got, want) {
				t.Errorf("drop reason: got %q, want it to contain %q", got, want)
			}
		})
	}
}

// TestDroppedToolsNeitherAdvertisedNorCallable serves one tool of each drop
// class beside a good one: the card lists only the good one, and calling a
// dropped one by name is an in-band unknown-tool error that never reaches
// the tool.
func TestDroppedToolsNeitherAdvertisedNorCallable(t *testing.T) {
	var ran atomic.Int32
	spec := func(name string) tool.FuncSpec {
		return tool.FuncSpec{
			Name: name, Description: "Does " + name, Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) {
				ran.Add(1)
				return tool.Outcome{JSON: json.RawMessage(`{"ran":"` + name + `"}`)}, nil
			},
		}
	}
	mcpOnly := spec("mcponly")
	mcpOnly.Exposure = tool.ExposeMCP
	gated := spec("gated")
	gated.Confirmation = tool.ConfirmRequired
	mute := spec("mute")
	mute.Description = ""
	unsure := &fakeTool{name: "unsure", desc: "x", exposure: tool.ExposeA2A}
	badName := &fakeTool{name: "bad name", desc: "x", confirm: tool.ConfirmNone, exposure: tool.ExposeA2A}

	ns := natstest.Start(t)
	srv := newServer(t, server.Config{Identity: "picky"}, []tool.Tool{
		funcTool(t, spec("good")), funcTool(t, mcpOnly), unsure, funcTool(t, gated), badName, funcTool(t, mute),
	})
	startServer(t, srv, ns.Connect(t))
	c := newClient(t, ns.Connect(t), "tester")

	reply, err := c.Discover(t.Context(), "picky")
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if got, want := cardNames(reply.AgentCard), []string{"good"}; !slices.Equal(got, want) {
		t.Errorf("card tools: got %v, want %v", got, want)
	}
	var dropped []string
	for _, d := range srv.Dropped() {
		dropped = append(dropped, d.Name)
	}
	if got, want := dropped, []string{"mcponly", "unsure", "gated", "bad name", "mute"}; !slices.Equal(got, want) {
		t.Errorf("dropped: got %v, want %v", got, want)
	}

	// "bad name" cannot even be sent: the schema refuses the name on the
	// client. The other four are valid names the agent must refuse.
	for _, name := range []string{"mcponly", "unsure", "gated", "mute"} {
		got := callTool(t, c, "picky", name, "")
		if !got.IsError {
			t.Errorf("call %s: got is_error false (output %q), want an in-band error", name, got.Output)
		}
		if want := fmt.Sprintf("unknown tool %q", name); !strings.Contains(got.Output, want) {
			t.Errorf("call %s: got output %q, want it to contain %q", name, got.Output, want)
		}
	}
	if got := ran.Load(); got != 0 {
		t.Errorf("dropped tools ran: got %d calls, want 0", got)
	}
	if got := unsure.callCount() + badName.callCount(); got != 0 {
		t.Errorf("dropped fake tools ran: got %d calls, want 0", got)
	}
	if got := callTool(t, c, "picky", "good", ""); got.IsError || got.Output != `{"ran":"good"}` {
		t.Errorf("call good: got is_error %t output %q, want %q", got.IsError, got.Output, `{"ran":"good"}`)
	}
}

func TestNewRefuses(t *testing.T) {
	good := funcTool(t, tool.FuncSpec{Name: "good", Description: "Good", Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone})
	gated := funcTool(t, tool.FuncSpec{Name: "gated", Description: "Gated", Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmRequired})
	tests := []struct {
		name    string
		cfg     server.Config
		tools   []tool.Tool
		wantErr error
	}{
		{"empty identity", server.Config{}, []tool.Tool{good}, server.ErrInvalidConfig},
		{"identity with a subject token", server.Config{Identity: "a.b"}, []tool.Tool{good}, server.ErrInvalidConfig},
		{"identity with a wildcard", server.Config{Identity: ">"}, []tool.Tool{good}, server.ErrInvalidConfig},
		{"instance with a space", server.Config{Identity: "ok", Instance: "a b"}, []tool.Tool{good}, server.ErrInvalidConfig},
		{"no tools", server.Config{Identity: "ok"}, nil, server.ErrNothingToServe},
		{"only gated tools", server.Config{Identity: "ok"}, []tool.Tool{gated}, server.ErrNothingToServe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Logger = testLogger(t)
			_, err := server.New(tt.cfg, tt.tools)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("New: got error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestDemoSelection serves the demo app as an operator would with
// confirm_tags [impact:rw]: the gated commands and ai:deny are gone, the
// rest is advertised in declaration order.
func TestDemoSelection(t *testing.T) {
	srv := newServer(t, server.Config{Identity: "demo"}, demoTools(t, fiskapp.Options{ConfirmTags: []string{tool.TagReadWrite}}))
	want := []string{"echo", "sleep", "ticker", "fail", "flood", "spawn", "cluster_node_status", "getenv"}
	if got := cardNames(srv.Card()); !slices.Equal(got, want) {
		t.Errorf("card tools: got %v, want %v", got, want)
	}
	reasons := map[string]string{}
	for _, d := range srv.Dropped() {
		reasons[d.Name] = d.Reason
	}
	for name, want := range map[string]string{"deploy": "gated", "restart": "gated", "noop": "empty description"} {
		if got := reasons[name]; !strings.Contains(got, want) {
			t.Errorf("drop reason of %s: got %q, want it to contain %q", name, got, want)
		}
	}
	if got, ok := reasons["destroy"]; ok {
		t.Errorf("destroy reached the server (reason %q); ai:deny must drop it at load", got)
	}
	for _, d := range srv.Card().Tools {
		if strings.TrimSpace(d.Description) == "" || !strings.Contains(d.Description, "Tags: ") {
			t.Errorf("card description of %s: got %q, want the help and a Tags line", d.Name, d.Description)
		}
	}
}

// The served set and the reasons for the rest, as `a2a-agent info` shows
// them.
func ExampleSelect() {
	spec := func(name string, exposure tool.Exposure, confirm tool.Confirmation) tool.Tool {
		t, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Description: "Does " + name, Exposure: exposure, Confirmation: confirm,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) { return tool.Outcome{}, nil },
		})
		if err != nil {
			panic(err)
		}
		return t
	}
	served, dropped := server.Select([]tool.Tool{
		spec("status", tool.ExposeMCP|tool.ExposeA2A, tool.ConfirmNone),
		spec("deploy", tool.ExposeMCP|tool.ExposeA2A, tool.ConfirmRequired),
		spec("search", tool.ExposeMCP, tool.ConfirmNone),
	}, false)
	for _, t := range served {
		fmt.Println("served:", t.Name())
	}
	for _, d := range dropped {
		fmt.Printf("dropped: %s: %s\n", d.Name, d.Reason)
	}
	// Output:
	// served: status
	// dropped: deploy: gated (ai:confirm or confirm_tags): nobody on the bus can approve it; set approvals.operator: true to have an operator approve it
	// dropped: search: not exposed over A2A (posture mcp)
}
