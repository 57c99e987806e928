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
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// cancelConf is the permissions of the example configurations: an agent
// that subscribes to control.*.*, and a caller that may publish on
// control.open.* only. The shared control subject must fit both.
const cancelConf = `
authorization {
  users = [
    {
      user: agent, password: agent-pw
      permissions {
        subscribe: ["choria.fisk-ai.discovery.*", "choria.fisk-ai.tool.*", "choria.fisk-ai.control.*.*", "$SRV.>", "_INBOX.>"]
        publish: ["_INBOX.>", "$SRV.>"]
      }
    }
    {
      user: caller, password: caller-pw
      permissions {
        publish: ["choria.fisk-ai.discovery.*", "choria.fisk-ai.tool.open", "choria.fisk-ai.control.open.*"]
        subscribe: ["_INBOX.>"]
        allow_responses: true
      }
    }
    { user: watcher, password: watcher-pw }
  ]
}`

// cancelAgent serves identity as an agent whose tool call "wait" answers
// at once, unless its input is {"hold": true}: then it runs until a cancel
// for its request id comes on the shared control subject, and answers
// that it was canceled (unless deaf is set: then it never answers). Its
// card lists the unary cancel when cancels is set. Every cancel it hears
// is kept.
type cancelAgent struct {
	deaf bool

	mu sync.Mutex
	// running maps the request ids of held calls to their stop channels;
	// heard holds every cancel decoded on the shared subject; both
	// guarded by mu.
	running map[string]chan string
	heard   []*a2a.Cancel
	// held receives the request id of each held call.
	held chan string
}

func serveCancelable(t *testing.T, nc *nats.Conn, identity string, cancels, deaf bool) *cancelAgent {
	t.Helper()
	a := &cancelAgent{deaf: deaf, running: map[string]chan string{}, held: make(chan string, 16)}
	self := a2a.Participant{Name: identity, Instance: "i1"}
	protocols := []string{a2a.ProtocolToolRequest}
	if cancels {
		protocols = append(protocols, a2a.ProtocolCallCancel)
	}
	card := a2a.AgentCard{Name: identity, Version: "1", Protocols: protocols,
		Tools: []a2a.ToolDescriptor{{Name: "wait", Description: "Waits", InputSchema: []byte(`{"type":"object"}`)}}}
	answer := func(r *natsbus.Request, req *a2a.ToolRequest, reply *a2a.ToolReply) {
		a2a.StampReply(reply, req, self)
		data, _ := a2a.Encode(reply)
		_ = r.Reply(data)
	}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:  identity,
		Discovery: cardDiscovery(t, card, self),
		Tool: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			if !strings.Contains(string(req.Input), `"hold"`) {
				answer(r, req, &a2a.ToolReply{Output: "done\n"})
				return
			}
			stop := make(chan string, 1)
			a.mu.Lock()
			a.running[req.ID] = stop
			a.mu.Unlock()
			a.held <- req.ID
			go func() {
				why := <-stop
				if !a.deaf {
					answer(r, req, &a2a.ToolReply{IsError: true, Output: why})
				}
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	sub, err := natsbus.CallControl(nc, identity, func(data []byte) {
		c := &a2a.Cancel{}
		if err := a2a.Decode(data, c); err != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.heard = append(a.heard, c)
		if stop := a.running[c.Request]; stop != nil {
			stop <- "canceled: " + c.Reason
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return a
}

// callResult is what a call returned.
type callResult struct {
	reply *a2a.ToolReply
	err   error
}

// goHeld makes a cancelable call of open's "wait" that the agent holds
// until it is canceled, on its own goroutine, with grace.
func goHeld(ctx context.Context, c *a2a.Client, grace time.Duration) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		r, err := c.CallToolCancelable(ctx, "open", "wait", []byte(`{"hold":true}`), grace)
		done <- callResult{r, err}
	}()
	return done
}

func (a *cancelAgent) cancels() []*a2a.Cancel {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*a2a.Cancel(nil), a.heard...)
}

// TestCallControlSubject checks the shared control subject: one token
// past the identity, where an instance's token sits, and never an
// instance's own.
func TestCallControlSubject(t *testing.T) {
	got := natsbus.CallControlSubject("demo")
	if want := "choria.fisk-ai.control.demo.@all"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if a2a.ValidIdentity(natsbus.CallControlToken) {
		t.Errorf("%q is a valid instance name: an instance could take its place", natsbus.CallControlToken)
	}
	if got, inst := strings.Count(got, "."), strings.Count(natsbus.ControlSubject("demo", "i1"), "."); got != inst {
		t.Errorf("tokens: got %d dots, an instance's control subject has %d", got, inst)
	}
}

// TestCallToolCancelable runs unary calls on a server with the example
// configurations' permissions and two agent processes on one identity: a
// call that ends on its own sends nothing but the request (nobody hears a
// control message); a call whose context ends sends one cancel, naming the
// call's request id and sender, on the shared control subject, which the
// caller may publish and both agents hear, and gets the canceled reply of
// the agent that ran it with the context's error. Request ids share no
// prefix, as nuid's do.
func TestCallToolCancelable(t *testing.T) {
	ns := natstest.StartFromConfig(t, cancelConf)
	agents := []*cancelAgent{
		serveCancelable(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "open", true, false),
		serveCancelable(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "open", true, false),
	}

	// Everything published on any control subject, seen by a watcher with
	// full rights.
	watcher := ns.Connect(t, nats.UserInfo("watcher", "watcher-pw"))
	var (
		mu      sync.Mutex // guards control
		control []string
	)
	if _, err := watcher.Subscribe("choria.fisk-ai.control.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		control = append(control, m.Subject)
	}); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	controlSeen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), control...)
	}

	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t, nats.UserInfo("caller", "caller-pw"))), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CancelsCalls(t.Context(), "open"); err != nil || !ok {
		t.Fatalf("CancelsCalls: got %v, %v, want the card's claim", ok, err)
	}
	for range 10 {
		reply, err := c.CallToolCancelable(t.Context(), "open", "wait", nil, time.Second)
		if err != nil || reply.Output != "done\n" {
			t.Fatalf("uncanceled call: got %+v, %v, want done", reply, err)
		}
	}

	ids := map[string]bool{}
	for round := range 2 {
		ctx, cancel := context.WithCancel(t.Context())
		done := goHeld(ctx, c, 5*time.Second)
		var id string
		select {
		case id = <-agents[0].held:
		case id = <-agents[1].held:
		case <-time.After(10 * time.Second):
			t.Fatal("no agent took the call")
		}
		ids[id] = true
		if got := controlSeen(); len(got) != round {
			t.Errorf("control messages before the cancel: got %v, want %d", got, round)
		}
		cancel()
		var r callResult
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the canceled call did not return within 5s")
		}
		if !errors.Is(r.err, context.Canceled) || r.reply == nil || !r.reply.IsError || !strings.HasPrefix(r.reply.Output, "canceled: ") {
			t.Errorf("canceled call: got %+v, %v, want the canceled reply with context.Canceled", r.reply, r.err)
		}
		// Both processes hear the cancel: no queue group.
		for i, a := range agents {
			fisktest.WaitFor(t, 10*time.Second, "agent to hear the cancel", func() bool { return len(a.cancels()) == round+1 })
			if got := a.cancels()[round]; got.Request != id || got.Sender.Name != "gw" {
				t.Errorf("agent %d heard %+v, want the cancel of request %s from gw", i, got, id)
			}
		}
		// The watcher's delivery runs on a goroutine of its own, which a
		// busy machine may leave behind the agents'.
		fisktest.WaitFor(t, 10*time.Second, "the watcher to see the cancel", func() bool { return len(controlSeen()) >= round+1 })
	}
	if got := controlSeen(); len(got) != 2 || got[0] != natsbus.CallControlSubject("open") {
		t.Errorf("control messages: got %v, want two on %s", got, natsbus.CallControlSubject("open"))
	}
	var prev string
	for id := range ids {
		if len(id) < 26 || (prev != "" && id[:8] == prev[:8]) {
			t.Errorf("request ids %q and %q: want 26 random characters each, no shared prefix", prev, id)
		}
		prev = id
	}
}

// TestCallToolCancelableGrace cancels a call whose agent never answers
// the cancel: the caller gives up grace after its context ended, with the
// context's error, rather than at the transport's timeout of a minute.
func TestCallToolCancelableGrace(t *testing.T) {
	ns := natstest.Start(t)
	a := serveCancelable(t, ns.Connect(t), "deaf", true, true)
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t), natsbus.WithTimeout(time.Minute)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	reply, err := c.CallToolCancelable(ctx, "deaf", "wait", []byte(`{"hold":true}`), 200*time.Millisecond)
	took := time.Since(start)
	if reply != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %+v, %v, want no reply and the deadline's error", reply, err)
	}
	if took > 20*time.Second {
		t.Errorf("returned after %s, want about the deadline and the grace", took)
	}
	fisktest.WaitFor(t, 10*time.Second, "the agent to hear the cancel", func() bool { return len(a.cancels()) == 1 })
}

// TestCallToolCancelableWithoutCapability checks that an agent whose card
// does not list the unary cancel is reported as such.
func TestCallToolCancelableWithoutCapability(t *testing.T) {
	ns := natstest.Start(t)
	serveCancelable(t, ns.Connect(t), "old", false, false)
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.CancelsCalls(t.Context(), "old"); err != nil || ok {
		t.Errorf("CancelsCalls: got %v, %v, want false", ok, err)
	}
}

// TestCallToolCancelableRefused cancels a call whose caller may call the
// tool but not publish its cancel: the caller hears of the refusal at
// once, with an error naming the subject and the permissions, rather than
// after the grace, which the cancel could never end early.
func TestCallToolCancelableRefused(t *testing.T) {
	ns := natstest.StartFromConfig(t, `
authorization {
  users = [
    { user: agent, password: agent-pw }
    {
      user: nocancel, password: nocancel-pw
      permissions {
        publish: ["choria.fisk-ai.discovery.*", "choria.fisk-ai.tool.open"]
        subscribe: ["_INBOX.>"]
        allow_responses: true
      }
    }
  ]
}`)
	a := serveCancelable(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "open", true, true)
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t, nats.UserInfo("nocancel", "nocancel-pw"))), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := goHeld(ctx, c, time.Minute)
	select {
	case <-a.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never got the call")
	}
	start := time.Now()
	cancel()
	var r callResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the canceled call did not return")
	}
	if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, a2a.ErrPermission) || !strings.Contains(r.err.Error(), natsbus.CallControlSubject("open")) {
		t.Errorf("got %+v, %v, want context.Canceled and a2a.ErrPermission naming %s", r.reply, r.err, natsbus.CallControlSubject("open"))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("returned %s after the cancel, want at once, not after the minute's grace", took)
	}
	if got := a.cancels(); len(got) != 0 {
		t.Errorf("the agent heard %d cancels, want none", len(got))
	}
}
