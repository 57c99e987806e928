package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestStreamToolStaleCard serves a card that lists streamed calls from an
// agent that answers none (as after a downgrade behind the same identity):
// the stream request finds no responder, and the client falls back to the
// unary call, handing its output on once.
func TestStreamToolStaleCard(t *testing.T) {
	ns := natstest.Start(t)
	card := a2a.AgentCard{Name: "shifty", Version: "1", Protocols: []string{a2a.ProtocolToolRequest, a2a.ProtocolEvent},
		Tools: []a2a.ToolDescriptor{{Name: "echo", Description: "Echoes", InputSchema: []byte(`{"type":"object"}`)}}}
	self := a2a.Participant{Name: "shifty"}
	agent := ns.Connect(t)
	svc, err := natsbus.Serve(agent, natsbus.ServiceConfig{
		Identity:  "shifty",
		Discovery: cardDiscovery(t, card, self),
		Tool: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			reply := &a2a.ToolReply{Output: "unary\n", Exec: &a2a.Exec{Command: "shifty echo"}}
			a2a.StampReply(reply, req, self)
			data, _ := a2a.Encode(reply)
			_ = r.Reply(data)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := agent.Flush(); err != nil {
		t.Fatal(err)
	}

	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Streams(t.Context(), "shifty"); err != nil || !ok {
		t.Fatalf("Streams: got %v, %v, want the card's claim", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var got strings.Builder
	reply, err := c.StreamTool(ctx, "shifty", "echo", nil, func(s string) { got.WriteString(s) })
	if err != nil || reply.Output != "unary\n" || got.String() != "unary\n" {
		t.Errorf("got %+v, %v, output %q, want the unary reply handed on once", reply, err, got.String())
	}
}

// TestStreamsShareOneInbox opens many streams at once on one transport:
// they share one subscription, each reads its own messages in order, a
// probe on the inbox of a stream its caller closed finds no one (as with
// an inbox of its own), and a reader waiting when the connection closes
// fails at once rather than at its timeout.
func TestStreamsShareOneInbox(t *testing.T) {
	ns := natstest.Start(t)
	const n = 20
	probes := make(chan error, n)
	agent := ns.Connect(t)
	svc, err := natsbus.Serve(agent, natsbus.ServiceConfig{
		Identity:  "fan",
		Discovery: func(*natsbus.Request) {},
		Tool:      func(*natsbus.Request) {},
		Stream: func(r *natsbus.Request) {
			id := string(r.Data())
			if id == "quiet" {
				return
			}
			go func() {
				for i := range 3 {
					if err := r.Send([]byte(fmt.Sprintf("%s/%d", id, i))); err != nil {
						t.Errorf("send: %v", err)
					}
				}
				// The caller closes the stream once it has the three;
				// then a probe must find no one.
				deadline := time.Now().Add(10 * time.Second)
				for {
					err := r.Probe([]byte("probe"), time.Second)
					if errors.Is(err, natsbus.ErrCallerGone) || time.Now().After(deadline) {
						probes <- err
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := agent.Flush(); err != nil {
		t.Fatal(err)
	}

	nc := ns.Connect(t)
	tr := natsbus.NewTransport(nc)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", i)
			s, err := tr.OpenStream(t.Context(), "fan", []byte(id))
			if err != nil {
				t.Errorf("open %s: %v", id, err)
				return
			}
			defer s.Close()
			for j := range 3 {
				data, err := s.Next(t.Context(), 10*time.Second)
				if want := fmt.Sprintf("%s/%d", id, j); err != nil || string(data) != want {
					t.Errorf("stream %s message %d: got %q, %v, want %q", id, j, data, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := nc.NumSubscriptions(); got != 1 {
		t.Errorf("the caller's subscriptions: got %d, want the one shared inbox", got)
	}
	for range n {
		if err := <-probes; !errors.Is(err, natsbus.ErrCallerGone) {
			t.Errorf("a probe on a closed stream's inbox: got %v, want %v", err, natsbus.ErrCallerGone)
		}
	}

	// A reader waiting on a stream whose connection closes.
	s, err := tr.OpenStream(t.Context(), "fan", []byte("quiet"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); nc.Close() }()
	start := time.Now()
	if _, err := s.Next(t.Context(), 30*time.Second); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("reading after the connection closed: got %v after %s, want an error at once", err, time.Since(start))
	}
}
