package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// TestRun answers every POST with the payload file's bytes, whatever the
// request holds, refuses other methods and a body over the cap, and
// refuses to start without a payload.
func TestRun(t *testing.T) {
	payload := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n")
	path := filepath.Join(t.TempDir(), "reply.json")
	if err := os.WriteFile(path, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := &fisktest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, "127.0.0.1:0", path, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: got %v, want nil after cancel", err)
		}
	})
	fisktest.WaitFor(t, 10*time.Second, "httpreplier to print its ready line", func() bool {
		return strings.HasPrefix(ready.String(), readyPrefix)
	})
	url := strings.TrimSpace(strings.TrimPrefix(ready.String(), readyPrefix))

	for _, body := range [][]byte{nil, []byte(`{"jsonrpc":"2.0"}`), bytes.Repeat([]byte("x"), 64<<10)} {
		resp, err := http.Post(url+"/mcp", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST of %d bytes: %v", len(body), err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, payload) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("POST of %d bytes: got %d %q (%s), want 200 and the payload as JSON", len(body), resp.StatusCode, got, resp.Header.Get("Content-Type"))
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: got %d, want 405", resp.StatusCode)
	}
	resp, err = http.Post(url, "application/json", bytes.NewReader(bytes.Repeat([]byte("x"), maxBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized POST: got %d, want 413", resp.StatusCode)
	}

	if err := run(t.Context(), "127.0.0.1:0", "", io.Discard); err == nil {
		t.Error("run without a payload: got nil, want an error")
	}
	if err := run(t.Context(), "127.0.0.1:0", filepath.Join(t.TempDir(), "missing"), io.Discard); err == nil {
		t.Error("run with a missing payload: got nil, want an error")
	}
}
