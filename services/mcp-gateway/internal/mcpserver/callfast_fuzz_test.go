package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// FuzzToolsCallMatchesMCPGo holds the gateway's own tools/call paths to
// mcp-go on any POST: a body and the Mcp-Name header it is sent with, in
// the 2026-07-28 era or on a live session of the session-based one. What
// the gateway answers itself must be what mcp-go answers, status,
// content type and bytes; what it declines reaches mcp-go unchanged, so
// the same holds. Tasks on a session are the gateway's own, answered in
// front of mcp-go, and are left out ([ownSessionFeature]). The tools are
// built-ins, so an input runs in microseconds: facts, a fixed result, and
// args, which answers with the canonical form of the arguments it was
// given (so the arguments each path hands the tool are compared too).
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
	gateway, mcpGo := edge{}.handler(s), http.Handler(s.streamable)
	session := fuzzSession(f, gateway)
	// The seeds reach the gateway's own paths, so the target compares
	// them and not only mcp-go with itself.
	modern := []byte(rawCall{name: "args", args: `{"a":1}`}.body())
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(modern))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	r.Header.Set(mcp.HeaderMethod, "tools/call")
	r.Header.Set(mcp.HeaderName, "args")
	if !s.router.ServeToolsCall(httptest.NewRecorder(), r, modern, "") {
		f.Fatalf("the 2026-07-28 fast path declined %s", modern)
	}
	legacy := []byte(rawCall{session: session, name: "args", args: `{"a":1}`}.body())
	r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(legacy))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	cw := s.router.Cancels.Watch(httptest.NewRecorder(), session, json.RawMessage(`7`))
	taken := s.router.ServeToolsCall(cw, r, legacy, session)
	s.router.Cancels.Done(cw)
	if !taken {
		f.Fatalf("the session path declined %s", legacy)
	}

	f.Fuzz(func(t *testing.T, body, name string, withSession bool) {
		if withSession && ownSessionFeature(body) {
			t.Skip("the gateway's session layer answers tasks itself; mcp-go alone is no reference for them (task_test.go tests them)")
		}
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
		if !sameAnswer(got, want, withSession) {
			t.Errorf("%q (name %q, session %v): got %d %s:\n%s\nwant mcp-go's %d %s:\n%s", body, name, withSession,
				got.Code, got.Header().Get("Content-Type"), got.Body.Bytes(),
				want.Code, want.Header().Get("Content-Type"), want.Body.Bytes())
		}
	})
}

// ownSessionFeature reports whether the gateway's session layer answers
// body, POSTed on a session, with a feature mcp-go alone does not have: a
// task-augmented tools/call (a task, or the error of a malformed task
// parameter) or a tasks/* method. It reads body as that layer does
// ([mcphttp.Router.ServeHTTP]): a _meta of the 2026-07-28 era, or one
// that does not decode, passes to mcp-go.
func ownSessionFeature(body string) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Meta json.RawMessage `json:"_meta"`
			Task json.RawMessage `json:"task"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(body), &msg) != nil {
		return false
	}
	if len(msg.Params.Meta) > 0 {
		var meta *mcp.Meta
		if json.Unmarshal(msg.Params.Meta, &meta) != nil || meta != nil && mcp.IsModernProtocol(meta.ProtocolVersion()) {
			return false
		}
	}
	switch mcp.MCPMethod(msg.Method) {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel, mcp.MethodTasksList:
		return true
	}
	task := bytes.TrimSpace(msg.Params.Task)
	return msg.Method == string(mcp.MethodToolsCall) && len(msg.ID) > 0 && len(task) > 0 && !bytes.Equal(task, []byte("null"))
}

// sameAnswer reports whether got, the gateway's answer, is want, mcp-go's:
// the same status, content type and bytes. On a session one difference is
// allowed, the one callsession.go documents: once mcp-go has sent a
// session any notification, it answers each later request of the
// session as an event stream (a task's status notification does it, when
// the fuzzer sends a task-augmented call on the shared session), where the
// gateway's own path answers JSON. The transport lets a server answer
// either way, so there the JSON-RPC response the gateway wrote must be the
// stream's one event.
func sameAnswer(got, want *httptest.ResponseRecorder, session bool) bool {
	if got.Code != want.Code {
		return false
	}
	gotType, wantType := got.Header().Get("Content-Type"), want.Header().Get("Content-Type")
	if gotType == wantType {
		return bytes.Equal(got.Body.Bytes(), want.Body.Bytes())
	}
	if !session || gotType != "application/json" || wantType != "text/event-stream" {
		return false
	}
	event := "event: message\ndata: " + strings.TrimSuffix(got.Body.String(), "\n") + "\n\n"
	return want.Body.String() == event
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

// TestSameAnswer holds the fuzz target's comparison to the one difference
// it allows, made the way the fuzzer made it: a task-augmented call on the
// session, whose status notification makes mcp-go answer every later
// request of the session as an event stream. A plain call then gets JSON
// from the gateway and the same response as an event stream from mcp-go,
// which sameAnswer accepts on a session only; it refuses a stream with
// another response, or with a notification besides.
func TestSameAnswer(t *testing.T) {
	s, _ := startServer(t, Config{}, []tool.Tool{fuzzTool(t, "facts", func(json.RawMessage) json.RawMessage {
		return json.RawMessage(`{"a":1}`)
	})})
	gateway, mcpGo := edge{}.handler(s), http.Handler(s.streamable)
	session := fuzzSession(t, gateway)
	header := http.Header{}
	header.Set(server.HeaderKeySessionID, session)
	header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	plain := rawCall{session: session, name: "facts"}.body()
	if got, want := postJSON(gateway, plain, header), postJSON(mcpGo, plain, header); !sameAnswer(got, want, true) ||
		got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Fatalf("before any notification: got %s %q, want mcp-go's %s %q", got.Header().Get("Content-Type"), got.Body, want.Header().Get("Content-Type"), want.Body)
	}
	task := rawCall{session: session, name: "facts", extra: `,"task":{"ttl":60000}`}.body()
	if w := postJSON(gateway, task, header); w.Code != http.StatusOK {
		t.Fatalf("the task: got %d %q", w.Code, w.Body)
	}
	var got, want *httptest.ResponseRecorder
	// The task's status notifications ride on the next responses of the
	// session, one or more of them depending on timing: wait for a stream
	// that carries the response alone.
	fisktest.WaitFor(t, 10*time.Second, "mcp-go to answer the session as an event stream with no notification", func() bool {
		want = postJSON(mcpGo, plain, header)
		return want.Header().Get("Content-Type") == "text/event-stream" &&
			!strings.Contains(want.Body.String(), `"method":"notifications/`)
	})
	got = postJSON(gateway, plain, header)
	if got.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("the gateway's own path: got %s %q, want JSON", got.Header().Get("Content-Type"), got.Body)
	}
	if !sameAnswer(got, want, true) {
		t.Errorf("got %q, mcp-go's %q: want them the same response", got.Body, want.Body)
	}
	if sameAnswer(got, want, false) {
		t.Errorf("without a session: got %q and mcp-go's %q the same, want them different", got.Body, want.Body)
	}
	other := httptest.NewRecorder()
	other.Header().Set("Content-Type", "text/event-stream")
	other.WriteString(strings.Replace(want.Body.String(), `"id":7`, `"id":8`, 1))
	if sameAnswer(got, other, true) {
		t.Errorf("got %q the same as the stream %q of another response", got.Body, other.Body)
	}
	notified := httptest.NewRecorder()
	notified.Header().Set("Content-Type", "text/event-stream")
	notified.WriteString("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" + want.Body.String())
	if sameAnswer(got, notified, true) {
		t.Errorf("got %q the same as the stream %q with a notification besides", got.Body, notified.Body)
	}
}

// TestOwnSessionFeature holds the fuzz target's exclusion to what the
// session layer answers itself: tasks, however the keys are cased, and
// nothing else.
func TestOwnSessionFeature(t *testing.T) {
	for _, tt := range []struct {
		body string
		want bool
	}{
		{rawCall{session: "s", name: "facts", extra: `,"task":{"ttl":1000}`}.body(), true},
		{`{"jsonrpC":"2.0","id":0,"method":"tools/call","pArAms":{"nAme":"args","tAsk":{}}}`, true},
		{rawCall{session: "s", name: "facts", extra: `,"task":"soon"`}.body(), true},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`, true},
		{rawCall{session: "s", name: "facts", extra: `,"task":null`}.body(), false},
		{rawCall{session: "s", name: "facts"}.body(), false},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"facts","task":{}}}`, false},
		{rawCall{name: "facts", extra: `,"task":{}`}.body(), false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`, false},
	} {
		if got := ownSessionFeature(tt.body); got != tt.want {
			t.Errorf("ownSessionFeature(%s): got %v, want %v", tt.body, got, tt.want)
		}
	}
}
