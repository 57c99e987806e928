package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestRun answers requests with the payload file's bytes, whatever the
// request holds, and refuses to start without a subject or a payload.
func TestRun(t *testing.T) {
	ns := natstest.Start(t)
	payload := []byte(`{"protocol":"io.choria.fisk-ai.v1.discovery.reply","name":"x"}` + "\n\x00binary")
	path := filepath.Join(t.TempDir(), "reply.bin")
	if err := os.WriteFile(path, payload, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	ready := &fisktest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, ns.URL(), "floor.test", path, ready) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: got %v, want nil after cancel", err)
		}
	})
	fisktest.WaitFor(t, 10*time.Second, "natsreplier to print ready", func() bool {
		return strings.TrimSpace(ready.String()) == readyLine
	})

	nc := ns.Connect(t)
	for _, req := range [][]byte{nil, []byte("anything"), bytes.Repeat([]byte("x"), 4096)} {
		msg, err := nc.Request("floor.test", req, 10*time.Second)
		if err != nil {
			t.Fatalf("request of %d bytes: %v", len(req), err)
		}
		if !bytes.Equal(msg.Data, payload) {
			t.Errorf("reply to %d bytes: got %q, want %q", len(req), msg.Data, payload)
		}
	}

	tests := []struct {
		name, subject, payload, wantErr string
	}{
		{"no subject", "", path, "--subject and --payload are required"},
		{"no payload", "floor.test", "", "--subject and --payload are required"},
		{"missing payload file", "floor.test", filepath.Join(t.TempDir(), "none"), "reading the payload: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), ns.URL(), tt.subject, tt.payload, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run: got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
