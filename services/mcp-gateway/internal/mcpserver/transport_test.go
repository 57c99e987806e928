package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// rawClient speaks the session-based era of streamable HTTP with plain
// net/http, as curl would: every status and header is the server's own.
type rawClient struct {
	tb  testing.TB
	url string
}

// do sends method with body and headers, returning the response with its
// body read.
func (c rawClient) do(method string, body []byte, header map[string]string) (*http.Response, string) {
	c.tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.tb.Context(), method, c.url, rd)
	if err != nil {
		c.tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.tb.Fatalf("%s %s: %v", method, c.url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// initialize opens a session and returns its id.
func (c rawClient) initialize(header map[string]string) string {
	c.tb.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, text := c.do(http.MethodPost, []byte(body), header)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		c.tb.Fatalf("initialize: got HTTP %d session %q %q, want 200 and a session", resp.StatusCode, id, cut(text))
	}
	h := map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION}
	for k, v := range header {
		h[k] = v
	}
	if resp, text := c.do(http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), h); resp.StatusCode != http.StatusAccepted {
		c.tb.Fatalf("notifications/initialized: got HTTP %d %q, want 202", resp.StatusCode, cut(text))
	}
	return id
}

// session POSTs body in session id and checks the status.
func (c rawClient) session(id, body string, want int) string {
	c.tb.Helper()
	resp, text := c.do(http.MethodPost, []byte(body), map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	if resp.StatusCode != want {
		c.tb.Fatalf("POST %s in session %s: got HTTP %d %q, want %d", body, id, resp.StatusCode, cut(text), want)
	}
	return text
}

const rawPing = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

func TestOrigin(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServerEdge(t, Config{}, edge{origins: []string{"https://console.example.com"}}, app.Tools())
	c := rawClient{t, url}
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	tests := []struct {
		name   string
		origin string
		want   int
	}{
		{"no Origin (not a browser)", "", http.StatusOK},
		{"the gateway's own address", "http://127.0.0.1:" + port, http.StatusOK},
		{"the gateway's own address as localhost", "http://localhost:" + port, http.StatusOK},
		{"an allowed origin", "https://console.example.com", http.StatusOK},
		{"a foreign origin", "http://evil.example.com", http.StatusForbidden},
		{"loopback on another port", "http://127.0.0.1:1", http.StatusForbidden},
		{"the allowed origin over http", "http://console.example.com", http.StatusForbidden},
		{"null", "null", http.StatusForbidden},
		{"empty", " ", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.origin != "" {
				h["Origin"] = tt.origin
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
			resp, text := c.do(http.MethodPost, []byte(body), h)
			if resp.StatusCode != tt.want {
				t.Errorf("got HTTP %d %q, want %d", resp.StatusCode, cut(text), tt.want)
			}
			if tt.want == http.StatusForbidden && !strings.Contains(text, "expose.agent.mcp.allowed_origins") {
				t.Errorf("got %q, want the refusal to name expose.agent.mcp.allowed_origins", text)
			}
		})
	}
}

func TestSessionRules(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	c := rawClient{t, url}
	legacy := mcp.LATEST_LEGACY_PROTOCOL_VERSION

	id := c.initialize(nil)
	c.session(id, rawPing, http.StatusOK)
	if resp, text := c.do(http.MethodDelete, nil, map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": legacy}); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: got HTTP %d %q, want 200", resp.StatusCode, text)
	}
	tests := []struct {
		name   string
		method string
		body   string
		header map[string]string
		want   int
	}{
		{"GET with a deleted session", http.MethodGet, "", map[string]string{"Mcp-Session-Id": id}, http.StatusNotFound},
		{"POST with a deleted session", http.MethodPost, rawPing, map[string]string{"Mcp-Session-Id": id}, http.StatusNotFound},
		{"DELETE of a deleted session", http.MethodDelete, "", map[string]string{"Mcp-Session-Id": id}, http.StatusNotFound},
		{"GET with a session never issued", http.MethodGet, "", map[string]string{"Mcp-Session-Id": "mcp-session-0123456789abcdef0123456789abcdef"}, http.StatusNotFound},
		{"GET without a session", http.MethodGet, "", nil, http.StatusBadRequest},
		{"POST other than initialize without a session", http.MethodPost, rawPing, nil, http.StatusBadRequest},
		{"notification without a session", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, http.StatusBadRequest},
		{"DELETE without a session", http.MethodDelete, "", nil, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Mcp-Protocol-Version": legacy}
			for k, v := range tt.header {
				h[k] = v
			}
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			resp, text := c.do(tt.method, body, h)
			if resp.StatusCode != tt.want {
				t.Errorf("got HTTP %d %q, want %d", resp.StatusCode, cut(text), tt.want)
			}
		})
	}

	t.Run("a live session keeps working", func(t *testing.T) {
		other := c.initialize(nil)
		c.session(other, rawPing, http.StatusOK)
	})
}

func TestSessionIdleTimeout(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	const idle = 300 * time.Millisecond
	s, url := startServer(t, Config{SessionIdleTimeout: idle}, app.Tools())
	c := rawClient{t, url}

	abandoned := c.initialize(nil)
	fisktest.WaitFor(t, 10*time.Second, "the abandoned session to expire", func() bool { return s.router.Sessions.Count() == 0 })
	c.session(abandoned, rawPing, http.StatusNotFound)

	// A session whose event stream is open is in use, however long it is
	// quiet; it expires only once the stream closes.
	listening := c.initialize(nil)
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", listening)
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: got %v %v, want 200", resp, err)
	}
	deadline := time.Now().Add(5 * idle)
	for time.Now().Before(deadline) {
		if s.router.Sessions.Count() != 1 {
			t.Fatalf("a session with an open stream expired")
		}
		time.Sleep(idle / 3)
	}
	cancel()
	resp.Body.Close()
	fisktest.WaitFor(t, 10*time.Second, "the session to expire once its stream closed", func() bool { return s.router.Sessions.Count() == 0 })
	c.session(listening, rawPing, http.StatusNotFound)
}

func TestSessionCap(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{MaxSessions: 3}, app.Tools())
	c := rawClient{t, url}
	var ids []string
	for range 3 {
		ids = append(ids, c.initialize(nil))
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, text := c.do(http.MethodPost, []byte(body), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(text, "expose.agent.mcp.max_sessions") {
		t.Errorf("initialize beyond the cap: got HTTP %d %q, want 503 naming expose.agent.mcp.max_sessions", resp.StatusCode, text)
	}
	for _, id := range ids {
		c.session(id, rawPing, http.StatusOK)
	}
	// Deleting one makes room.
	c.do(http.MethodDelete, nil, map[string]string{"Mcp-Session-Id": ids[0], "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	c.initialize(nil)
}

// TestCancelledCallGetsNoResponse cancels a running call: its process group
// is killed (the grandchild that ignores SIGTERM too) and no JSON-RPC
// response for it is sent.
func TestCancelledCallGetsNoResponse(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	c := rawClient{t, url}
	id := c.initialize(nil)
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"spawn","arguments":{"duration":"1m","pidfile":%q}}}`, pidfile)

	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		var all strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
		}
		answered <- answer{resp.StatusCode, all.String()}
	}()

	pid := fisktest.WaitPIDFile(t, pidfile)
	c.session(id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"call-1","reason":"user pressed stop"}}`, http.StatusAccepted)

	select {
	case a := <-answered:
		if strings.Contains(a.body, `"id":"call-1"`) {
			t.Errorf("cancelled call: got a response %q (HTTP %d), want none", a.body, a.status)
		}
		if a.status != http.StatusAccepted && a.status != http.StatusOK {
			t.Errorf("cancelled call: got HTTP %d %q, want the POST to end without a response", a.status, a.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call's POST did not end within 30s")
	}
	fisktest.WaitFor(t, 10*time.Second, "the SIGTERM-ignoring grandchild to die", func() bool { return fisktest.ProcessGone(pid) })

	// The session goes on: the next call is answered.
	text := c.session(id, `{"jsonrpc":"2.0","id":"call-2","method":"tools/call","params":{"name":"echo","arguments":{"message":"after"}}}`, http.StatusOK)
	if !strings.Contains(text, `"id":"call-2"`) || !strings.Contains(text, `after\n`) {
		t.Errorf("next call: got %q, want its answer", text)
	}
}

// TestCORS shows a page of an allowed origin getting what a browser needs
// to use the gateway from another origin: a preflight answered without a
// token, and answers it may read, with the session and challenge headers
// exposed. Other origins get none of it.
func TestCORS(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServerEdge(t, Config{AuthToken: "tok"}, edge{origins: []string{"https://console.example.com"}}, app.Tools())
	send := func(method, origin string, h map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", origin)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	pre := send(http.MethodOptions, "https://console.example.com", map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization, content-type, mcp-session-id",
	})
	if pre.StatusCode != http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Origin") != "https://console.example.com" ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: got %d with %v, want 204 allowing the origin, POST and Authorization", pre.StatusCode, pre.Header)
	}

	// 2026-07-28 sends Mcp-Method and Mcp-Name on every POST, and an
	// Mcp-Param-NAME per header-bound argument, whose names no fixed list
	// can hold: each one asked for is allowed, a malformed one is not.
	modern := send(http.MethodOptions, "https://console.example.com", map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "content-type,mcp-method,mcp-name,mcp-param-region,mcp-protocol-version,mcp-param-bad name",
	})
	allowed := strings.Split(strings.ToLower(modern.Header.Get("Access-Control-Allow-Headers")), ", ")
	for _, want := range []string{"content-type", "mcp-method", "mcp-name", "mcp-param-region", "mcp-protocol-version", "authorization"} {
		if !slices.Contains(allowed, want) {
			t.Errorf("2026-07-28 preflight: got Access-Control-Allow-Headers %q, want %s among them", modern.Header.Get("Access-Control-Allow-Headers"), want)
		}
	}
	if slices.Contains(allowed, "mcp-param-bad name") {
		t.Errorf("2026-07-28 preflight: got %q, want the malformed header name left out", allowed)
	}

	// Without the token: the 401 is readable, and so is its challenge.
	unauth := send(http.MethodPost, "https://console.example.com", nil)
	if unauth.StatusCode != http.StatusUnauthorized || unauth.Header.Get("Access-Control-Allow-Origin") != "https://console.example.com" ||
		!strings.Contains(unauth.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") ||
		!strings.Contains(unauth.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Errorf("unauthenticated: got %d with %v, want 401 readable by the page, exposing the challenge and the session id", unauth.StatusCode, unauth.Header)
	}

	foreign := send(http.MethodOptions, "https://evil.example.com", map[string]string{"Access-Control-Request-Method": "POST"})
	if foreign.StatusCode != http.StatusForbidden || foreign.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("foreign preflight: got %d with %v, want 403 and no CORS headers", foreign.StatusCode, foreign.Header)
	}
}
