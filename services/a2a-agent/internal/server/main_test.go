package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func TestMain(m *testing.M) { fisktest.Main(m) }

// demoTools loads the demo app with opts (Path is filled in) and returns
// its tools.
func demoTools(tb testing.TB, opts fiskapp.Options) []tool.Tool {
	tb.Helper()
	opts.Path = fisktest.FiskDemo(tb)
	app, err := fiskapp.Load(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("loading the demo app: %v", err)
	}
	return app.Tools()
}

// cancelFrom encodes a cancel of request on agent demo, as sender sends
// it.
func cancelFrom(tb testing.TB, sender, request string) []byte {
	tb.Helper()
	m := &a2a.Cancel{}
	a2a.StampReply(m, a2a.NewDiscoveryRequest(a2a.Participant{Name: sender}, "demo"), a2a.Participant{Name: sender})
	m.Request = request
	data, err := a2a.Encode(m)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// testLogger is the code under test's logger: silent unless -v.
func testLogger(tb testing.TB) *slog.Logger { return fisktest.Logger(tb) }

// newServer builds a server for tools, failing tb on error.
func newServer(tb testing.TB, cfg server.Config, tools []tool.Tool) *server.Server {
	tb.Helper()
	if cfg.Identity == "" {
		cfg.Identity = "demo"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(tb)
	}
	srv, err := server.New(cfg, tools)
	if err != nil {
		tb.Fatalf("server.New: %v", err)
	}
	return srv
}

// startServer starts srv on nc and stops it at the end of the test.
func startServer(tb testing.TB, srv *server.Server, nc *nats.Conn) {
	tb.Helper()
	if err := srv.Start(nc); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			tb.Errorf("Stop: %v", err)
		}
	})
}

// serveDemo starts an embedded NATS server and an agent serving the demo
// app's tools with cfg and opts, and returns the NATS server and a client.
func serveDemo(tb testing.TB, cfg server.Config, opts fiskapp.Options) (*natstest.Server, *a2a.Client, *server.Server) {
	tb.Helper()
	ns := natstest.Start(tb)
	srv := newServer(tb, cfg, demoTools(tb, opts))
	startServer(tb, srv, ns.Connect(tb))
	return ns, newClient(tb, ns.Connect(tb), "tester"), srv
}

// newClient returns an A2A client sending as name over nc.
func newClient(tb testing.TB, nc *nats.Conn, name string, opts ...natsbus.Option) *a2a.Client {
	tb.Helper()
	c, err := a2a.NewClient(natsbus.NewTransport(nc, opts...), a2a.Participant{Name: name})
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	return c
}

// callTool calls name on identity with input under a bounded context and
// fails tb when the call cannot be made.
func callTool(tb testing.TB, c *a2a.Client, identity, name, input string) *a2a.ToolReply {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 20*time.Second)
	defer cancel()
	var in json.RawMessage
	if input != "" {
		in = json.RawMessage(input)
	}
	reply, err := c.CallTool(ctx, identity, name, in)
	if err != nil {
		tb.Fatalf("CallTool(%s, %s): %v", identity, name, err)
	}
	return reply
}

// cardNames returns the tool names an agent card advertises.
func cardNames(card a2a.AgentCard) []string {
	out := make([]string, len(card.Tools))
	for i, t := range card.Tools {
		out[i] = t.Name
	}
	return out
}

// fakeTool is a tool.Tool whose every answer is set by the test, for what
// tool.NewFunc refuses to build (an invalid name, a tool that cannot say
// whether it is gated). calls counts Call invocations.
type fakeTool struct {
	name     string
	desc     string
	confirm  tool.Confirmation
	exposure tool.Exposure
	mu       sync.Mutex // guards calls
	calls    int
}

func (f *fakeTool) Name() string             { return f.name }
func (f *fakeTool) Description() string      { return f.desc }
func (f *fakeTool) ModelDescription() string { return f.desc }
func (f *fakeTool) Tags() []string           { return nil }
func (f *fakeTool) Title() string            { return f.name }
func (f *fakeTool) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{}}`)
}
func (f *fakeTool) Confirmation() tool.Confirmation { return f.confirm }
func (f *fakeTool) Exposure() tool.Exposure         { return f.exposure }
func (f *fakeTool) Call(context.Context, tool.Request) (tool.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return tool.Outcome{JSON: json.RawMessage(`{"ran":true}`)}, nil
}

func (f *fakeTool) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// funcTool builds a tool.NewFunc tool, failing tb when the spec is refused.
func funcTool(tb testing.TB, spec tool.FuncSpec) tool.Tool {
	tb.Helper()
	if spec.Call == nil {
		spec.Call = func(context.Context, tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: json.RawMessage(`{"ran":true}`)}, nil
		}
	}
	t, err := tool.NewFunc(spec)
	if err != nil {
		tb.Fatalf("tool.NewFunc(%s): %v", spec.Name, err)
	}
	return t
}

// configFilter is an include filter naming tools.
func configFilter(tools ...string) config.Filter { return config.Filter{Tools: tools} }

// isUnavailable reports whether err is a round trip nobody answered.
func isUnavailable(err error) bool { return errors.Is(err, a2a.ErrAgentUnavailable) }
