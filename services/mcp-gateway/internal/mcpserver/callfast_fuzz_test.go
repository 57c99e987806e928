package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// FuzzToolsCallMatchesMCPGo holds the gateway's own tools/call paths to
// mcp-go on any POST: a body and the Mcp-Name header it is sent with, in
// the 2026-07-28 era or on a live session of the session-based one. What
// the gateway answers itself must be what mcp-go answers, status,
// content type and bytes; what it declines reaches mcp-go unchanged, so
// the same holds. The tools are built-ins, so an input runs in
// microseconds: facts, a fixed result, and args, which answers with the
// canonical form of the arguments it was given (so the arguments each
// path hands the tool are compared too).
func FuzzToolsCallMatchesMCPGo(f *testing.F) {
	for _, q := range plainCalls() {
		q.name = "args"
		f.Add(q.body(), q.name, false)
	}
	for _, body := range []string{
		rawCall{name: "facts"}.body(),
		rawCall{name: "facts", id: `"x"`, meta: `,"progressToken":1`}.body(),
		rawCall{name: "args", args: `{"a":1.50,"b":"\u00e9","c":[true,null]}`}.body(),
		rawCall{name: "args", args: `{"a":1}`, extra: `,"task":{"ttl":1000}`}.body(),
		rawCall{name: "args", args: `{"a":1}`, extra: `,"params":{"name":"facts"}`}.body(),
		rawCall{name: "args", args: `{"a":1e999}`}.body(),
		rawCall{name: "args", args: `"not an object"`}.body(),
		rawCall{name: "nosuch"}.body(),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"facts","_meta":{}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"facts"}}`,
		`{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"facts"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"facts"},"params":{"name":"args"}}`,
		`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"facts"}}]`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`,
		``,
	} {
		f.Add(body, "facts", false)
		f.Add(body, "args", false)
	}
	for _, q := range []rawCall{
		{session: "live", name: "facts"},
		{session: "live", name: "args", args: `{"x":[1,2,{"y":"z"}]}`},
		{session: "live", name: "args", args: `{"x":1}`, meta: `,"progressToken":"p"`},
		{session: "live", name: "args", meta: `,"io.modelcontextprotocol/protocolVersion":"2026-07-28"`},
	} {
		f.Add(q.body(), q.name, true)
	}

	// The log goes nowhere: a fuzz target may not log through f.
	s, _ := startServer(f, Config{Logger: slog.New(slog.DiscardHandler)}, []tool.Tool{fuzzTool(f, "facts", func(json.RawMessage) json.RawMessage {
		return json.RawMessage(`{"b":2, "a":[1,2]}`)
	}), fuzzTool(f, "args", func(in json.RawMessage) json.RawMessage {
		return canonical(in)
	})})
	gateway, mcpGo := s.Handler(), http.Handler(s.streamable)
	session := fuzzSession(f, gateway)
	// The seeds reach the gateway's own paths, so the target compares
	// them and not only mcp-go with itself.
	modern := []byte(rawCall{name: "args", args: `{"a":1}`}.body())
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(modern))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	r.Header.Set(mcp.HeaderMethod, "tools/call")
	r.Header.Set(mcp.HeaderName, "args")
	if !s.serveToolsCall(httptest.NewRecorder(), r, modern) {
		f.Fatalf("the 2026-07-28 fast path declined %s", modern)
	}
	legacy := []byte(rawCall{session: session, name: "args", args: `{"a":1}`}.body())
	r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(legacy))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	cw := s.cancels.watch(httptest.NewRecorder(), session, json.RawMessage(`7`))
	taken := s.serveSessionToolsCall(cw, r, legacy, session)
	s.cancels.done(cw)
	if !taken {
		f.Fatalf("the session path declined %s", legacy)
	}

	f.Fuzz(func(t *testing.T, body, name string, withSession bool) {
		header := http.Header{}
		if withSession {
			header.Set(server.HeaderKeySessionID, session)
			header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		} else {
			header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
			header.Set(mcp.HeaderMethod, "tools/call")
			header.Set(mcp.HeaderName, name)
		}
		got := postJSON(gateway, body, header)
		want := postJSON(mcpGo, body, header)
		if got.Code != want.Code || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") ||
			!bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Errorf("%q (name %q, session %v): got %d %s:\n%s\nwant mcp-go's %d %s:\n%s", body, name, withSession,
				got.Code, got.Header().Get("Content-Type"), got.Body.Bytes(),
				want.Code, want.Header().Get("Content-Type"), want.Body.Bytes())
		}
	})
}

// fuzzTool is a built-in tool named name, answering with answer(input).
func fuzzTool(tb testing.TB, name string, answer func(json.RawMessage) json.RawMessage) tool.Tool {
	tb.Helper()
	t, err := tool.NewFunc(tool.FuncSpec{
		Name: name, Description: "A built-in of the fuzz target", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(_ context.Context, req tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: answer(req.Input)}, nil
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// fuzzSession initialises a session of the session-based era on h and
// returns its id.
func fuzzSession(tb testing.TB, h http.Handler) string {
	tb.Helper()
	header := http.Header{}
	w := postJSON(h, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcp.LATEST_LEGACY_PROTOCOL_VERSION+
		`","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}`, header)
	id := w.Header().Get(server.HeaderKeySessionID)
	if w.Code != http.StatusOK || id == "" {
		tb.Fatalf("initialize: got %d, session %q: %s", w.Code, id, w.Body.Bytes())
	}
	header.Set(server.HeaderKeySessionID, id)
	header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	if w := postJSON(h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, header); w.Code != http.StatusAccepted {
		tb.Fatalf("notifications/initialized: got %d: %s", w.Code, w.Body.Bytes())
	}
	return id
}
