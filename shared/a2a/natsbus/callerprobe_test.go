package natsbus_test

import (
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

// probeAgent serves identity with a tool "wait" that answers at once, and
// keeps, for every tool request, the probe subject it named
// (Request.CallerProbe) and what probing it there gave.
type probeAgent struct {
	mu     sync.Mutex // guards probes
	probes []probeSeen
}

type probeSeen struct {
	subject string
	err     error
}

func serveProbed(t *testing.T, nc *nats.Conn, identity string) *probeAgent {
	t.Helper()
	a := &probeAgent{}
	self := a2a.Participant{Name: identity, Instance: "i1"}
	card := a2a.AgentCard{Name: identity, Version: "1", Protocols: []string{a2a.ProtocolToolRequest},
		Tools: []a2a.ToolDescriptor{{Name: "wait", Description: "Waits", InputSchema: []byte(`{"type":"object"}`)}}}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:  identity,
		Discovery: cardDiscovery(t, card, self),
		Tool: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			seen := probeSeen{subject: r.CallerProbe()}
			if seen.subject != "" {
				seen.err = r.ProbeCaller(seen.subject, 5*time.Second)
			}
			a.mu.Lock()
			a.probes = append(a.probes, seen)
			a.mu.Unlock()
			reply := &a2a.ToolReply{Output: "done\n"}
			a2a.StampReply(reply, req, self)
			data, _ := a2a.Encode(reply)
			_ = r.Reply(data)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *probeAgent) seen() []probeSeen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]probeSeen(nil), a.probes...)
}

// TestCallerProbe: a transport's unary tool requests name a subject of its
// own that answers probes, once it has answered one itself, under the
// permissions of the example configurations; discovery names none; and
// once the caller's connection is gone, a probe there finds no one.
func TestCallerProbe(t *testing.T) {
	// caller may not publish to its own inbox, so it cannot check its
	// probe subject with a probe; watcher may, and does.
	for _, user := range []string{"caller", "watcher"} {
		t.Run(user, func(t *testing.T) { testCallerProbe(t, user) })
	}
}

func testCallerProbe(t *testing.T, user string) {
	ns := natstest.StartFromConfig(t, cancelConf)
	agent := serveProbed(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "open")
	callerConn := ns.Connect(t, nats.UserInfo(user, user+"-pw"))
	c, err := a2a.NewClient(natsbus.NewTransport(callerConn), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Discover(t.Context(), "open"); err != nil {
		t.Fatal(err)
	}
	var named string
	fisktest.WaitFor(t, 10*time.Second, "a tool request naming a probe subject", func() bool {
		if r, err := c.CallTool(t.Context(), "open", "wait", nil); err != nil || r.Output != "done\n" {
			t.Fatalf("call: got %+v, %v, want done", r, err)
		}
		seen := agent.seen()
		named = seen[len(seen)-1].subject
		return named != ""
	})
	for _, s := range agent.seen() {
		if s.subject != "" && (s.subject != named || s.err != nil) {
			t.Errorf("probe: got %q answering %v, want %q answered", s.subject, s.err, named)
		}
	}
	if !strings.HasPrefix(named, nats.InboxPrefix) || !strings.HasSuffix(named, ".@caller") {
		t.Errorf("probe subject: got %q, want one of the caller's inbox, ending .@caller", named)
	}

	// A request the transport did not send names nothing: the header is
	// the caller's own claim, which discovery does not make.
	prober := ns.Connect(t, nats.UserInfo("agent", "agent-pw"))
	if _, err := prober.Request(named, nil, 5*time.Second); err != nil {
		t.Errorf("probing the live caller: got %v, want an answer", err)
	}
	callerConn.Close()
	fisktest.WaitFor(t, 10*time.Second, "no responders once the caller is gone", func() bool {
		_, err := prober.Request(named, nil, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
}

// TestCallerProbeSubject: what an agent accepts as a probe subject from a
// request's header (a literal subject of at most 256 bytes, ending in
// .@caller), and what probing it gives.
func TestCallerProbeSubject(t *testing.T) {
	ns := natstest.StartFromConfig(t, cancelConf)
	agentConn := ns.Connect(t, nats.UserInfo("agent", "agent-pw"))
	got := make(chan probeSeen, 1)
	svc, err := natsbus.Serve(agentConn, natsbus.ServiceConfig{
		Identity:  "open",
		Discovery: func(*natsbus.Request) {},
		Tool: func(r *natsbus.Request) {
			seen := probeSeen{subject: r.CallerProbe()}
			if seen.subject != "" {
				seen.err = r.ProbeCaller(seen.subject, 2*time.Second)
			}
			got <- seen
			_ = r.Reply([]byte(`{}`))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	// The service's subscriptions are in place before anyone calls.
	if err := agentConn.Flush(); err != nil {
		t.Fatal(err)
	}
	caller := ns.Connect(t, nats.UserInfo("watcher", "watcher-pw"))
	if _, err := caller.Subscribe("_INBOX.live.@caller", func(m *nats.Msg) { _ = m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	if err := caller.Flush(); err != nil {
		t.Fatal(err)
	}
	long := "_INBOX." + strings.Repeat("x", 250) + ".@caller"
	for _, tt := range []struct {
		header, want string
		err          error
	}{
		{header: "", want: ""},
		{header: "_INBOX.live.@caller", want: "_INBOX.live.@caller"},
		{header: "_INBOX.dead.@caller", want: "_INBOX.dead.@caller", err: natsbus.ErrCallerGone},
		{header: "_INBOX.*.@caller", want: ""},
		{header: "_INBOX.live", want: ""},
		{header: "$SYS.REQ.SERVER.PING", want: ""},
		{header: "@caller", want: ""},
		{header: "_INBOX.>", want: ""},
		{header: "_INBOX..x", want: ""},
		{header: ".x", want: ""},
		{header: "_INBOX.a b", want: ""},
		{header: long, want: ""},
	} {
		msg := nats.NewMsg(natsbus.ToolSubject("open"))
		msg.Data = []byte(`{}`)
		if tt.header != "" {
			msg.Header.Set(natsbus.CallerProbeHeader, tt.header)
		}
		if _, err := caller.RequestMsg(msg, 10*time.Second); err != nil {
			t.Fatalf("%q: %v", tt.header, err)
		}
		seen := <-got
		if seen.subject != tt.want || !errors.Is(seen.err, tt.err) || (tt.err == nil && seen.err != nil) {
			t.Errorf("%q: got %q probing to %v, want %q probing to %v", tt.header, seen.subject, seen.err, tt.want, tt.err)
		}
	}
}

// limitConf puts the caller in an account of its own whose connections
// may hold one subscription: nats.go's reply inbox takes it.
const limitConf = `
accounts {
  AGENTS {
    users = [{ user: agent, password: agent-pw }]
    exports = [{ service: "choria.fisk-ai.tool.*" }]
  }
  CALLERS {
    users = [{ user: caller, password: caller-pw }]
    imports = [{ service: { account: AGENTS, subject: "choria.fisk-ai.tool.*" } }]
    limits { max_subscriptions: 1 }
  }
}`

// TestCallerProbeSubscriptionLimit: a caller whose connection may not
// subscribe to its stream inbox never names a probe subject, and its
// calls go on being answered: the probe is what it loses, never its
// replies.
func TestCallerProbeSubscriptionLimit(t *testing.T) {
	ns := natstest.StartFromConfig(t, limitConf)
	agent := serveProbed(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "open")
	refused := make(chan error, 10)
	callerConn := ns.Connect(t, nats.UserInfo("caller", "caller-pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case refused <- err:
		default:
		}
	}))
	c, err := a2a.NewClient(natsbus.NewTransport(callerConn), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	call := func() {
		t.Helper()
		if r, err := c.CallTool(t.Context(), "open", "wait", nil); err != nil || r.Output != "done\n" {
			t.Fatalf("call: got %+v, %v, want done", r, err)
		}
	}
	call()
	select {
	case err := <-refused:
		if !errors.Is(err, nats.ErrMaxSubscriptionsExceeded) {
			t.Fatalf("the caller's connection: got %v, want %v for its stream inbox", err, nats.ErrMaxSubscriptionsExceeded)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server never refused the stream inbox: the limit does not hold, and the test shows nothing")
	}
	for range 3 {
		call()
	}
	for i, s := range agent.seen() {
		if s.subject != "" {
			t.Errorf("call %d named probe subject %q, which the server refused to subscribe", i, s.subject)
		}
	}
}
