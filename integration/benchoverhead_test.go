package integration_test

// The overhead of each call path in transport round trips, the anonymous
// memory of the services, and the base revision `make bench BASE=<rev>`
// measures beside the current one: see benchReport for the figures.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/memtrim"
)

const (
	// benchBaseEnv names a directory holding a2a-agent and mcp-gateway
	// built from another revision (make bench BASE=<rev>): the report then
	// measures them beside the current ones, in the same rounds.
	benchBaseEnv = "FISKFLEET_BENCH_BASE"
	// benchBaseRevEnv is the revision those binaries were built from, as
	// make was given it, for the report.
	benchBaseRevEnv = "FISKFLEET_BENCH_BASE_REV"
	// benchBaseEnvEnv holds NAME=value settings, space-separated, added to
	// the environment of the base services only (make bench
	// BASE_ENV=...): with BASE=HEAD it measures a runtime setting, such as
	// GOMAXPROCS or GOGC, against the services as they run today.
	benchBaseEnvEnv = "FISKFLEET_BENCH_BASE_ENV"
	// benchRounds is how many rounds the call series run in: each round
	// interleaves every series, the floor among them, and the overhead is
	// computed per round, then the median taken.
	benchRounds = 5
	// floorIdentity answers on the floor's subjects; as long as "bench",
	// so that subjects, and so messages, are of the same size.
	floorIdentity = "floor"
	// baseIdentity is the base revision's agent, as long as "bench" too.
	baseIdentity = "based"
)

// Goals for the anonymous memory of each service after a load of calls
// (DESIGN.md, Performance expectations), in MiB.
const (
	agentAnonGoalMiB   = 8
	gatewayAnonGoalMiB = 12
)

// callFloorIdle is how long the client and natsreplier idle before each
// call_floor_idle request: about the demo's echo run on these machines.
const callFloorIdle = 2 * time.Millisecond

// overheadPaths are the call paths whose overhead is counted in round
// trips, by their series names.
var overheadPaths = []string{"a2a_call", "mcp_call", "mcp_legacy_call", "mcp_raw_call", "mcp_remote_call", "mcp_remote_legacy_call", "mcp_remote_raw_call"}

// baseFigures are the base revision's figures (make bench BASE=<rev>), the
// same as the current ones' of the same names without the base_ prefix.
// The report holds them only when a base was measured. The base services
// carry the call paths and the streamed call in the timed rounds, as the
// current ones do; before its _after memory is read, the base agent is
// given the rest of the current one's load untimed ([baseLoad]), so both
// _after figures follow the same calls.
type baseFigures struct {
	BaseRevision string `json:"base_revision"`

	BaseA2ACallP50 float64   `json:"base_a2a_call_p50_us"`
	BaseA2ACallP99 float64   `json:"base_a2a_call_p99_us"`
	BaseA2ACallRT  float64   `json:"base_a2a_call_overhead_rt"`
	BaseA2ACallRTs []float64 `json:"base_a2a_call_overhead_rt_rounds"`

	BaseMCPCallP50 float64   `json:"base_mcp_call_p50_us"`
	BaseMCPCallP99 float64   `json:"base_mcp_call_p99_us"`
	BaseMCPCallRT  float64   `json:"base_mcp_call_overhead_rt"`
	BaseMCPCallRTs []float64 `json:"base_mcp_call_overhead_rt_rounds"`

	BaseMCPLegacyCallP50 float64   `json:"base_mcp_legacy_call_p50_us"`
	BaseMCPLegacyCallP99 float64   `json:"base_mcp_legacy_call_p99_us"`
	BaseMCPLegacyCallRT  float64   `json:"base_mcp_legacy_call_overhead_rt"`
	BaseMCPLegacyCallRTs []float64 `json:"base_mcp_legacy_call_overhead_rt_rounds"`

	BaseMCPRawCallP50 float64   `json:"base_mcp_raw_call_p50_us"`
	BaseMCPRawCallP99 float64   `json:"base_mcp_raw_call_p99_us"`
	BaseMCPRawCallRT  float64   `json:"base_mcp_raw_call_overhead_rt"`
	BaseMCPRawCallRTs []float64 `json:"base_mcp_raw_call_overhead_rt_rounds"`

	BaseMCPRemoteCallP50 float64   `json:"base_mcp_remote_call_p50_us"`
	BaseMCPRemoteCallP99 float64   `json:"base_mcp_remote_call_p99_us"`
	BaseMCPRemoteCallRT  float64   `json:"base_mcp_remote_call_overhead_rt"`
	BaseMCPRemoteCallRTs []float64 `json:"base_mcp_remote_call_overhead_rt_rounds"`

	BaseMCPRemoteLegacyCallP50 float64   `json:"base_mcp_remote_legacy_call_p50_us"`
	BaseMCPRemoteLegacyCallP99 float64   `json:"base_mcp_remote_legacy_call_p99_us"`
	BaseMCPRemoteLegacyCallRT  float64   `json:"base_mcp_remote_legacy_call_overhead_rt"`
	BaseMCPRemoteLegacyCallRTs []float64 `json:"base_mcp_remote_legacy_call_overhead_rt_rounds"`

	BaseMCPRemoteRawCallP50 float64   `json:"base_mcp_remote_raw_call_p50_us"`
	BaseMCPRemoteRawCallP99 float64   `json:"base_mcp_remote_raw_call_p99_us"`
	BaseMCPRemoteRawCallRT  float64   `json:"base_mcp_remote_raw_call_overhead_rt"`
	BaseMCPRemoteRawCallRTs []float64 `json:"base_mcp_remote_raw_call_overhead_rt_rounds"`

	// BaseAgent2AgentCall is agent2agent_call on the base gateway, and
	// its delta the current overhead less the base's, paired by batch
	// with its 95 % interval, as for the paths below.
	BaseAgent2AgentCallP50     float64   `json:"base_agent2agent_call_p50_us"`
	BaseAgent2AgentCallP99     float64   `json:"base_agent2agent_call_p99_us"`
	BaseAgent2AgentCallRT      float64   `json:"base_agent2agent_call_overhead_rt"`
	BaseAgent2AgentCallRTs     []float64 `json:"base_agent2agent_call_overhead_rt_rounds"`
	BaseAgent2AgentCallDelta   float64   `json:"base_agent2agent_call_paired_delta_rt"`
	BaseAgent2AgentCallDeltaLo float64   `json:"base_agent2agent_call_paired_delta_lo_rt"`
	BaseAgent2AgentCallDeltaHi float64   `json:"base_agent2agent_call_paired_delta_hi_rt"`

	baseProcFigures // base_<series>_{cpu_us,vcsw,ivcsw}_per_call_<proc>

	// Base<path>Delta is the current path's overhead less the base's, in
	// round trips, paired by batch (see pairedDelta): negative when the
	// current services are faster.
	BaseA2ACallDelta             float64 `json:"base_a2a_call_paired_delta_rt"`
	BaseMCPCallDelta             float64 `json:"base_mcp_call_paired_delta_rt"`
	BaseMCPLegacyCallDelta       float64 `json:"base_mcp_legacy_call_paired_delta_rt"`
	BaseMCPRawCallDelta          float64 `json:"base_mcp_raw_call_paired_delta_rt"`
	BaseMCPRemoteCallDelta       float64 `json:"base_mcp_remote_call_paired_delta_rt"`
	BaseMCPRemoteLegacyCallDelta float64 `json:"base_mcp_remote_legacy_call_paired_delta_rt"`
	BaseMCPRemoteRawCallDelta    float64 `json:"base_mcp_remote_raw_call_paired_delta_rt"`
	// Base<path>DeltaLo and Hi bound the 95 % confidence interval of that
	// median (see medianCI): a delta whose interval holds 0 is not one the
	// run can tell from noise.
	BaseA2ACallDeltaLo             float64 `json:"base_a2a_call_paired_delta_lo_rt"`
	BaseA2ACallDeltaHi             float64 `json:"base_a2a_call_paired_delta_hi_rt"`
	BaseMCPCallDeltaLo             float64 `json:"base_mcp_call_paired_delta_lo_rt"`
	BaseMCPCallDeltaHi             float64 `json:"base_mcp_call_paired_delta_hi_rt"`
	BaseMCPLegacyCallDeltaLo       float64 `json:"base_mcp_legacy_call_paired_delta_lo_rt"`
	BaseMCPLegacyCallDeltaHi       float64 `json:"base_mcp_legacy_call_paired_delta_hi_rt"`
	BaseMCPRawCallDeltaLo          float64 `json:"base_mcp_raw_call_paired_delta_lo_rt"`
	BaseMCPRawCallDeltaHi          float64 `json:"base_mcp_raw_call_paired_delta_hi_rt"`
	BaseMCPRemoteCallDeltaLo       float64 `json:"base_mcp_remote_call_paired_delta_lo_rt"`
	BaseMCPRemoteCallDeltaHi       float64 `json:"base_mcp_remote_call_paired_delta_hi_rt"`
	BaseMCPRemoteLegacyCallDeltaLo float64 `json:"base_mcp_remote_legacy_call_paired_delta_lo_rt"`
	BaseMCPRemoteLegacyCallDeltaHi float64 `json:"base_mcp_remote_legacy_call_paired_delta_hi_rt"`
	BaseMCPRemoteRawCallDeltaLo    float64 `json:"base_mcp_remote_raw_call_paired_delta_lo_rt"`
	BaseMCPRemoteRawCallDeltaHi    float64 `json:"base_mcp_remote_raw_call_paired_delta_hi_rt"`

	BaseA2AStreamP50 float64 `json:"base_a2a_stream_p50_us"`
	BaseA2AStreamP99 float64 `json:"base_a2a_stream_p99_us"`

	BaseAgentIdleAnon   float64 `json:"base_agent_idle_anon_mib"`
	BaseAgentAnonAfter  float64 `json:"base_agent_anon_after_mib"`
	BaseGatewayIdleAnon float64 `json:"base_gateway_idle_anon_mib"`
	BaseGatewayAnonAft  float64 `json:"base_gateway_anon_after_mib"`
	BaseAgentAnonQuiet  float64 `json:"base_agent_anon_quiet_mib"`
	BaseGatewayAnonQt   float64 `json:"base_gateway_anon_quiet_mib"`
}

// pathFigures points at one path's figures in the report.
type pathFigures struct {
	p50, p99, rt *float64
	rts          *[]float64
}

// roundSamples returns the samples of round i (from 0) of a series run by
// [interleaveRounds].
func (s *benchSeries) roundSamples(i int) []time.Duration {
	from := 0
	if i > 0 {
		from = s.roundEnds[i-1]
	}
	return s.samples[from:s.roundEnds[i]]
}

// overheadRT is a call's overhead in transport round trips: its p50 less
// direct exec's p50, over the floor's p50, to three decimals; 0 when the
// floor is not positive.
func overheadRT(call, direct, floor time.Duration) float64 {
	if floor <= 0 {
		return 0
	}
	return round(float64(call-direct)/float64(floor), 3)
}

// roundOverheads returns call's overhead in round trips in each round,
// each from that round's p50s of call, direct and floor.
func roundOverheads(call, direct, floor *benchSeries) []float64 {
	out := make([]float64, len(call.roundEnds))
	for i := range out {
		out[i] = overheadRT(percentile(call.roundSamples(i), 50), percentile(direct.roundSamples(i), 50), percentile(floor.roundSamples(i), 50))
	}
	return out
}

// pairedDeltas is how many round trips of the floor cur takes more than
// base (negative: fewer) in each timed batch: cur's batch p50 less base's
// batch p50 of the same turn, over the floor's p50. [interleaveRounds]
// runs the k-th batch of every series in its k-th turn, so each
// difference is of two batches a few milliseconds apart: the machine's
// drift over a run, which moves the rounds of even identical services
// half a round trip apart, mostly cancels out. A partial batch at the end
// is left out.
func pairedDeltas(cur, base *benchSeries, batch int, floor time.Duration) []float64 {
	n := min(len(cur.samples), len(base.samples)) / batch
	if n == 0 || floor <= 0 {
		return nil
	}
	deltas := make([]float64, n)
	for k := range deltas {
		c := percentile(cur.samples[k*batch:(k+1)*batch], 50)
		b := percentile(base.samples[k*batch:(k+1)*batch], 50)
		deltas[k] = float64(c-b) / float64(floor)
	}
	return deltas
}

// pairedDelta is the median of [pairedDeltas], to three decimals (an
// outlying batch does not move it), and its 95 % interval ([medianCI]).
func pairedDelta(cur, base *benchSeries, batch int, floor time.Duration) (float64, [2]float64) {
	deltas := pairedDeltas(cur, base, batch, floor)
	return round(median(deltas), 3), medianCI(deltas)
}

// medianCI is an approximate 95 % confidence interval of the median of xs,
// to three decimals, from their order alone: the values ranked
// n/2 ∓ 0.98·√n, the normal approximation of the binomial count of values
// below the median. It assumes the batches independent, which pairing
// makes them mostly; with fewer than eight values it is their whole
// range.
func medianCI(xs []float64) [2]float64 {
	if len(xs) == 0 {
		return [2]float64{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := float64(len(s))
	half := 0.98 * math.Sqrt(n)
	lo := max(int(math.Floor(n/2-half)), 0)
	hi := min(int(math.Ceil(n/2+half)), len(s)-1)
	return [2]float64{round(s[lo], 3), round(s[hi], 3)}
}

// roundRatios returns a's p50 over b's in each round, to three decimals.
func roundRatios(a, b *benchSeries) []float64 {
	out := make([]float64, len(a.roundEnds))
	for i := range out {
		out[i] = ratio(float64(percentile(a.roundSamples(i), 50)), float64(percentile(b.roundSamples(i), 50)))
	}
	return out
}

// roundBeyond returns call's overhead in round trips of floor beyond one
// round trip of each of transports in each round: (call − direct − the
// transports) / floor, each that round's p50.
func roundBeyond(call, direct, floor *benchSeries, transports ...*benchSeries) []float64 {
	out := make([]float64, len(call.roundEnds))
	for i := range out {
		direct50 := percentile(direct.roundSamples(i), 50)
		for _, t := range transports {
			direct50 += percentile(t.roundSamples(i), 50)
		}
		out[i] = overheadRT(percentile(call.roundSamples(i), 50), direct50, percentile(floor.roundSamples(i), 50))
	}
	return out
}

// median is the middle of xs (the mean of the two middles for an even
// count), or 0 for none. It sorts a copy.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return round((s[n/2-1]+s[n/2])/2, 3)
}

// anonMiB reads a process's anonymous memory (heap, stacks, and whatever
// else no file backs) from /proc/PID/smaps_rollup: what one more process
// of a binary costs, since the binary's own pages are shared.
func anonMiB(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, false
	}
	return parseAnon(string(b))
}

// parseAnon returns the Anonymous line of an smaps_rollup in MiB.
func parseAnon(rollup string) (float64, bool) {
	for line := range strings.Lines(rollup) {
		if rest, ok := strings.CutPrefix(line, "Anonymous:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err == nil
			}
		}
	}
	return 0, false
}

func mustAnon(tb testing.TB, name string, pid int) float64 {
	tb.Helper()
	v, ok := anonMiB(pid)
	if !ok {
		tb.Fatalf("%s (pid %d): no Anonymous in /proc/%d/smaps_rollup", name, pid, pid)
	}
	return round(v, 2)
}

// goalMark says how a figure stands against its goal, for the log.
func goalMark(v, goal float64) string {
	if v <= goal {
		return fmt.Sprintf("within the goal of %g", goal)
	}
	return fmt.Sprintf("OVER the goal of %g", goal)
}

// callFloor captures the agent identity's reply to one encoded echo call
// and starts natsreplier answering that request's size with those bytes
// on [floorIdentity]'s tool subject. It returns the floor's series: the
// same request through tr, the transport the A2A calls use, counting this
// process and the replier (see procFigures), the request's bytes and the
// reply's size.
func callFloor(tb testing.TB, b *bus, tr *natsbus.Transport, identity string) (_ *benchSeries, req []byte, replyBytes int) {
	tb.Helper()
	req, err := a2a.Encode(a2a.NewToolRequest(a2a.Participant{Name: "bench-report"}, identity, "echo", echoInput))
	if err != nil {
		tb.Fatal(err)
	}
	reply, err := tr.RoundTrip(tb.Context(), identity, a2a.RouteTool, req)
	if err != nil {
		tb.Fatalf("echo of %s: %v", identity, err)
	}
	r := &a2a.ToolReply{}
	if err := a2a.Decode(reply, r); err != nil || r.Output != "hi\n" {
		tb.Fatalf("echo reply of %s: got %+v (%v), want output \"hi\\n\"", identity, r, err)
	}
	payload := fleettest.WriteFile(tb, tb.TempDir(), "tool-reply.json", string(reply))
	p := fleettest.Start(tb, b.home.Env(), fisktest.Build(tb, natsReplierPackage, "natsreplier"),
		"--url", b.ns.URL(), "--subject", natsbus.ToolSubject(floorIdentity), "--payload", payload)
	p.WaitOutput(tb, "ready", fleettest.ReadyTimeout)
	return &benchSeries{
		name:  "call_floor",
		run:   rawRoundTrip(tr, floorIdentity, a2a.RouteTool, req, len(reply), 0),
		procs: []benchProc{benchSelf, {"replier", p.PID}},
	}, req, len(reply)
}

// rawRoundTrip sends req to identity's route through tr and checks only
// the reply's size: want bytes, ± slack.
func rawRoundTrip(tr *natsbus.Transport, identity string, route a2a.Route, req []byte, want, slack int) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := tr.RoundTrip(ctx, identity, route, req)
		if err != nil || len(got) < want-slack || len(got) > want+slack {
			return fmt.Errorf("got %d bytes (%v), want %d ± %d", len(got), err, want, slack)
		}
		return nil
	}
}

// httpReplierPackage is the HTTP transport's floor.
const httpReplierPackage = "github.com/fiskfleet/fiskfleet/integration/cmd/httpreplier"

// mcpEchoRequest is an MCP echo call of the 2026-07-28 era as raw
// JSON-RPC, the way the floor sends it.
var mcpEchoRequest = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `",` +
	`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}`

// postMCP POSTs body to url as a 2026-07-28 client sends method for tool
// name, on hc, and returns the answer's bytes, failing on any status but
// 200.
func postMCP(ctx context.Context, hc *http.Client, url, method, name, body string, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20260728)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: got status %d: %.300s", method, resp.StatusCode, buf.Bytes())
	}
	return nil
}

// rawMCPEcho is an MCP call of the gateway at url's echo tool name (the
// local echo, or a remote agent's) as a plain HTTP client makes it (the
// request http_floor sends, naming name), checked for echo's output.
func rawMCPEcho(url, name string) func(context.Context) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	body := mcpEchoBody(name)
	var buf bytes.Buffer
	return func(ctx context.Context) error {
		if err := postMCP(ctx, hc, url, "tools/call", name, body, &buf); err != nil {
			return err
		}
		if !bytes.Contains(buf.Bytes(), []byte(`hi\\n`)) || bytes.Contains(buf.Bytes(), []byte(`"isError":true`)) {
			return fmt.Errorf("got %.300s, want echo's output", buf.Bytes())
		}
		return nil
	}
}

// rawAgent2AgentEcho is a blocking Agent2Agent SendMessage of echo to
// the gateway endpoint url, as a plain HTTP client makes it, checked for
// a completed task with echo's output.
func rawAgent2AgentEcho(url string) func(context.Context) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"bench","role":"ROLE_USER",` +
		`"parts":[{"data":{"tool":"echo","arguments":{"message":"hi"}}}]}}}`
	var buf bytes.Buffer
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		buf.Reset()
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !bytes.Contains(buf.Bytes(), []byte(`TASK_STATE_COMPLETED`)) || !bytes.Contains(buf.Bytes(), []byte(`"text":"hi\n"`)) {
			return fmt.Errorf("SendMessage: got %d %s, want a completed task with echo's output", resp.StatusCode, buf.Bytes())
		}
		return nil
	}
}

// mcpEchoBody is mcpEchoRequest calling the echo tool named name.
func mcpEchoBody(name string) string {
	return strings.Replace(mcpEchoRequest, `"name":"echo"`, `"name":`+strconv.Quote(name), 1)
}

// httpFloor captures the gateway's answer to one raw MCP echo call and
// starts httpreplier answering with those bytes. It returns the floor's
// series (see replierFloor) and the request's and the answer's sizes.
func httpFloor(tb testing.TB, b *bus, gatewayURL string) (_ *benchSeries, reqBytes, replyBytes int) {
	tb.Helper()
	s, reply := replierFloor(tb, b, "http_floor", gatewayURL, "echo", b.home.Env())
	return s, len(mcpEchoRequest), len(reply)
}

// remoteFloor captures the gateway's answer to one raw MCP call of the
// remote echo tool named remote and starts httpreplier relaying every
// POST as req, the call floor's request, to natsreplier's subject before
// answering with those bytes: the transports of a remote call, HTTP and
// then NATS from a process other than the broker's, with nothing of a
// gateway or an agent. The relay runs on one P, as the services do by
// default: measured side by side, that made it about a tenth faster than
// on every CPU, and the floor is the best a relay does. Its series counts
// the relay as the replier (see replierFloor).
func remoteFloor(tb testing.TB, b *bus, gatewayURL, remote string, req []byte) *benchSeries {
	tb.Helper()
	request := fleettest.WriteFile(tb, tb.TempDir(), "tool-request.json", string(req))
	s, _ := replierFloor(tb, b, "remote_floor", gatewayURL, remote, b.home.Env("GOMAXPROCS=1"),
		"--relay-url", b.ns.URL(), "--relay-subject", natsbus.ToolSubject(floorIdentity), "--relay-request", request)
	return s
}

// replierFloor captures the gateway's answer to one raw MCP call of the
// echo tool named tool and starts httpreplier, with env and args, to
// answer with those bytes. It returns the series, called name, of that
// same request POSTed to httpreplier by a plain net/http client on a
// kept-alive connection, counting this process and the replier, and the
// answer's bytes.
func replierFloor(tb testing.TB, b *bus, name, gatewayURL, tool string, env []string, args ...string) (*benchSeries, []byte) {
	tb.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	tb.Cleanup(hc.CloseIdleConnections)
	body := mcpEchoBody(tool)
	var buf bytes.Buffer
	if err := postMCP(tb.Context(), hc, gatewayURL, "tools/call", tool, body, &buf); err != nil {
		tb.Fatalf("raw MCP call of %s: %v", tool, err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`hi\n`)) {
		tb.Fatalf("raw MCP call of %s: got %s, want echo's output", tool, buf.Bytes())
	}
	reply := bytes.Clone(buf.Bytes())
	payload := fleettest.WriteFile(tb, tb.TempDir(), "mcp-reply.json", string(reply))
	p := fleettest.Start(tb, env, fisktest.Build(tb, httpReplierPackage, "httpreplier"), append([]string{"--payload", payload}, args...)...)
	p.WaitOutput(tb, "ready http://", fleettest.ReadyTimeout)
	url := strings.TrimSpace(strings.TrimPrefix(p.Stdout(), "ready "))
	return &benchSeries{name: name, procs: []benchProc{benchSelf, {"replier", p.PID}}, run: func(ctx context.Context) error {
		if err := postMCP(ctx, hc, url+"/mcp", "tools/call", tool, body, &buf); err != nil {
			return err
		}
		if buf.Len() != len(reply) {
			return fmt.Errorf("got %d bytes, want %d", buf.Len(), len(reply))
		}
		return nil
	}}, reply
}

// baseFleet is the base revision's agent and gateway (make bench BASE=).
type baseFleet struct {
	agent   *fleettest.Process
	gateway *gatewayProcess
}

// startBase starts the base revision's agent on [baseIdentity] and a
// gateway importing only it, from the binaries in dir, configured as the
// current ones are.
func startBase(tb testing.TB, b *bus, dir string) *baseFleet {
	tb.Helper()
	settings, err := baseEnv(os.Getenv(benchBaseEnvEnv))
	if err != nil {
		tb.Fatal(err)
	}
	env := append(b.home.Env(), settings...)
	cfg := fleettest.WriteAgentConfig(tb, b.demoAgent(tb, baseIdentity, 2))
	agent := fleettest.Start(tb, env, filepath.Join(dir, "a2a-agent"), "serve", "--config", cfg)
	agent.WaitOutput(tb, fleettest.A2AServingLog, fleettest.ReadyTimeout)
	// The base serves Agent2Agent as the current gateway does, so that
	// its agent2agent_call is measured beside the current one.
	gw := startGatewayBinary(tb, env, filepath.Join(dir, "mcp-gateway"), b.gatewayConfigMCP(tb, map[string]any{"agent2agent": map[string]any{}}, "0", baseIdentity))
	return &baseFleet{agent: agent, gateway: gw}
}

// baseEnv reads BASE_ENV's settings: NAME=value, space-separated. A word
// that sets nothing is an error, not a setting the base would silently
// go without.
func baseEnv(s string) ([]string, error) {
	settings := strings.Fields(s)
	for _, kv := range settings {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("BASE_ENV (%s): %q is not a NAME=value setting", benchBaseEnvEnv, kv)
		}
	}
	return settings, nil
}

// logOverheads logs each path's overhead table: per round and the median,
// beside its p50 and p99, and where the median stands against the path's
// goal, if it has one ([overheadGoals]).
func logOverheads(tb testing.TB, rows []overheadRow) {
	tb.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "overhead in transport round trips (call p50 − exec_direct p50) / call_floor p50, per round, median of %d:\n", benchRounds)
	fmt.Fprintf(&sb, "  %-27s %9s %9s  %-8s %-12s %s\n", "path", "p50 µs", "p99 µs", "median", "goal", "rounds")
	for _, r := range rows {
		fmt.Fprintf(&sb, "  %-27s %9.1f %9.1f  %-8.3f %-12s %v\n", r.name, r.p50, r.p99, r.rt, goalColumn(r.name, r.rt), r.rts)
	}
	tb.Log(sb.String())
}

// overheadGoals are the call paths' goals, in round trips of the call
// floor, as docs/measuring.md states them: 2.0 for an A2A call
// and a local MCP call, 3.0 for a remote MCP call, whichever era or client
// makes it. The transport floors and the differences between paths have
// none. A base_ row is held to its path's goal too.
var overheadGoals = map[string]float64{
	"a2a_call":               2.0,
	"mcp_call":               2.0,
	"mcp_legacy_call":        2.0,
	"mcp_raw_call":           2.0,
	"mcp_remote_call":        3.0,
	"mcp_remote_legacy_call": 3.0,
	"mcp_remote_raw_call":    3.0,
}

// currentGoals are the goals of rows the base fleet has no figure of
// (paths it predates): in round trips, like overheadGoals; the "over"
// rows are differences of two paths' overheads, round by round.
var currentGoals = map[string]float64{
	"agent2agent_call": 2.0,
	// The Agent2Agent surface costs at most this much beyond the plain
	// MCP client's call of the same tool.
	"agent2agent over mcp_raw": 0.3,
	"mcp_raw_call_guarded":     2.0,
	// A rate limit and an audit spool cost a call at most this much.
	"guarded over mcp_raw": 0.1,
}

// goalColumn is a row's goal column: "≤ 2.0 met" or "≤ 2.0 over" for a
// path with a goal, empty for any other row.
func goalColumn(name string, rt float64) string {
	goal, ok := overheadGoals[strings.TrimPrefix(name, "base_")]
	if !ok {
		if goal, ok = currentGoals[name]; !ok {
			return ""
		}
	}
	verdict := "met"
	if rt > goal {
		verdict = "over"
	}
	return fmt.Sprintf("≤ %.1f %s", goal, verdict)
}

// overheadRow is one line of [logOverheads].
type overheadRow struct {
	name         string
	p50, p99, rt float64
	rts          []float64
}

func TestBaseEnv(t *testing.T) {
	for _, tt := range []struct {
		in, err string
		want    []string
	}{
		{in: ""},
		{in: "GOMAXPROCS=1", want: []string{"GOMAXPROCS=1"}},
		{in: "  GOMAXPROCS=2\tGOGC=off  GODEBUG=gctrace=1,madvdontneed=1 ", want: []string{"GOMAXPROCS=2", "GOGC=off", "GODEBUG=gctrace=1,madvdontneed=1"}},
		{in: "EMPTY=", want: []string{"EMPTY="}},
		{in: "GOMAXPROCS 2", err: `"GOMAXPROCS" is not a NAME=value setting`},
		{in: "GOGC=50 =1", err: `"=1" is not a NAME=value setting`},
	} {
		got, err := baseEnv(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), benchBaseEnvEnv)):
			t.Errorf("%q: got %v, want an error naming %s and saying %s", tt.in, err, benchBaseEnvEnv, tt.err)
		case tt.err == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%q: got %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestOverheadArithmetic(t *testing.T) {
	us := func(v int) time.Duration { return time.Duration(v) * time.Microsecond }
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"two round trips", overheadRT(us(2400), us(2000), us(200)), 2},
		{"no overhead", overheadRT(us(2000), us(2000), us(200)), 0},
		{"faster than direct is negative", overheadRT(us(1950), us(2000), us(200)), -0.25},
		{"three decimals", overheadRT(us(2100), us(2000), us(300)), 0.333},
		{"no floor", overheadRT(us(2400), us(2000), 0), 0},
		{"median of odd count", median([]float64{5, 1, 3, 9, 2}), 3},
		{"median of even count is the mean of the middles", median([]float64{4, 1, 3, 2}), 2.5},
		{"median of one", median([]float64{7.25}), 7.25},
		{"median of none", median(nil), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Errorf("median sorted its argument: got %v, want [3 1 2]", xs)
	}
}

// TestRoundOverheads takes each round's p50s, not the whole run's: a
// round where the machine was slow for every series alike gives the same
// overhead as a quiet one.
// durations returns v in units of unit.
func durations(unit time.Duration, v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * unit
	}
	return out
}

func TestRoundOverheads(t *testing.T) {
	us := func(v ...int) []time.Duration { return durations(time.Microsecond, v...) }
	// Three rounds of three samples; the second round is twice as slow.
	call := &benchSeries{samples: us(2400, 2300, 2500, 4800, 4600, 5000, 2500, 2600, 2400), roundEnds: []int{3, 6, 9}}
	direct := &benchSeries{samples: us(2000, 1900, 2100, 4000, 3800, 4200, 2000, 2000, 2000), roundEnds: []int{3, 6, 9}}
	floor := &benchSeries{samples: us(200, 200, 200, 400, 400, 400, 250, 250, 250), roundEnds: []int{3, 6, 9}}
	got := roundOverheads(call, direct, floor)
	if want := []float64{2, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("roundOverheads: got %v, want %v", got, want)
	}
	if got := median(got); got != 2 {
		t.Errorf("median: got %v, want 2", got)
	}
	if got := call.roundSamples(1); !slices.Equal(got, us(4800, 4600, 5000)) {
		t.Errorf("roundSamples(1): got %v, want the second round's", got)
	}
	// An HTTP round trip of one floor in the first round, two in the
	// second, half of one in the third.
	http := &benchSeries{samples: us(200, 200, 200, 800, 800, 800, 125, 125, 125), roundEnds: []int{3, 6, 9}}
	if got, want := roundRatios(http, floor), []float64{1, 2, 0.5}; !slices.Equal(got, want) {
		t.Errorf("roundRatios: got %v, want %v", got, want)
	}
	if got, want := roundBeyond(call, direct, floor, http), []float64{1, 0, 1.5}; !slices.Equal(got, want) {
		t.Errorf("roundBeyond: got %v, want %v", got, want)
	}
	// Beyond two transports: the HTTP one and another of half a floor
	// per round.
	other := &benchSeries{samples: us(100, 100, 100, 200, 200, 200, 125, 125, 125), roundEnds: []int{3, 6, 9}}
	if got, want := roundBeyond(call, direct, floor, http, other), []float64{0.5, -0.5, 1}; !slices.Equal(got, want) {
		t.Errorf("roundBeyond of two transports: got %v, want %v", got, want)
	}
	if got, want := roundBeyond(call, direct, floor), roundOverheads(call, direct, floor); !slices.Equal(got, want) {
		t.Errorf("roundBeyond of no transport: got %v, want roundOverheads' %v", got, want)
	}
}

// TestOverheadGoals holds the goal column to the report: every path with
// a goal is one the report has an overhead figure of, the column says
// where a median stands against it (the goal itself is met), and a base_
// row is held to its path's goal.
func TestOverheadGoals(t *testing.T) {
	tags := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[benchReport](), reflect.TypeFor[baseFigures]()} {
		for f := range typ.Fields() {
			tags[strings.Split(f.Tag.Get("json"), ",")[0]] = true
		}
	}
	for name := range overheadGoals {
		for _, key := range []string{name + "_overhead_rt", "base_" + name + "_overhead_rt"} {
			if !tags[key] {
				t.Errorf("goal for %s: the report has no %s", name, key)
			}
		}
	}
	for _, tt := range []struct {
		name string
		rt   float64
		want string
	}{
		{"a2a_call", 1.84, "≤ 2.0 met"},
		{"a2a_call", 2.0, "≤ 2.0 met"},
		{"base_a2a_call", 2.01, "≤ 2.0 over"},
		{"mcp_remote_call", 2.9, "≤ 3.0 met"},
		{"mcp_remote_raw_call", 4.09, "≤ 3.0 over"},
		{"call_floor_idle", 1.5, ""},
		{"mcp_call beyond http", 1.9, ""},
	} {
		if got := goalColumn(tt.name, tt.rt); got != tt.want {
			t.Errorf("goalColumn(%s, %v): got %q, want %q", tt.name, tt.rt, got, tt.want)
		}
	}
}

// TestPairedDelta takes the difference batch by batch: a drift that
// moves both series alike cancels out, and an outlying batch does not
// move the median.
func TestPairedDelta(t *testing.T) {
	us := func(v ...int) []time.Duration { return durations(time.Microsecond, v...) }
	// Batches of two; the machine slows down by 1 ms from one batch to
	// the next, and cur is 100 µs faster in each but the last, where it
	// is 3 ms slower.
	cur := &benchSeries{samples: us(2400, 2400, 3400, 3400, 4400, 4400, 8500, 8500)}
	base := &benchSeries{samples: us(2500, 2500, 3500, 3500, 4500, 4500, 5500, 5500)}
	if got, _ := pairedDelta(cur, base, 2, 200*time.Microsecond); got != -0.5 {
		t.Errorf("got %v, want -0.5", got)
	}
	// A partial batch at the end is left out.
	cur.samples = append(cur.samples, us(100000)...)
	if got, _ := pairedDelta(cur, base, 2, 200*time.Microsecond); got != -0.5 {
		t.Errorf("with a partial batch: got %v, want -0.5", got)
	}
	if got, ci := pairedDelta(cur, &benchSeries{}, 2, 200*time.Microsecond); got != 0 || ci != [2]float64{} {
		t.Errorf("no base batches: got %v %v, want 0 and no interval", got, ci)
	}
}

// TestMedianCI: the interval of the median of 1..100 is the 41st to the
// 61st value (the exact binomial interval is the 40th to the 61st), a
// handful of values gives their whole range, and order does not matter.
func TestMedianCI(t *testing.T) {
	var xs []float64
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	for _, tt := range []struct {
		xs   []float64
		want [2]float64
	}{
		{xs, [2]float64{41, 61}},
		{[]float64{3, -1, 2, 0.5, 1}, [2]float64{-1, 3}},
		{[]float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}, [2]float64{0.25, 0.25}},
		{nil, [2]float64{}},
	} {
		if got := medianCI(tt.xs); got != tt.want {
			t.Errorf("medianCI of %d values: got %v, want %v", len(tt.xs), got, tt.want)
		}
	}
}

// TestInterleaveRounds runs every series the same number of times per
// round, in batches, and marks where each round ends.
func TestInterleaveRounds(t *testing.T) {
	var order []string
	mk := func(name string) *benchSeries {
		return &benchSeries{name: name, run: func(context.Context) error { order = append(order, name); return nil }}
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	interleaveRounds(t, []*benchSeries{a, b, c}, 1, 10, 2, 5)
	for _, s := range []*benchSeries{a, b, c} {
		if len(s.samples) != 10 || !slices.Equal(s.roundEnds, []int{2, 4, 6, 8, 10}) {
			t.Errorf("%s: got %d samples, round ends %v, want 10 and [2 4 6 8 10]", s.name, len(s.samples), s.roundEnds)
		}
	}
	// Warm-up once each, then in each turn a batch of two of every
	// series, in an order that changes from turn to turn.
	if got, want := strings.Join(order[:3], ""), "abc"; got != want {
		t.Errorf("warm-up order: got %s, want %s", got, want)
	}
	firsts := map[string]bool{}
	for turn := range 5 {
		calls := order[3+6*turn : 3+6*(turn+1)]
		seen := map[string]bool{}
		for i := 0; i < len(calls); i += 2 {
			if calls[i] != calls[i+1] || seen[calls[i]] {
				t.Fatalf("turn %d: got %v, want a batch of two of each series", turn, calls)
			}
			seen[calls[i]] = true
		}
		firsts[calls[0]] = true
	}
	if len(firsts) < 2 {
		t.Errorf("the same series began all 5 turns: %v", firsts)
	}
	// Iterations that do not divide into the rounds still all run.
	d := mk("d")
	interleaveRounds(t, []*benchSeries{d}, 0, 7, 3, 5)
	if len(d.samples) != 7 || !slices.Equal(d.roundEnds, []int{1, 2, 4, 5, 7}) {
		t.Errorf("7 in 5 rounds: got %d samples, round ends %v, want 7 and [1 2 4 5 7]", len(d.samples), d.roundEnds)
	}
}

func TestParseAnon(t *testing.T) {
	rollup := `55d4c5a4e000-7ffd3a5f6000 ---p 00000000 00:00 0                          [rollup]
Rss:               11264 kB
Pss:                4321 kB
Pss_Anon:           3072 kB
Anonymous:          3072 kB
AnonHugePages:         0 kB
Swap:                  0 kB
`
	if got, ok := parseAnon(rollup); !ok || got != 3 {
		t.Errorf("parseAnon: got %v, %v, want 3 MiB", got, ok)
	}
	for _, bad := range []string{"", "Rss: 100 kB\n", "Anonymous: lots kB\n", "Anonymous: 100\n"} {
		if got, ok := parseAnon(bad); ok {
			t.Errorf("parseAnon(%q): got %v, want not found", bad, got)
		}
	}
	// This process has an Anonymous line of its own, where the kernel
	// keeps a rollup (Linux 4.14 on).
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skipf("no smaps_rollup here: %v", err)
	}
	if v, ok := anonMiB(os.Getpid()); !ok || v <= 0 {
		t.Errorf("anonMiB(self): got %v, %v, want a positive figure", v, ok)
	}
}

// baseLoad gives the base agent, untimed, what the current agent served
// beyond the timed rounds: as many first-output tickers, and as many
// discoveries as its two discovery series (the client's and the raw one)
// took together.
func baseLoad(tb testing.TB, ac *a2a.Client, set benchSettings) {
	tb.Helper()
	ctx := tb.Context()
	for i := range firstOutputIterations {
		if _, err := firstEventStream(ctx, ac, baseIdentity); err != nil {
			tb.Fatalf("base first output %d: %v", i, err)
		}
	}
	for i := range 2 * (set.discoveryWarmup + set.discoveries) {
		if r, err := ac.Discover(ctx, baseIdentity); err != nil || r.Name != baseIdentity {
			tb.Fatalf("base discovery %d: got %+v (%v), want the card of %s", i, r, err, baseIdentity)
		}
	}
}

// quietWait is how long the load is over before the _quiet memory is
// read: two of memtrim's periods, within which a quiet agent trims, and
// a margin for a busy machine.
const quietWait = 2*memtrim.DefaultPeriod + time.Second

// quietAnon waits quietWait, then reads the _quiet anonymous memory of
// the agent, the gateway and, when measured, the base's.
func quietAnon(tb testing.TB, rep *benchReport, agent, gateway int, base *baseFleet) {
	tb.Helper()
	select {
	case <-time.After(quietWait):
	case <-tb.Context().Done():
		tb.Fatal("interrupted while the fleet went quiet")
	}
	rep.AgentAnonQuiet = mustAnon(tb, "a2a-agent", agent)
	rep.GatewayAnonQuiet = mustAnon(tb, "mcp-gateway", gateway)
	tb.Logf("quiet for %s after the load: a2a-agent anonymous %.2f MiB (%s); mcp-gateway anonymous %.2f MiB (%s)", quietWait,
		rep.AgentAnonQuiet, goalMark(rep.AgentAnonQuiet, agentAnonGoalMiB), rep.GatewayAnonQuiet, goalMark(rep.GatewayAnonQuiet, gatewayAnonGoalMiB))
	if base == nil {
		return
	}
	rep.BaseAgentAnonQuiet = mustAnon(tb, "base a2a-agent", base.agent.PID)
	rep.BaseGatewayAnonQt = mustAnon(tb, "base mcp-gateway", base.gateway.PID)
	tb.Logf("base %s quiet: a2a-agent anonymous %.2f MiB, mcp-gateway anonymous %.2f MiB", rep.BaseRevision, rep.BaseAgentAnonQuiet, rep.BaseGatewayAnonQt)
}
