package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// chunks collects a streamed call's output pieces as they arrive.
type chunks struct {
	mu     sync.Mutex // guards pieces, firstAt
	pieces []string
	first  chan struct{}
}

func newChunks() *chunks { return &chunks{first: make(chan struct{})} }

func (c *chunks) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pieces) == 0 {
		close(c.first)
	}
	c.pieces = append(c.pieces, s)
}

func (c *chunks) joined() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.pieces, "")
}

func TestStreamTicker(t *testing.T) {
	_, c, _ := serveDemo(t, server.Config{}, fiskapp.Options{})
	if ok, err := c.Streams(t.Context(), "demo"); err != nil || !ok {
		t.Fatalf("Streams: got %v, %v, want the card to list %s", ok, err, a2a.ProtocolEvent)
	}
	input := json.RawMessage(`{"every":"300ms","count":5}`)
	got := newChunks()
	done := make(chan *a2a.ToolReply, 1)
	go func() {
		reply, err := c.StreamTool(context.Background(), "demo", "ticker", input, got.add)
		if err != nil {
			t.Errorf("StreamTool: %v", err)
		}
		done <- reply
	}()
	select {
	case <-got.first:
		select {
		case <-done:
			t.Errorf("the first output came with the final reply, want it while the command runs")
		default:
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no output within 20s")
	}
	reply := <-done
	if reply == nil {
		t.FailNow()
	}
	if got.joined() != reply.Output {
		t.Errorf("chunks: got %q, want the final output %q", got.joined(), reply.Output)
	}
	unary := callTool(t, c, "demo", "ticker", string(input))
	cr, ok := reply.CommandResult()
	ucr, uok := unary.CommandResult()
	if !ok || !uok || cr != ucr {
		t.Errorf("streamed result %+v, want the unary one %+v", cr, ucr)
	}
}

func TestStreamCancelKillsGroup(t *testing.T) {
	_, c, _ := serveDemo(t, server.Config{}, fiskapp.Options{})
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var reply *a2a.ToolReply
	go func() {
		var err error
		reply, err = c.StreamTool(ctx, "demo", "spawn", json.RawMessage(`{"duration":"1m","pidfile":`+strconv.Quote(pidfile)+`}`), nil)
		done <- err
	}()
	var pid int
	fisktest.WaitFor(t, 20*time.Second, "the grandchild to start", func() bool {
		raw, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(raw))
		return err == nil
	})
	cancel()
	select {
	case err := <-done:
		if err == nil || reply == nil || !reply.IsError || !strings.Contains(reply.Output, "canceled") {
			t.Errorf("got reply %+v, error %v, want a final reply saying canceled and ctx's error", reply, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no final reply within 30s of the cancel")
	}
	fisktest.WaitFor(t, 10*time.Second, "the SIGTERM-ignoring grandchild to die", func() bool { return processGone(pid) })
	// The slot is free again.
	if r := callTool(t, c, "demo", "echo", `{"message":"after"}`); r.IsError || r.Output != "after\n" {
		t.Errorf("after the cancel: got %+v, want the echo", r)
	}
}

// processGone reports whether pid no longer runs (a zombie counts).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(stat)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
