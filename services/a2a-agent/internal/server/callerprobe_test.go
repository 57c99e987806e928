package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// probedCall sends a unary call of name with input to the agent "demo",
// naming probe in natsbus.CallerProbeHeader, and returns the channel its
// answer (or error) comes on.
func probedCall(t *testing.T, nc *nats.Conn, name string, input json.RawMessage, probe string) <-chan *nats.Msg {
	t.Helper()
	data, err := a2a.Encode(a2a.NewToolRequest(a2a.Participant{Name: "tester"}, "demo", name, input))
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(natsbus.ToolSubject("demo"))
	msg.Data = data
	msg.Header.Set(natsbus.CallerProbeHeader, probe)
	done := make(chan *nats.Msg, 1)
	go func() {
		m, err := nc.RequestMsg(msg, 2*time.Minute)
		if err != nil {
			m = &nats.Msg{Data: []byte(err.Error())}
		}
		done <- m
	}()
	return done
}

// answerProbes answers caller probes on subject until the returned
// connection is closed: a caller that is alive.
func answerProbes(t *testing.T, ns *natstest.Server, subject string) *nats.Conn {
	t.Helper()
	nc := ns.Connect(t)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(nil) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestCallerGoneStopsUnaryCall: a unary call whose caller named a probe
// subject runs while someone answers there; once no one does, the agent
// cancels it within a heartbeat interval or two, kills its process group
// (the grandchild that ignores SIGTERM too), records it as caller_gone and
// frees its only slot.
func TestCallerGoneStopsUnaryCall(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	auditedDemo(t, ns, server.Config{Identity: "demo", MaxConcurrent: 1})
	const probe = "_INBOX.tester.@caller"
	caller := answerProbes(t, ns, probe)
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	done := probedCall(t, ns.Connect(t), "spawn", spawnInput(pidfile), probe)
	pid := fisktest.WaitPIDFile(t, pidfile)

	// Alive for more than one probe: the call runs on.
	time.Sleep(a2a.HeartbeatInterval + a2a.HeartbeatInterval/2)
	if fisktest.ProcessGone(pid) {
		t.Fatal("the call stopped while its caller answered its probes")
	}
	caller.Close()
	gone := time.Now()
	fisktest.WaitFor(t, 2*a2a.HeartbeatInterval+10*time.Second, "the agent to kill the abandoned command's group", func() bool { return fisktest.ProcessGone(pid) })
	t.Logf("caller gone; the grandchild was gone %s later", time.Since(gone).Round(time.Millisecond))
	if m := receive(t, done, "the abandoned call's reply"); !strings.Contains(string(m.Data), "the caller is gone") {
		t.Errorf("reply: got %s, want one saying the caller is gone", m.Data)
	}
	rec, _ := tr.next(t)
	if o := rec.Outcome; o.Result != audit.ResultCanceled || o.ErrorClass != "caller_gone" || rec.Tool != "spawn" {
		t.Errorf("audit: got tool %q result %q class %q, want spawn canceled caller_gone", rec.Tool, o.Result, o.ErrorClass)
	}
	c := newClient(t, ns.Connect(t), "tester")
	if r := callTool(t, c, "demo", "echo", `{"message":"after"}`); r.IsError || r.Output != "after\n" {
		t.Errorf("after the abandoned call: got %+v, want the echo", r)
	}
}

// TestCallerProbeUnanswerable: a probe that cannot be answered in time, a
// subject no probe from here has ever reached, or one no probe may be
// sent to, never stops a call; only no responders on a caller-probe
// subject that answered before does.
func TestCallerProbeUnanswerable(t *testing.T) {
	t.Parallel()
	ns := natstest.Start(t)
	auditedDemo(t, ns, server.Config{Identity: "demo", MaxConcurrent: 4})
	// A caller that takes the probe and never answers: slow, not gone.
	slow := ns.Connect(t)
	if _, err := slow.Subscribe("_INBOX.slow.@caller", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := slow.Flush(); err != nil {
		t.Fatal(err)
	}
	// Long enough for a probe to time out, and another to be sent.
	input := json.RawMessage(`{"duration":"12s"}`)
	calls := []<-chan *nats.Msg{
		probedCall(t, ns.Connect(t), "sleep", input, "_INBOX.slow.@caller"),
		// No one there from the start, though the caller waits for its
		// reply: a caller of another account (TestCallerProbeOtherAccount).
		probedCall(t, ns.Connect(t), "sleep", input, "_INBOX.elsewhere.@caller"),
		// Not subjects a probe may be sent to, though no one answers
		// there: the header is ignored.
		probedCall(t, ns.Connect(t), "sleep", input, "_INBOX.*"),
		probedCall(t, ns.Connect(t), "sleep", input, "_INBOX.nobody"),
	}
	for i, done := range calls {
		select {
		case m := <-done:
			reply := &a2a.ToolReply{}
			if err := a2a.Decode(m.Data, reply); err != nil || reply.IsError || reply.Exec == nil || reply.Exec.ExitCode != 0 {
				t.Errorf("call %d: got %s (%v), want the sleep's result", i, m.Data, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("call %d: no reply within a minute", i)
		}
	}
}

// TestCallerGoneWithdrawsApproval: a unary call of a gated tool whose
// caller goes while it waits for an operator has its approval request
// withdrawn, and the tool never runs.
func TestCallerGoneWithdrawsApproval(t *testing.T) {
	t.Parallel()
	ns, b, runs, _ := gatedServer(t, time.Minute)
	const probe = "_INBOX.gated.@caller"
	caller := answerProbes(t, ns, probe)
	done := probedCall(t, ns.Connect(t), "gate", json.RawMessage(`{}`), probe)
	waitPending(t, b, 1)
	caller.Close()
	fisktest.WaitFor(t, 2*a2a.HeartbeatInterval+10*time.Second, "the approval request to be withdrawn", func() bool { return len(b.Pending()) == 0 })
	if m := receive(t, done, "the abandoned call's reply"); !strings.Contains(string(m.Data), "gate was not run: its approval was withdrawn") {
		t.Errorf("reply: got %s, want one saying the approval was withdrawn", m.Data)
	}
	if runs.Load() != 0 {
		t.Errorf("gate ran %d times, want 0", runs.Load())
	}
}

// accountsConf puts agents and their callers in accounts of their own, as
// an operator's deployment does: the callers import the agents' services.
// A caller's inbox is a subject of its own account, where its replies
// come back through the import; no subject of it can be reached from the
// agents' account.
const accountsConf = `
accounts {
  AGENTS {
    users = [{ user: agent, password: agent-pw }]
    exports = [
      { service: "choria.fisk-ai.discovery.*" }
      { service: "choria.fisk-ai.tool.*" }
    ]
  }
  CALLERS {
    users = [{ user: caller, password: caller-pw }]
    imports = [
      { service: { account: AGENTS, subject: "choria.fisk-ai.discovery.*" } }
      { service: { account: AGENTS, subject: "choria.fisk-ai.tool.*" } }
    ]
  }
}`

// TestCallerProbeOtherAccount: a caller in another account names a probe
// subject of its own account, where the agent's probes find no one
// however alive the caller is; its calls run to their end.
func TestCallerProbeOtherAccount(t *testing.T) {
	t.Parallel()
	ns := natstest.StartFromConfig(t, accountsConf)
	agent := nats.UserInfo("agent", "agent-pw")
	startServer(t, newServer(t, server.Config{Identity: "demo", MaxConcurrent: 2}, demoTools(t, fiskapp.Options{})), ns.Connect(t, agent))
	// The tool requests as the agent gets them, in its account.
	tapConn := ns.Connect(t, agent)
	tap, err := tapConn.SubscribeSync(natsbus.ToolSubject("demo"))
	if err != nil {
		t.Fatal(err)
	}
	// In place on the server before the first call.
	if err := tapConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ns.Connect(t, nats.UserInfo("caller", "caller-pw")), "tester")
	fisktest.WaitFor(t, 10*time.Second, "a tool request naming a probe subject", func() bool {
		if r := callTool(t, c, "demo", "echo", `{"message":"ready"}`); r.IsError {
			t.Fatalf("echo: got %+v", r)
		}
		m, err := tap.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("the tap saw no request: %v", err)
		}
		return m.Header.Get(natsbus.CallerProbeHeader) != ""
	})
	// Longer than a heartbeat interval, so the agent probes while the
	// caller waits.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r, err := c.CallTool(ctx, "demo", "sleep", json.RawMessage(`{"duration":"7s"}`))
	if err != nil || r.IsError || r.Exec == nil || r.Exec.ExitCode != 0 {
		t.Fatalf("a call of a caller that waited for it: got %+v (%v), want the sleep's result", r, err)
	}
}
