package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// rawCall is one raw tools/call POST of the 2026-07-28 era, or, with a
// session, of the session-based era.
type rawCall struct {
	// session, when set, is the Mcp-Session-Id of a session-based call,
	// sent without the 2026-07-28 era's _meta and headers.
	session string
	id      string // empty: 7
	name    string
	args    string // the arguments object; empty for none
	meta    string // extra _meta members, each with its leading comma
	extra   string // extra params members, each with its leading comma
	header  map[string]string
	token   string
	// raw, when set, is the whole body, sent with the headers of name.
	raw string
}

func (q rawCall) body() string {
	if q.raw != "" {
		return q.raw
	}
	id := q.id
	if id == "" {
		id = "7"
	}
	params := `{"name":"` + q.name + `"`
	if q.args != "" {
		params += `,"arguments":` + q.args
	}
	switch {
	case q.session == "":
		params += `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 +
			`","io.modelcontextprotocol/clientCapabilities":{}` + q.meta + `}`
	case q.meta != "":
		params += `,"_meta":{` + q.meta[1:] + `}`
	}
	params += q.extra + `}`
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// do POSTs the call to url and returns the status, content type and body.
func (q rawCall) do(tb testing.TB, url string) (int, string, []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(q.body()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if q.session != "" {
		req.Header.Set(server.HeaderKeySessionID, q.session)
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	} else {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, q.name)
	}
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("tools/call: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the tools/call answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// countingTool wraps a tool and counts its calls, to tell which path ran
// it and how often.
type countingTool struct {
	tool.Tool
	calls atomic.Int64
}

func (c *countingTool) Call(ctx context.Context, req tool.Request) (tool.Outcome, error) {
	c.calls.Add(1)
	return c.Tool.Call(ctx, req)
}

// mcpGoPair starts a gateway serving the demo and facts, a built-in with
// a JSON outcome, and returns it, its URL and that of a server of its
// mcp-go handler alone: the answers the gateway's own paths are held to.
func mcpGoPair(t *testing.T) (s *Server, url, direct string) {
	t.Helper()
	facts, err := tool.NewFunc(tool.FuncSpec{
		Name: "facts", Description: "Returns facts", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			return tool.Outcome{JSON: json.RawMessage(`{"b":2, "a":[1,2]}`)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, url = startServer(t, Config{}, append(loadDemo(t, fiskapp.Options{}).Tools(), facts))
	mcpGo := httptest.NewServer(s.streamable)
	t.Cleanup(mcpGo.Close)
	return s, url, mcpGo.URL + "/mcp"
}

// sameAsMCPGo checks that q gets the status, content type and bytes from
// url that it gets from direct, mcp-go's handler alone.
func sameAsMCPGo(t *testing.T, q rawCall, url, direct string) {
	t.Helper()
	status, ctype, got := q.do(t, url)
	wstatus, wctype, want := q.do(t, direct)
	if status != wstatus || ctype != wctype || !bytes.Equal(got, want) {
		t.Errorf("%s (headers %v, token %q, session %q): got %d %s:\n%s\nwant mcp-go's %d %s:\n%s",
			q.body(), q.header, q.token, q.session, status, ctype, got, wstatus, wctype, want)
	}
}

// plainCalls are calls both fast paths answer: results, exits, built-ins,
// in-band errors, ids of every kind, arguments of every shape.
func plainCalls() []rawCall {
	return []rawCall{
		{name: "echo", args: `{"message":"hi"}`},
		{name: "echo", args: `{"message":"<b> & \u2028","count":2,"upper":true}`, id: `"a-string-id"`},
		{name: "echo", args: `{"message":"hi"}`, id: `12345678901234567890`},
		{name: "fail", args: `{"code":4}`},
		{name: "facts"},
		{name: "echo", args: `{"count":"not a number"}`},
		{name: "echo", args: `[1,2]`},
		{name: "echo", args: `{"message":"hi","extra":{"deep":[1,{"x":null}]}}`},
		// Numbers mcp-go decodes, one in a string.
		{name: "echo", args: `{"message":"x\\\"1e400","count":-0.5e-400,"n":[1E+2,-0,1.5e308]}`},
	}
}

// TestToolsCallMatchesMCPGo: a 2026-07-28 tools/call answered by the
// gateway's own path gets the status, content type and bytes mcp-go's
// answer to the same request has, for results, in-band errors and the
// policy's refusals alike; what the path leaves to mcp-go still gets
// mcp-go's answer.
func TestToolsCallMatchesMCPGo(t *testing.T) {
	_, url, direct := mcpGoPair(t)
	for _, q := range append(plainCalls(),
		// A number mcp-go cannot decode.
		rawCall{name: "echo", args: `{"message":"hi","count":1e400}`},
		rawCall{name: "echo", raw: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"count":1e400}},` +
			`"params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		rawCall{name: "no_such_tool", args: `{}`},
		// Params named twice: the arguments of the first stay, every
		// other field is the second's, even one it leaves out (here the
		// tool's name, then the _meta).
		rawCall{name: "echo", raw: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"one"}},` +
			`"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		rawCall{name: "echo", raw: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fail","arguments":{"message":"one"}},` +
			`"params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		// Left to mcp-go: a task, a retry with input.
		rawCall{name: "echo", args: `{"message":"hi"}`, extra: `,"task":{"ttl":60000}`},
		rawCall{name: "echo", args: `{"message":"hi"}`, extra: `,"requestState":"x"`},
		// Whatever the client accepts, mcp-go answers a call that sent
		// no notification as JSON.
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{"Accept": "text/event-stream"}},
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{"Accept": "*/*"}},
		// Headers mcp-go refuses.
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{mcp.HeaderName: "other"}},
		rawCall{name: "echo", args: `{"message":"hi"}`, header: map[string]string{mcp.HeaderMethod: "tools/list"}},
	) {
		sameAsMCPGo(t, q, url, direct)
	}
	// A call with a progress token is mcp-go's too: its answer is an
	// event stream (whether a progress notification precedes the result
	// depends on timing, so the bytes are not compared).
	q := rawCall{name: "echo", args: `{"message":"hi"}`, meta: `,"progressToken":"p1"`}
	if status, ctype, got := q.do(t, url); status != http.StatusOK || ctype != "text/event-stream" || !bytes.Contains(got, []byte(`"resultType":"complete"`)) {
		t.Errorf("with a progress token: got %d %s %s, want mcp-go's event stream", status, ctype, got)
	}
}

// TestToolsCallFastPath checks which path a call takes, and that the
// gateway's own path keeps the call path's rules: a policy refusal in
// band, the input schema, a gated tool left to mcp-go (and so to its
// approval), and a client that goes away interrupting the command.
func TestToolsCallFastPath(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	var tools []tool.Tool
	counted := map[string]*countingTool{}
	for _, tl := range app.Tools() {
		c := &countingTool{Tool: tl}
		counted[tl.Name()] = c
		tools = append(tools, c)
	}
	s, url := startServer(t, Config{}, tools)
	if e := (*s.entries.Load())["echo"]; e == nil || e.Gated || e.headerParams {
		t.Fatalf("echo's entry: got %+v, want an ungated tool without header parameters", e)
	}

	// A gated tool never runs through the fast path: mcp-go answers, and
	// with a client that cannot elicit it is refused in band, not run.
	gated := gatedTool(t, s)
	before := counted[gated].calls.Load()
	status, _, body := rawCall{name: gated, args: `{}`}.do(t, url)
	if status != http.StatusOK || counted[gated].calls.Load() != before {
		t.Errorf("gated %s: got %d %s, ran %d times, want an answer that ran nothing", gated, status, body, counted[gated].calls.Load()-before)
	}

	// A client that goes away stops its call.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(rawCall{name: "sleep", args: `{"duration":"30s"}`}.body()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, "sleep")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.core.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.core.InFlight() == 0 {
		t.Fatal("the sleep call never started")
	}
	cancel()
	<-done
	for s.core.InFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.core.InFlight(); n != 0 {
		t.Errorf("after the client went away: %d calls still in flight, want 0", n)
	}
}

// TestToolsCallPolicy: the gateway's own paths, of both eras, refuse a
// call outside the caller's grant in band, as mcp-go's path does.
func TestToolsCallPolicy(t *testing.T) {
	cfg := Config{Policy: listPolicy()}
	s, url := startFleetServer(t, cfg, 40, 60)
	direct := httptest.NewServer(s.cfg.Authenticate(s.streamable, s.cfg.Policy.Authorize))
	t.Cleanup(direct.Close)
	var names []string
	for name := range *s.entries.Load() {
		names = append(names, name)
	}
	for _, token := range []string{"alice", "bob", "carol", "dave"} {
		// The same calls in a session of the caller's own, on the
		// session-based path.
		sid := rawClient{t, url}.initialize(map[string]string{"Authorization": "Bearer " + token})
		for _, name := range names[:min(len(names), 6)] {
			for _, session := range []string{"", sid} {
				sameAsMCPGo(t, rawCall{name: name, args: `{}`, token: token, session: session}, url, direct.URL+"/mcp")
			}
		}
	}
}

// gatedTool returns the name of a gated tool s serves.
func gatedTool(t *testing.T, s *Server) string {
	t.Helper()
	for name, e := range *s.entries.Load() {
		if e.Gated {
			return name
		}
	}
	t.Fatal("the demo has no gated tool")
	return ""
}

// TestToolsCallTakes checks which requests the gateway's own path answers
// and which it leaves, untouched, to mcp-go.
func TestToolsCallTakes(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, _ := startServer(t, Config{}, app.Tools())
	gated := gatedTool(t, s)
	echo := rawCall{name: "echo", args: `{"message":"hi"}`}
	tests := []struct {
		name string
		q    rawCall
		edit func(*http.Request)
		want bool
	}{
		{"a call", echo, nil, true},
		{"a string id", rawCall{name: "echo", args: `{"message":"hi"}`, id: `"x"`}, nil, true},
		{"invalid arguments (answered in band)", rawCall{name: "echo", args: `{"count":"x"}`}, nil, true},
		{"a null id", rawCall{name: "echo", id: "null"}, nil, false},
		{"an object id", rawCall{name: "echo", id: `{"a":1}`}, nil, false},
		{"a progress token", rawCall{name: "echo", meta: `,"progressToken":1`}, nil, false},
		{"a task", rawCall{name: "echo", extra: `,"task":{}`}, nil, false},
		{"a retry with input", rawCall{name: "echo", extra: `,"inputResponses":{"a":{}}`}, nil, false},
		{"request state", rawCall{name: "echo", extra: `,"requestState":"s"`}, nil, false},
		{"a gated tool", rawCall{name: gated, args: `{}`}, nil, false},
		{"an unknown tool", rawCall{name: "nope"}, nil, false},
		{"a session id", echo, func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "s") }, false},
		{"Last-Event-ID", echo, func(r *http.Request) { r.Header.Set(mcp.HeaderLastEventID, "1") }, false},
		{"no protocol header", echo, func(r *http.Request) { r.Header.Del(mcp.HeaderProtocolVersion) }, false},
		{"another protocol header", echo, func(r *http.Request) { r.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION) }, false},
		{"a wrong Mcp-Name", echo, func(r *http.Request) { r.Header.Set(mcp.HeaderName, "fail") }, false},
		{"no Mcp-Method", echo, func(r *http.Request) { r.Header.Del(mcp.HeaderMethod) }, false},
		{"text/plain", echo, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, false},
		{"a GET", echo, func(r *http.Request) { r.Method = http.MethodGet }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.q.body())
			r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
			r.Header.Set(mcp.HeaderMethod, "tools/call")
			r.Header.Set(mcp.HeaderName, tt.q.name)
			if tt.edit != nil {
				tt.edit(r)
			}
			w := httptest.NewRecorder()
			if got := s.router.ServeToolsCall(w, r, body, ""); got != tt.want {
				t.Fatalf("taken: got %v, want %v", got, tt.want)
			}
			if !tt.want && (w.Body.Len() > 0 || len(w.Header()) > 0) {
				t.Errorf("left to mcp-go, but wrote %v %q", w.Header(), w.Body.Bytes())
			}
			if tt.want && (w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"resultType":"complete"`))) {
				t.Errorf("got %d %s, want a result", w.Code, w.Body.Bytes())
			}
		})
	}
}

// TestCommandResultBytes checks that a command's result, whose
// structuredContent is written from the text's bytes, marshals as it
// would from the result itself.
func TestCommandResultBytes(t *testing.T) {
	for _, r := range []tool.CommandResult{
		{Command: "app echo -- hi", Output: "hi\n"},
		{Command: "app say '<b> & </b>'", ExitCode: 3, Output: "<b> & \u2028 \u2029 \x00 \xff ünï", Truncated: true},
		{},
	} {
		res := ranResult(tool.Outcome{Result: &r})
		got, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		res.RawStructuredContent = nil
		want, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%+v: got\n%s\nwant\n%s", r, got, want)
		}
	}
}
