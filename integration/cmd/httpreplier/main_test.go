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

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
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
	url := start(t, options{listen: "127.0.0.1:0", payload: path})

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

	if err := run(t.Context(), options{listen: "127.0.0.1:0"}, io.Discard); err == nil {
		t.Error("run without a payload: got nil, want an error")
	}
	if err := run(t.Context(), options{listen: "127.0.0.1:0", payload: filepath.Join(t.TempDir(), "missing")}, io.Discard); err == nil {
		t.Error("run with a missing payload: got nil, want an error")
	}
}

// TestRelay sends one NATS request of the relayed bytes per POST, to a
// real server, and answers with the payload once its reply is in; with
// nobody answering, the POST fails with 502 rather than the payload. A
// relay missing a flag, or a relay flag without the URL, does not start.
func TestRelay(t *testing.T) {
	dir := t.TempDir()
	payload := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi\n"}]}}` + "\n")
	request := []byte(`{"name":"echo","input":{"message":"hi"}}`)
	paths := map[string][]byte{"reply.json": payload, "request.json": request}
	for name, data := range paths {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	got := make(chan []byte, 10)
	sub, err := nc.Subscribe("floor.echo", func(m *nats.Msg) {
		got <- m.Data
		_ = m.Respond([]byte(`{"output":"hi\n"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	o := options{listen: "127.0.0.1:0", payload: filepath.Join(dir, "reply.json"),
		relayURL: ns.URL(), relaySubject: "floor.echo", relayRequest: filepath.Join(dir, "request.json")}
	url := start(t, o)

	for i := range 3 {
		resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, payload) {
			t.Errorf("POST %d: got %d %q, want 200 and the payload", i, resp.StatusCode, body)
		}
		select {
		case data := <-got:
			if !bytes.Equal(data, request) {
				t.Errorf("POST %d relayed %q, want %q", i, data, request)
			}
		default:
			t.Errorf("POST %d was answered without a relayed request", i)
		}
	}
	if len(got) != 0 {
		t.Errorf("%d more requests relayed than POSTs", len(got))
	}

	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "floor.echo") {
		t.Errorf("POST with nobody answering the relay: got %d %q, want 502 naming the subject", resp.StatusCode, body)
	}

	for name, bad := range map[string]options{
		"no subject":           {relayURL: ns.URL(), relayRequest: o.relayRequest},
		"no request":           {relayURL: ns.URL(), relaySubject: "floor.echo"},
		"missing request file": {relayURL: ns.URL(), relaySubject: "floor.echo", relayRequest: filepath.Join(dir, "missing")},
		"subject without url":  {relaySubject: "floor.echo", relayRequest: o.relayRequest},
	} {
		bad.listen, bad.payload = "127.0.0.1:0", o.payload
		if err := run(t.Context(), bad, io.Discard); err == nil {
			t.Errorf("run with %s: got nil, want an error", name)
		}
	}
}

// start runs httpreplier with o until the test ends and returns its URL.
func start(t *testing.T, o options) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := &fisktest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, o, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: got %v, want nil after cancel", err)
		}
	})
	fisktest.WaitFor(t, 10*time.Second, "httpreplier to print its ready line", func() bool {
		return strings.HasPrefix(ready.String(), readyPrefix)
	})
	return strings.TrimSpace(strings.TrimPrefix(ready.String(), readyPrefix))
}
