package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func TestMain(m *testing.M) { fisktest.Main(m) }

// loadDemo loads the demo application's commands. A short kill grace keeps
// timeout tests quick.
func loadDemo(tb testing.TB, opts fiskapp.Options) *fiskapp.App {
	tb.Helper()
	opts.Path = fisktest.FiskDemo(tb)
	if opts.KillGrace == 0 {
		opts.KillGrace = 100 * time.Millisecond
	}
	app, err := fiskapp.Load(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("loading fiskdemo: %v", err)
	}
	return app
}

// command returns the demo command named name.
func command(tb testing.TB, app *fiskapp.App, name string) *fiskapp.Command {
	tb.Helper()
	for _, c := range app.Commands {
		if c.Name() == name {
			return c
		}
	}
	tb.Fatalf("fiskdemo has no command %q", name)
	return nil
}

// testLogger is the code under test's logger: silent unless -v.
func testLogger(tb testing.TB) *slog.Logger { return fisktest.Logger(tb) }

// edge is what stands in front of a server's MCP handler besides its
// caller check, as the gateway mounts it: the edge's settings the test
// sets, and open routes beside /mcp.
type edge struct {
	origins     []string
	readTimeout time.Duration
	open        map[string]http.Handler
}

// handler is s at /mcp behind an [httpedge.Edge] with e's settings and
// the server's own caller check, as the gateway serves it (with the
// arrival marked for the trace).
func (e edge) handler(s *Server) http.Handler {
	ed := httpedge.New(httpedge.Config{
		AuthToken:      s.cfg.AuthToken,
		Authenticate:   s.cfg.Authenticate,
		Authorize:      s.cfg.Policy.Authorize,
		ReadTimeout:    e.readTimeout,
		AllowedOrigins: e.origins,
	})
	ed.Authenticated("/mcp", s.MCPHandler())
	for p, h := range e.open {
		ed.Open(p, h)
	}
	if s.cfg.Tracer != nil {
		return call.MarkArrival(ed.Handler())
	}
	return ed.Handler()
}

// startServer builds a strict server for tools and serves it behind an
// edge with no settings on an httptest server (127.0.0.1, ephemeral
// port). It returns the server and the /mcp URL.
func startServer(tb testing.TB, cfg Config, tools []tool.Tool) (*Server, string) {
	tb.Helper()
	return startServerEdge(tb, cfg, edge{}, tools)
}

// startServerEdge is [startServer] behind an edge with e's settings.
func startServerEdge(tb testing.TB, cfg Config, e edge, tools []tool.Tool) (*Server, string) {
	tb.Helper()
	if cfg.Identity == "" {
		cfg.Identity = "demo"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(tb)
	}
	s, err := New(cfg, tools)
	if err != nil {
		tb.Fatalf("building the server: %v", err)
	}
	hs := httptest.NewServer(e.handler(s))
	tb.Cleanup(func() {
		s.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	return s, hs.URL + "/mcp"
}

// serveLoopback serves s behind e with [httpedge.Serve], as the gateway
// does (the server's tasks stopped within the shutdown budget, the server
// closed after), on a new loopback listener until stop is called or the
// test ends. It returns the address and the channel the serve's result
// arrives on.
func serveLoopback(tb testing.TB, s *Server, e edge) (addr string, stop context.CancelFunc, served <-chan error) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listening: %v", err)
	}
	ctx, cancel := context.WithCancel(tb.Context())
	result := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer s.Close()
		result <- httpedge.Serve(ctx, ln, e.handler(s), httpedge.ServeOptions{
			ReadTimeout: e.readTimeout,
			Logger:      s.log,
			Stopping:    s.Tasks().Close,
		})
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String(), cancel, result
}

// era is one of the two protocol eras mcp-go speaks.
type era struct {
	name string
	opts []client.ClientOption
	// modern is whether the client should end up on 2026-07-28 or later.
	modern bool
}

var (
	legacyEra = era{name: "legacy", opts: []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}}
	modernEra = era{name: "modern", modern: true}
	eras      = []era{legacyEra, modernEra}
)

// connect starts an initialised mcp-go client for url in era e and checks
// that it negotiated that era.
func connect(tb testing.TB, url string, e era, topts []transport.StreamableHTTPCOption, copts ...client.ClientOption) *client.Client {
	tb.Helper()
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		tb.Fatalf("creating the transport: %v", err)
	}
	c := client.NewClient(tr, append(append([]client.ClientOption(nil), e.opts...), copts...)...)
	ctx := tb.Context()
	if err := c.Start(ctx); err != nil {
		tb.Fatalf("starting the client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "mcpserver-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		tb.Fatalf("initialising the client: %v", err)
	}
	if got := mcp.IsModernProtocol(c.ProtocolVersion()); got != e.modern {
		tb.Fatalf("client negotiated %q: got modern %t, want %t", c.ProtocolVersion(), got, e.modern)
	}
	return c
}

// callTool calls name with args and fails the test on a protocol error.
func callTool(tb testing.TB, c *client.Client, name string, args any) *mcp.CallToolResult {
	tb.Helper()
	res, err := tryCall(tb.Context(), c, name, args)
	if err != nil {
		tb.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func tryCall(ctx context.Context, c *client.Client, name string, args any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// resultText joins a result's text content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// commandResult decodes a command tool's result text.
func commandResult(tb testing.TB, res *mcp.CallToolResult) tool.CommandResult {
	tb.Helper()
	if res.IsError {
		tb.Fatalf("got an error result %q, want a command result", resultText(res))
	}
	var cr tool.CommandResult
	if err := json.Unmarshal([]byte(resultText(res)), &cr); err != nil {
		tb.Fatalf("decoding the command result %q: %v", resultText(res), err)
	}
	return cr
}

// elicitor is a client elicitation handler backed by a function; it counts
// the requests it sees and keeps the last one.
type elicitor struct {
	fn    func(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
	mu    sync.Mutex // guards calls and last
	calls int
	last  mcp.ElicitationRequest
}

func (e *elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.calls++
	e.last = req
	e.mu.Unlock()
	return e.fn(ctx, req)
}

func (e *elicitor) seen() (int, mcp.ElicitationRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls, e.last
}

// answer returns an elicitation result with action and content.
func answer(action mcp.ElicitationResponseAction, content any) *mcp.ElicitationResult {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: content}}
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// postJSON POSTs body with header to h as a JSON client would.
func postJSON(h http.Handler, body string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
