package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// TestSessionToolsCallMatchesMCPGo: a session-based tools/call answered by
// the gateway's own path gets the status, content type and bytes mcp-go's
// answer to the same request in the same session has; what the path
// leaves to mcp-go still gets mcp-go's answer.
func TestSessionToolsCallMatchesMCPGo(t *testing.T) {
	_, url, direct := mcpGoPair(t)
	sid := rawClient{t, url}.initialize(nil)

	legacyMeta := `,"io.modelcontextprotocol/protocolVersion":"2025-06-18"`
	for _, q := range append(plainCalls(),
		// An older version in _meta is still the session-based era.
		rawCall{name: "echo", args: `{"message":"hi"}`, meta: legacyMeta},
		// Left to mcp-go: a number it cannot decode, an unknown tool,
		// params named twice, a _meta of the 2026-07-28 era, protocol
		// version headers it refuses or defaults.
		rawCall{name: "echo", args: `{"message":"hi","count":1e400}`},
		rawCall{name: "no_such_tool", args: `{}`},
		rawCall{name: "echo", raw: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fail","arguments":{"message":"one"}},"params":{"name":"echo"}}`},
		rawCall{name: "echo", args: `{"message":"hi"}`, meta: `,"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{}`},
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{mcp.HeaderProtocolVersion: "1999-01-01"}},
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{mcp.HeaderProtocolVersion: ""}},
		// Whatever the client accepts, a call that sent no notification
		// is answered as JSON.
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{"Accept": "text/event-stream"}},
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{"Accept": "*/*"}},
	) {
		q.session = sid
		sameAsMCPGo(t, q, url, direct)
	}
	// A call with a progress token is mcp-go's: an event stream.
	q := rawCall{session: sid, name: "echo", args: `{"message":"hi"}`, meta: `,"progressToken":"p1"`}
	if status, ctype, got := q.do(t, url); status != http.StatusOK || ctype != "text/event-stream" || !bytes.Contains(got, []byte(`"id":7`)) {
		t.Errorf("with a progress token: got %d %s %s, want mcp-go's event stream", status, ctype, got)
	}
}

// TestSessionToolsCallNotifications: a notification queued for a session
// is not held back by the gateway's own path. The next call goes to
// mcp-go, which writes it ahead of the answer; later calls are the
// gateway's again, and answered as JSON.
func TestSessionToolsCallNotifications(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	sid := rawClient{t, url}.initialize(nil)
	echo := rawCall{session: sid, name: "echo", args: `{"message":"hi"}`}
	if _, ctype, got := echo.do(t, url); ctype != "application/json" || !bytes.Contains(got, []byte(`hi\\n`)) {
		t.Fatalf("first call: got %s %s, want a JSON answer", ctype, got)
	}
	s.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
	status, ctype, got := echo.do(t, url)
	if status != http.StatusOK || ctype != "text/event-stream" ||
		!bytes.Contains(got, []byte(mcp.MethodNotificationToolsListChanged)) || !bytes.Contains(got, []byte(`hi\\n`)) {
		t.Errorf("call after a notification: got %d %s %s, want an event stream with the notification, then the answer", status, ctype, got)
	}
	if i, j := bytes.Index(got, []byte(mcp.MethodNotificationToolsListChanged)), bytes.Index(got, []byte(`"id":7`)); i < 0 || j < i {
		t.Errorf("call after a notification: got %s, want the notification ahead of the answer", got)
	}
	if _, ctype, got := echo.do(t, url); ctype != "application/json" || !bytes.Contains(got, []byte(`hi\\n`)) {
		t.Errorf("next call: got %s %s, want a JSON answer", ctype, got)
	}
}

// TestSessionToolsCallTakes checks which session-based requests the
// gateway's own path answers and which it leaves, untouched, to mcp-go.
func TestSessionToolsCallTakes(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	sid := rawClient{t, url}.initialize(nil)
	gated := gatedTool(t, s)
	echo := rawCall{name: "echo", args: `{"message":"hi"}`}
	tests := []struct {
		name    string
		q       rawCall
		edit    func(*http.Request)
		session string // empty: sid
		want    bool
	}{
		{name: "a call", q: echo, want: true},
		{name: "a string id", q: rawCall{name: "echo", args: `{"message":"hi"}`, id: `"x"`}, want: true},
		{name: "invalid arguments (answered in band)", q: rawCall{name: "echo", args: `{"count":"x"}`}, want: true},
		{name: "an older version in _meta", q: rawCall{name: "echo", meta: `,"io.modelcontextprotocol/protocolVersion":"2025-06-18"`}, want: true},
		{name: "a null id", q: rawCall{name: "echo", id: "null"}},
		{name: "a progress token", q: rawCall{name: "echo", meta: `,"progressToken":1`}},
		{name: "a task", q: rawCall{name: "echo", extra: `,"task":{}`}},
		{name: "a gated tool", q: rawCall{name: gated, args: `{}`}},
		{name: "an unknown tool", q: rawCall{name: "nope"}},
		{name: "params twice", q: rawCall{name: "echo", raw: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"Params":{"name":"echo"}}`}},
		{name: "a 2026-07-28 _meta", q: rawCall{name: "echo", meta: `,"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `"`}},
		{name: "no protocol header", q: echo, edit: func(r *http.Request) { r.Header.Del(mcp.HeaderProtocolVersion) }},
		{name: "a 2026-07-28 protocol header", q: echo, edit: func(r *http.Request) { r.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728) }},
		{name: "an unsupported protocol header", q: echo, edit: func(r *http.Request) { r.Header.Set(mcp.HeaderProtocolVersion, "1999-01-01") }},
		{name: "Last-Event-ID", q: echo, edit: func(r *http.Request) { r.Header.Set(mcp.HeaderLastEventID, "1") }},
		{name: "text/plain", q: echo, edit: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }},
		{name: "a GET", q: echo, edit: func(r *http.Request) { r.Method = http.MethodGet }},
		{name: "a session mcp-go does not know", q: echo, session: "mcp-session-00000000000000000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := sid
			if tt.session != "" {
				id = tt.session
			}
			tt.q.session = id
			body := []byte(tt.q.body())
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
			if tt.edit != nil {
				tt.edit(r)
			}
			w := httptest.NewRecorder()
			cw := s.router.Cancels.Watch(w, id, json.RawMessage(`7`))
			got := s.router.ServeToolsCall(cw, r, body, id)
			s.router.Cancels.Done(cw)
			if got != tt.want {
				t.Fatalf("taken: got %v, want %v", got, tt.want)
			}
			if !tt.want && (w.Body.Len() > 0 || len(w.Header()) > 0) {
				t.Errorf("left to mcp-go, but wrote %v %q", w.Header(), w.Body.Bytes())
			}
			if tt.want && (w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result":{`) || strings.Contains(w.Body.String(), "resultType")) {
				t.Errorf("got %d %s, want a session-based era's result", w.Code, w.Body.Bytes())
			}
		})
	}
}

// TestSessionToolsCallSessions: the sessions the gateway's path answers in
// are mcp-go's own, kept from initialize until the session ends; a call
// of an ended session is answered 404 by the session rules, never by the
// path.
func TestSessionToolsCallSessions(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, url := startServer(t, Config{}, app.Tools())
	c := rawClient{t, url}
	sid := c.initialize(nil)
	if !s.router.ClientSession(sid) {
		t.Fatalf("session %s: not kept after initialize", sid)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION}
	if resp, text := c.do(http.MethodDelete, nil, h); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: got HTTP %d %q, want 200", resp.StatusCode, text)
	}
	if s.router.ClientSession(sid) {
		t.Errorf("session %s: still kept after DELETE", sid)
	}
	if status, _, got := (rawCall{session: sid, name: "echo", args: `{"message":"hi"}`}).do(t, url); status != http.StatusNotFound {
		t.Errorf("a call of the deleted session: got %d %s, want 404", status, got)
	}
}
