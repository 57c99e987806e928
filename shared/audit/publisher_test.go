package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// startJetStream starts a NATS server with JetStream and an AUDIT stream
// on every identity's trail, as docs/security.md tells operators to create it.
func startJetStream(tb testing.TB) (*natstest.Server, jetstream.Stream) {
	tb.Helper()
	ns := natstest.StartWithOptions(tb, server.Options{JetStream: true, StoreDir: tb.TempDir()})
	js, err := jetstream.New(ns.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := js.CreateStream(tb.Context(), jetstream.StreamConfig{
		Name:     "AUDIT",
		Subjects: []string{audit.SubjectAll()},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		tb.Fatalf("creating the AUDIT stream: %v", err)
	}
	return ns, stream
}

// streamMessages waits until stream holds want messages and returns them
// in stream order.
func streamMessages(tb testing.TB, stream jetstream.Stream, want int) []jetstream.RawStreamMsg {
	tb.Helper()
	fisktest.WaitFor(tb, 20*time.Second, fmt.Sprintf("%d messages in the stream", want), func() bool {
		info, err := stream.Info(tb.Context())
		return err == nil && info.State.Msgs >= uint64(want)
	})
	info, err := stream.Info(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	if got := info.State.Msgs; got != uint64(want) {
		tb.Fatalf("stream messages: got %d, want %d", got, want)
	}
	out := make([]jetstream.RawStreamMsg, 0, want)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(tb.Context(), seq)
		if err != nil {
			tb.Fatalf("getting message %d: %v", seq, err)
		}
		out = append(out, *m)
	}
	return out
}

func closePublisher(tb testing.TB, p *audit.Publisher) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

// TestPublisherJetStream publishes 2000 records as fast as a loop can and
// finds every one, schema-valid and in order, in a JetStream stream made
// on the subject.
func TestPublisherJetStream(t *testing.T) {
	const n = 2000
	ns, stream := startJetStream(t)
	var logs logSink
	// The loop publishes faster than any service calls tools: the buffer
	// holds the whole burst, as DefaultBuffer holds a real one.
	p := audit.NewPublisher(ns.Connect(t), audit.PublisherConfig{Subject: audit.Subject("demo"), Buffer: n, Logger: logs.logger()})
	for i := range n {
		p.Publish(sampleRecord(i))
	}
	closePublisher(t, p)
	msgs := streamMessages(t, stream, n)
	for i, m := range msgs {
		if m.Subject != "choria.fisk-ai.audit.demo" {
			t.Fatalf("message %d subject: got %q, want choria.fisk-ai.audit.demo", i, m.Subject)
		}
		r, err := audit.Decode(m.Data)
		if err != nil {
			t.Fatalf("message %d: %v\n%s", i, err, m.Data)
		}
		if got, want := r.Tool, fmt.Sprintf("tool-%05d", i); got != want {
			t.Fatalf("message %d: got tool %s, want %s (records out of order)", i, got, want)
		}
	}
	if !strings.Contains(string(msgs[0].Data), "hi && true") {
		t.Errorf("record: got %s, want the command without HTML escaping", msgs[0].Data)
	}
	if got := logs.unpublished(t); len(got) != 0 {
		t.Errorf("unpublished records: got %d, want none (first: %s)", len(got), got[0].Record)
	}
}

// TestPublisherSubjects checks where records go: the configured subject,
// else the default subject of each record's identity.
func TestPublisherSubjects(t *testing.T) {
	tests := []struct {
		name     string
		subject  string
		identity string
		want     string
	}{
		{name: "configured subject", subject: "ops.audit.fleet", identity: "demo", want: "ops.audit.fleet"},
		{name: "default of the identity", identity: "billing", want: "choria.fisk-ai.audit.billing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := natstest.Start(t)
			sub := subscribe(t, ns, ">")
			p := audit.NewPublisher(ns.Connect(t), audit.PublisherConfig{Subject: tt.subject})
			r := sampleRecord(1)
			r.Identity = tt.identity
			p.Publish(r)
			closePublisher(t, p)
			m, err := sub.NextMsg(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != tt.want {
				t.Errorf("subject: got %q, want %q", m.Subject, tt.want)
			}
		})
	}
}

// TestPublisherBoundsHostileRecord publishes a record carrying what a
// hostile caller controls at its worst: it is cut to the schema's bounds,
// published and valid.
func TestPublisherBoundsHostileRecord(t *testing.T) {
	ns := natstest.Start(t)
	sub := subscribe(t, ns, audit.SubjectAll())
	var logs logSink
	p := audit.NewPublisher(ns.Connect(t), audit.PublisherConfig{Logger: logs.logger()})
	r := sampleRecord(1)
	r.Time = time.Time{}
	r.Tool = strings.Repeat("é", 1000)
	r.Caller.Name = "bad\xffname"
	roles := make([]string, 100)
	roles[0] = strings.Repeat("r", 1000)
	r.Caller.Roles = roles
	r.Command = strings.Repeat("c", 100<<10)
	r.Outcome.Message = strings.Repeat("世", 1000)
	r.Outcome.DurationMS = -3
	r.SetArguments(json.RawMessage(`{"blob":"`+strings.Repeat("x", 900<<10)+`"}`), false)
	p.Publish(r)
	closePublisher(t, p)
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no record published: %v; log:\n%s", err, logs.buf.String())
	}
	got, err := audit.Decode(m.Data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	checks := []struct {
		what      string
		got, want int
	}{
		{"tool bytes at most", len(got.Tool), audit.MaxLabel},
		{"message bytes at most", len(got.Outcome.Message), audit.MaxMessage},
		{"command bytes at most", len(got.Command), audit.MaxCommand},
		{"roles at most", len(got.Caller.Roles), audit.MaxRoles},
		{"record bytes at most", len(m.Data), 64 << 10},
	}
	for _, c := range checks {
		if c.got > c.want {
			t.Errorf("%s %d: got %d", c.what, c.want, c.got)
		}
	}
	if len(roles[0]) != 1000 || len(got.Caller.Roles[0]) != audit.MaxLabel {
		t.Errorf("roles: got %d bytes in the caller's slice and %d in the record, want 1000 (untouched) and %d", len(roles[0]), len(got.Caller.Roles[0]), audit.MaxLabel)
	}
	if got.Time.IsZero() || got.Arguments != nil || got.ArgumentsNote != audit.NoteTooLarge || got.Caller.Name != "bad\uFFFDname" {
		t.Errorf("record: got time %v, arguments %d bytes, note %q, caller %q; want a time, no arguments, too_large, the name with U+FFFD",
			got.Time, len(got.Arguments), got.ArgumentsNote, got.Caller.Name)
	}
}

// TestPublisherWithoutConnection logs every record at info level.
func TestPublisherWithoutConnection(t *testing.T) {
	var logs logSink
	p := audit.NewPublisher(nil, audit.PublisherConfig{Logger: logs.logger()})
	p.Publish(sampleRecord(3))
	closePublisher(t, p)
	lines := logs.lines(t)
	if len(lines) != 1 || lines[0].Level != "INFO" || lines[0].Msg != "audit record" {
		t.Fatalf("log: got %+v, want one info line \"audit record\"", lines)
	}
	if _, err := audit.Decode(lines[0].Record); err != nil {
		t.Errorf("logged record: %v\n%s", err, lines[0].Record)
	}
}

// TestPublisherLogsWhatItCannotPublish checks that a record that cannot be
// published (invalid, after Close, raw arguments that are not JSON) is
// logged at error level with the record.
func TestPublisherLogsWhatItCannotPublish(t *testing.T) {
	tests := []struct {
		name       string
		change     func(*audit.Record)
		afterClose bool
		wantReason string
	}{
		{name: "invalid: no gate decision", change: func(r *audit.Record) { r.Gate.Decision = "" }, wantReason: "invalid"},
		{name: "invalid: unknown result", change: func(r *audit.Record) { r.Outcome.Result = "shrug" }, wantReason: "invalid"},
		{name: "arguments set by hand, not JSON", change: func(r *audit.Record) { r.Arguments = json.RawMessage("{oops") }, wantReason: "encoding"},
		{name: "published after Close", change: func(*audit.Record) {}, afterClose: true, wantReason: "publisher closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := natstest.Start(t)
			sub := subscribe(t, ns, audit.SubjectAll())
			var logs logSink
			p := audit.NewPublisher(ns.Connect(t), audit.PublisherConfig{Logger: logs.logger()})
			r := sampleRecord(9)
			tt.change(r)
			if tt.afterClose {
				closePublisher(t, p)
			}
			p.Publish(r)
			closePublisher(t, p)
			lost := logs.unpublished(t)
			if len(lost) != 1 {
				t.Fatalf("unpublished: got %d log lines, want 1; log:\n%s", len(lost), logs.buf.String())
			}
			if lost[0].Reason != tt.wantReason {
				t.Errorf("reason: got %q, want %q", lost[0].Reason, tt.wantReason)
			}
			if !strings.Contains(string(lost[0].Record), "tool-00009") || !json.Valid(lost[0].Record) {
				t.Errorf("logged record: got %s, want the record as JSON", lost[0].Record)
			}
			if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
				t.Errorf("published: got %s, want nothing", m.Data)
			}
		})
	}
}

// TestPublishNeverBlocks stalls the connection (a proxy stops reading, so
// the publisher's writes block in the socket) and publishes far more than
// the buffer holds: every Publish returns at once, every record that
// found the buffer full is logged with the record, and once the
// connection flows again every other record arrives. None is lost
// silently.
func TestPublishNeverBlocks(t *testing.T) {
	const (
		n      = 300
		buffer = 8
	)
	ns := natstest.Start(t)
	sub := subscribe(t, ns, audit.SubjectAll())
	proxy := startStallProxy(t, strings.TrimPrefix(ns.URL(), "nats://"))
	nc, err := nats.Connect(proxy.URL(), nats.SetCustomDialer(smallWriteBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var logs logSink
	p := audit.NewPublisher(nc, audit.PublisherConfig{Buffer: buffer, Logger: logs.logger()})

	proxy.stall()
	// The stall lasts until resume: a Publish that waited for the
	// connection would never return, and the loop would not end.
	done := make(chan struct{})
	go func() {
		defer close(done)
		blob := strings.Repeat("x", 60<<10)
		for i := range n {
			r := sampleRecord(i)
			r.SetArguments(json.RawMessage(`{"blob":"`+blob+`"}`), false)
			p.Publish(r)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Publish blocked on a stalled connection: %d records logged so far", len(logs.unpublished(t)))
	}
	lost := logs.unpublished(t)
	if len(lost) == 0 {
		t.Fatalf("unpublished: got none, want the records that found the buffer full")
	}
	for _, l := range lost {
		if l.Reason != "buffer full" || !strings.Contains(string(l.Record), `"tool":"tool-`) {
			t.Fatalf("unpublished line: got reason %q record %.100s, want buffer full with the record", l.Reason, l.Record)
		}
	}

	proxy.resume()
	closePublisher(t, p)
	delivered := n - len(lost)
	for i := range delivered {
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("delivered: got %d, want %d (n %d - logged %d): %v", i, delivered, n, len(lost), err)
		}
	}
	if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Errorf("got a record beyond n - logged: %.100s", m.Data)
	}
}

// TestCloseGivesUp stalls the connection and closes with a short
// deadline: Close returns ErrUnpublished instead of waiting, and the
// records still buffered are logged.
func TestCloseGivesUp(t *testing.T) {
	ns := natstest.Start(t)
	proxy := startStallProxy(t, strings.TrimPrefix(ns.URL(), "nats://"))
	nc, err := nats.Connect(proxy.URL(), nats.SetCustomDialer(smallWriteBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var logs logSink
	p := audit.NewPublisher(nc, audit.PublisherConfig{Buffer: 64, Logger: logs.logger()})
	proxy.stall()
	blob := strings.Repeat("x", 60<<10)
	for i := range 64 {
		r := sampleRecord(i)
		r.SetArguments(json.RawMessage(`{"blob":"`+blob+`"}`), false)
		p.Publish(r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Close(ctx); !errors.Is(err, audit.ErrUnpublished) {
		t.Fatalf("Close: got %v, want %v", err, audit.ErrUnpublished)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %s, want it to give up at its deadline", took)
	}
	// The publisher's goroutine is stuck in a write until the connection
	// moves again; then it logs the rest instead of publishing them.
	proxy.resume()
	fisktest.WaitFor(t, 10*time.Second, "the records left to be logged", func() bool {
		for _, l := range logs.unpublished(t) {
			if l.Reason == "closing timed out" {
				return true
			}
		}
		return false
	})
}

// TestPublisherReconnect stops the NATS server under the publisher: the
// records published while it is away wait in nats.go's reconnect buffer
// and reach the stream once it is back. With a reconnect buffer too small
// for them, those that do not fit are logged with the record, and
// delivered plus logged is every record.
func TestPublisherReconnect(t *testing.T) {
	const before, during = 20, 50
	tests := []struct {
		name       string
		bufSize    int
		wantLogged bool
	}{
		{name: "reconnect buffer holds them", bufSize: 8 << 20},
		{name: "reconnect buffer too small", bufSize: 4 << 10, wantLogged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, stream := startJetStream(t)
			nc := ns.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(tt.bufSize))
			var logs logSink
			p := audit.NewPublisher(nc, audit.PublisherConfig{Logger: logs.logger()})
			for i := range before {
				p.Publish(sampleRecord(i))
			}
			streamMessages(t, stream, before)

			ns.Shutdown()
			fisktest.WaitFor(t, 10*time.Second, "the client to notice the server is gone", func() bool { return nc.Status() == nats.RECONNECTING })
			base := nc.Stats().OutMsgs
			for i := range during {
				p.Publish(sampleRecord(before + i))
			}
			var logged int
			fisktest.WaitFor(t, 10*time.Second, "the publisher to handle every record", func() bool {
				logged = len(logs.unpublished(t))
				return int(nc.Stats().OutMsgs-base)+logged == during
			})
			ns.Restart()
			fisktest.WaitFor(t, 20*time.Second, "the client to reconnect", nc.IsConnected)
			closePublisher(t, p)

			if got := logged > 0; got != tt.wantLogged {
				t.Errorf("records logged: got %d, want some %t", logged, tt.wantLogged)
			}
			for _, l := range logs.unpublished(t) {
				if l.Reason != "publishing" || !json.Valid(l.Record) {
					t.Errorf("unpublished line: got reason %q record %.100s, want publishing with the record", l.Reason, l.Record)
				}
			}
			msgs := streamMessages(t, stream, before+during-logged)
			for i, m := range msgs {
				if _, err := audit.Decode(m.Data); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
		})
	}
}

// subscribe subscribes to subject on a connection of its own, registered
// with the server when it returns.
func subscribe(tb testing.TB, ns *natstest.Server, subject string) *nats.Subscription {
	tb.Helper()
	nc := ns.Connect(tb)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return sub
}
