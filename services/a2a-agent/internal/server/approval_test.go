package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// gatedTools are a gated tool "gate", counting its runs, and an ungated
// "plain".
func gatedTools(tb testing.TB) (tools []tool.Tool, runs *atomic.Int32) {
	tb.Helper()
	runs = &atomic.Int32{}
	gate := funcTool(tb, tool.FuncSpec{
		Name: "gate", Description: "Changes something that matters",
		Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmRequired,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			runs.Add(1)
			return tool.Outcome{JSON: json.RawMessage(`{"gate":"ran"}`)}, nil
		},
	})
	plain := funcTool(tb, tool.FuncSpec{Name: "plain", Description: "Reads something", Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone})
	return []tool.Tool{gate, plain}, runs
}

// gatedServer serves gatedTools on an embedded NATS server with one slot,
// a 1s run timeout and operator approvals through a broker of instance
// inst-a that times out after timeout. It returns the server, the broker,
// the gated tool's run count and a client.
func gatedServer(tb testing.TB, timeout time.Duration) (*natstest.Server, *approval.Broker, *atomic.Int32, *a2a.Client) {
	tb.Helper()
	ns := natstest.Start(tb)
	nc := ns.Connect(tb)
	b, err := approval.NewBroker(nc, approval.Options{
		Identity: "demo", Instance: "inst-a",
		Config: approval.Config{Operator: true, Timeout: timeout},
		Logger: testLogger(tb),
	})
	if err != nil {
		tb.Fatal(err)
	}
	// Closed after the server stops (cleanups run last first).
	tb.Cleanup(func() { _ = b.Close() })
	tools, runs := gatedTools(tb)
	srv := newServer(tb, server.Config{Instance: "inst-a", MaxConcurrent: 1, Timeout: time.Second, Approvals: b}, tools)
	startServer(tb, srv, nc)
	return ns, b, runs, newClient(tb, ns.Connect(tb), "tester")
}

// waitPending waits until b waits on n requests and returns them.
func waitPending(tb testing.TB, b *approval.Broker, n int) []approval.Request {
	tb.Helper()
	fisktest.WaitFor(tb, 10*time.Second, "the approval requests", func() bool { return len(b.Pending()) == n })
	return b.Pending()
}

// TestApprovalCard serves a gated tool only with operator approvals on,
// its card description ending with the note that an operator approves it.
func TestApprovalCard(t *testing.T) {
	tools, _ := gatedTools(t)
	off := newServer(t, server.Config{}, tools)
	if names := cardNames(off.Card()); len(names) != 1 || names[0] != "plain" {
		t.Errorf("without approvals, card: got %v, want plain only", names)
	}
	if d := off.Dropped(); len(d) != 1 || d[0].Name != "gate" || !strings.Contains(d[0].Reason, "approvals.operator: true") {
		t.Errorf("without approvals, dropped: got %+v, want gate, naming approvals.operator", d)
	}

	_, _, _, c := gatedServer(t, time.Minute)
	card, err := c.Discover(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if names := cardNames(card.AgentCard); len(names) != 2 || names[0] != "gate" || names[1] != "plain" {
		t.Fatalf("with approvals, card: got %v, want gate and plain", names)
	}
	const note = "Needs an operator's approval: the call waits until an operator approves or denies it (a2a-agent approvals), or the approval times out, which denies it."
	if d := card.Tools[0].Description; !strings.HasPrefix(d, "Changes something that matters") || !strings.HasSuffix(d, note) {
		t.Errorf("gate's description: got %q, want its own, then the note", d)
	}
	if d := card.Tools[1].Description; strings.Contains(d, "operator") {
		t.Errorf("plain's description: got %q, want no approval note", d)
	}
}

// TestApprovalStream reads a gated stream off the wire: the ack at once,
// then a status event "awaiting operator approval (id …)" naming the
// request the broker waits on, and heartbeats saying the same while it
// waits; the only slot stays free meanwhile. The wait, longer than the
// run timeout, is not counted against it: once approved the tool runs,
// once.
func TestApprovalStream(t *testing.T) {
	t.Parallel()
	ns, b, runs, c := gatedServer(t, time.Minute)
	data, err := a2a.Encode(a2a.NewToolRequest(a2a.Participant{Name: "tester"}, "demo", "gate", json.RawMessage(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := natsbus.NewTransport(ns.Connect(t)).OpenStream(t.Context(), "demo", data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next := func(wait time.Duration) a2a.Message {
		t.Helper()
		raw, err := s.Next(t.Context(), wait)
		if err != nil {
			t.Fatal(err)
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
			t.Fatalf("%s: %v", raw, err)
		}
		return m
	}
	phase := func(m a2a.Message) string {
		if ev, ok := m.(*a2a.Event); ok {
			if st, ok := ev.Block.Content.(*a2a.StatusBlock); ok {
				return st.Phase
			}
		}
		return ""
	}

	if ack, ok := next(5 * time.Second).(*a2a.Ack); !ok || !ack.Accepted || ack.Sender.Instance != "inst-a" {
		t.Fatalf("first message: got %+v, want an accepted ack from inst-a", ack)
	}
	status := next(5 * time.Second)
	req := waitPending(t, b, 1)[0]
	want := "awaiting operator approval (id " + req.ID + ")"
	if got := phase(status); got != want {
		t.Fatalf("second message: got %+v (phase %q), want a status event %q", status, got, want)
	}
	if req.Tool != "gate" || req.Caller.Name != "tester" || !req.Caller.Claimed || req.Instance != "inst-a" {
		t.Errorf("request: got %+v, want gate for the claimed caller tester on inst-a", req)
	}

	// The one slot is free while the gated call waits.
	if r := callTool(t, c, "demo", "plain", `{}`); r.IsError {
		t.Errorf("an ungated call beside the waiting one: got %+v, want it run", r)
	}
	start := time.Now()
	if got := phase(next(a2a.HeartbeatInterval + 3*time.Second)); got != want {
		t.Errorf("heartbeat while waiting: got phase %q, want %q", got, want)
	}
	if waited := time.Since(start); waited < a2a.HeartbeatInterval-time.Second {
		t.Errorf("the heartbeat came %s after the status, want about %s", waited, a2a.HeartbeatInterval)
	}
	if runs.Load() != 0 {
		t.Fatalf("gate ran %d times before the approval, want 0", runs.Load())
	}

	if _, err := approval.Answer(t.Context(), ns.Connect(t), req, true, approval.Approver{Name: "alice"}, ""); err != nil {
		t.Fatal(err)
	}
	var reply *a2a.ToolReply
	for reply == nil {
		switch m := next(5 * time.Second).(type) {
		case *a2a.ToolReply:
			reply = m
		case *a2a.Event:
			if p := phase(m); p != "" && p != "running" {
				t.Errorf("after the approval: got status %q, want running or output", p)
			}
		}
	}
	if reply.IsError || !strings.Contains(reply.Output, `"gate":"ran"`) {
		t.Errorf("final reply: got %+v, want the gate's result (the wait of over 5s is outside the 1s run timeout)", reply)
	}
	if runs.Load() != 1 {
		t.Errorf("gate ran %d times, want once", runs.Load())
	}
}

// TestApprovalRefused leaves the gated tool not run when its request is
// denied (unary), times out, or its stream is cancelled (which withdraws
// the request), each answered in-band.
func TestApprovalRefused(t *testing.T) {
	t.Parallel()
	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		ns, b, runs, c := gatedServer(t, time.Minute)
		done := goCall(t, c, "demo", "gate", `{}`)
		req := waitPending(t, b, 1)[0]
		if _, err := approval.Answer(t.Context(), ns.Connect(t), req, false, approval.Approver{Name: "alice"}, "not now"); err != nil {
			t.Fatal(err)
		}
		r := receive(t, done, "the denied call's reply")
		if want := "gate was not run: operator alice denied approval " + req.ID + ": not now"; r.err != nil || !r.reply.IsError || r.reply.Output != want {
			t.Errorf("got %+v, %v, want the in-band %q", r.reply, r.err, want)
		}
		if runs.Load() != 0 {
			t.Errorf("gate ran %d times, want 0", runs.Load())
		}
	})
	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		_, _, runs, c := gatedServer(t, 300*time.Millisecond)
		r := receive(t, goCall(t, c, "demo", "gate", `{}`), "the timed-out call's reply")
		if r.err != nil || !r.reply.IsError || !strings.Contains(r.reply.Output, "gate was not run: no operator answered approval") {
			t.Errorf("got %+v, %v, want the in-band timeout", r.reply, r.err)
		}
		if runs.Load() != 0 {
			t.Errorf("gate ran %d times, want 0", runs.Load())
		}
	})
	t.Run("stream canceled", func(t *testing.T) {
		t.Parallel()
		ns, b, runs, c := gatedServer(t, time.Minute)
		events := make(chan approval.Event, 64)
		go func() {
			_ = approval.Watch(t.Context(), ns.Connect(t), "demo", func(ev approval.Event) {
				select {
				case events <- ev:
				default:
				}
			})
		}()
		// seen waits until an operator watching sees what happened to id.
		seen := func(id string, typ approval.EventType) {
			t.Helper()
			deadline := time.After(10 * time.Second)
			for {
				select {
				case ev := <-events:
					if ev.ID == id && ev.Type == typ {
						return
					}
				case <-deadline:
					t.Fatalf("watching: no %s event for %s within 10s", typ, id)
				}
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		type result struct {
			reply *a2a.ToolReply
			err   error
		}
		done := make(chan result, 1)
		go func() {
			r, err := c.StreamTool(ctx, "demo", "gate", json.RawMessage(`{}`), nil)
			done <- result{r, err}
		}()
		req := waitPending(t, b, 1)[0]
		seen(req.ID, approval.EventRequested)
		cancel()
		r := receive(t, done, "the canceled stream's reply")
		if !errors.Is(r.err, context.Canceled) || r.reply == nil || !r.reply.IsError || !strings.Contains(r.reply.Output, "gate was not run: its approval was withdrawn") {
			t.Errorf("got %+v, %v, want the final reply saying withdrawn and ctx's error", r.reply, r.err)
		}
		if p := b.Pending(); len(p) != 0 {
			t.Errorf("pending after the cancel: got %+v, want none", p)
		}
		// Operators watching were told.
		seen(req.ID, approval.EventWithdrawn)
		if _, err := approval.Answer(t.Context(), ns.Connect(t), req, true, approval.Approver{Name: "alice"}, ""); !errors.Is(err, approval.ErrRefused) {
			t.Errorf("approving the withdrawn request: got %v, want it refused", err)
		}
		if runs.Load() != 0 {
			t.Errorf("gate ran %d times, want 0", runs.Load())
		}
	})
}
