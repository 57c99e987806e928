package integration_test

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestAuditSpoolOutage: 1,000 calls of the gateway's local echo, with the
// NATS server stopped for 20 s in the middle and the gateway killed
// (SIGKILL) during the outage and started again once the bus is back.
// With audit.spool_dir the JetStream stream of the trail ends with
// exactly 1,000 records, one per call, in call order.
func TestAuditSpoolOutage(t *testing.T) {
	t.Parallel()
	ns := natstest.StartJetStream(t)
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, fleetContext, nil)
	js, err := jetstream.New(ns.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{audit.SubjectAll()}, Duplicates: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	spool := t.TempDir()
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"max_concurrent_tools": 4},
		Extra:           map[string]any{"audit": map[string]any{"spool_dir": spool}},
	})
	gw := startGateway(t, home.Env(), cfg)

	hc := &http.Client{Timeout: 30 * time.Second}
	var buf bytes.Buffer
	n := 0
	calls := func(count int) {
		t.Helper()
		for range count {
			body := strings.Replace(mcpEchoRequest, `"message":"hi"`, fmt.Sprintf(`"message":"call-%04d"`, n), 1)
			if err := postMCP(t.Context(), hc, gw.URL, "tools/call", "echo", body, &buf); err != nil || !bytes.Contains(buf.Bytes(), fmt.Appendf(nil, "call-%04d", n)) {
				t.Fatalf("call %d: %v %.300s", n, err, buf.Bytes())
			}
			n++
		}
	}
	// spooled counts the records on disk now.
	spooled := func() int {
		files, _ := filepath.Glob(filepath.Join(spool, "slot-*", "*.rec"))
		return len(files)
	}

	calls(300)
	ns.Stop()
	outage := time.Now()
	calls(250)
	// The record of a call goes to disk just after its answer: wait for
	// it before the kill (see docs/security.md on what a kill can still lose).
	// At least the outage's 250: a record of the last calls before it may
	// have been on its way when the bus stopped and be spooled too; the
	// stream's count below is what says none is lost or doubled.
	fisktest.WaitFor(t, 30*time.Second, "the outage's calls to be spooled", func() bool { return spooled() >= 250 })
	gw.Signal(t, syscall.SIGKILL)
	gw.Wait(t, 10*time.Second)
	if d := 20*time.Second - time.Since(outage); d > 0 {
		time.Sleep(d)
	}
	ns.Resume()
	// The next run replays what the killed one spooled, before its own.
	gw = startGateway(t, home.Env(), cfg)
	calls(450)

	st, err := js.Stream(t.Context(), "AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 60*time.Second, "the stream to hold 1,000 records", func() bool {
		info, err := st.Info(t.Context())
		return err == nil && info.State.Msgs >= 1000
	})
	time.Sleep(time.Second) // a record too many would show by now
	info, err := st.Info(t.Context())
	if err != nil || info.State.Msgs != 1000 {
		t.Fatalf("the stream: got %d records (%v), want exactly 1,000", info.State.Msgs, err)
	}
	for seq := uint64(1); seq <= 1000; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		r, err := audit.Decode(m.Data)
		if err != nil {
			t.Fatalf("record %d: %v", seq, err)
		}
		if want := fmt.Sprintf(`{"message":"call-%04d"}`, seq-1); string(r.Arguments) != want || r.Service != audit.ServiceMCPGateway {
			t.Fatalf("record %d: got %s arguments %s, want %s: one record per call, in call order", seq, r.Service, r.Arguments, want)
		}
	}
	if left := spooled(); left != 0 {
		t.Errorf("spool: got %d records left, want none", left)
	}
	if out := gw.Stderr(); !strings.Contains(out, "records of an earlier run to publish") {
		t.Errorf("the restarted gateway's log: want it to say it replays the earlier run's records:\n%s", out)
	}
}
