package remotetools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestMain builds the demo application once for the tests that run it.
func TestMain(m *testing.M) { fisktest.Main(m) }

// busAgent serves the demo app's spawn and echo commands, really run, on
// one identity over the real NATS transport: unary calls on the tool
// subject (cancelable on the shared control subject when the card lists
// [a2a.ProtocolCallCancel]) and streamed calls (ack, one text event with
// the output, the final reply). It stands at the wire, so the importer and
// the A2A client are tested as the gateway runs them.
type busAgent struct {
	identity string
	self     a2a.Participant
	tools    map[string]*fiskapp.Command
	opts     agentOptions
	svc      *natsbus.Service

	mu sync.Mutex
	// running maps request ids to their cancels; guarded by mu.
	running map[string]context.CancelFunc
}

type agentOptions struct {
	cancels  bool // the card lists the unary cancel
	gated    bool // echo's description carries the approval note
	promises bool // the card lists the command result promise
	// breaksPromise answers echo with its output alone, no exec: an
	// agent whose card promises more than it keeps.
	breaksPromise bool
}

func serveBusAgent(t *testing.T, nc *nats.Conn, identity string, o agentOptions) *busAgent {
	t.Helper()
	spawn, echo := fisktest.DemoCommand(t, "spawn"), fisktest.DemoCommand(t, "echo")
	a := &busAgent{identity: identity, self: a2a.Participant{Name: identity, Instance: "i1"},
		tools: map[string]*fiskapp.Command{"spawn": spawn, "echo": echo}, opts: o, running: map[string]context.CancelFunc{}}
	protocols := []string{a2a.ProtocolToolRequest, a2a.ProtocolEvent, a2a.ProtocolCancel}
	if o.cancels {
		protocols = append(protocols, a2a.ProtocolCallCancel)
	}
	if o.promises {
		protocols = append(protocols, a2a.ProtocolCommandResult)
	}
	echoDesc := "Prints a message"
	if o.gated {
		echoDesc += "\n\n" + a2a.ApprovalNote
	}
	card := a2a.AgentCard{Name: identity, Version: "1", Protocols: protocols, Tools: []a2a.ToolDescriptor{
		{Name: "spawn", Description: "Spawns a child that ignores SIGTERM", InputSchema: spawn.InputSchema()},
		{Name: "echo", Description: echoDesc, InputSchema: echo.InputSchema()},
	}}
	cr, err := a2a.NewCardReply(card)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity: identity,
		Discovery: func(r *natsbus.Request) {
			req := &a2a.DiscoveryRequest{}
			if a2a.Decode(r.Data(), req) == nil {
				data, _ := cr.Reply(req, a.self)
				_ = r.Reply(data)
			}
		},
		Tool: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			go func() {
				reply := a.run(req)
				a2a.StampReply(reply, req, a.self)
				data, _ := a2a.Encode(reply)
				_ = r.Reply(data)
			}()
		},
		Stream: func(r *natsbus.Request) {
			req := &a2a.ToolRequest{}
			if a2a.Decode(r.Data(), req) != nil {
				return
			}
			send := func(m a2a.Message, seq uint64) {
				a2a.StampReply(m, req, a.self)
				switch m := m.(type) {
				case *a2a.Ack:
					m.Sequence = seq
				case *a2a.Event:
					m.Sequence = seq
				case *a2a.ToolReply:
					m.Sequence = seq
				}
				data, _ := a2a.Encode(m)
				_ = r.Send(data)
			}
			send(&a2a.Ack{Accepted: true}, 1)
			go func() {
				reply := a.run(req)
				send(&a2a.Event{Block: a2a.Block{Content: &a2a.TextBlock{Text: reply.Output}}}, 2)
				send(reply, 3)
			}()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.svc = svc
	t.Cleanup(func() { _ = svc.Stop() })
	sub, err := natsbus.CallControl(nc, identity, func(data []byte) {
		c := &a2a.Cancel{}
		if a2a.Decode(data, c) != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if cancel := a.running[c.Request]; cancel != nil {
			cancel()
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

// run runs the command req names, cancelable by its request id.
func (a *busAgent) run(req *a2a.ToolRequest) *a2a.ToolReply {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a.mu.Lock()
	a.running[req.ID] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.running, req.ID)
		a.mu.Unlock()
	}()
	out, err := a.tools[req.Name].Call(ctx, tool.Request{Input: req.Input})
	if err != nil {
		return &a2a.ToolReply{IsError: true, Output: "canceled: " + err.Error()}
	}
	if a.opts.breaksPromise && req.Name == "echo" {
		return &a2a.ToolReply{Output: out.Result.Output}
	}
	return &a2a.ToolReply{Output: out.Result.Output, Exec: &a2a.Exec{Command: out.Result.Command, ExitCode: out.Result.ExitCode}}
}

// countSubjects counts the messages published on the tool and stream
// subjects and the control subjects of every identity.
func countSubjects(t *testing.T, nc *nats.Conn) *natstest.SubjectCounter {
	t.Helper()
	return natstest.CountSubjects(t, nc, natsbus.ToolSubject("*"), natsbus.StreamSubject("*"), "choria.fisk-ai.control.>")
}

// TestRemoteCallPath imports agents over real NATS with the real client and
// checks which path each remote call takes, on the bus: unary (a request on
// the tool subject, nothing on the stream subject, no control message) for
// a call that wants no output, of an agent that honours the unary cancel,
// of an ungated tool, outside a task; streamed otherwise. Both give the same
// CommandResult.
func TestRemoteCallPath(t *testing.T) {
	ns := natstest.Start(t)
	serveBusAgent(t, ns.Connect(t), "fast", agentOptions{cancels: true})
	serveBusAgent(t, ns.Connect(t), "old", agentOptions{})
	serveBusAgent(t, ns.Connect(t), "gated", agentOptions{cancels: true, gated: true})
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewImporter(c, []config.RemoteHost{{Host: "fast"}, {Host: "old"}, {Host: "gated"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name()] = tl
	}
	sc := countSubjects(t, ns.Connect(t))

	tests := []struct {
		name     string
		tool     string
		streamed bool
		output   bool
		wantPath string
	}{
		{name: "no output wanted", tool: "fast_echo", wantPath: "tool"},
		{name: "output wanted", tool: "fast_echo", output: true, wantPath: "stream"},
		{name: "a task", tool: "fast_echo", streamed: true, wantPath: "stream"},
		{name: "agent without the unary cancel", tool: "old_echo", wantPath: "stream"},
		{name: "gated tool", tool: "gated_echo", wantPath: "stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			var buf bytes.Buffer
			req := tool.Request{Input: json.RawMessage(`{"message":"hi"}`), Remote: tool.Remote{Streamed: tt.streamed}}
			if tt.output {
				req.Output = &buf
			}
			sc.Take()
			out, err := byName[tt.tool].Call(ctx, req)
			if err != nil || out.IsError || out.Result == nil || out.Result.Output != "hi\n" || !strings.HasSuffix(out.Result.Command, "echo -- hi") {
				t.Fatalf("got %q (error %t), %v, want the echo's CommandResult", out.Text(), out.IsError, err)
			}
			host := strings.TrimSuffix(tt.tool, "_echo")
			var got map[string]int
			fisktest.WaitFor(t, 10*time.Second, "the request on the bus", func() bool {
				got = sc.Take()
				return len(got) > 0
			})
			subject := natsbus.ToolSubject(host)
			if tt.wantPath == "stream" {
				subject = natsbus.StreamSubject(host)
			}
			if len(got) != 1 || got[subject] != 1 {
				t.Errorf("on the bus: got %v, want one request on %s and nothing else", got, subject)
			}
			if tt.output && buf.String() != "hi\n" {
				t.Errorf("relayed output: got %q, want the echo", buf.String())
			}
		})
	}
}

// TestRemoteUnaryCancel cancels a unary remote call of the demo spawn:
// the remote process group dies (the grandchild that ignores SIGTERM
// included), the call answers within cancelGrace of the cancel, and a
// deadline cancels the same way.
func TestRemoteUnaryCancel(t *testing.T) {
	ns := natstest.Start(t)
	serveBusAgent(t, ns.Connect(t), "fast", agentOptions{cancels: true})
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewImporter(c, []config.RemoteHost{{Host: "fast"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var spawn tool.Tool
	for _, tl := range res.Tools {
		if tl.Name() == "spawn" {
			spawn = tl
		}
	}
	sc := countSubjects(t, ns.Connect(t))

	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			var (
				ctx    context.Context
				cancel context.CancelFunc
			)
			if how == "cancel" {
				ctx, cancel = context.WithCancel(t.Context())
			} else {
				ctx, cancel = context.WithTimeout(t.Context(), 3*time.Second)
			}
			defer cancel()
			type result struct {
				out tool.Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := spawn.Call(ctx, tool.Request{Input: json.RawMessage(`{"duration":"1m","pidfile":` + strconv.Quote(pidfile) + `}`)})
				done <- result{out, err}
			}()
			pid := fisktest.WaitPIDFile(t, pidfile)
			if how == "cancel" {
				cancel()
			}
			<-ctx.Done()
			ended := time.Now()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the call did not answer within 20s of its end")
			}
			if took := time.Since(ended); took > cancelGrace+2*time.Second {
				t.Errorf("answered %s after the context ended, want within about %s", took, cancelGrace)
			}
			if r.err != nil || !r.out.IsError {
				t.Errorf("got %+v, %v, want an in-band failure", r.out, r.err)
			}
			fisktest.WaitFor(t, 10*time.Second, "the remote grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
			got := sc.Take()
			if got[natsbus.ToolSubject("fast")] != 1 || got[natsbus.CallControlSubject("fast")] != 1 || got[natsbus.StreamSubject("fast")] != 0 {
				t.Errorf("on the bus: got %v, want one unary request and one cancel", got)
			}
		})
	}
}

// TestRemoteUnaryPermission refuses a unary call by NATS permissions: it
// fails at once with the permissions named, not at its deadline.
func TestRemoteUnaryPermission(t *testing.T) {
	ns := natstest.StartFromConfig(t, `
authorization {
  users = [
    { user: agent, password: agent-pw }
    {
      user: caller, password: caller-pw
      permissions {
        publish: ["choria.fisk-ai.discovery.*", "choria.fisk-ai.control.*.*"]
        subscribe: ["_INBOX.>"]
        allow_responses: true
      }
    }
  ]
}`)
	serveBusAgent(t, ns.Connect(t, nats.UserInfo("agent", "agent-pw")), "fast", agentOptions{cancels: true})
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t, nats.UserInfo("caller", "caller-pw"))), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewImporter(c, []config.RemoteHost{{Host: "fast"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	for _, tl := range res.Tools {
		if tl.Name() != "echo" {
			continue
		}
		out, err := tl.Call(ctx, tool.Request{Input: json.RawMessage(`{"message":"hi"}`)})
		if err != nil || !out.IsError || !strings.Contains(out.Message, "refused by NATS permissions") {
			t.Errorf("got %+v, %v, want the permissions refusal", out, err)
		}
	}
	if took := time.Since(start); took > 5*time.Second || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("refused after %s, want at once", took)
	}
}
