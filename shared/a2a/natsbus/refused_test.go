package natsbus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// refusedConf has an agent user that serves every identity and a caller
// that may discover every agent but call only open, and may start streams
// on nocancel without cancelling them.
const refusedConf = `
authorization {
  users = [
    {
      user: agent, password: agent-pw
      permissions {
        subscribe: ["choria.fisk-ai.>", "$SRV.>", "_INBOX.>"]
        publish: ["_INBOX.>", "$SRV.>"]
      }
    }
    {
      user: caller, password: caller-pw
      permissions {
        publish: [
          "choria.fisk-ai.discovery.*"
          "choria.fisk-ai.tool.open"
          "choria.fisk-ai.stream.open"
          "choria.fisk-ai.control.open.*"
          "choria.fisk-ai.stream.nocancel"
        ]
        subscribe: ["_INBOX.>"]
        allow_responses: true
      }
    }
  ]
}`

// refusalBound is how soon a refused call must fail: the server's -ERR is
// one network hop away, against the seconds of the call's own deadline.
const refusalBound = 500 * time.Millisecond

// serveStreaming serves identity on nc as an agent whose card lists
// streamed calls: a tool call is answered once release is closed, a
// streamed call is acked by instance i1 at once and, unless hold is set,
// answered once release is closed.
func serveStreaming(t *testing.T, nc *nats.Conn, identity string, release <-chan struct{}, hold bool) {
	t.Helper()
	self := a2a.Participant{Name: identity, Instance: "i1"}
	card := a2a.AgentCard{Name: identity, Version: "1", Protocols: []string{a2a.ProtocolToolRequest, a2a.ProtocolEvent},
		Tools: []a2a.ToolDescriptor{{Name: "echo", Description: "Echoes", InputSchema: []byte(`{"type":"object"}`)}}}
	reply := func(req *a2a.ToolRequest, seq uint64) []byte {
		reply := &a2a.ToolReply{Output: identity + " " + req.Name + "\n"}
		a2a.StampReply(reply, req, self)
		reply.Sequence = seq
		data, err := a2a.Encode(reply)
		if err != nil {
			t.Errorf("encoding reply: %v", err)
		}
		return data
	}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:  identity,
		Discovery: cardDiscovery(t, card, self),
		Tool: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			go func() {
				<-release
				_ = r.Reply(reply(req, 0))
			}()
		},
		Stream: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			ack := &a2a.Ack{Accepted: true}
			a2a.StampReply(ack, req, self)
			ack.Sequence = 1
			data, err := a2a.Encode(ack)
			if err != nil {
				t.Errorf("encoding ack: %v", err)
				return
			}
			if err := r.Send(data); err != nil {
				t.Errorf("sending ack: %v", err)
				return
			}
			if hold {
				return
			}
			go func() {
				<-release
				_ = r.Send(reply(req, 2))
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
}

// TestRefusedPublishFailsAtOnce runs a server whose caller user may not
// publish calls to agent secret, nor cancels to agent nocancel. On one
// connection of that user, at the same time and many times over: streamed
// and unary calls of secret fail within refusalBound with
// [a2a.ErrPermission] naming the refused subject, where they used to wait
// out their deadline; the same calls of open, whose agent answers only
// once every refusal is in, so that they are in flight meanwhile, succeed;
// and a streamed call of nocancel whose caller gives up fails as soon as
// its cancel is refused, rather than after three heartbeats.
func TestRefusedPublishFailsAtOnce(t *testing.T) {
	ns := natstest.StartFromConfig(t, refusedConf)
	agent := ns.Connect(t, nats.UserInfo("agent", "agent-pw"))
	release, now := make(chan struct{}), make(chan struct{})
	close(now)
	serveStreaming(t, agent, "open", release, false)
	serveStreaming(t, agent, "secret", now, false)
	serveStreaming(t, agent, "nocancel", now, true)
	if err := agent.Flush(); err != nil {
		t.Fatal(err)
	}
	// The connection's own error handler keeps getting the violations;
	// a quiet one keeps nats.go's default from printing them.
	var violations sync.Map
	nc := ns.Connect(t, nats.UserInfo("caller", "caller-pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		violations.Store(err.Error(), true)
	}))
	c, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"open", "secret", "nocancel"} {
		if ok, err := c.Streams(t.Context(), id); err != nil || !ok {
			t.Fatalf("Streams(%s): got %v, %v, want true: discovery is permitted", id, ok, err)
		}
	}

	// refused checks err is a refusal naming subject, within the bound.
	refused := func(what string, took time.Duration, err error, subject string) {
		t.Helper()
		if !errors.Is(err, a2a.ErrPermission) || !strings.Contains(err.Error(), subject) {
			t.Errorf("%s: got %v, want %v naming %s", what, err, a2a.ErrPermission, subject)
		}
		if errors.Is(err, a2a.ErrAgentUnavailable) {
			t.Errorf("%s: got %v, want no %v: the server refused the publish, the agent was not silent", what, err, a2a.ErrAgentUnavailable)
		}
		if took > refusalBound {
			t.Errorf("%s: got the refusal after %s, want it within %s", what, took, refusalBound)
		}
	}
	allowed := func(what string, reply *a2a.ToolReply, err error) {
		t.Helper()
		if err != nil || reply.Output != "open echo\n" {
			t.Errorf("%s: got %+v, %v, want output %q", what, reply, err, "open echo\n")
		}
	}

	const rounds = 8
	var wg, refusals sync.WaitGroup
	for range rounds {
		refusals.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.StreamTool(ctx, "secret", "echo", nil, nil)
			refused("streamed call of secret", time.Since(start), err, natsbus.StreamSubject("secret"))
		})
		refusals.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.CallTool(ctx, "secret", "echo", nil)
			refused("unary call of secret", time.Since(start), err, natsbus.ToolSubject("secret"))
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			reply, err := c.StreamTool(ctx, "open", "echo", nil, nil)
			allowed("streamed call of open", reply, err)
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			reply, err := c.CallTool(ctx, "open", "echo", nil)
			allowed("unary call of open", reply, err)
		})
		refusals.Go(func() {
			// The agent acks and holds the call; the caller gives up, and
			// its cancel is refused.
			const giveUp = 200 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), giveUp)
			defer cancel()
			start := time.Now()
			_, err := c.StreamTool(ctx, "nocancel", "echo", nil, nil)
			refused("cancel of a streamed call of nocancel", time.Since(start)-giveUp, err, natsbus.ControlSubject("nocancel", "i1"))
		})
	}
	refusals.Wait()
	close(release)
	wg.Wait()

	for _, subject := range []string{natsbus.StreamSubject("secret"), natsbus.ToolSubject("secret"), natsbus.ControlSubject("nocancel", "i1")} {
		found := false
		violations.Range(func(k, _ any) bool {
			found = found || strings.Contains(k.(string), subject)
			return !found
		})
		if !found {
			t.Errorf("the connection's own error handler: got no violation naming %s, want it still to hear of each", subject)
		}
	}
}

// TestRefusalOnlyWithTheHandler replaces the connection's error handler
// after the transport was made, so the transport hears of no refusal: the
// call is then one nobody answers, failing at its deadline as before.
func TestRefusalOnlyWithTheHandler(t *testing.T) {
	ns := natstest.StartFromConfig(t, refusedConf)
	nc := ns.Connect(t, nats.UserInfo("caller", "caller-pw"))
	tr := natsbus.NewTransport(nc)
	nc.SetErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := tr.RoundTrip(ctx, "secret", a2a.RouteTool, []byte("{}"))
	if !errors.Is(err, a2a.ErrAgentUnavailable) || errors.Is(err, a2a.ErrPermission) {
		t.Errorf("got %v, want %v at the deadline", err, a2a.ErrAgentUnavailable)
	}
}
