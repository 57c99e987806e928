package ops

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsPath is where [Metrics.Handler] is mounted by [Metrics.Mux].
const MetricsPath = "/metrics"

// Surfaces a call arrives on.
const (
	// SurfaceMCP is a local tool called over MCP.
	SurfaceMCP = "mcp"
	// SurfaceA2A is a tool called over NATS on an agent.
	SurfaceA2A = "a2a"
	// SurfaceRemote is a remote tool called over MCP and forwarded by the
	// gateway to an agent.
	SurfaceRemote = "remote"
	// SurfaceAgent2Agent is a tool called over the gateway's Agent2Agent
	// (HTTP) endpoint, local or remote.
	SurfaceAgent2Agent = "agent2agent"
)

// Call outcomes, the values of the outcome label. Any other value passed
// to [Metrics.Call] is counted as [OutcomeError].
const (
	OutcomeOK          = "ok"
	OutcomeExitNonzero = "exit_nonzero"
	OutcomeDenied      = "denied"
	OutcomeTimeout     = "timeout"
	OutcomeBusy        = "busy"
	OutcomeCanceled    = "canceled"
	OutcomeError       = "error"
)

// Approval answers, the values of the answer label of approvals. Error is
// an approval that could not be asked or redeemed (the client failed, the
// nonce was unknown or spent): it denies like a decline.
const (
	AnswerAccepted    = "accepted"
	AnswerDeclined    = "declined"
	AnswerCanceled    = "canceled"
	AnswerTimeout     = "timeout"
	AnswerUnsupported = "unsupported"
	AnswerError       = "error"
)

// Reasons an A2A message is rejected, the values of the reason label.
const (
	RejectOversize    = "oversize"
	RejectSchema      = "schema"
	RejectProtocol    = "protocol"
	RejectUnknownTool = "unknown_tool"
)

// OtherTool is the tool label of a call whose name is not in the served
// set: one series for all of them, however many names callers invent.
const OtherTool = "_other"

var (
	outcomes = []string{OutcomeOK, OutcomeExitNonzero, OutcomeDenied, OutcomeTimeout, OutcomeBusy, OutcomeCanceled, OutcomeError}
	answers  = []string{AnswerAccepted, AnswerDeclined, AnswerCanceled, AnswerTimeout, AnswerUnsupported, AnswerError}
	reasons  = []string{RejectOversize, RejectSchema, RejectProtocol, RejectUnknownTool}
)

// durationBuckets span a fork/exec of a quick command (a few ms) to a
// command that runs into a generous tool timeout.
var durationBuckets = []float64{.0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is one process's Prometheus registry: its own collectors plus
// the Go runtime and process collectors. Its methods are safe for
// concurrent use, and every method of a nil *Metrics does nothing.
type Metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	approvals *prometheus.CounterVec
	rejected  *prometheus.CounterVec
	// tools is the served set: names outside it are labelled OtherTool.
	tools atomic.Pointer[map[string]struct{}]

	mu sync.Mutex // guards hosts
	// hosts reports the configured remote hosts' state at scrape time.
	hosts func() []HostState
}

// HostState is what the gateway knows of one remote host.
type HostState struct {
	Host string
	// Discovered is set once the host has answered discovery.
	Discovered bool
	// Reachable is whether its latest discovery was answered.
	Reachable bool
}

// NewMetrics returns a registry for service (the value of every series'
// service label: "mcp-gateway" or "a2a-agent") and identity. The outcome,
// answer and reason series start at zero, so a dashboard sees them before
// the first event.
func NewMetrics(service, identity string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	constLabels := prometheus.Labels{"service": service, "identity": identity}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "fiskfleet", Name: "calls_total", ConstLabels: constLabels,
		Help: "Tool calls finished, by tool (a served name, or _other), surface (mcp, a2a, remote) and outcome.",
	}, []string{"tool", "surface", "outcome"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "fiskfleet", Name: "call_duration_seconds", ConstLabels: constLabels, Buckets: durationBuckets,
		Help: "Time from a call's arrival to its answer, approval wait included, by tool and surface.",
	}, []string{"tool", "surface"})
	m.approvals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "fiskfleet", Name: "approvals_total", ConstLabels: constLabels,
		Help: "Approvals of gated MCP calls, by the human's answer (accepted, declined, canceled, timeout, unsupported, error).",
	}, []string{"answer"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "fiskfleet", Name: "a2a_rejected_total", ConstLabels: constLabels,
		Help: "A2A messages refused before any tool ran, by reason (oversize, schema, protocol, unknown_tool).",
	}, []string{"reason"})
	for _, a := range answers {
		m.approvals.WithLabelValues(a)
	}
	for _, r := range reasons {
		m.rejected.WithLabelValues(r)
	}
	empty := map[string]struct{}{}
	m.tools.Store(&empty)
	m.reg.MustRegister(m.calls, m.duration, m.approvals, m.rejected,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&hostCollector{m: m, constLabels: constLabels})
	return m
}

// Registry is the underlying registry, for collectors a service adds.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Mux serves [Metrics.Handler] at [MetricsPath], for a listener of its own.
func (m *Metrics) Mux() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, m.Handler())
	return mux
}

// SetTools replaces the served set: the names a tool label may carry.
// Series of tools no longer served stay until the process ends, as
// counters must not go back.
func (m *Metrics) SetTools(names []string) {
	if m == nil {
		return
	}
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	m.tools.Store(&set)
}

// Call counts one finished call and observes its duration. A tool not in
// the served set is labelled [OtherTool]; an outcome or surface outside
// the fixed lists is labelled [OutcomeError] or [SurfaceMCP].
func (m *Metrics) Call(tool, surface, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	if _, ok := (*m.tools.Load())[tool]; !ok {
		tool = OtherTool
	}
	if !slices.Contains(outcomes, outcome) {
		outcome = OutcomeError
	}
	switch surface {
	case SurfaceMCP, SurfaceA2A, SurfaceRemote, SurfaceAgent2Agent:
	default:
		surface = SurfaceMCP
	}
	m.calls.WithLabelValues(tool, surface, outcome).Inc()
	m.duration.WithLabelValues(tool, surface).Observe(d.Seconds())
}

// Approval counts one approval by its answer, one of the Answer constants
// (anything else counts as [AnswerError]).
func (m *Metrics) Approval(answer string) {
	if m == nil {
		return
	}
	if !slices.Contains(answers, answer) {
		answer = AnswerError
	}
	m.approvals.WithLabelValues(answer).Inc()
}

// Rejected counts one refused A2A message by reason, one of the Reject
// constants (anything else counts as [RejectSchema]).
func (m *Metrics) Rejected(reason string) {
	if m == nil {
		return
	}
	if !slices.Contains(reasons, reason) {
		reason = RejectSchema
	}
	m.rejected.WithLabelValues(reason).Inc()
}

// Slots registers the gauges of one surface's concurrency: calls in
// flight (inFlight) and free execution slots (free), read at scrape time.
// Call it once per surface.
func (m *Metrics) Slots(surface string, inFlight, free func() int) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"surface": surface}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "fiskfleet", Name: "calls_in_flight", ConstLabels: labels,
			Help: "Calls being handled now, waiting for approval or a slot included.",
		}, func() float64 { return float64(inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "fiskfleet", Name: "free_slots", ConstLabels: labels,
			Help: "Execution slots free now (max_concurrent_tools minus the calls running).",
		}, func() float64 { return float64(free()) }),
	)
}

// RemoteHosts sets the source of the remote host gauges, read at scrape
// time: fiskfleet_remote_hosts, and fiskfleet_remote_host_reachable and
// fiskfleet_remote_host_discovered per configured host.
func (m *Metrics) RemoteHosts(state func() []HostState) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hosts = state
}

func (m *Metrics) hostState() []HostState {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts == nil {
		return nil
	}
	return m.hosts()
}

// hostCollector turns [Metrics.RemoteHosts] into series at scrape time;
// it describes nothing up front, as the hosts are known only once set.
type hostCollector struct {
	m           *Metrics
	constLabels prometheus.Labels
}

func (c *hostCollector) Describe(chan<- *prometheus.Desc) {}

func (c *hostCollector) Collect(ch chan<- prometheus.Metric) {
	states := c.m.hostState()
	if states == nil {
		return
	}
	hosts := prometheus.NewDesc("fiskfleet_remote_hosts", "Remote hosts configured in remote_tools.", nil, c.constLabels)
	reach := prometheus.NewDesc("fiskfleet_remote_host_reachable", "1 when the host answered its latest discovery, else 0.", []string{"host"}, c.constLabels)
	disc := prometheus.NewDesc("fiskfleet_remote_host_discovered", "1 once the host has answered discovery at least once, else 0.", []string{"host"}, c.constLabels)
	ch <- prometheus.MustNewConstMetric(hosts, prometheus.GaugeValue, float64(len(states)))
	seen := map[string]bool{}
	for _, s := range states {
		if seen[s.Host] {
			continue
		}
		seen[s.Host] = true
		ch <- prometheus.MustNewConstMetric(reach, prometheus.GaugeValue, b2f(s.Reachable), s.Host)
		ch <- prometheus.MustNewConstMetric(disc, prometheus.GaugeValue, b2f(s.Discovered), s.Host)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// AuditSpool registers the gauges of the audit spool (audit.spool_dir),
// read at scrape time: fiskfleet_audit_spooled, the records waiting on
// disk to be published, and fiskfleet_audit_spool_dropped_total, those
// lost because the spool was full (audit.spool_max).
func (m *Metrics) AuditSpool(spooled func() int64, dropped func() uint64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "fiskfleet", Name: "audit_spooled",
			Help: "Audit records waiting in the spool (audit.spool_dir) to be published.",
		}, func() float64 { return float64(spooled()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "fiskfleet", Name: "audit_spool_dropped_total",
			Help: "Audit records lost because the spool was full (audit.spool_max).",
		}, func() float64 { return float64(dropped()) }),
	)
}
