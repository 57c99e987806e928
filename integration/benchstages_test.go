package integration_test

// The stage breakdown of the bench report: where each call path spends
// its time between the request arriving and the command starting, and
// between the command exiting and the reply leaving, read from the spans
// and stage events (tracing.Event*) of an agent and a gateway that trace
// into a receiver in the test process. They are a fleet of their own,
// measured after the overhead figures, so that tracing's cost is in none
// of those.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
	"github.com/fiskfleet/fiskfleet/shared/tracing/tracingtest"
)

const (
	// traceIdentity is the traced agent, as long as "bench".
	traceIdentity = "trace"
	// Service names of the traced agent and gateway.
	stageAgentService   = "bench-agent"
	stageGatewayService = "bench-gateway"
)

// A point is a moment of one call, by where it is read from: the client
// (this test), the agent's spans or the gateway's.
const (
	ptClientStart = "client.start"
	ptClientEnd   = "client.end"

	ptAgentArrived   = "agent.arrived"   // a2a server span start
	ptAgentDecoded   = "agent.decoded"   // tracing.EventDecoded
	ptAgentSlot      = "agent.slot"      // "slot wait" span end
	ptAgentRun       = "agent.run"       // "command run" span start
	ptAgentStarting  = "agent.starting"  // tracing.EventStarting
	ptAgentStarted   = "agent.started"   // tracing.EventStarted
	ptAgentExited    = "agent.exited"    // tracing.EventExited
	ptAgentCollected = "agent.collected" // "command run" span end
	ptAgentEncoded   = "agent.encoded"   // tracing.EventEncoded
	ptAgentSent      = "agent.sent"      // tracing.EventSent

	ptGatewayArrived   = "gateway.arrived"   // tools/call span start: the HTTP request's arrival
	ptGatewayParsed    = "gateway.parsed"    // tracing.EventParsed
	ptGatewayValidated = "gateway.validated" // tracing.EventValidated
	ptGatewaySlot      = "gateway.slot"      // tracing.EventSlot
	ptGatewayStarting  = "gateway.starting"  // tracing.EventStarting (local)
	ptGatewayStarted   = "gateway.started"   // tracing.EventStarted (local)
	ptGatewayExited    = "gateway.exited"    // tracing.EventExited (local)
	ptGatewayRan       = "gateway.ran"       // "command run" or "remote call" span end
	ptGatewayReturned  = "gateway.returned"  // tracing.EventReturned
	ptGatewaySent      = "gateway.sent"      // tracing.EventSent
)

// stage is the time from the point before it to its point.
type stage struct{ name, point string }

// stagePaths are the stages of each path, in order, from ptClientStart.
// A stage whose point a trace lacks is left out of that trace, and the
// next one runs from the last point it had.
var stagePaths = []struct {
	path   string
	stages []stage
}{
	{"a2a_call", []stage{
		{"to_agent", ptAgentArrived},
		{"decode", ptAgentDecoded},
		{"slot", ptAgentSlot},
		{"handoff", ptAgentRun},
		{"argv", ptAgentStarting},
		{"spawn", ptAgentStarted},
		{"process", ptAgentExited},
		{"collect", ptAgentCollected},
		{"encode", ptAgentEncoded},
		{"send", ptAgentSent},
		{"to_client", ptClientEnd},
	}},
	{"mcp_call", localMCPStages},
	{"mcp_legacy_call", localMCPStages},
	{"mcp_remote_call", []stage{
		{"to_gateway", ptGatewayArrived},
		{"parse", ptGatewayParsed},
		{"validate", ptGatewayValidated},
		{"slot", ptGatewaySlot},
		{"to_agent", ptAgentArrived},
		{"agent_decode", ptAgentDecoded},
		{"agent_slot", ptAgentSlot},
		{"agent_handoff", ptAgentRun},
		{"agent_argv", ptAgentStarting},
		{"agent_spawn", ptAgentStarted},
		{"process", ptAgentExited},
		{"agent_collect", ptAgentCollected},
		{"agent_encode", ptAgentEncoded},
		{"agent_send", ptAgentSent},
		{"from_agent", ptGatewayRan},
		{"result", ptGatewayReturned},
		{"encode", ptGatewaySent},
		{"to_client", ptClientEnd},
	}},
}

// localMCPStages are the stages of an MCP call of a local command, on
// either era.
var localMCPStages = []stage{
	{"to_gateway", ptGatewayArrived},
	{"parse", ptGatewayParsed},
	{"validate", ptGatewayValidated},
	{"slot", ptGatewaySlot},
	{"argv", ptGatewayStarting},
	{"spawn", ptGatewayStarted},
	{"process", ptGatewayExited},
	{"collect", ptGatewayRan},
	{"result", ptGatewayReturned},
	{"encode", ptGatewaySent},
	{"to_client", ptClientEnd},
}

// stageFigure is one stages_* figure of the report.
type stageFigure struct {
	key   string
	value float64
}

// MarshalJSON writes the report's fields, then its stage figures as more
// keys of the same flat object, in the breakdown's order.
func (r benchReport) MarshalJSON() ([]byte, error) {
	type fields benchReport // without this method
	data, err := json.Marshal(fields(r))
	if err != nil || len(r.stages) == 0 {
		return data, err
	}
	var buf bytes.Buffer
	buf.Write(data[:len(data)-1])
	for _, f := range r.stages {
		fmt.Fprintf(&buf, ",%q:%s", f.key, strconv.FormatFloat(f.value, 'f', -1, 64))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// tracePoints reads the points of one call from the spans of its trace.
func tracePoints(spans []tracingtest.Span) map[string]time.Time {
	pts := map[string]time.Time{}
	set := func(name string, t time.Time) {
		if _, ok := pts[name]; !ok && !t.IsZero() {
			pts[name] = t
		}
	}
	event := func(sp tracingtest.Span, ev, name string) {
		if t, ok := sp.Event(ev); ok {
			set(name, t)
		}
	}
	for _, sp := range spans {
		switch {
		case sp.Service == stageAgentService && strings.HasPrefix(sp.Name, "a2a "):
			set(ptAgentArrived, sp.Start)
			event(sp, tracing.EventDecoded, ptAgentDecoded)
			event(sp, tracing.EventEncoded, ptAgentEncoded)
			event(sp, tracing.EventSent, ptAgentSent)
		case sp.Service == stageAgentService && sp.Name == "slot wait":
			set(ptAgentSlot, sp.End)
		case sp.Service == stageAgentService && sp.Name == "command run":
			set(ptAgentRun, sp.Start)
			event(sp, tracing.EventStarting, ptAgentStarting)
			event(sp, tracing.EventStarted, ptAgentStarted)
			event(sp, tracing.EventExited, ptAgentExited)
			set(ptAgentCollected, sp.End)
		case sp.Service == stageGatewayService && strings.HasPrefix(sp.Name, "tools/call "):
			set(ptGatewayArrived, sp.Start)
			event(sp, tracing.EventParsed, ptGatewayParsed)
			event(sp, tracing.EventValidated, ptGatewayValidated)
			event(sp, tracing.EventSlot, ptGatewaySlot)
			event(sp, tracing.EventReturned, ptGatewayReturned)
			event(sp, tracing.EventSent, ptGatewaySent)
		case sp.Service == stageGatewayService && (sp.Name == "command run" || sp.Name == "remote call"):
			event(sp, tracing.EventStarting, ptGatewayStarting)
			event(sp, tracing.EventStarted, ptGatewayStarted)
			event(sp, tracing.EventExited, ptGatewayExited)
			set(ptGatewayRan, sp.End)
		}
	}
	return pts
}

// stageDurations returns the duration of each stage of stages that pts
// have the point of, from the last point before it, starting at
// ptClientStart; and the total, ptClientStart to ptClientEnd (0 when
// either is missing).
func stageDurations(pts map[string]time.Time, stages []stage) (map[string]time.Duration, time.Duration) {
	out := map[string]time.Duration{}
	last, ok := pts[ptClientStart]
	if !ok {
		return out, 0
	}
	for _, st := range stages {
		t, ok := pts[st.point]
		if !ok {
			continue
		}
		out[st.name] = t.Sub(last)
		last = t
	}
	var total time.Duration
	if end, ok := pts[ptClientEnd]; ok {
		total = end.Sub(pts[ptClientStart])
	}
	return out, total
}

// tracedCall is one call of the stage pass, by its trace.
type tracedCall struct {
	path       string
	traceID    string
	start, end time.Time
}

// traced runs call under a fresh sampled trace context, as a client whose
// own span is not exported would, and records it under path.
func traced(mu *sync.Mutex, calls *[]tracedCall, path string, call func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		var tid trace.TraceID
		var sid trace.SpanID
		for i := range tid {
			tid[i] = byte(rand.Uint32())
		}
		for i := range sid {
			sid[i] = byte(rand.Uint32())
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		start := time.Now()
		err := call(ctx)
		end := time.Now()
		mu.Lock()
		*calls = append(*calls, tracedCall{path: path, traceID: tid.String(), start: start, end: end})
		mu.Unlock()
		return err
	}
}

// mcpEchoTraced is [mcpEcho] sending ctx's trace context in the request's
// _meta, as an MCP client that traces does.
func mcpEchoTraced(c *client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = map[string]any{"message": "hi"}
		req.Params.Meta = &mcp.Meta{AdditionalFields: tracing.InjectMeta(ctx, nil)}
		return checkEcho(c.CallTool(ctx, req))
	}
}

// benchStages starts an agent and a gateway that trace into a receiver
// here, exporting in small batches, runs each call path through them with
// a trace per call, and returns the p50 of each stage of each path (see
// stagePaths), as stages_<path>_<stage>_p50_us figures, with
// stages_<path>_total_p50_us and stages_calls. It logs the breakdown.
func benchStages(t *testing.T, b *bus, ac *a2a.Client, set benchSettings) []stageFigure {
	t.Helper()
	rcv := tracingtest.Start(t)
	otel := func(service string) []string {
		return append(withoutOTEL(b.home.Env()),
			"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.HTTPEndpoint,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_SERVICE_NAME="+service,
			"OTEL_BSP_SCHEDULE_DELAY=100",
			"OTEL_BSP_MAX_EXPORT_BATCH_SIZE=64",
			"OTEL_BSP_MAX_QUEUE_SIZE=8192")
	}
	agent := fleettest.Start(t, otel(stageAgentService), fleettest.A2AAgent(t), "serve", "--config", fleettest.WriteAgentConfig(t, b.demoAgent(t, traceIdentity, 2)))
	agent.WaitOutput(t, fleettest.A2AServingLog, fleettest.ReadyTimeout)
	gw := startGateway(t, otel(stageGatewayService), b.gatewayConfig(t, "0", traceIdentity))
	mc := connectMCP(t, gw.URL, nil)
	lc := connectLegacyMCP(t, gw.URL)

	var (
		mu    sync.Mutex
		calls []tracedCall
	)
	series := []*benchSeries{
		{name: "a2a_call", run: traced(&mu, &calls, "a2a_call", func(ctx context.Context) error {
			r, err := ac.CallTool(ctx, traceIdentity, "echo", echoInput)
			if err != nil || r.IsError || r.Output != "hi\n" {
				return fmt.Errorf("got %+v (%v), want output \"hi\\n\"", r, err)
			}
			return nil
		})},
		{name: "mcp_call", run: traced(&mu, &calls, "mcp_call", mcpEchoTraced(mc, "echo"))},
		{name: "mcp_legacy_call", run: traced(&mu, &calls, "mcp_legacy_call", mcpEchoTraced(lc, "echo"))},
		{name: "mcp_remote_call", run: traced(&mu, &calls, "mcp_remote_call", mcpEchoTraced(mc, traceIdentity+"_echo"))},
	}
	n := max(set.calls/2, 20)
	interleave(t, series, set.callWarmup, n, set.callBatch)

	// Every call's outermost server span, which ends last in its process.
	want := map[string]bool{}
	for _, c := range calls {
		want[c.traceID] = true
	}
	byTrace := map[string][]tracingtest.Span{}
	rcv.WaitFor(t, 2*time.Minute, func(spans []tracingtest.Span) bool {
		clear(byTrace)
		for _, sp := range spans {
			if want[sp.TraceID] {
				byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
			}
		}
		for _, c := range calls {
			if !complete(c.path, byTrace[c.traceID]) {
				return false
			}
		}
		return true
	})

	perStage := map[string]map[string][]time.Duration{}
	totals := map[string][]time.Duration{}
	for _, c := range calls {
		pts := tracePoints(byTrace[c.traceID])
		pts[ptClientStart], pts[ptClientEnd] = c.start, c.end
		if perStage[c.path] == nil {
			perStage[c.path] = map[string][]time.Duration{}
		}
		for _, sp := range stagePaths {
			if sp.path != c.path {
				continue
			}
			d, total := stageDurations(pts, sp.stages)
			for name, v := range d {
				perStage[c.path][name] = append(perStage[c.path][name], v)
			}
			totals[c.path] = append(totals[c.path], total)
		}
	}

	figures := []stageFigure{{"stages_calls", float64(n)}}
	var sb strings.Builder
	fmt.Fprintf(&sb, "stage breakdown (p50 µs of %d traced calls per path; stages from the client's send to its receipt):\n", n)
	for _, sp := range stagePaths {
		fmt.Fprintf(&sb, "  %s:", sp.path)
		for _, st := range sp.stages {
			samples := perStage[sp.path][st.name]
			if len(samples) == 0 {
				continue
			}
			v := micros(percentile(samples, 50))
			figures = append(figures, stageFigure{"stages_" + sp.path + "_" + st.name + "_p50_us", v})
			fmt.Fprintf(&sb, " %s %.1f", st.name, v)
		}
		total := micros(percentile(totals[sp.path], 50))
		figures = append(figures, stageFigure{"stages_" + sp.path + "_total_p50_us", total})
		fmt.Fprintf(&sb, " | total %.1f\n", total)
	}
	t.Log(sb.String())
	return figures
}

// complete reports whether the spans of a call on path hold the server
// spans that end last: the agent's request span, the gateway's tools/call
// span, or both for a remote call.
func complete(path string, spans []tracingtest.Span) bool {
	var agent, gateway bool
	for _, sp := range spans {
		agent = agent || sp.Service == stageAgentService && strings.HasPrefix(sp.Name, "a2a ")
		gateway = gateway || sp.Service == stageGatewayService && strings.HasPrefix(sp.Name, "tools/call ")
	}
	switch path {
	case "a2a_call":
		return agent
	case "mcp_call", "mcp_legacy_call":
		return gateway
	}
	return agent && gateway
}

// TestStageDurations reads the points of a remote call from its spans
// and cuts them into the remote path's stages; a point the trace lacks
// folds its stage into the next.
func TestStageDurations(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	ev := func(name string, us int) tracingtest.Event { return tracingtest.Event{Name: name, Time: at(us)} }
	spans := []tracingtest.Span{
		{Service: stageGatewayService, Name: "tools/call trace_echo", Start: at(100), End: at(3000), Events: []tracingtest.Event{
			ev(tracing.EventParsed, 150), ev(tracing.EventValidated, 160), ev(tracing.EventSlot, 170),
			ev(tracing.EventReturned, 2900), ev(tracing.EventSent, 2950),
		}},
		{Service: stageGatewayService, Name: "remote call", Start: at(180), End: at(2800)},
		{Service: stageAgentService, Name: "a2a stream", Start: at(300), End: at(2900), Events: []tracingtest.Event{
			ev(tracing.EventDecoded, 320), ev(tracing.EventEncoded, 2600), ev(tracing.EventSent, 2620),
		}},
		{Service: stageAgentService, Name: "slot wait", Start: at(321), End: at(325)},
		{Service: stageAgentService, Name: "command run", Start: at(400), End: at(2500), Events: []tracingtest.Event{
			ev(tracing.EventStarting, 420), ev(tracing.EventStarted, 1000), ev(tracing.EventExited, 2400),
		}},
		// Another service's span in the same trace is not read.
		{Service: "elsewhere", Name: "command run", Start: at(1), End: at(2)},
	}
	pts := tracePoints(spans)
	pts[ptClientStart], pts[ptClientEnd] = at(0), at(3100)
	var remote []stage
	for _, sp := range stagePaths {
		if sp.path == "mcp_remote_call" {
			remote = sp.stages
		}
	}
	got, total := stageDurations(pts, remote)
	us := func(v int) time.Duration { return time.Duration(v) * time.Microsecond }
	want := map[string]time.Duration{
		"to_gateway": us(100), "parse": us(50), "validate": us(10), "slot": us(10),
		"to_agent": us(130), "agent_decode": us(20), "agent_slot": us(5), "agent_handoff": us(75),
		"agent_argv": us(20), "agent_spawn": us(580), "process": us(1400), "agent_collect": us(100),
		"agent_encode": us(100), "agent_send": us(20), "from_agent": us(180),
		"result": us(100), "encode": us(50), "to_client": us(150),
	}
	if len(got) != len(want) {
		t.Errorf("stages: got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %s, want %s", k, got[k], v)
		}
	}
	if total != us(3100) {
		t.Errorf("total: got %s, want 3.1ms", total)
	}
	var sum time.Duration
	for _, v := range got {
		sum += v
	}
	if sum != total {
		t.Errorf("stages add up to %s, want the total %s", sum, total)
	}

	// Without the agent's decode event, its time goes to the slot stage.
	delete(pts, ptAgentDecoded)
	got, _ = stageDurations(pts, remote)
	if _, ok := got["agent_decode"]; ok || got["agent_slot"] != us(25) {
		t.Errorf("without agent.decoded: got agent_decode %s and agent_slot %s, want none and 25µs", got["agent_decode"], got["agent_slot"])
	}
	// Without the client's start there is nothing to measure from.
	delete(pts, ptClientStart)
	if got, total := stageDurations(pts, remote); len(got) != 0 || total != 0 {
		t.Errorf("without client.start: got %v and %s, want nothing", got, total)
	}
}
