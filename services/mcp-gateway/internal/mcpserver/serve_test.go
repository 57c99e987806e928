package mcpserver

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// TestServeShutdown holds a GET event stream open and shows a cancelled
// serve returns well within its shutdown budget, ending the stream.
func TestServeShutdown(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	s, err := New(Config{Identity: "demo", Logger: testLogger(t)}, app.Tools())
	if err != nil {
		t.Fatalf("building: %v", err)
	}
	addr, cancel, served := serveLoopback(t, s, edge{})
	url := "http://" + addr + "/mcp"

	// A session-based client's initialize, then its standalone GET stream.
	sessionID := initSession(t, url)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("opening the event stream: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("got HTTP %d %q, want an open event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
	}()

	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("got %v from serve, want a clean stop", err)
		}
	case <-time.After(ShutdownTimeout + time.Second):
		t.Fatalf("serve still running %s after cancel, want it back within the %s budget", time.Since(start), ShutdownTimeout)
	}
	if d := time.Since(start); d >= ShutdownTimeout {
		t.Errorf("got shutdown in %s, want it before the %s budget runs out", d, ShutdownTimeout)
	}
	select {
	case <-streamEnded:
	case <-time.After(5 * time.Second):
		t.Error("got the event stream still open after shutdown, want it ended")
	}
}

// initSession initialises a session-based client by hand and returns its
// session id.
func initSession(tb testing.TB, url string) string {
	tb.Helper()
	req, _ := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("initialising: %v", err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		tb.Fatalf("got no Mcp-Session-Id from initialize (HTTP %d)", resp.StatusCode)
	}
	req, _ = http.NewRequestWithContext(tb.Context(), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("sending initialized: %v", err)
	}
	resp.Body.Close()
	return id
}
