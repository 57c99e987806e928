package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
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
	pid := fisktest.WaitPIDFile(t, pidfile)
	cancel()
	select {
	case err := <-done:
		if err == nil || reply == nil || !reply.IsError || !strings.Contains(reply.Output, "canceled") {
			t.Errorf("got reply %+v, error %v, want a final reply saying canceled and ctx's error", reply, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no final reply within 30s of the cancel")
	}
	fisktest.WaitFor(t, 10*time.Second, "the SIGTERM-ignoring grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
	// The slot is free again.
	if r := callTool(t, c, "demo", "echo", `{"message":"after"}`); r.IsError || r.Output != "after\n" {
		t.Errorf("after the cancel: got %+v, want the echo", r)
	}
}

// TestStreamHostileInput sends what a hostile or confused peer might on the
// stream and control subjects: each is rejected or ignored with a logged
// reason, a stream in progress is not disturbed, and the agent keeps
// serving.
func TestStreamHostileInput(t *testing.T) {
	var logs fisktest.Buffer
	cfg := server.Config{Instance: "inst-a", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ns, c, _ := serveDemo(t, cfg, fiskapp.Options{})
	nc := ns.Connect(t)
	// The stream's request, as it crosses the bus: its id is what a
	// cancel names.
	snoop, err := nc.SubscribeSync(natsbus.StreamSubject("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// A stream in progress, for the cancels below to aim at.
	got := newChunks()
	done := make(chan *a2a.ToolReply, 1)
	go func() {
		r, err := c.StreamTool(context.Background(), "demo", "ticker", json.RawMessage(`{"every":"200ms","count":10}`), got.add)
		if err != nil {
			t.Errorf("the stream under attack: %v", err)
		}
		done <- r
	}()
	<-got.first
	seen, err := snoop.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req := &a2a.ToolRequest{}
	if err := a2a.Decode(seen.Data, req); err != nil {
		t.Fatal(err)
	}
	id := req.ID
	_ = snoop.Unsubscribe()

	control := natsbus.ControlSubject("demo", "inst-a")
	tests := []struct {
		name    string
		subject string
		data    []byte
		wantLog string
	}{
		{"cancel for an unknown id", control, cancelFrom(t, "tester", "no-such-stream"), "ignored a cancel for no call in progress"},
		{"cancel from a forged sender", control, cancelFrom(t, "mallory", id), "ignored a cancel from another caller than the call's"},
		{"malformed control message", control, []byte(`{"protocol":`), "ignored a malformed control message"},
		{"mislabelled control message", control, mustJSON(t, validRequest(t, "demo", "echo", `{}`)), "ignored a malformed control message"},
		{"oversized control message", control, make([]byte, a2a.MaxMessageSize+1), "ignored a malformed control message"},
		{"cancel sent to another instance", natsbus.ControlSubject("demo", "inst-b"), cancelFrom(t, "tester", id), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(logs.String(), tt.wantLog)
			if err := nc.Publish(tt.subject, tt.data); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if tt.wantLog != "" {
				fisktest.WaitFor(t, 10*time.Second, "the log line "+tt.wantLog, func() bool { return strings.Count(logs.String(), tt.wantLog) > before })
			}
		})
	}

	// Malformed requests on the stream subject get a transport error.
	for _, body := range [][]byte{[]byte(`not json`), mustJSON(t, map[string]any{"protocol": a2a.ProtocolCancel}), make([]byte, a2a.MaxMessageSize+1)} {
		msg, err := nc.Request(natsbus.StreamSubject("demo"), body, 10*time.Second)
		if err != nil {
			t.Fatalf("malformed stream request: %v", err)
		}
		if msg.Header.Get("Nats-Service-Error-Code") == "" {
			t.Errorf("malformed stream request %.40q: got %q, want a micro error header", body, msg.Data)
		}
	}
	// An unknown tool on the stream subject is refused in-band, as the
	// ack's whole answer.
	r, err := c.StreamTool(t.Context(), "demo", "nosuch", nil, nil)
	if err != nil || !r.IsError || !strings.Contains(r.Output, `unknown tool "nosuch"`) {
		t.Errorf("unknown tool: got %+v, %v, want an in-band refusal", r, err)
	}

	r = <-done
	if r == nil || r.IsError || !strings.HasSuffix(r.Output, "tick 10 of 10\n") {
		t.Errorf("the stream under attack: got %+v, want it to run to its end", r)
	}
	if r := callTool(t, c, "demo", "echo", `{"message":"still"}`); r.Output != "still\n" {
		t.Errorf("after the attack: got %+v, want the echo", r)
	}
}

// streamMessages sends a stream request for name with input over a bare
// transport and returns every message of the stream, decoded, with when
// each arrived.
func streamMessages(t *testing.T, tr *natsbus.Transport, name, input string) ([]a2a.Message, []time.Time) {
	t.Helper()
	data, err := a2a.Encode(a2a.NewToolRequest(a2a.Participant{Name: "tester"}, "demo", name, json.RawMessage(input)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := tr.OpenStream(t.Context(), "demo", data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var msgs []a2a.Message
	var at []time.Time
	for {
		raw, err := s.Next(t.Context(), 20*time.Second)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(msgs), err)
		}
		var m a2a.Message
		switch {
		case strings.Contains(string(raw), a2a.ProtocolAck):
			m = &a2a.Ack{}
		case strings.Contains(string(raw), a2a.ProtocolEvent):
			m = &a2a.Event{}
		default:
			m = &a2a.ToolReply{}
		}
		if err := a2a.Decode(raw, m); err != nil {
			t.Fatalf("message %d %s: %v", len(msgs), raw, err)
		}
		msgs, at = append(msgs, m), append(at, time.Now())
		if _, ok := m.(*a2a.ToolReply); ok {
			return msgs, at
		}
	}
}

// TestStreamAckFirst checks the wire order of a quick command and of a
// silent one, whose ack does not wait for its end: ack (accepted, naming
// the instance) first, sequence numbers from 1 without a gap, the output
// events adding up to the final reply's output.
func TestStreamAckFirst(t *testing.T) {
	ns, _, _ := serveDemo(t, server.Config{Instance: "inst-a"}, fiskapp.Options{})
	tr := natsbus.NewTransport(ns.Connect(t))
	for _, tt := range []struct{ name, input string }{
		{"echo", `{"message":"hi"}`},
		{"sleep", `{"duration":"3s"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs, at := streamMessages(t, tr, tt.name, tt.input)
			ack, ok := msgs[0].(*a2a.Ack)
			if !ok || !ack.Accepted || ack.Sender.Instance != "inst-a" {
				t.Fatalf("first message: got %+v, want an accepted ack naming inst-a", msgs[0])
			}
			var out strings.Builder
			for i, m := range msgs {
				if seq := headerOf(m).Sequence; seq != uint64(i+1) {
					t.Errorf("message %d: sequence %d, want %d", i, seq, i+1)
				}
				if ev, ok := m.(*a2a.Event); ok {
					if text, ok := ev.Block.Content.(*a2a.TextBlock); ok {
						out.WriteString(text.Text)
					}
				}
			}
			reply := msgs[len(msgs)-1].(*a2a.ToolReply)
			if reply.IsError || out.String() != reply.Output {
				t.Errorf("output events %q, final reply %+v", out.String(), reply)
			}
			if tt.name == "sleep" && at[len(at)-1].Sub(at[0]) < time.Second {
				t.Errorf("the ack of a 3s silent command came %s before its reply, want it at the start", at[len(at)-1].Sub(at[0]))
			}
		})
	}
}

func headerOf(m a2a.Message) a2a.Header {
	switch m := m.(type) {
	case *a2a.Ack:
		return m.Header
	case *a2a.Event:
		return m.Header
	case *a2a.ToolReply:
		return m.Header
	}
	return a2a.Header{}
}

// TestStreamCancelBeforeAck gives up on a streamed call before anything of
// it arrived (its context is cancelled from the start): the caller waits a
// moment for the ack, which is on its way, and cancels then, so the
// command is stopped at once and the final reply says so, instead of the
// agent finding out at its first heartbeat.
func TestStreamCancelBeforeAck(t *testing.T) {
	_, c, _ := serveDemo(t, server.Config{}, fiskapp.Options{})
	if ok, err := c.Streams(t.Context(), "demo"); err != nil || !ok {
		t.Fatalf("Streams: got %v, %v", ok, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	reply, err := c.StreamTool(ctx, "demo", "sleep", json.RawMessage(`{"duration":"1m"}`), nil)
	if !errors.Is(err, context.Canceled) || reply == nil || !reply.IsError || !strings.Contains(reply.Output, "canceled") {
		t.Fatalf("got reply %+v, error %v, want the final reply saying canceled and ctx's error", reply, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the canceled call took %s", d)
	}
	// The slot is free again.
	if r := callTool(t, c, "demo", "echo", `{"message":"after"}`); r.IsError || r.Output != "after\n" {
		t.Errorf("after the cancel: got %+v, want the echo", r)
	}
}
