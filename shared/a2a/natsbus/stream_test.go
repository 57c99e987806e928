package natsbus_test

import (
	"context"
	"strings"
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
	cr, err := a2a.NewCardReply(card)
	if err != nil {
		t.Fatal(err)
	}
	self := a2a.Participant{Name: "shifty"}
	agent := ns.Connect(t)
	svc, err := natsbus.Serve(agent, natsbus.ServiceConfig{
		Identity: "shifty",
		Discovery: func(r *natsbus.Request) {
			req := &a2a.DiscoveryRequest{}
			if a2a.Decode(r.Data(), req) == nil {
				data, _ := cr.Reply(req, self)
				_ = r.Reply(data)
			}
		},
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
