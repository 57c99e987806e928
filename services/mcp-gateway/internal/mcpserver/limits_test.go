package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// spanTool wraps a tool and records when each call ran, to show from the
// calls themselves (not from timing thresholds) whether they overlapped.
type spanTool struct {
	tool.Tool
	started chan struct{}
	mu      sync.Mutex // guards spans
	spans   [][2]time.Time
}

func (s *spanTool) Call(ctx context.Context, req tool.Request) (tool.Outcome, error) {
	start := time.Now()
	s.started <- struct{}{}
	out, err := s.Tool.Call(ctx, req)
	s.mu.Lock()
	s.spans = append(s.spans, [2]time.Time{start, time.Now()})
	s.mu.Unlock()
	return out, err
}

func TestConcurrencyCap(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	tests := []struct {
		name    string
		max     int
		overlap bool
	}{
		{name: "one slot runs the second after the first", max: 1, overlap: false},
		{name: "two slots run them together", max: 2, overlap: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := &spanTool{Tool: command(t, app, "sleep"), started: make(chan struct{}, 2)}
			_, url := startServer(t, Config{MaxConcurrent: tt.max}, []tool.Tool{spy})
			c := connect(t, url, legacyEra, nil)
			var wg sync.WaitGroup
			call := func() {
				defer wg.Done()
				if cr := commandResult(t, callTool(t, c, "sleep", map[string]any{"duration": "500ms"})); !strings.HasPrefix(cr.Output, "slept 500ms") {
					t.Errorf("got %q, want the sleep's report", cr.Output)
				}
			}
			wg.Add(1)
			go call()
			<-spy.started // the first is running; the second arrives meanwhile
			wg.Add(1)
			go call()
			wg.Wait()

			spans := spy.spans
			if len(spans) != 2 {
				t.Fatalf("got %d calls, want 2", len(spans))
			}
			slices.SortFunc(spans, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
			first, second := spans[0], spans[1]
			if got := second[0].Before(first[1]); got != tt.overlap {
				t.Errorf("got second start %s before first end %s = %t, want %t",
					second[0].Format(time.StampMicro), first[1].Format(time.StampMicro), got, tt.overlap)
			}
		})
	}
}

func TestToolTimeout(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Timeout: 500 * time.Millisecond}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	t.Run("in-band error naming the timeout", func(t *testing.T) {
		res := callTool(t, c, "sleep", map[string]any{"duration": "5s"})
		want := "sleep did not finish within the tool timeout of 500ms (expose.agent.mcp.tool_timeout); its process group was killed"
		if !res.IsError || resultText(res) != want {
			t.Errorf("got %q (error %t), want %q", resultText(res), res.IsError, want)
		}
	})

	t.Run("the whole process group is killed", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		res := callTool(t, c, "spawn", map[string]any{"duration": "1m", "pidfile": pidfile})
		if !res.IsError || !strings.Contains(resultText(res), "tool timeout") {
			t.Fatalf("got %q, want the timeout error", resultText(res))
		}
		raw, err := os.ReadFile(pidfile)
		if err != nil {
			t.Fatalf("reading the child's pid: %v", err)
		}
		pid, err := strconv.Atoi(string(raw))
		if err != nil {
			t.Fatalf("parsing the child's pid %q: %v", raw, err)
		}
		// The grandchild ignores SIGTERM; the group SIGKILL after the grace
		// must still reach it.
		fisktest.WaitFor(t, 10*time.Second, "the SIGTERM-ignoring grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
	})

	t.Run("the slot is free again", func(t *testing.T) {
		if cr := commandResult(t, callTool(t, c, "echo", map[string]any{"message": "after"})); cr.Output != "after\n" {
			t.Errorf("got %q, want the echo", cr.Output)
		}
	})
}

func TestBadInput(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	c := connect(t, url, legacyEra, nil)

	inBand := []struct {
		name string
		tool string
		args any
		want string
	}{
		{name: "wrong type", tool: "echo", args: map[string]any{"message": "x", "count": "abc"}, want: "invalid arguments for echo: at /count: got string, want integer"},
		{name: "array as arguments", tool: "echo", args: []any{"x"}, want: "invalid arguments for echo: input must be a JSON object, got an array"},
		{name: "string as arguments", tool: "echo", args: "x", want: "input must be a JSON object, got a string"},
		{name: "unknown property", tool: "echo", args: map[string]any{"message": "x", "bogus": 1}, want: "bogus"},
		{name: "hidden flag", tool: "echo", args: map[string]any{"message": "x", "trace": true}, want: "trace"},
		{name: "missing required", tool: "echo", args: map[string]any{}, want: "message"},
		{name: "gated tool checks before asking", tool: "deploy", args: map[string]any{"marker": 3}, want: "invalid arguments for deploy"},
	}
	for _, tt := range inBand {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, c, tt.tool, tt.args)
			if !res.IsError || !strings.Contains(resultText(res), tt.want) {
				t.Errorf("got %q (error %t), want an in-band error containing %q", resultText(res), res.IsError, tt.want)
			}
			stillServing(t, c)
		})
	}

	raw := []struct {
		name       string
		body       []byte
		wantStatus int
		wantBody   string
	}{
		{name: "malformed JSON-RPC", body: []byte(`{"jsonrpc":"2.0","id":1,"method":`), wantStatus: http.StatusBadRequest, wantBody: `"code":-32700`},
		{name: "oversized body", body: bytes.Repeat([]byte(" "), httpedge.DefaultMaxBodyBytes+1), wantStatus: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range raw {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, url, tt.body, nil)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("got HTTP %d %q, want %d containing %q", status, cut(body), tt.wantStatus, tt.wantBody)
			}
			stillServing(t, c)
		})
	}
}

// post sends body to url as an MCP POST with extra headers and returns the
// status and body.
func post(tb testing.TB, url string, body []byte, header map[string]string) (int, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("building the request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("posting: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

var pingBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)

func TestAccess(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	const token = "s3cret-token"
	_, url := startServer(t, Config{AuthToken: token}, app.Tools())

	tests := []struct {
		name       string
		header     map[string]string
		wantStatus int
	}{
		{name: "no token", wantStatus: http.StatusUnauthorized},
		{name: "wrong token", header: map[string]string{"Authorization": "Bearer nope"}, wantStatus: http.StatusUnauthorized},
		{name: "token as another scheme", header: map[string]string{"Authorization": "Basic " + token}, wantStatus: http.StatusUnauthorized},
		{name: "token prefix", header: map[string]string{"Authorization": "Bearer " + token[:5]}, wantStatus: http.StatusUnauthorized},
		{name: "DNS rebinding: loopback connection, foreign Host", header: map[string]string{"Authorization": "Bearer " + token, "Host": "evil.example"}, wantStatus: http.StatusForbidden},
		{name: "unknown session", header: map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": "mcp-session-00000000-0000-4000-8000-000000000000", "Mcp-Protocol-Version": mcp.LATEST_LEGACY_PROTOCOL_VERSION}, wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, url, pingBody, tt.header)
			if status != tt.wantStatus {
				t.Errorf("got HTTP %d %q, want %d", status, cut(body), tt.wantStatus)
			}
		})
	}

	t.Run("challenge", func(t *testing.T) {
		resp, err := http.Post(url, "application/json", bytes.NewReader(pingBody))
		if err != nil {
			t.Fatalf("posting: %v", err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("got WWW-Authenticate %q, want a Bearer challenge", got)
		}
	})

	t.Run("the real client with the token works", func(t *testing.T) {
		for _, e := range eras {
			c := connect(t, url, e, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})})
			if cr := commandResult(t, callTool(t, c, "echo", map[string]any{"message": e.name})); cr.Output != e.name+"\n" {
				t.Errorf("got %q, want the echo", cr.Output)
			}
		}
	})

	t.Run("the real client without it fails", func(t *testing.T) {
		tr, err := transport.NewStreamableHTTP(url)
		if err != nil {
			t.Fatalf("creating the transport: %v", err)
		}
		defer tr.Close()
		req := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(1), Method: "ping"}
		if _, err := tr.SendRequest(t.Context(), req); err == nil {
			t.Error("got a response without the token, want an error")
		}
	})
}

// TestCommandResultJSON pins the CommandResult shape the output schema
// promises.
func TestCommandResultJSON(t *testing.T) {
	b, _ := json.Marshal(tool.CommandResult{Command: "x", ExitCode: 1, Output: "o", Truncated: true})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	var schema struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(commandResultSchema, &schema)
	for _, k := range schema.Required {
		if _, ok := m[k]; !ok {
			t.Errorf("got CommandResult JSON %s, want the schema's required %q", b, k)
		}
	}
}

// TestSlowBody holds the gateway's server to its read timeout: a client
// that stops sending its body, or dribbles it faster than any single read
// would wait long but slower than the bound, gets 408 naming the bound on
// /mcp and a failed read on every other route; the gateway serves other
// clients meanwhile; and a call whose body has arrived runs for as long as
// its command does, past the bound, on either era, as does an event
// stream.
func TestSlowBody(t *testing.T) {
	const bound = 300 * time.Millisecond
	app := loadDemo(t, fiskapp.Options{})
	openRead := make(chan error, 4)
	s, err := New(Config{Identity: "demo", Logger: testLogger(t)}, app.Tools())
	if err != nil {
		t.Fatalf("building: %v", err)
	}
	host, _, _ := serveLoopback(t, s, edge{readTimeout: bound, open: map[string]http.Handler{"/form": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		openRead <- err
	})}})
	mcpURL := "http://" + host + "/mcp"
	c := connect(t, mcpURL, legacyEra, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"never"}}}`

	// send writes a POST of body to path on a new connection: the headers,
	// then the body by dribble, in the background. It returns the
	// connection's reader.
	send := func(t *testing.T, path string, dribble func(net.Conn, string)) *bufio.Reader {
		t.Helper()
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("dialing the gateway: %v", err)
		}
		t.Cleanup(func() { conn.Close() })
		// However the gateway behaves, the test ends.
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", path, host, len(body))
		go dribble(conn, body)
		return bufio.NewReader(conn)
	}
	stalled := func(conn net.Conn, body string) { _, _ = io.WriteString(conn, body[:len(body)/2]) }
	// dribbled sends a byte every tenth of the bound: no read waits long,
	// and the whole body would take about ten bounds.
	dribbled := func(conn net.Conn, body string) {
		for i := range len(body) {
			if _, err := io.WriteString(conn, body[i:i+1]); err != nil {
				return
			}
			time.Sleep(bound / 10)
		}
	}
	for _, tt := range []struct {
		name    string
		dribble func(net.Conn, string)
	}{
		{"stalled", stalled},
		{"dribbled", dribbled},
	} {
		t.Run(tt.name+" on /mcp", func(t *testing.T) {
			r := send(t, "/mcp", tt.dribble)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := "request timeout: the request did not arrive in full within 300ms"
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), want) {
				t.Errorf("got HTTP %d %q, want 408 saying %q", resp.StatusCode, b, want)
			}
			// The connection is not kept for another request: its body
			// never ended.
			if !resp.Close {
				t.Errorf("got a connection kept alive, want it closed")
			}
			// A reset, not only the end of file, closes it too: the
			// dribbler may still be writing when the gateway closes.
			if _, err := r.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("reading on after the answer: got %v, want the connection closed", err)
			}
			stillServing(t, c)
		})
		t.Run(tt.name+" on another route", func(t *testing.T) {
			r := send(t, "/form", tt.dribble)
			select {
			case err := <-openRead:
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("the handler's read of the body: got %v, want %v", err, os.ErrDeadlineExceeded)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("the handler's read of a stalled body did not end")
			}
			// The handler wrote nothing, so the answer is an empty 200,
			// unless the dribbler's next byte has reset the connection.
			if _, err := http.ReadResponse(r, nil); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("reading the answer: %v", err)
			}
		})
	}

	// The bound ends with the body: a call longer than it, then another
	// on the same connection.
	for _, e := range eras {
		t.Run("a call past the bound, "+e.name, func(t *testing.T) {
			c := connect(t, mcpURL, e, nil)
			for _, d := range []string{"1s", "10ms"} {
				if res := callTool(t, c, "sleep", map[string]any{"duration": d}); res.IsError {
					t.Errorf("sleep %s: got the error %q, want it to finish", d, resultText(res))
				}
			}
		})
	}
	t.Run("an event stream past the bound", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, mcpURL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", initSession(t, mcpURL))
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("opening the event stream: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got HTTP %d, want an open event stream", resp.StatusCode)
		}
		ended := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, resp.Body)
			ended <- err
		}()
		select {
		case err := <-ended:
			t.Errorf("the event stream ended after %s (%v), want it open", bound*5, err)
		case <-time.After(bound * 5):
		}
	})
}

// stillServing fails tb unless c's echo call is answered.
func stillServing(tb testing.TB, c *client.Client) {
	tb.Helper()
	if cr := commandResult(tb, callTool(tb, c, "echo", map[string]any{"message": "ok"})); cr.Output != "ok\n" {
		tb.Errorf("got %q from the following call, want the echo", cr.Output)
	}
}
