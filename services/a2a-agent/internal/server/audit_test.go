package server_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// trail follows the audit records published on a NATS server.
type trail struct{ sub *nats.Subscription }

func followTrail(tb testing.TB, ns *natstest.Server) *trail {
	tb.Helper()
	nc := ns.Connect(tb)
	sub, err := nc.SubscribeSync(audit.SubjectAll())
	if err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return &trail{sub: sub}
}

// next returns the next record, failing tb unless it arrives within 10 s
// and is schema-valid.
func (tr *trail) next(tb testing.TB) (*audit.Record, string) {
	tb.Helper()
	m, err := tr.sub.NextMsg(10 * time.Second)
	if err != nil {
		tb.Fatalf("no audit record: %v", err)
	}
	r, err := audit.Decode(m.Data)
	if err != nil {
		tb.Fatalf("audit record: %v\n%s", err, m.Data)
	}
	return r, m.Subject
}

// none fails tb if a record arrives within a short while.
func (tr *trail) none(tb testing.TB) {
	tb.Helper()
	if m, err := tr.sub.NextMsg(200 * time.Millisecond); err == nil {
		tb.Errorf("audit record: got %s, want none", m.Data)
	}
}

// auditedDemo serves the demo app as identity with a publisher on the
// agent's own connection, closed after the server stops.
func auditedDemo(tb testing.TB, ns *natstest.Server, cfg server.Config) *server.Server {
	tb.Helper()
	nc := ns.Connect(tb)
	pub := audit.NewPublisher(nc, audit.PublisherConfig{Subject: audit.Subject(cfg.Identity), Logger: testLogger(tb)})
	// Cleanups run last first: the server stops, then the publisher
	// drains.
	tb.Cleanup(func() {
		if err := pub.Close(context.Background()); err != nil {
			tb.Errorf("closing the publisher: %v", err)
		}
	})
	cfg.Audit = pub
	srv := newServer(tb, cfg, demoTools(tb, fiskapp.Options{}))
	startServer(tb, srv, nc)
	return srv
}

// TestAuditRecords makes calls of every outcome on both endpoints and
// checks the one record each leaves: schema-valid, on the identity's
// subject, the sender claimed, the arguments canonical, the command and
// exit code when a command ran.
func TestAuditRecords(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	srv := auditedDemo(t, ns, server.Config{Identity: "audited"})
	auditedDemo(t, ns, server.Config{Identity: "hasty", Timeout: 500 * time.Millisecond})
	c := newClient(t, ns.Connect(t), "tester")

	type want struct {
		result, class, command, message string
		exit                            *int
	}
	tests := []struct {
		name   string
		agent  string
		stream bool
		tool   string
		input  string
		want   want
	}{
		{name: "ok", tool: "echo", input: `{"upper":true, "message":"hi"}`, want: want{result: audit.ResultOK, command: "echo --upper -- hi", exit: audit.ExitCode(0)}},
		{name: "no arguments", tool: "cluster_node_status", want: want{result: audit.ResultOK, command: "cluster node status", exit: audit.ExitCode(0)}},
		{name: "non-zero exit", tool: "fail", input: `{"code":7}`, want: want{result: audit.ResultFailed, class: "exit_nonzero", command: "fail --code=7", exit: audit.ExitCode(7)}},
		{name: "unknown tool", tool: "nosuch", input: `{"a":1}`, want: want{result: audit.ResultUnknownTool, class: "unknown_tool", message: `unknown tool "nosuch"`}},
		{name: "invalid input", tool: "echo", input: `{"message":"hi","bogus":1}`, want: want{result: audit.ResultInvalid, class: "invalid_input", message: "bogus"}},
		{name: "timeout", agent: "hasty", tool: "sleep", input: `{"duration":"5s"}`, want: want{result: audit.ResultTimeout, class: "timeout", command: "sleep --duration=5s", message: "timed out after 500ms"}},
		{name: "stream ok", stream: true, tool: "echo", input: `{"message":"hi"}`, want: want{result: audit.ResultOK, command: "echo -- hi", exit: audit.ExitCode(0)}},
		{name: "stream non-zero exit", stream: true, tool: "fail", input: `{"code":3}`, want: want{result: audit.ResultFailed, class: "exit_nonzero", command: "fail --code=3", exit: audit.ExitCode(3)}},
		{name: "stream unknown tool", stream: true, tool: "nosuch", want: want{result: audit.ResultUnknownTool, class: "unknown_tool", message: `unknown tool "nosuch"`}},
		{name: "stream invalid input", stream: true, tool: "echo", input: `{"bogus":1}`, want: want{result: audit.ResultInvalid, class: "invalid_input", message: "bogus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := tt.agent
			if agent == "" {
				agent = "audited"
			}
			var input json.RawMessage
			if tt.input != "" {
				input = json.RawMessage(tt.input)
			}
			before := time.Now()
			if tt.stream {
				if _, err := c.StreamTool(t.Context(), agent, tt.tool, input, nil); err != nil && tt.want.result != audit.ResultUnknownTool {
					t.Fatalf("StreamTool: %v", err)
				}
			} else {
				callTool(t, c, agent, tt.tool, tt.input)
			}
			r, subject := tr.next(t)
			tr.none(t)

			surface := audit.SurfaceA2A
			if tt.stream {
				surface = audit.SurfaceA2AStream
			}
			if subject != audit.Subject(agent) {
				t.Errorf("subject: got %q, want %q", subject, audit.Subject(agent))
			}
			if r.Service != audit.ServiceA2AAgent || r.Identity != agent || r.Surface != surface || r.Tool != tt.tool {
				t.Errorf("got service %q identity %q surface %q tool %q, want %q %q %q %q",
					r.Service, r.Identity, r.Surface, r.Tool, audit.ServiceA2AAgent, agent, surface, tt.tool)
			}
			if agent == "audited" && r.Instance != srv.Self().Instance {
				t.Errorf("instance: got %q, want %q", r.Instance, srv.Self().Instance)
			}
			if want := (audit.Caller{Name: "tester", Claimed: true}); r.Caller.Name != want.Name || !r.Caller.Claimed || r.Caller.Subject != "" {
				t.Errorf("caller: got %+v, want %+v", r.Caller, want)
			}
			if r.Gate.Decision != audit.DecisionNotGated {
				t.Errorf("gate: got %q, want %q", r.Gate.Decision, audit.DecisionNotGated)
			}
			if got, want := string(r.Arguments), string(audit.Canonical(input)); got != want {
				t.Errorf("arguments: got %s, want %s", got, want)
			}
			if got, want := r.ArgumentsDigest, audit.Digest(input); got != want {
				t.Errorf("digest: got %s, want %s", got, want)
			}
			o := r.Outcome
			if o.Result != tt.want.result || o.ErrorClass != tt.want.class {
				t.Errorf("outcome: got %q class %q (%s), want %q class %q", o.Result, o.ErrorClass, o.Message, tt.want.result, tt.want.class)
			}
			switch {
			case tt.want.exit == nil && o.ExitCode != nil:
				t.Errorf("exit code: got %d, want none", *o.ExitCode)
			case tt.want.exit != nil && (o.ExitCode == nil || *o.ExitCode != *tt.want.exit):
				t.Errorf("exit code: got %v, want %d", o.ExitCode, *tt.want.exit)
			}
			if tt.want.command == "" && r.Command != "" || !strings.HasSuffix(r.Command, tt.want.command) {
				t.Errorf("command: got %q, want one ending %q", r.Command, tt.want.command)
			}
			if !strings.Contains(o.Message, tt.want.message) || tt.want.message == "" && o.Message != "" {
				t.Errorf("message: got %q, want %q", o.Message, tt.want.message)
			}
			if elapsed := time.Since(before); o.DurationMS <= 0 || o.DurationMS > float64(elapsed.Milliseconds()+1) {
				t.Errorf("duration: got %gms, want above 0 and at most the %s the call took", o.DurationMS, elapsed)
			}
			if r.Time.Before(before.Add(-time.Second)) || r.Time.After(time.Now()) {
				t.Errorf("time: got %s, want the call's arrival, after %s", r.Time, before)
			}
			if r.TraceID != "" {
				t.Errorf("trace id: got %q, want none without a tracer", r.TraceID)
			}
		})
	}
}

// TestAuditCanceledStream cancels a streamed call: its record says
// canceled by the caller, names the command that was running, and holds
// no exit code and none of the output.
func TestAuditCanceledStream(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	auditedDemo(t, ns, server.Config{Identity: "audited"})
	c := newClient(t, ns.Connect(t), "tester")

	pidfile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.StreamTool(ctx, "audited", "spawn", json.RawMessage(`{"duration":"1m","pidfile":`+strconv.Quote(pidfile)+`}`), nil)
		done <- err
	}()
	fisktest.WaitPIDFile(t, pidfile)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no final reply within 30s of the cancel")
	}
	r, _ := tr.next(t)
	o := r.Outcome
	if r.Surface != audit.SurfaceA2AStream || o.Result != audit.ResultCanceled || o.ErrorClass != "canceled_by_caller" || o.ExitCode != nil {
		t.Errorf("got surface %q result %q class %q exit %v, want a2a-stream canceled canceled_by_caller and no exit code", r.Surface, o.Result, o.ErrorClass, o.ExitCode)
	}
	if !strings.Contains(r.Command, "spawn --duration=1m") {
		t.Errorf("command: got %q, want the spawn command line", r.Command)
	}
	if !strings.Contains(o.Message, "canceled") || strings.Contains(o.Message, "spawned") {
		t.Errorf("message: got %q, want why it was canceled and none of the output", o.Message)
	}
}

// TestAuditDigestOnly records only the digest of the arguments, and no
// command line.
func TestAuditDigestOnly(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	auditedDemo(t, ns, server.Config{Identity: "audited", AuditDigestOnly: true})
	c := newClient(t, ns.Connect(t), "tester")
	const secret = `{"message":"a secret argument"}`
	callTool(t, c, "audited", "echo", secret)
	r, _ := tr.next(t)
	if r.Arguments != nil || r.ArgumentsDigest != audit.Digest(json.RawMessage(secret)) {
		t.Errorf("got arguments %s digest %s, want none and %s", r.Arguments, r.ArgumentsDigest, audit.Digest(json.RawMessage(secret)))
	}
	// The command line spells the arguments out: it goes too.
	if r.Command != "" {
		t.Errorf("command: got %q, want none with the digest only", r.Command)
	}
}

// TestAuditTraceID records the trace of a call made within a span.
func TestAuditTraceID(t *testing.T) {
	tracer, _ := inMemoryTracing(t)
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	auditedDemo(t, ns, server.Config{Identity: "audited", Tracer: tracer})
	c := newClient(t, ns.Connect(t), "tester")
	ctx, span := tracer.Start(t.Context(), "caller", trace.WithSpanKind(trace.SpanKindClient))
	if _, err := c.CallTool(ctx, "audited", "echo", json.RawMessage(`{"message":"x"}`)); err != nil {
		t.Fatal(err)
	}
	span.End()
	r, _ := tr.next(t)
	if got, want := r.TraceID, span.SpanContext().TraceID().String(); got != want {
		t.Errorf("trace id: got %q, want the caller's %q", got, want)
	}
}

// TestNoAuditWithoutPublisher: a server without a publisher publishes
// nothing on the trail.
func TestNoAuditWithoutPublisher(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	srv := newServer(t, server.Config{Identity: "quiet"}, demoTools(t, fiskapp.Options{}))
	startServer(t, srv, ns.Connect(t))
	callTool(t, newClient(t, ns.Connect(t), "tester"), "quiet", "echo", `{"message":"x"}`)
	tr.none(t)
}

// TestAuditStopping stops the agent with one call running and one waiting
// for the slot: the waiting call is refused as stopping, the running one
// finishes, and each leaves its record, published before the publisher
// closes.
func TestAuditStopping(t *testing.T) {
	ns := natstest.Start(t)
	tr := followTrail(t, ns)
	nc := ns.Connect(t)
	pub := audit.NewPublisher(nc, audit.PublisherConfig{Logger: testLogger(t)})
	b := newBlockingTool(t)
	// A span processor tells when a handler begins to wait for the slot.
	waits := make(chan struct{}, 4)
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(slotWaits{waits}))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	srv := newServer(t, server.Config{Identity: "narrow", MaxConcurrent: 1, Audit: pub, Tracer: sdk.Tracer("test")}, []tool.Tool{b})
	startServer(t, srv, nc)
	c := newClient(t, ns.Connect(t), "tester")

	first := goCall(t, c, "narrow", "block", `{"id":"first"}`)
	receive(t, b.entered, "the first call to enter")
	receive(t, waits, "the first call's slot wait")
	second := goCall(t, c, "narrow", "block", `{"id":"second"}`)
	// The second call's handler waits for the slot the first one holds.
	receive(t, waits, "the second call's slot wait")

	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(context.Background()) }()
	if r := receive(t, second, "the refusal"); r.err != nil || !strings.Contains(r.reply.Output, "is stopping") {
		t.Fatalf("second call: got %+v, %v, want the stopping refusal", r.reply, r.err)
	}
	close(b.release)
	if r := receive(t, first, "the first reply"); r.err != nil || r.reply.IsError {
		t.Fatalf("first call: got %+v, %v, want its result", r.reply, r.err)
	}
	if err := receive(t, stopped, "Stop"); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]*audit.Record{}
	for range 2 {
		r, _ := tr.next(t)
		got[r.Outcome.Result] = r
	}
	if r := got[audit.ResultRefused]; r == nil || r.Outcome.ErrorClass != "stopping" || string(r.Arguments) != `{"id":"second"}` {
		t.Errorf("refused record: got %+v, want the second call refused as stopping", r)
	}
	if r := got[audit.ResultOK]; r == nil || string(r.Arguments) != `{"id":"first"}` {
		t.Errorf("ok record: got %+v, want the first call", r)
	}
}

// slotWaits is a span processor that signals each "slot wait" span as it
// starts.
type slotWaits struct{ ch chan<- struct{} }

func (w slotWaits) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == "slot wait" {
		w.ch <- struct{}{}
	}
}
func (slotWaits) OnEnd(sdktrace.ReadOnlySpan)      {}
func (slotWaits) Shutdown(context.Context) error   { return nil }
func (slotWaits) ForceFlush(context.Context) error { return nil }
