package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// echoInput is the call both echo benchmarks make, so their ratio is the
// gateway's overhead over a direct exec of the same argv.
var echoInput = json.RawMessage(`{"message":"hello"}`)

// BenchmarkMCPCallEcho is one tools/call round trip through the real HTTP
// server (2026-07-28 client, no session) to the demo echo command.
func BenchmarkMCPCallEcho(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	_, url := startServer(b, Config{}, app.Tools())
	c := connect(b, url, modernEra, nil)
	var args map[string]any
	_ = json.Unmarshal(echoInput, &args)
	b.ReportAllocs()
	for b.Loop() {
		res := callTool(b, c, "echo", args)
		if res.IsError {
			b.Fatalf("got error %q", resultText(res))
		}
	}
}

// BenchmarkExecEchoDirect execs the argv the echo tool runs, with nothing
// in between: the floor BenchmarkMCPCallEcho is compared with.
func BenchmarkExecEchoDirect(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	argv, err := command(b, app, "echo").Argv(echoInput)
	if err != nil {
		b.Fatalf("building argv: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || string(out) != "hello\n" {
			b.Fatalf("got %q, %v", out, err)
		}
	}
}

// BenchmarkCommandCallEcho runs the echo tool in process, without MCP or
// HTTP: it splits BenchmarkMCPCallEcho's overhead into the command runner's
// share (process group, scrubbed environment, capped output) and the
// protocol's.
func BenchmarkCommandCallEcho(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	echo := command(b, app, "echo")
	b.ReportAllocs()
	for b.Loop() {
		out, err := echo.Call(b.Context(), tool.Request{Input: echoInput})
		if err != nil || out.Result == nil || out.Result.Output != "hello\n" {
			b.Fatalf("got %+v, %v", out, err)
		}
	}
}

// BenchmarkToolsList is one tools/list round trip for the demo's tools.
func BenchmarkToolsList(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	_, url := startServer(b, Config{}, app.Tools())
	c := connect(b, url, modernEra, nil)
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.ListTools(b.Context(), mcp.ListToolsRequest{})
		if err != nil || len(res.Tools) == 0 {
			b.Fatalf("got %v, %v", res, err)
		}
	}
}

// BenchmarkMCPCallEchoLegacy is BenchmarkMCPCallEcho for a session-based
// (2025-11-25) client: the floor BenchmarkMCPTaskEcho is compared with.
func BenchmarkMCPCallEchoLegacy(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	_, url := startServer(b, Config{}, app.Tools())
	c := connect(b, url, legacyEra, nil)
	var args map[string]any
	_ = json.Unmarshal(echoInput, &args)
	b.ReportAllocs()
	for b.Loop() {
		if res := callTool(b, c, "echo", args); res.IsError {
			b.Fatalf("got error %q", resultText(res))
		}
	}
}

// BenchmarkMCPTaskEcho runs the demo echo as an MCP task: the
// task-augmented tools/call, then tasks/result, which waits for the end.
// Its ratio to BenchmarkMCPCallEchoLegacy is what a task costs over a call.
// Beyond max_tasks the finished tasks make room for new ones.
func BenchmarkMCPTaskEcho(b *testing.B) {
	app := loadDemo(b, fiskapp.Options{})
	_, url := startServer(b, Config{}, app.Tools())
	c := connect(b, url, legacyEra, nil)
	var args map[string]any
	_ = json.Unmarshal(echoInput, &args)
	b.ReportAllocs()
	for b.Loop() {
		task := createTask(b, c, "echo", args, map[string]any{})
		if res, _ := taskResult(b, c, task.TaskId); res.IsError {
			b.Fatalf("got error %q", resultText(res))
		}
	}
}

// BenchmarkServeToolsCallBuiltin is the gateway's own work for one
// 2026-07-28 tools/call, without the network or a process: the whole
// handler chain (origin, authentication, body cap, session rules, the
// call path, the audit trail's queueing) answering a call of an
// in-process tool into a recorder.
func BenchmarkServeToolsCallBuiltin(b *testing.B) {
	h := builtinHandler(b)
	body := rawCall{name: "facts", args: `{}`}.body()
	header := http.Header{
		mcp.HeaderProtocolVersion: {mcp.ProtocolVersion20260728},
		mcp.HeaderMethod:          {"tools/call"},
		mcp.HeaderName:            {"facts"},
	}
	b.ReportAllocs()
	for b.Loop() {
		serveBuiltin(b, h, http.StatusOK, body, header)
	}
}

// BenchmarkServeToolsCallBuiltinLegacy is BenchmarkServeToolsCallBuiltin
// for a session-based (2025-11-25) client, whose calls mcp-go's transport
// answers: the session's lookup and bookkeeping, and the goroutine that
// would forward the call's notifications.
func BenchmarkServeToolsCallBuiltinLegacy(b *testing.B) {
	h := builtinHandler(b)
	w := serveBuiltin(b, h, http.StatusOK, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcp.LATEST_LEGACY_PROTOCOL_VERSION+
		`","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`, nil)
	header := http.Header{
		server.HeaderKeySessionID: {w.Header().Get(server.HeaderKeySessionID)},
		mcp.HeaderProtocolVersion: {mcp.LATEST_LEGACY_PROTOCOL_VERSION},
	}
	serveBuiltin(b, h, http.StatusAccepted, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, header)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"facts","arguments":{}}}`
	b.ReportAllocs()
	for b.Loop() {
		serveBuiltin(b, h, http.StatusOK, body, header)
	}
}

// builtinHandler is the whole handler chain of a gateway serving one
// in-process tool, facts.
func builtinHandler(b *testing.B) http.Handler {
	facts, err := tool.NewFunc(tool.FuncSpec{
		Name: "facts", Description: "Returns facts", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: json.RawMessage(`{"b":2}`)}, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	s, _ := startServer(b, Config{}, []tool.Tool{facts})
	return edge{}.handler(s)
}

// serveBuiltin POSTs body with header to h and fails unless it is
// answered with status want.
func serveBuiltin(b *testing.B, h http.Handler, want int, body string, header http.Header) *httptest.ResponseRecorder {
	w := postJSON(h, body, header)
	if w.Code != want {
		b.Fatalf("got %d %s, want %d", w.Code, w.Body.Bytes(), want)
	}
	return w
}
