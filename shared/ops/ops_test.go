package ops_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// serve starts a real listener on a free loopback port for h and returns
// its base URL; it stops when the test ends.
func serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	addr, done, err := ops.Listen(tb.Context(), "127.0.0.1:0", h, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			tb.Errorf("listener on %s still serving 10s after the test ended", addr)
		}
	})
	return "http://" + addr.String()
}

func get(tb testing.TB, method, url string) (int, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(body)
}

func TestHealth(t *testing.T) {
	var connected atomic.Bool
	h := ops.NewHealth(
		ops.Check{Name: "tools", Ready: func() error { return nil }},
		ops.Check{Name: "nats", Ready: func() error {
			if !connected.Load() {
				return errors.New("disconnected")
			}
			return nil
		}},
	)
	base := serve(t, h.Handler())

	tests := []struct {
		name       string
		connected  bool
		method     string
		path       string
		wantStatus int
		wantBody   string
	}{
		{"live while not ready", false, http.MethodGet, ops.LivePath, 200, "ok\n"},
		{"not ready names the check", false, http.MethodGet, ops.ReadyPath, 503, "tools: ok\nnats: disconnected\nnot ready\n"},
		{"ready", true, http.MethodGet, ops.ReadyPath, 200, "tools: ok\nnats: ok\nready\n"},
		{"head", true, http.MethodHead, ops.ReadyPath, 200, ""},
		{"post refused", true, http.MethodPost, ops.ReadyPath, 405, "method not allowed: probes answer GET and HEAD\n"},
		{"other path", true, http.MethodGet, "/metrics", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			connected.Store(tt.connected)
			status, body := get(t, tt.method, base+tt.path)
			if status != tt.wantStatus || body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
	connected.Store(false)
	if err := h.Ready(); err == nil || err.Error() != "not ready: nats: disconnected" {
		t.Errorf("Ready: got %v, want not ready: nats: disconnected", err)
	}
}

// scrape fetches url and parses it with the Prometheus text parser.
func scrape(tb testing.TB, url string) map[string]*dto.MetricFamily {
	tb.Helper()
	status, body := get(tb, http.MethodGet, url)
	if status != http.StatusOK {
		tb.Fatalf("GET %s: got %d %q, want 200", url, status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		tb.Fatalf("parsing the scrape of %s: %v", url, err)
	}
	return fams
}

// labelsOf renders a series' labels as name=value pairs, sorted by name.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func TestMetricsLabelsBounded(t *testing.T) {
	m := ops.NewMetrics("a2a-agent", "demo")
	m.SetTools([]string{"echo", "sleep"})
	m.Slots(ops.SurfaceA2A, func() int { return 1 }, func() int { return 3 })
	base := serve(t, m.Mux())

	m.Call("echo", ops.SurfaceA2A, ops.OutcomeOK, 3*time.Millisecond)
	m.Call("echo", ops.SurfaceA2A, ops.OutcomeExitNonzero, 5*time.Millisecond)
	m.Call("sleep", ops.SurfaceA2A, "no-such-outcome", time.Second)
	m.Rejected(ops.RejectOversize)
	m.Approval(ops.AnswerDeclined)
	before := len(scrape(t, base+ops.MetricsPath)["fiskfleet_calls_total"].GetMetric())
	for range 1000 {
		m.Call(fmt.Sprintf("tool_%x", rand.Uint64()), ops.SurfaceA2A, ops.OutcomeOK, time.Millisecond)
	}
	fams := scrape(t, base+ops.MetricsPath)

	got := map[string]float64{}
	for _, s := range fams["fiskfleet_calls_total"].GetMetric() {
		got[labelsOf(s)] = s.GetCounter().GetValue()
	}
	key := func(outcome, tool string) string {
		return "identity=demo,outcome=" + outcome + ",service=a2a-agent,surface=a2a,tool=" + tool
	}
	want := map[string]float64{
		key("ok", "echo"):           1,
		key("exit_nonzero", "echo"): 1,
		key("error", "sleep"):       1,
		key("ok", "_other"):         1000,
	}
	if len(got) != len(want) {
		t.Errorf("calls_total: got %d series %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("calls_total{%s}: got %v, want %v", k, got[k], v)
		}
	}
	if before != 3 {
		t.Errorf("calls_total before the unknown names: got %d series, want 3", before)
	}
	if n := len(fams["fiskfleet_call_duration_seconds"].GetMetric()); n != 3 {
		t.Errorf("call_duration_seconds: got %d series, want 3 (echo, sleep, _other)", n)
	}
	for _, tt := range []struct {
		family string
		label  string
		want   float64
	}{
		{"fiskfleet_a2a_rejected_total", "reason=oversize", 1},
		{"fiskfleet_a2a_rejected_total", "reason=schema", 0},
		{"fiskfleet_approvals_total", "answer=declined", 1},
		{"fiskfleet_approvals_total", "answer=accepted", 0},
		{"fiskfleet_calls_in_flight", "surface=a2a", 1},
		{"fiskfleet_free_slots", "surface=a2a", 3},
	} {
		if got := value(t, fams, tt.family, tt.label); got != tt.want {
			t.Errorf("%s{%s}: got %v, want %v", tt.family, tt.label, got, tt.want)
		}
	}
	for _, f := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[f] == nil {
			t.Errorf("got no %s, want the Go and process collectors", f)
		}
	}
	if fams["fiskfleet_remote_hosts"] != nil {
		t.Errorf("got fiskfleet_remote_hosts on a process without remote_tools, want none")
	}
}

// value returns the value of the one series of family whose labels
// contain label (name=value), failing tb when there is none.
func value(tb testing.TB, fams map[string]*dto.MetricFamily, family, label string) float64 {
	tb.Helper()
	for _, s := range fams[family].GetMetric() {
		if strings.Contains(","+labelsOf(s)+",", ","+label+",") {
			switch {
			case s.Counter != nil:
				return s.GetCounter().GetValue()
			case s.Gauge != nil:
				return s.GetGauge().GetValue()
			}
		}
	}
	tb.Fatalf("%s: got no series with %s", family, label)
	return 0
}

func TestMetricsRemoteHosts(t *testing.T) {
	m := ops.NewMetrics("mcp-gateway", "gw")
	var up atomic.Bool
	m.RemoteHosts(func() []ops.HostState {
		return []ops.HostState{{Host: "demo", Discovered: true, Reachable: up.Load()}, {Host: "ops"}}
	})
	base := serve(t, m.Mux())
	for _, reachable := range []bool{false, true} {
		up.Store(reachable)
		fams := scrape(t, base+ops.MetricsPath)
		want := map[string]float64{"demo": 0, "ops": 0}
		if reachable {
			want["demo"] = 1
		}
		for host, w := range want {
			if got := value(t, fams, "fiskfleet_remote_host_reachable", "host="+host); got != w {
				t.Errorf("reachable %v: remote_host_reachable{host=%s}: got %v, want %v", reachable, host, got, w)
			}
		}
		if got := fams["fiskfleet_remote_hosts"].GetMetric()[0].GetGauge().GetValue(); got != 2 {
			t.Errorf("remote_hosts: got %v, want 2", got)
		}
		if got := value(t, fams, "fiskfleet_remote_host_discovered", "host=ops"); got != 0 {
			t.Errorf("remote_host_discovered{host=ops}: got %v, want 0", got)
		}
	}
}

func TestNilMetricsDoNothing(t *testing.T) {
	var m *ops.Metrics
	m.SetTools([]string{"echo"})
	m.Call("echo", ops.SurfaceMCP, ops.OutcomeOK, time.Millisecond)
	m.Approval(ops.AnswerAccepted)
	m.Rejected(ops.RejectSchema)
	m.Slots(ops.SurfaceMCP, func() int { return 0 }, func() int { return 0 })
	m.RemoteHosts(nil)
	if m.Registry() != nil {
		t.Errorf("Registry of nil Metrics: got non-nil, want nil")
	}
}

func BenchmarkNilMetricsCall(b *testing.B) {
	var m *ops.Metrics
	for b.Loop() {
		m.Call("echo", ops.SurfaceMCP, ops.OutcomeOK, time.Millisecond)
	}
}

func BenchmarkMetricsCall(b *testing.B) {
	m := ops.NewMetrics("a2a-agent", "demo")
	m.SetTools([]string{"echo"})
	for b.Loop() {
		m.Call("echo", ops.SurfaceA2A, ops.OutcomeOK, time.Millisecond)
	}
}

// TestAuditSpoolMetrics: the spool's gauges read the publisher at scrape
// time, so a full spool shows without anyone reading the logs.
func TestAuditSpoolMetrics(t *testing.T) {
	m := ops.NewMetrics("mcp-gateway", "demo")
	var spooled atomic.Int64
	var dropped atomic.Uint64
	m.AuditSpool(spooled.Load, dropped.Load)
	base := serve(t, m.Handler())
	spooled.Store(12)
	dropped.Store(3)
	fams := scrape(t, base+"/metrics")
	for name, want := range map[string]float64{"fiskfleet_audit_spooled": 12, "fiskfleet_audit_spool_dropped_total": 3} {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("%s: got %v, want one series", name, f)
		}
		mm := f.GetMetric()[0]
		if got := mm.GetGauge().GetValue() + mm.GetCounter().GetValue(); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}
