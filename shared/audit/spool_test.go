package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// trailStream is a JetStream stream on every audit subject, with a
// duplicate window, as an operator keeps the trail.
func trailStream(tb testing.TB, ns *natstest.Server) jetstream.Stream {
	tb.Helper()
	js, err := jetstream.New(ns.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := js.CreateStream(tb.Context(), jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{audit.SubjectAll()}, Duplicates: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// trailTools reads the stream from its start and returns each record's
// tool, in stream order, with a fresh connection to the server.
func trailTools(tb testing.TB, ns *natstest.Server, want int) []string {
	tb.Helper()
	js, err := jetstream.New(ns.Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	var st jetstream.Stream
	fisktest.WaitFor(tb, 20*time.Second, fmt.Sprintf("the stream to hold %d records", want), func() bool {
		st, err = js.Stream(tb.Context(), "AUDIT")
		if err != nil {
			return false
		}
		info, err := st.Info(tb.Context())
		return err == nil && info.State.Msgs >= uint64(want)
	})
	var tools []string
	info, _ := st.Info(tb.Context())
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(tb.Context(), seq)
		if err != nil {
			tb.Fatalf("reading the stream's message %d: %v", seq, err)
		}
		r, err := audit.Decode(m.Data)
		if err != nil {
			tb.Fatalf("the stream's message %d: %v", seq, err)
		}
		tools = append(tools, r.Tool)
	}
	return tools
}

func wantTools(from, to int) []string {
	var out []string
	for n := from; n < to; n++ {
		out = append(out, sampleRecord(n).Tool)
	}
	return out
}

// reconnecting connects to ns for good: the publisher's connection rides
// out the outage.
func reconnecting(tb testing.TB, ns *natstest.Server) *nats.Conn {
	return ns.Connect(tb, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1))
}

// TestSpoolOutage: records published while the server is away go to the
// spool and, once it is back, to the stream, behind the ones before the
// outage and before the ones after it: every record once, in order.
func TestSpoolOutage(t *testing.T) {
	ns := natstest.StartJetStream(t)
	trailStream(t, ns)
	var log logSink
	p, err := audit.OpenPublisher(reconnecting(t, ns), audit.PublisherConfig{Logger: log.logger(), SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 50 {
		p.Publish(sampleRecord(n))
	}
	trailTools(t, ns, 50)
	ns.Stop()
	for n := 50; n < 150; n++ {
		p.Publish(sampleRecord(n))
	}
	fisktest.WaitFor(t, 10*time.Second, "the outage's records to be spooled", func() bool { return p.Spooled() == 100 })
	ns.Resume()
	for n := 150; n < 160; n++ {
		p.Publish(sampleRecord(n))
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := trailTools(t, ns, 160), wantTools(0, 160); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the trail: got %d records %v, want the 160 in call order", len(got), got)
	}
	if lost := log.unpublished(t); len(lost) != 0 {
		t.Errorf("got %d records logged as not published, want none: %+v", len(lost), lost[0])
	}
}

// TestSpoolRestart: a publisher stopped mid-outage leaves its records on
// disk, and the next one on the same spool_dir publishes them first.
func TestSpoolRestart(t *testing.T) {
	ns := natstest.StartJetStream(t)
	trailStream(t, ns)
	dir := t.TempDir()
	nc := reconnecting(t, ns)
	ns.Stop()
	first, err := audit.OpenPublisher(nc, audit.PublisherConfig{Logger: (&logSink{}).logger(), SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 30 {
		first.Publish(sampleRecord(n))
	}
	fisktest.WaitFor(t, 10*time.Second, "the records to be spooled", func() bool { return first.Spooled() == 30 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_ = first.Close(ctx)
	nc.Close()
	fisktest.WaitFor(t, 10*time.Second, "the first publisher to release its slot", func() bool { return slotFree(t, filepath.Join(dir, "slot-0")) })

	ns.Resume()
	second, err := audit.OpenPublisher(reconnecting(t, ns), audit.PublisherConfig{Logger: (&logSink{}).logger(), SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second.Publish(sampleRecord(30))
	if err := second.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := trailTools(t, ns, 31), wantTools(0, 31); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the trail after a restart: got %v, want the 30 spooled records, then the new one", got)
	}
}

// TestSpoolFull: a spool at audit.spool_max keeps the oldest records,
// refuses the newest with an error log naming the key, and counts them.
func TestSpoolFull(t *testing.T) {
	ns := natstest.StartJetStream(t)
	trailStream(t, ns)
	nc := reconnecting(t, ns)
	ns.Stop()
	var log logSink
	// Room for some three records of about 600 bytes.
	p, err := audit.OpenPublisher(nc, audit.PublisherConfig{Logger: log.logger(), SpoolDir: t.TempDir(), SpoolMax: 2000})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 10 {
		p.Publish(sampleRecord(n))
	}
	fisktest.WaitFor(t, 10*time.Second, "the spool to fill", func() bool { return p.Spooled()+int64(p.SpoolDropped()) == 10 })
	kept := int(p.Spooled())
	if kept == 0 || p.SpoolDropped() == 0 {
		t.Fatalf("got %d kept and %d dropped, want the spool full", kept, p.SpoolDropped())
	}
	lost := log.unpublished(t)
	if len(lost) != int(p.SpoolDropped()) || !strings.Contains(log.buf.String(), "audit.spool_max") {
		t.Errorf("got %d records logged as not published, want %d, each naming audit.spool_max:\n%s", len(lost), p.SpoolDropped(), log.buf.String())
	}
	ns.Resume()
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := trailTools(t, ns, kept), wantTools(0, kept); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the trail: got %v, want the oldest %d", got, kept)
	}
}

// TestSpoolDamage: a half-written file and a damaged record left in the
// spool are skipped with a log line, and the records behind them still
// go out.
func TestSpoolDamage(t *testing.T) {
	ns := natstest.StartJetStream(t)
	trailStream(t, ns)
	dir := t.TempDir()
	nc := reconnecting(t, ns)
	ns.Stop()
	first, err := audit.OpenPublisher(nc, audit.PublisherConfig{Logger: (&logSink{}).logger(), SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		first.Publish(sampleRecord(n))
	}
	fisktest.WaitFor(t, 10*time.Second, "the records to be spooled", func() bool { return first.Spooled() == 3 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_ = first.Close(ctx)
	nc.Close()
	slot := filepath.Join(dir, "slot-0")
	// Close gave up while the server was away; the first publisher's
	// goroutine lets go of its slot a moment later. A second one opened
	// before that would take an empty slot of its own.
	fisktest.WaitFor(t, 10*time.Second, "the first publisher to release its slot", func() bool { return slotFree(t, slot) })
	files, _ := filepath.Glob(filepath.Join(slot, "*.rec"))
	if len(files) != 3 {
		t.Fatalf("got spool files %v, want 3", files)
	}
	if err := os.WriteFile(files[1], []byte("garbage without a message id"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(slot, "00000000000000000099.rec.tmp"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}

	ns.Resume()
	var log logSink
	second, err := audit.OpenPublisher(reconnecting(t, ns), audit.PublisherConfig{Logger: log.logger(), SpoolDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := trailTools(t, ns, 2); strings.Join(got, ",") != sampleRecord(0).Tool+","+sampleRecord(2).Tool {
		t.Errorf("the trail: got %v, want records 0 and 2 around the damaged one", got)
	}
	for _, want := range []string{"dropping a damaged spooled record", "half written"} {
		if !strings.Contains(log.buf.String(), want) {
			t.Errorf("the log: got\n%s\nwant %q", log.buf.String(), want)
		}
	}
}

// slotFree reports whether no publisher holds the spool slot's lock.
func slotFree(tb testing.TB, slot string) bool {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(slot, "LOCK"), os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}
