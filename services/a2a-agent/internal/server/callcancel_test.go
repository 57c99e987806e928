package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// spawnInput is the demo spawn command's input: a grandchild that ignores
// SIGTERM, its PID written to pidfile, and a minute's sleep.
func spawnInput(pidfile string) json.RawMessage {
	return json.RawMessage(`{"duration":"1m","pidfile":` + strconv.Quote(pidfile) + `}`)
}

// goCancelable makes a cancelable unary call on its own goroutine.
func goCancelable(ctx context.Context, c *a2a.Client, identity, name string, input json.RawMessage) <-chan callResult {
	done := make(chan callResult, 1)
	go func() {
		r, err := c.CallToolCancelable(ctx, identity, name, input, 10*time.Second)
		done <- callResult{r, err}
	}()
	return done
}

// TestCallCancelCard lists the unary cancel beside the streamed call in
// the card, and leaves the card valid for every v1 reader (Decode checks
// the reply against the v1 schema).
func TestCallCancelCard(t *testing.T) {
	_, c, _ := serveDemo(t, server.Config{}, fiskapp.Options{})
	card, err := c.Discover(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a2a.ProtocolEvent, a2a.ProtocolCancel, a2a.ProtocolCallCancel} {
		if !slices.Contains(card.Protocols, p) {
			t.Errorf("card protocols %v: want %s", card.Protocols, p)
		}
	}
	if ok, err := c.CancelsCalls(t.Context(), "demo"); err != nil || !ok {
		t.Errorf("CancelsCalls: got %v, %v, want true", ok, err)
	}
}

// TestCallCancelKillsGroup cancels a unary call of the demo spawn: the
// agent kills the whole process group (the grandchild that ignores SIGTERM
// included), answers the call with a reply that says it was canceled,
// records it as canceled by its caller, and frees its only slot.
func TestCallCancelKillsGroup(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	auditedDemo(t, ns, server.Config{Identity: "demo", MaxConcurrent: 1})
	c := newClient(t, ns.Connect(t), "tester")
	pidfile := filepath.Join(t.TempDir(), "child.pid")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := goCancelable(ctx, c, "demo", "spawn", spawnInput(pidfile))
	pid := fisktest.WaitPIDFile(t, pidfile)
	canceled := time.Now()
	cancel()
	r := receive(t, done, "the canceled call's reply")
	if !errors.Is(r.err, context.Canceled) || r.reply == nil || !r.reply.IsError ||
		!strings.Contains(r.reply.Output, "tool spawn was canceled: canceled by the caller; its process group was killed") {
		t.Errorf("got %+v, %v, want the reply saying canceled with context.Canceled", r.reply, r.err)
	}
	fisktest.WaitFor(t, 10*time.Second, "the SIGTERM-ignoring grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
	t.Logf("grandchild gone %s after the cancel", time.Since(canceled).Round(time.Millisecond))

	rec, _ := tr.next(t)
	o := rec.Outcome
	if rec.Surface != audit.SurfaceA2A || o.Result != audit.ResultCanceled || o.ErrorClass != "canceled_by_caller" || o.ExitCode != nil {
		t.Errorf("audit: got surface %q result %q class %q exit %v, want a2a canceled canceled_by_caller and no exit code", rec.Surface, o.Result, o.ErrorClass, o.ExitCode)
	}
	if !strings.Contains(rec.Command, "spawn --duration=1m") || rec.Caller.Name != "tester" {
		t.Errorf("audit: got command %q caller %+v, want the spawn command line and tester", rec.Command, rec.Caller)
	}
	// The only slot is free again.
	if r := callTool(t, c, "demo", "echo", `{"message":"after"}`); r.IsError || r.Output != "after\n" {
		t.Errorf("after the cancel: got %+v, want the echo", r)
	}
}

// TestCallCancelReachesItsInstance runs two instances of one identity: a
// cancel on the shared subject stops the call where it runs, and the other
// instance, which heard it too, ignores it at debug level.
func TestCallCancelReachesItsInstance(t *testing.T) {
	ns := natstest.Start(t)
	insts := []string{"inst-a", "inst-b"}
	logs := make([]*fisktest.Buffer, len(insts))
	for i, inst := range insts {
		logs[i] = &fisktest.Buffer{}
		srv := newServer(t, server.Config{Instance: inst,
			Logger: slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))}, demoTools(t, fiskapp.Options{}))
		startServer(t, srv, ns.Connect(t))
	}
	c := newClient(t, ns.Connect(t), "tester")
	// Calls land on either instance: cancel a few, so that each instance
	// is both the one that runs a call and the one that does not.
	ran := map[string]bool{}
	// want counts the log lines each instance must have written so far.
	want := map[string]int{}
	for round := 0; round < 12 && len(ran) < 2; round++ {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		ctx, cancel := context.WithCancel(t.Context())
		done := goCancelable(ctx, c, "demo", "spawn", spawnInput(pidfile))
		pid := fisktest.WaitPIDFile(t, pidfile)
		cancel()
		r := receive(t, done, "the canceled call's reply")
		if !errors.Is(r.err, context.Canceled) || r.reply == nil || !strings.Contains(r.reply.Output, "was canceled") {
			t.Fatalf("canceled call: got %+v, %v", r.reply, r.err)
		}
		fisktest.WaitFor(t, 10*time.Second, "the grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
		inst := r.reply.Sender.Instance
		ran[inst] = true
		for i, other := range insts {
			line := `level=INFO msg="call canceled by its caller"`
			if other != inst {
				line = `level=DEBUG msg="ignored a cancel for no call this instance runs"`
			}
			want[other+line]++
			n := want[other+line]
			fisktest.WaitFor(t, 10*time.Second, other+" to log "+line, func() bool { return strings.Count(logs[i].String(), line) >= n })
		}
	}
	if len(ran) != 2 {
		t.Logf("every call ran on %v: the queue group never picked the other instance", ran)
	}
}

// TestCallCancelHostile sends what a hostile or confused peer might on
// the shared control subject while a unary call runs: a cancel for an
// unknown id (ignored, logged at debug), one naming the call's id from
// another sender (ignored with a warning), malformed, mislabelled and
// oversized messages (refused by validation and logged). The call runs
// to its end and the agent keeps serving.
func TestCallCancelHostile(t *testing.T) {
	var logs fisktest.Buffer
	cfg := server.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ns, c, _ := serveDemo(t, cfg, fiskapp.Options{})
	nc := ns.Connect(t)
	// The call's request as it crosses the bus: its id is what a cancel
	// names, and only those who may read the tool subject see it.
	snoop, err := nc.SubscribeSync(natsbus.ToolSubject("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	done := goCancelable(t.Context(), c, "demo", "sleep", json.RawMessage(`{"duration":"3s"}`))
	seen, err := snoop.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req := &a2a.ToolRequest{}
	if err := a2a.Decode(seen.Data, req); err != nil {
		t.Fatal(err)
	}
	_ = snoop.Unsubscribe()

	tests := []struct {
		name    string
		data    []byte
		wantLog string
	}{
		{"cancel for an unknown id", cancelFrom(t, "tester", "no-such-call"), "level=DEBUG msg=\"ignored a cancel for no call this instance runs\""},
		{"cancel from a forged sender", cancelFrom(t, "mallory", req.ID), "level=WARN msg=\"ignored a cancel from another caller than the call's\""},
		{"malformed control message", []byte(`{"protocol":`), "ignored a malformed control message"},
		{"not JSON at all", []byte("\x00\xff cancel everything"), "ignored a malformed control message"},
		{"mislabelled control message", mustJSON(t, validRequest(t, "demo", "echo", `{}`)), "ignored a malformed control message"},
		{"cancel with unknown fields", []byte(strings.Replace(string(cancelFrom(t, "tester", req.ID)), `{`, `{"kill":"all",`, 1)), "ignored a malformed control message"},
		{"oversized control message", make([]byte, a2a.MaxMessageSize+1), "ignored a malformed control message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(logs.String(), tt.wantLog)
			// The request is on the bus before the instance has taken
			// the call, and a cancel arriving in between names no call
			// it runs: send again until the answer to this one shows.
			var sent time.Time
			fisktest.WaitFor(t, 10*time.Second, "the log line "+tt.wantLog, func() bool {
				if strings.Count(logs.String(), tt.wantLog) > before {
					return true
				}
				if time.Since(sent) > 250*time.Millisecond {
					if err := nc.Publish(natsbus.CallControlSubject("demo"), tt.data); err != nil {
						t.Fatal(err)
					}
					sent = time.Now()
				}
				return false
			})
		})
	}
	r := receive(t, done, "the call under attack")
	if r.err != nil || r.reply.IsError || !strings.HasPrefix(r.reply.Output, "slept 3s") {
		t.Errorf("the call under attack: got %+v, %v, want it to run to its end", r.reply, r.err)
	}
	// A cancel for the call now finished is ignored like any unknown id.
	before := strings.Count(logs.String(), "ignored a cancel for no call this instance runs")
	if err := nc.Publish(natsbus.CallControlSubject("demo"), cancelFrom(t, "tester", req.ID)); err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 10*time.Second, "the finished call's cancel to be ignored", func() bool {
		return strings.Count(logs.String(), "ignored a cancel for no call this instance runs") > before
	})
	if r := callTool(t, c, "demo", "echo", `{"message":"still"}`); r.Output != "still\n" {
		t.Errorf("after the attack: got %+v, want the echo", r)
	}
}

// TestCallCancelGated cancels a unary call of a gated tool while it waits
// for an operator: the request is withdrawn and the tool never runs.
func TestCallCancelGated(t *testing.T) {
	ns, b, runs, c := gatedServer(t, time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := goCancelable(ctx, c, "demo", "gate", json.RawMessage(`{}`))
	req := waitPending(t, b, 1)[0]
	cancel()
	r := receive(t, done, "the canceled call's reply")
	if !errors.Is(r.err, context.Canceled) || r.reply == nil || !r.reply.IsError || !strings.Contains(r.reply.Output, "gate was not run: its approval was withdrawn") {
		t.Errorf("got %+v, %v, want the reply saying withdrawn with context.Canceled", r.reply, r.err)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("pending after the cancel: got %+v, want none", p)
	}
	if _, err := approval.Answer(t.Context(), ns.Connect(t), req, true, approval.Approver{Name: "alice"}, ""); !errors.Is(err, approval.ErrRefused) {
		t.Errorf("approving the withdrawn request: got %v, want it refused", err)
	}
	if runs.Load() != 0 {
		t.Errorf("gate ran %d times, want 0", runs.Load())
	}
}
