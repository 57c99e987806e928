package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func TestToolsList(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatalf("listing tools: %v", err)
			}
			byName := map[string]mcp.Tool{}
			var names []string
			for _, tl := range res.Tools {
				byName[tl.Name] = tl
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			want := []string{"cluster_node_status", "deploy", "echo", "fail", "flood", "getenv", "restart", "sleep", "spawn", "ticker"}
			if !slices.Equal(names, want) {
				t.Fatalf("got tools %v, want %v (destroy is ai:deny, linger hidden, noop has no description)", names, want)
			}

			tests := []struct {
				name         string
				title        string
				descContains string
				readOnly     *bool
				destructive  *bool
				property     string
			}{
				{name: "echo", title: "echo", descContains: "Prints a message\n\nTags: impact:ro", readOnly: mcp.ToBoolPtr(true), destructive: mcp.ToBoolPtr(false), property: "message"},
				{name: "deploy", title: "deploy", descContains: "Tags: ai:confirm, impact:rw", readOnly: mcp.ToBoolPtr(false), destructive: mcp.ToBoolPtr(true), property: "marker"},
				{name: "restart", title: "restart", descContains: "Tags: impact:rw", readOnly: mcp.ToBoolPtr(false), destructive: mcp.ToBoolPtr(true), property: "marker"},
				{name: "cluster_node_status", title: "cluster node status", descContains: "Shows a node's status\n\nTags: impact:ro", readOnly: mcp.ToBoolPtr(true), destructive: mcp.ToBoolPtr(false), property: "node"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tl := byName[tt.name]
					if tl.Title != tt.title || tl.Annotations.Title != tt.title {
						t.Errorf("got title %q and annotation title %q, want %q", tl.Title, tl.Annotations.Title, tt.title)
					}
					if !strings.Contains(tl.Description, tt.descContains) {
						t.Errorf("got description %q, want it to contain %q", tl.Description, tt.descContains)
					}
					if !sameHint(tl.Annotations.ReadOnlyHint, tt.readOnly) {
						t.Errorf("got readOnlyHint %v, want %v", deref(tl.Annotations.ReadOnlyHint), deref(tt.readOnly))
					}
					if !sameHint(tl.Annotations.DestructiveHint, tt.destructive) {
						t.Errorf("got destructiveHint %v, want %v", deref(tl.Annotations.DestructiveHint), deref(tt.destructive))
					}
					var schema struct {
						Type       string                     `json:"type"`
						Properties map[string]json.RawMessage `json:"properties"`
					}
					raw, _ := json.Marshal(tl.InputSchema)
					if len(tl.RawInputSchema) > 0 {
						raw = tl.RawInputSchema
					}
					if err := json.Unmarshal(raw, &schema); err != nil {
						t.Fatalf("decoding the input schema %s: %v", raw, err)
					}
					if schema.Type != "object" {
						t.Errorf("got schema type %q, want object", schema.Type)
					}
					if _, ok := schema.Properties[tt.property]; tt.property != "" && !ok {
						t.Errorf("got schema properties %v, want %q among them", keys(schema.Properties), tt.property)
					}
					out, _ := json.Marshal(tl.OutputSchema)
					if len(tl.RawOutputSchema) > 0 {
						out = tl.RawOutputSchema
					}
					for _, field := range []string{"command", "exit_code", "output", "truncated"} {
						if !strings.Contains(string(out), `"`+field+`"`) {
							t.Errorf("got output schema %s, want it to describe %q", out, field)
						}
					}
				})
			}
		})
	}
}

func sameHint(a, b *bool) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func deref(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestCallResults(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	builtin, err := tool.NewFunc(tool.FuncSpec{
		Name:         "facts",
		Description:  "Returns facts",
		Exposure:     tool.ExposeMCP,
		Confirmation: tool.ConfirmNone,
		Call: func(ctx context.Context, req tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: json.RawMessage(`{"b":2, "a":[1,2]}`)}, nil
		},
	})
	if err != nil {
		t.Fatalf("building the built-in: %v", err)
	}
	_, url := startServer(t, Config{}, append(app.Tools(), builtin))
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)

			res := callTool(t, c, "echo", map[string]any{"message": "hello", "count": 2, "upper": true})
			cr := commandResult(t, res)
			want := tool.CommandResult{Command: fisktest.FiskDemo(t) + " echo --count=2 --upper -- hello", ExitCode: 0, Output: "HELLO\nHELLO\n"}
			if cr != want {
				t.Errorf("got %+v, want %+v", cr, want)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			var structured tool.CommandResult
			if err := json.Unmarshal(sc, &structured); err != nil || structured != want {
				t.Errorf("got structured content %s, want %+v", sc, want)
			}

			res = callTool(t, c, "fail", map[string]any{"code": 4})
			if cr := commandResult(t, res); cr.ExitCode != 4 || !strings.Contains(cr.Output, "failing with exit code 4") {
				t.Errorf("got %+v, want exit code 4 with stderr in the output (a non-zero exit is not an error)", cr)
			}

			res = callTool(t, c, "facts", nil)
			if res.IsError || resultText(res) != `{"b":2, "a":[1,2]}` {
				t.Errorf("got %q (error %t), want the built-in's JSON verbatim", resultText(res), res.IsError)
			}
			if res.StructuredContent != nil {
				t.Errorf("got structured content %v for an in-process tool, want none", res.StructuredContent)
			}
		})
	}
}

// fakeTool is a tool whose answers a test chooses, for the selection rules
// tool.NewFunc refuses to build.
type fakeTool struct {
	name     string
	confirm  tool.Confirmation
	exposure tool.Exposure
}

func (f fakeTool) Name() string                 { return f.name }
func (f fakeTool) Title() string                { return f.name }
func (f fakeTool) Description() string          { return "a fake tool" }
func (f fakeTool) ModelDescription() string     { return "a fake tool" }
func (f fakeTool) Tags() []string               { return nil }
func (f fakeTool) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (f fakeTool) Confirmation() tool.Confirmation {
	return f.confirm
}
func (f fakeTool) Exposure() tool.Exposure { return f.exposure }
func (f fakeTool) Call(context.Context, tool.Request) (tool.Outcome, error) {
	return tool.Outcome{JSON: json.RawMessage(`"fake"`)}, nil
}

func newBuiltin(tb testing.TB, name string) tool.Tool {
	tb.Helper()
	bt, err := tool.NewFunc(tool.FuncSpec{
		Name: name, Description: "A built-in", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: json.RawMessage(`{"builtin":true}`)}, nil
		},
	})
	if err != nil {
		tb.Fatalf("building built-in %s: %v", name, err)
	}
	return bt
}

func TestSelection(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	echo := command(t, app, "echo")
	tools := []tool.Tool{
		echo,
		newBuiltin(t, "echo"),
		fakeTool{name: "bad name!", confirm: tool.ConfirmNone, exposure: tool.ExposeMCP},
		fakeTool{name: "unsure", confirm: tool.ConfirmUnknown, exposure: tool.ExposeMCP},
		fakeTool{name: "bus_only", confirm: tool.ConfirmNone, exposure: tool.ExposeA2A},
		fakeTool{name: "fine", confirm: tool.ConfirmNone, exposure: tool.ExposeMCP | tool.ExposeA2A},
	}

	t.Run("strict constructor refuses a collision naming both", func(t *testing.T) {
		_, err := New(Config{Identity: "demo", Logger: testLogger(t)}, tools)
		if !errors.Is(err, ErrCollision) {
			t.Fatalf("got error %v, want ErrCollision", err)
		}
		for _, want := range []string{`"echo" is claimed by command "echo"`, `in-process tool "echo"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("got %q, want it to contain %q", err, want)
			}
		}
	})

	t.Run("lenient builder skips the loser", func(t *testing.T) {
		s, err := Build(Config{Identity: "demo", Logger: testLogger(t)}, tools)
		if err != nil {
			t.Fatalf("building: %v", err)
		}
		defer s.Close()
		served := s.Served()
		if len(served) != 2 || served[0] != tool.Tool(echo) || served[1].Name() != "fine" {
			t.Fatalf("got served %v, want the echo command then fine", names(served))
		}
		want := map[string]string{
			"echo":      "name already claimed by command \"echo\"",
			"bad name!": "invalid name",
			"unsure":    "cannot say whether it is gated",
			"bus_only":  "not exposed over MCP",
		}
		got := map[string]string{}
		for _, d := range s.Dropped() {
			got[d.Name] = d.Reason
		}
		for name, reason := range want {
			if !strings.Contains(got[name], reason) {
				t.Errorf("got drop reason %q for %s, want it to contain %q", got[name], name, reason)
			}
		}
	})

	t.Run("Select agrees with the builder", func(t *testing.T) {
		served, dropped := Select(tools)
		if len(served) != 2 || len(dropped) != 4 {
			t.Errorf("got %d served and %d dropped, want 2 and 4", len(served), len(dropped))
		}
	})
}

func names(ts []tool.Tool) []string {
	var ns []string
	for _, t := range ts {
		ns = append(ns, t.Name())
	}
	return ns
}

func TestSetTools(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	notified := make(chan struct{}, 16)
	c := connect(t, url, legacyEra, []transport.StreamableHTTPCOption{transport.WithContinuousListening()})
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			notified <- struct{}{}
		}
	})

	t.Run("a remote tool cannot take a local name on a strict server", func(t *testing.T) {
		err := s.SetTools("peer", []tool.Tool{newBuiltin(t, "echo")})
		if !errors.Is(err, ErrCollision) || !strings.Contains(err.Error(), `in-process tool "echo" from peer`) {
			t.Fatalf("got %v, want ErrCollision naming the peer's echo", err)
		}
		// Every command but noop, which has no description to serve.
		if got := len(s.Served()); got != len(app.Commands)-1 {
			t.Errorf("got %d served tools, want the %d unchanged", got, len(app.Commands)-1)
		}
	})

	t.Run("adding a source announces list_changed", func(t *testing.T) {
		if err := s.SetTools("peer", []tool.Tool{newBuiltin(t, "peer_hello")}); err != nil {
			t.Fatalf("setting tools: %v", err)
		}
		select {
		case <-notified:
		case <-time.After(10 * time.Second):
			t.Fatal("got no notifications/tools/list_changed within 10s")
		}
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		var got []string
		for _, tl := range res.Tools {
			got = append(got, tl.Name)
		}
		if !slices.Contains(got, "peer_hello") || !slices.Contains(got, "echo") {
			t.Errorf("got tools %v, want peer_hello beside the local ones", got)
		}
		if res := callTool(t, c, "peer_hello", nil); resultText(res) != `{"builtin":true}` {
			t.Errorf("got %q, want the remote tool's JSON", resultText(res))
		}
		if last := s.Served()[len(s.Served())-1].Name(); last != "peer_hello" {
			t.Errorf("got last served %q, want peer_hello after the local tools", last)
		}
	})

	t.Run("removing a source removes its tools", func(t *testing.T) {
		if err := s.SetTools("peer", nil); err != nil {
			t.Fatalf("setting tools: %v", err)
		}
		if _, err := tryCall(t.Context(), c, "peer_hello", nil); err == nil {
			t.Error("got a result for a removed tool, want mcp-go's unknown tool error")
		}
	})
}

func TestInstructionsAndPanics(t *testing.T) {
	panicky, err := tool.NewFunc(tool.FuncSpec{
		Name: "panicky", Description: "Panics", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) { panic("boom") },
	})
	if err != nil {
		t.Fatalf("building the tool: %v", err)
	}
	_, url := startServer(t, Config{Instructions: "Use panicky with care."}, []tool.Tool{panicky, newBuiltin(t, "calm")})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			req := mcp.InitializeRequest{}
			req.Params.ClientInfo = mcp.Implementation{Name: "t", Version: "0"}
			init, err := c.Initialize(t.Context(), req)
			if err != nil {
				t.Fatalf("initialising: %v", err)
			}
			if init.Instructions != "Use panicky with care." {
				t.Errorf("got instructions %q, want the configured ones", init.Instructions)
			}
			res := callTool(t, c, "panicky", nil)
			if !res.IsError || !strings.Contains(resultText(res), "panicky failed: internal error: boom") {
				t.Errorf("got %q (error %t), want an in-band failure", resultText(res), res.IsError)
			}
			if res := callTool(t, c, "calm", nil); res.IsError {
				t.Errorf("got %q after the panic, want the next call to work", resultText(res))
			}
		})
	}
}

func TestUnknownTool(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			// mcp-go looks a name up before any handler runs and answers an
			// unknown one with JSON-RPC -32602, the protocol error the MCP
			// specification itself prescribes; it offers no hook to turn it
			// into an in-band result.
			_, err := tryCall(t.Context(), c, "no_such_tool", nil)
			if err == nil || !strings.Contains(err.Error(), "not found") {
				t.Fatalf("got %v, want mcp-go's tool not found error", err)
			}
			if cr := commandResult(t, callTool(t, c, "echo", map[string]any{"message": "still here"})); cr.Output != "still here\n" {
				t.Errorf("got %q after the unknown tool, want the echo", cr.Output)
			}
		})
	}
}
