package integration_test

// The benchmark report: `make bench` and `make bench-quick` run
// TestBenchReport, which measures the whole fleet with real processes and
// writes the figures as one flat JSON object (see benchReport). Every
// figure that matters is a ratio measured in the same run, because
// absolute times differ from machine to machine and from minute to minute
// on a shared one.
//
//	FISKFLEET_BENCH_OUT=/abs/bench.json [FISKFLEET_BENCH_QUICK=1] \
//	  CGO_ENABLED=0 go test -run '^TestBenchReport$' -count=1 -v .
//
// Without FISKFLEET_BENCH_OUT the test is skipped, so `make test` only runs
// the unit tests of the arithmetic below. CGO_ENABLED=0 builds the
// services as `make build` links them, so the resident memory is that of
// the binaries an operator runs.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/oidctest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Environment of TestBenchReport.
const (
	// benchOutEnv names the file the report is written to; the test runs
	// only when it is set.
	benchOutEnv = "FISKFLEET_BENCH_OUT"
	// benchQuickEnv, set to 1, selects [quickBench] instead of
	// [fullBench].
	benchQuickEnv = "FISKFLEET_BENCH_QUICK"
	// natsReplierPackage is the transport floor's replier.
	natsReplierPackage = "github.com/fiskfleet/fiskfleet/integration/cmd/natsreplier"
)

// benchSettings sizes one report run.
type benchSettings struct {
	mode string
	// calls and discoveries are the timed iterations per series; warmup
	// untimed iterations run first, and series are interleaved in batches
	// of batch so that machine noise falls on each of them alike.
	calls, callWarmup, callBatch int
	discoveries, discoveryWarmup int
	discoveryBatch               int
	// settle is how long the agent and the gateway idle before their
	// resident memory is read.
	settle time.Duration
	// sleep is the scaling command's duration; scaleWarm and scaleWindow
	// the untimed ramp and the counted window of each throughput run.
	sleep, scaleWarm, scaleWindow time.Duration
}

var (
	// fullBench is `make bench`: under two minutes of measuring.
	fullBench = benchSettings{
		mode:  "full",
		calls: 1000, callWarmup: 20, callBatch: 20,
		discoveries: 10000, discoveryWarmup: 500, discoveryBatch: 100,
		settle: 2 * time.Second,
		sleep:  500 * time.Millisecond, scaleWarm: time.Second, scaleWindow: 10 * time.Second,
	}
	// quickBench is `make bench-quick`: the same report in about twenty
	// seconds of measuring, with noisier tails.
	quickBench = benchSettings{
		mode:  "quick",
		calls: 100, callWarmup: 5, callBatch: 10,
		discoveries: 1000, discoveryWarmup: 100, discoveryBatch: 50,
		settle: time.Second,
		sleep:  200 * time.Millisecond, scaleWarm: 500 * time.Millisecond, scaleWindow: 3 * time.Second,
	}
)

// Scaling run shape: agents of scaleSlots concurrent tools each, and
// scaleCallersPerSlot callers per slot of the fleet, so that every slot
// always has a call waiting (NATS spreads a queue group at random, not by
// load).
const (
	scaleAgents         = 4
	scaleSlots          = 2
	scaleCallersPerSlot = 4
)

// benchReport is the JSON object the report writes: flat, one figure per
// key (a list of numbers for _rounds), all measured in one run. Units are
// in the key names: _us microseconds, _mib mebibytes (2^20 bytes), _per_s
// calls per second, _bytes bytes, _rt transport round trips; _ratio_* and
// efficiency are plain numbers. Schema 2 added the round-trip overheads,
// the call floor, anonymous memory, the stage breakdown (stages_*, see
// benchstages_test.go) and the base_* figures; every key of schema 1
// keeps its meaning. Schema 3 added the CPU time and context switches
// per call of each process a call crosses (procFigures).
//
// Latencies are the p50 and p99 (nearest rank, see [percentile]) of the
// timed iterations of a series:
//
//   - exec_direct: fork/exec of the demo's echo argv, output captured; the
//     baseline of every call ratio.
//   - exec_guarded: the same command through fiskapp's guarded runner
//     (argv from JSON, process group, scrubbed environment, capped output).
//   - a2a_call: a2a.Client.CallTool -> NATS -> a2a-agent process -> echo.
//   - mcp_call: mcp-go client -> mcp-gateway process (local tool) -> echo.
//   - mcp_remote_call: mcp-go client -> mcp-gateway -> NATS -> a2a-agent
//     -> echo (a remote_tools tool).
//   - mcp_remote_legacy_call: the same by mcp-go's session-based client
//     (2025-11-25), mcp_remote_raw_call by a plain net/http client.
//   - a2a_stream: a2a.Client.StreamTool of the same echo: the stream
//     endpoint, ack, output event and final reply instead of one reply.
//     a2a_stream_ratio_* is its percentile over a2a_call's, both from the
//     same interleaved run (the goal: at most 1.05).
//
// First output: the time from starting a demo ticker to its first line,
// firstOutputIterations times each: first_line_direct on a direct exec of
// its argv (stdout piped, read up to the first newline), first_event_stream
// through a2a.Client.StreamTool to the first output event; each run is then
// stopped (killed, or cancelled over A2A). first_event_ratio_* is the
// stream's percentile over the direct one's.
//
// Each call series has <series>_ratio_p50 and _ratio_p99: its percentile
// over exec_direct's.
//
// Discovery series share one NATS connection and one natsbus transport:
//
//   - discovery: a2a.Client.Discover against the agent (the client's
//     stamping, encoding and reply validation included).
//   - discovery_raw: the same encoded request through the same transport,
//     reply not decoded: the agent's side alone.
//   - floor: the same request to natsreplier, another process answering
//     with the agent's reply bytes and doing no work.
//
// discovery_ratio_* is discovery over floor; discovery_raw_ratio_* is
// discovery_raw over floor, what the agent's handler adds to NATS alone.
//
// Scaling: throughput of closed-loop callers of the demo's sleep with one
// agent, then with four on the same identity; scaling_efficiency is
// scale4_per_s / (4 × scale1_per_s).
type benchReport struct {
	Schema     int    `json:"schema"`
	Mode       string `json:"mode"`
	GoVersion  string `json:"go_version"`
	Timestamp  string `json:"timestamp"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// Load1mStart and Load1mEnd are the one-minute load average around
	// the run: how busy the machine was.
	Load1mStart float64 `json:"load_1m_start"`
	Load1mEnd   float64 `json:"load_1m_end"`
	ElapsedS    float64 `json:"elapsed_s"`

	Iterations          int `json:"iterations"`
	WarmupIterations    int `json:"warmup_iterations"`
	Batch               int `json:"batch"`
	DiscoveryIterations int `json:"discovery_iterations"`
	DiscoveryWarmup     int `json:"discovery_warmup_iterations"`
	DiscoveryBatch      int `json:"discovery_batch"`

	ExecDirectP50 float64 `json:"exec_direct_p50_us"`
	ExecDirectP99 float64 `json:"exec_direct_p99_us"`

	ExecGuardedP50      float64 `json:"exec_guarded_p50_us"`
	ExecGuardedP99      float64 `json:"exec_guarded_p99_us"`
	ExecGuardedRatioP50 float64 `json:"exec_guarded_ratio_p50"`
	ExecGuardedRatioP99 float64 `json:"exec_guarded_ratio_p99"`

	A2ACallP50      float64 `json:"a2a_call_p50_us"`
	A2ACallP99      float64 `json:"a2a_call_p99_us"`
	A2ACallRatioP50 float64 `json:"a2a_call_ratio_p50"`
	A2ACallRatioP99 float64 `json:"a2a_call_ratio_p99"`

	MCPCallP50      float64 `json:"mcp_call_p50_us"`
	MCPCallP99      float64 `json:"mcp_call_p99_us"`
	MCPCallRatioP50 float64 `json:"mcp_call_ratio_p50"`
	MCPCallRatioP99 float64 `json:"mcp_call_ratio_p99"`

	// Overhead of each call path in transport round trips: the call
	// series run in rounds (rounds), each interleaving every series with
	// exec_direct and the call floor; a path's <path>_overhead_rt_rounds
	// are (its p50 − exec_direct's p50) / call_floor's p50 per round (see
	// overheadRT), and <path>_overhead_rt their median. call_floor is a
	// request of an A2A echo call's size (call_request_bytes) to
	// natsreplier answering with the bytes of the agent's reply
	// (call_reply_bytes): one round trip of the transport alone, measured
	// in the same rounds as the calls.
	Rounds           int     `json:"rounds"`
	CallRequestBytes int     `json:"call_request_bytes"`
	CallReplyBytes   int     `json:"call_reply_bytes"`
	CallFloorP50     float64 `json:"call_floor_p50_us"`
	CallFloorP99     float64 `json:"call_floor_p99_us"`
	// CallFloorIdle is the same floor request sent after the client and
	// natsreplier have both been idle for call_floor_idle_ms, about a
	// command's run, as a call's reply finds its client and a call finds
	// an agent between calls; call_floor_idle_rt is its p50 over
	// call_floor's per round, the median. What it adds over the floor is
	// the machine's wake-up of idle processes, which every call pays on
	// its way there and back and a direct exec does not.
	CallFloorIdleMS  float64   `json:"call_floor_idle_ms"`
	CallFloorIdleP50 float64   `json:"call_floor_idle_p50_us"`
	CallFloorIdleP99 float64   `json:"call_floor_idle_p99_us"`
	CallFloorIdleRT  float64   `json:"call_floor_idle_rt"`
	A2ACallRT        float64   `json:"a2a_call_overhead_rt"`
	A2ACallRTs       []float64 `json:"a2a_call_overhead_rt_rounds"`
	MCPCallRT        float64   `json:"mcp_call_overhead_rt"`
	MCPCallRTs       []float64 `json:"mcp_call_overhead_rt_rounds"`
	MCPRemoteCallRT  float64   `json:"mcp_remote_call_overhead_rt"`
	MCPRemoteCallRTs []float64 `json:"mcp_remote_call_overhead_rt_rounds"`

	// MCPLegacyCall is mcp_call made by a session-based client of the
	// 2025-11-25 era, which the clients in use today are: mcp-go's client
	// on LATEST_LEGACY_PROTOCOL_VERSION, one session for all its calls.
	MCPLegacyCallP50 float64   `json:"mcp_legacy_call_p50_us"`
	MCPLegacyCallP99 float64   `json:"mcp_legacy_call_p99_us"`
	MCPLegacyCallRT  float64   `json:"mcp_legacy_call_overhead_rt"`
	MCPLegacyCallRTs []float64 `json:"mcp_legacy_call_overhead_rt_rounds"`

	// MCPRawCall is mcp_call made by a plain net/http client instead of
	// mcp-go's (the request http_floor sends, 2026-07-28 era, JSON
	// answer): the gateway's overhead without an MCP client library's.
	MCPRawCallP50 float64   `json:"mcp_raw_call_p50_us"`
	MCPRawCallP99 float64   `json:"mcp_raw_call_p99_us"`
	MCPRawCallRT  float64   `json:"mcp_raw_call_overhead_rt"`
	MCPRawCallRTs []float64 `json:"mcp_raw_call_overhead_rt_rounds"`

	// Agent2AgentCall is mcp_raw_call's echo called over the gateway's
	// Agent2Agent surface (a blocking SendMessage, protocol 1.0, by a
	// plain net/http client); Agent2AgentOverMCPRaw is its overhead less
	// mcp_raw_call's, per round: the goal is at most 0.3.
	Agent2AgentCallP50       float64   `json:"agent2agent_call_p50_us"`
	Agent2AgentCallP99       float64   `json:"agent2agent_call_p99_us"`
	Agent2AgentCallRT        float64   `json:"agent2agent_call_overhead_rt"`
	Agent2AgentCallRTs       []float64 `json:"agent2agent_call_overhead_rt_rounds"`
	Agent2AgentOverMCPRawRT  float64   `json:"agent2agent_call_over_mcp_raw_call_rt"`
	Agent2AgentOverMCPRawRTs []float64 `json:"agent2agent_call_over_mcp_raw_call_rt_rounds"`

	// MCPRawGuarded is mcp_raw_call on a gateway whose policy sets a
	// rate (never reached) and whose audit has a spool (never needed):
	// MCPRawGuardedOverRaw is what the rate limiter and the spool add to
	// a call, per round; the goal is at most 0.1.
	MCPRawGuardedP50        float64   `json:"mcp_raw_call_guarded_p50_us"`
	MCPRawGuardedP99        float64   `json:"mcp_raw_call_guarded_p99_us"`
	MCPRawGuardedRT         float64   `json:"mcp_raw_call_guarded_overhead_rt"`
	MCPRawGuardedRTs        []float64 `json:"mcp_raw_call_guarded_overhead_rt_rounds"`
	MCPRawGuardedOverRawRT  float64   `json:"mcp_raw_call_guarded_over_mcp_raw_call_rt"`
	MCPRawGuardedOverRawRTs []float64 `json:"mcp_raw_call_guarded_over_mcp_raw_call_rt_rounds"`

	// MCPRemoteLegacyCall is mcp_remote_call made by the session-based
	// client of mcp_legacy_call, as the clients in use today make it.
	MCPRemoteLegacyCallP50 float64   `json:"mcp_remote_legacy_call_p50_us"`
	MCPRemoteLegacyCallP99 float64   `json:"mcp_remote_legacy_call_p99_us"`
	MCPRemoteLegacyCallRT  float64   `json:"mcp_remote_legacy_call_overhead_rt"`
	MCPRemoteLegacyCallRTs []float64 `json:"mcp_remote_legacy_call_overhead_rt_rounds"`

	// MCPRemoteRawCall is mcp_remote_call made by that plain client: the
	// gateway's and the agent's overhead on a remote tool without an MCP
	// client library's.
	MCPRemoteRawCallP50 float64   `json:"mcp_remote_raw_call_p50_us"`
	MCPRemoteRawCallP99 float64   `json:"mcp_remote_raw_call_p99_us"`
	MCPRemoteRawCallRT  float64   `json:"mcp_remote_raw_call_overhead_rt"`
	MCPRemoteRawCallRTs []float64 `json:"mcp_remote_raw_call_overhead_rt_rounds"`

	// The HTTP transport's own round trip, in the same rounds: http_floor
	// is a POST of the bytes of an MCP echo call of the 2026-07-28 era
	// (http_request_bytes) to httpreplier, which answers with the bytes
	// the gateway answered that call with (http_reply_bytes), by a plain
	// net/http client on a kept-alive connection. http_floor_rt is its p50
	// over call_floor's per round, the median: what one HTTP round trip
	// costs in the unit every path is counted in. MCP calls cross HTTP,
	// so mcp_call_beyond_http_rt is mcp_call's overhead less one
	// http_floor, per round, the median: what the gateway and the MCP
	// client add to HTTP itself.
	HTTPRequestBytes int       `json:"http_request_bytes"`
	HTTPReplyBytes   int       `json:"http_reply_bytes"`
	HTTPFloorP50     float64   `json:"http_floor_p50_us"`
	HTTPFloorP99     float64   `json:"http_floor_p99_us"`
	HTTPFloorRT      float64   `json:"http_floor_rt"`
	MCPBeyondHTTPRT  float64   `json:"mcp_call_beyond_http_rt"`
	MCPBeyondHTTPRTs []float64 `json:"mcp_call_beyond_http_rt_rounds"`

	// HTTPFloorIdle is http_floor sent after the client and httpreplier
	// have idled for call_floor_idle_ms, as call_floor_idle is the NATS
	// floor's. A remote call crosses both transports between processes
	// that idled through the command, so
	// mcp_remote_raw_call_beyond_idle_floors_rt is mcp_remote_raw_call's
	// overhead less one call_floor_idle and one http_floor_idle, per
	// round, the median: what the gateway and the agent add to the two
	// transports as a call finds them.
	HTTPFloorIdleP50       float64   `json:"http_floor_idle_p50_us"`
	HTTPFloorIdleP99       float64   `json:"http_floor_idle_p99_us"`
	HTTPFloorIdleRT        float64   `json:"http_floor_idle_rt"`
	MCPRemoteBeyondIdleRT  float64   `json:"mcp_remote_raw_call_beyond_idle_floors_rt"`
	MCPRemoteBeyondIdleRTs []float64 `json:"mcp_remote_raw_call_beyond_idle_floors_rt_rounds"`

	// RemoteFloor is a remote call's transports alone, in the same
	// rounds: the raw remote call's request (remote_floor) POSTed to an
	// httpreplier that relays each as the call floor's request to
	// natsreplier, through the broker, and answers with the bytes the
	// gateway answered that call with once the reply is in. Unlike one
	// HTTP and one NATS floor added together, it holds the hops between
	// the gateway's process and the broker's, which the NATS floor, sent
	// from the broker's own process, does not. remote_floor_idle is sent
	// after idling as the other idle floors are, and
	// mcp_remote_raw_call_beyond_remote_floor_rt is mcp_remote_raw_call's
	// overhead less one remote_floor_idle, per round, the median: what
	// the gateway and the agent add to the transports a remote call
	// crosses, as it finds them.
	RemoteFloorP50                float64   `json:"remote_floor_p50_us"`
	RemoteFloorP99                float64   `json:"remote_floor_p99_us"`
	RemoteFloorRT                 float64   `json:"remote_floor_rt"`
	RemoteFloorIdleP50            float64   `json:"remote_floor_idle_p50_us"`
	RemoteFloorIdleP99            float64   `json:"remote_floor_idle_p99_us"`
	RemoteFloorIdleRT             float64   `json:"remote_floor_idle_rt"`
	MCPRemoteBeyondRemoteFloorRT  float64   `json:"mcp_remote_raw_call_beyond_remote_floor_rt"`
	MCPRemoteBeyondRemoteFloorRTs []float64 `json:"mcp_remote_raw_call_beyond_remote_floor_rt_rounds"`

	// Each local path beyond the idle floor of the one transport it
	// crosses, per round, the median: a2a_call less one call_floor_idle,
	// mcp_raw_call less one http_floor_idle. With
	// mcp_remote_raw_call_beyond_remote_floor_rt, what fiskfleet adds to
	// each path's transports as a call finds them, in the same unit.
	A2ABeyondIdleRT     float64   `json:"a2a_call_beyond_idle_floor_rt"`
	A2ABeyondIdleRTs    []float64 `json:"a2a_call_beyond_idle_floor_rt_rounds"`
	MCPRawBeyondIdleRT  float64   `json:"mcp_raw_call_beyond_idle_floor_rt"`
	MCPRawBeyondIdleRTs []float64 `json:"mcp_raw_call_beyond_idle_floor_rt_rounds"`

	// MCPOAuthCall is the same local call through a gateway that checks
	// an OAuth access token on every request (expose.agent.mcp.auth), and
	// its ratio over mcp_call of the same run (goal: within 1.05 at p50).
	MCPOAuthCallP50    float64 `json:"mcp_oauth_call_p50_us"`
	MCPOAuthCallP99    float64 `json:"mcp_oauth_call_p99_us"`
	MCPOAuthOverMCPP50 float64 `json:"mcp_oauth_over_mcp_call_p50"`
	MCPOAuthOverMCPP99 float64 `json:"mcp_oauth_over_mcp_call_p99"`

	MCPRemoteCallP50      float64 `json:"mcp_remote_call_p50_us"`
	MCPRemoteCallP99      float64 `json:"mcp_remote_call_p99_us"`
	MCPRemoteCallRatioP50 float64 `json:"mcp_remote_call_ratio_p50"`
	MCPRemoteCallRatioP99 float64 `json:"mcp_remote_call_ratio_p99"`

	// A2AStream is a streamed call of echo (a2a_stream), and its ratio
	// over the unary a2a_call of the same run.
	A2AStreamP50      float64 `json:"a2a_stream_p50_us"`
	A2AStreamP99      float64 `json:"a2a_stream_p99_us"`
	A2AStreamRatioP50 float64 `json:"a2a_stream_ratio_p50"`
	A2AStreamRatioP99 float64 `json:"a2a_stream_ratio_p99"`

	// FirstOutput is the time to a ticker's first line: on a direct exec
	// (first_line_direct) and as the first output event of a streamed
	// call (first_event_stream), with the stream's ratio over the exec.
	FirstOutputIterations int     `json:"first_output_iterations"`
	FirstLineDirectP50    float64 `json:"first_line_direct_p50_us"`
	FirstLineDirectP99    float64 `json:"first_line_direct_p99_us"`
	FirstEventStreamP50   float64 `json:"first_event_stream_p50_us"`
	FirstEventStreamP99   float64 `json:"first_event_stream_p99_us"`
	FirstEventRatioP50    float64 `json:"first_event_ratio_p50"`
	FirstEventRatioP99    float64 `json:"first_event_ratio_p99"`

	DiscoveryRequestBytes int     `json:"discovery_request_bytes"`
	DiscoveryReplyBytes   int     `json:"discovery_reply_bytes"`
	DiscoveryP50          float64 `json:"discovery_p50_us"`
	DiscoveryP99          float64 `json:"discovery_p99_us"`
	DiscoveryRawP50       float64 `json:"discovery_raw_p50_us"`
	DiscoveryRawP99       float64 `json:"discovery_raw_p99_us"`
	FloorP50              float64 `json:"floor_p50_us"`
	FloorP99              float64 `json:"floor_p99_us"`
	DiscoveryRatioP50     float64 `json:"discovery_ratio_p50"`
	DiscoveryRatioP99     float64 `json:"discovery_ratio_p99"`
	DiscoveryRawRatioP50  float64 `json:"discovery_raw_ratio_p50"`
	DiscoveryRawRatioP99  float64 `json:"discovery_raw_ratio_p99"`

	// Anonymous memory (smaps_rollup's Anonymous: heap, stacks) of the
	// same processes at the same moments: what one more process costs,
	// the binary's pages being shared (goals after the load: agent 8 MiB,
	// gateway 12 MiB).
	AgentIdleAnon    float64 `json:"agent_idle_anon_mib"`
	AgentAnonAfter   float64 `json:"agent_anon_after_mib"`
	GatewayIdleAnon  float64 `json:"gateway_idle_anon_mib"`
	GatewayAnonAfter float64 `json:"gateway_anon_after_mib"`
	// _quiet is the same once the load has been over for quietWait:
	// what a process holds between bursts, after the agent's memtrim.
	AgentAnonQuiet   float64 `json:"agent_anon_quiet_mib"`
	GatewayAnonQuiet float64 `json:"gateway_anon_quiet_mib"`

	// Idle resident memory after start and the settle; _after is the
	// same process once every series above has run through it.
	AgentIdleRSS      float64 `json:"agent_idle_rss_mib"`
	GatewayIdleRSS    float64 `json:"gateway_idle_rss_mib"`
	AgentRSSAfter     float64 `json:"agent_rss_after_mib"`
	GatewayRSSAfter   float64 `json:"gateway_rss_after_mib"`
	ScaleSleepMS      float64 `json:"scale_sleep_ms"`
	ScaleSlots        int     `json:"scale_slots_per_agent"`
	ScaleCallersSlot  int     `json:"scale_callers_per_slot"`
	ScaleWindowS      float64 `json:"scale_window_s"`
	Scale1PerS        float64 `json:"scale1_per_s"`
	Scale4PerS        float64 `json:"scale4_per_s"`
	ScalingEfficiency float64 `json:"scaling_efficiency"`

	// Gateway fleet: calls per second of the demo's sleep (scale_sleep_ms)
	// through haproxy with integration/examples/haproxy.cfg, in front of
	// one gateway (all three server lines naming it) and then of three,
	// each with fleet_slots_per_gateway slots (max_concurrent_tools), by
	// the same fleet_callers callers: the gateways' slots, not the
	// machine's cores, are the limit, since the command sleeps.
	// fleet_ratio is fleet3_per_s over fleet1_per_s (goal: at least 2.5).
	// All zero when haproxy is not installed (and CI is not set).
	FleetSlots   int     `json:"fleet_slots_per_gateway"`
	FleetCallers int     `json:"fleet_callers"`
	Fleet1PerS   float64 `json:"fleet1_per_s"`
	Fleet3PerS   float64 `json:"fleet3_per_s"`
	FleetRatio   float64 `json:"fleet_ratio"`

	procFigures      // <series>_{cpu_us,vcsw,ivcsw}_per_call_<proc>: see benchprocs_test.go
	knowledgeFigures // knowledge_*: see knowledge_bench_test.go
	toolsListFigures // tools_list_*: see toolslist_bench_test.go

	// *baseFigures holds the base_* figures of make bench BASE=<rev>; nil,
	// and so absent, otherwise (see benchoverhead_test.go).
	*baseFigures

	// stages are the stage breakdown's stages_* figures, written flat
	// after the fields by MarshalJSON (see benchstages_test.go).
	stages []stageFigure
}

// benchSeries is one measured path: run makes one call and checks its
// result; samples are the timed calls' durations, and roundEnds where
// each round of [interleaveRounds] ended in them.
type benchSeries struct {
	name      string
	run       func(context.Context) error
	samples   []time.Duration
	roundEnds []int
	// idle, when set, is slept before each timed call, outside its time:
	// the call then reaches processes that have been idle that long.
	idle time.Duration
	// procs, when set, are the processes whose CPU time and context
	// switches are read before and after each timed batch; usage holds
	// the sums of those differences, in procs' order (see procFigures).
	// The readings fall between batches, never inside a timed call; a
	// series with idle would be charged with its sleeps too.
	procs []benchProc
	usage []procUsage
}

// interleave is [interleaveRounds] in one round.
func interleave(tb testing.TB, series []*benchSeries, warmup, iterations, batch int) {
	tb.Helper()
	interleaveRounds(tb, series, warmup, iterations, batch, 1)
}

// interleaveRounds runs warmup untimed calls of every series, then
// iterations timed calls of each in rounds: each round takes its share of
// every series in batches taken in turn (in an order drawn afresh for
// each turn), so a slow spell of the machine falls on every series alike,
// and a figure computed per round compares series measured side by side.
// The usage of a series' procs is read around each of its timed batches.
// It fails tb on the first failed call.
func interleaveRounds(tb testing.TB, series []*benchSeries, warmup, iterations, batch, rounds int) {
	tb.Helper()
	ctx := tb.Context()
	for _, s := range series {
		for range warmup {
			if err := s.run(ctx); err != nil {
				tb.Fatalf("%s warm-up: %v", s.name, err)
			}
		}
		s.samples = make([]time.Duration, 0, iterations)
		s.roundEnds = make([]int, 0, rounds)
		s.usage = make([]procUsage, len(s.procs))
	}
	var pr procReader
	read := func(s *benchSeries, selfFirst bool) []procUsage {
		if len(s.procs) == 0 {
			return nil
		}
		u, err := pr.read(s.procs, selfFirst)
		if err != nil {
			tb.Fatalf("%s: reading the usage of its processes: %v", s.name, err)
		}
		return u
	}
	// Each turn runs the series in an order of its own: in a fixed one,
	// each series would always follow the same other, and whatever that
	// one leaves behind (caches, a process just gone idle) would bias it
	// alike in every turn. The seed is fixed, so runs stay comparable.
	order := rand.New(rand.NewPCG(1, uint64(len(series))))
	for r := range rounds {
		until := iterations * (r + 1) / rounds
		for len(series[0].samples) < until {
			for _, i := range order.Perm(len(series)) {
				s := series[i]
				if len(s.samples) >= until {
					continue
				}
				before := read(s, false)
				for j := 0; j < batch && len(s.samples) < until; j++ {
					if s.idle > 0 {
						time.Sleep(s.idle)
					}
					start := time.Now()
					err := s.run(ctx)
					d := time.Since(start)
					if err != nil {
						tb.Fatalf("%s iteration %d: %v", s.name, len(s.samples), err)
					}
					s.samples = append(s.samples, d)
				}
				for k, u := range read(s, true) {
					s.usage[k] = s.usage[k].add(u.sub(before[k]))
				}
			}
		}
		for _, s := range series {
			s.roundEnds = append(s.roundEnds, len(s.samples))
		}
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// samples: the smallest sample at least p % of the samples are less than
// or equal to. It sorts a copy; an empty slice gives 0.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// micros is d in microseconds, to 0.1 µs.
func micros(d time.Duration) float64 { return round(float64(d)/float64(time.Microsecond), 1) }

// ratio is a over b to three decimals, or 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round(a/b, 3)
}

// round rounds x to digits decimals.
func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}

// efficiency is how much of n times the single-process throughput n
// processes reach: 1 is perfect scaling.
func efficiency(one, many float64, n int) float64 { return ratio(many, float64(n)*one) }

// throughput runs callers closed-loop calls of call for warm plus window
// and returns the calls per second that completed inside window. Calls
// still running when window ends finish before it returns; the first
// error is returned.
func throughput(ctx context.Context, callers int, warm, window time.Duration, call func(context.Context) error) (float64, error) {
	from := time.Now().Add(warm)
	until := from.Add(window)
	var (
		counted atomic.Int64
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(until) && ctx.Err() == nil {
				err := call(ctx)
				if err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				if now := time.Now(); !now.Before(from) && !now.After(until) {
					counted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(counted.Load()) / window.Seconds(), ctx.Err()
}

// load1m reads the one-minute load average, or 0 when /proc has none.
func load1m() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// settleRSS waits d, then returns pid's resident memory in MiB, failing tb
// when /proc cannot tell.
func settleRSS(tb testing.TB, name string, pid int, d time.Duration) float64 {
	tb.Helper()
	select {
	case <-time.After(d):
	case <-tb.Context().Done():
		tb.Fatalf("interrupted while %s settled", name)
	}
	return mustRSS(tb, name, pid)
}

func mustRSS(tb testing.TB, name string, pid int) float64 {
	tb.Helper()
	rss, ok := rssMiB(pid)
	if !ok {
		tb.Fatalf("%s (pid %d): no VmRSS in /proc/%d/status", name, pid, pid)
	}
	return round(rss, 2)
}

// startAgentsAtOnce starts `a2a-agent serve` on each config without
// waiting in between, then waits until every one serves: start-ups
// overlap, which on a slow machine saves seconds per agent.
func startAgentsAtOnce(tb testing.TB, env []string, configs ...string) []*fleettest.Process {
	tb.Helper()
	procs := make([]*fleettest.Process, len(configs))
	for i, cfg := range configs {
		procs[i] = fleettest.Start(tb, env, fleettest.A2AAgent(tb), "serve", "--config", cfg)
	}
	for _, p := range procs {
		p.WaitOutput(tb, fleettest.A2AServingLog, fleettest.ReadyTimeout)
	}
	return procs
}

// mcpEcho calls an echo tool of the gateway and checks its output.
func mcpEcho(c *client.Client, name string) func(context.Context) error {
	return func(ctx context.Context) error {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = map[string]any{"message": "hi"}
		return checkEcho(c.CallTool(ctx, req))
	}
}

// checkEcho checks an MCP echo call's result: a command result with
// output "hi\n".
func checkEcho(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("isError: %s", mcpText(res))
	}
	var cr tool.CommandResult
	if err := json.Unmarshal([]byte(mcpText(res)), &cr); err != nil || cr.Output != "hi\n" {
		return fmt.Errorf("got %q (%v), want a command result with output \"hi\\n\"", mcpText(res), err)
	}
	return nil
}

// TestBenchReport measures the fleet and writes [benchReport] to the file
// named by FISKFLEET_BENCH_OUT. Run it through `make bench` or `make
// bench-quick`; it asserts only that every measured call succeeded.
func TestBenchReport(t *testing.T) {
	out := os.Getenv(benchOutEnv)
	if out == "" {
		t.Skipf("set %s (make bench, make bench-quick) to measure the fleet and write the report", benchOutEnv)
	}
	set := fullBench
	if os.Getenv(benchQuickEnv) == "1" {
		set = quickBench
	}
	began := time.Now()
	rep := benchReport{
		Schema: 3, Mode: set.mode, GoVersion: runtime.Version(),
		Timestamp: began.UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Load1mStart: load1m(),
		Iterations:  set.calls, WarmupIterations: set.callWarmup, Batch: set.callBatch,
		DiscoveryIterations: set.discoveries, DiscoveryWarmup: set.discoveryWarmup, DiscoveryBatch: set.discoveryBatch,
	}
	ctx := t.Context()

	// The fleet: agent "bench", a gateway serving echo locally and
	// importing bench's tools (no periodic refresh: it would add discovery
	// traffic to the measurement), and the first agent of the scaling run,
	// idle until then.
	b := newBus(t)
	scaled := fleettest.WriteAgentConfig(t, b.demoAgent(t, "scale", scaleSlots))
	started := startAgentsAtOnce(t, b.home.Env(), fleettest.WriteAgentConfig(t, b.demoAgent(t, "bench", 2)), scaled)
	agent, procs := started[0], started[1:]
	gw := startGateway(t, b.home.Env(), b.gatewayConfigMCP(t, map[string]any{"agent2agent": map[string]any{}}, "0", "bench"))
	var base *baseFleet
	if os.Getenv(benchBaseEnv) == "" && strings.TrimSpace(os.Getenv(benchBaseEnvEnv)) != "" {
		t.Fatalf("BASE_ENV (%s) sets the base services' environment, and there is no base: give BASE too", benchBaseEnvEnv)
	}
	if dir := os.Getenv(benchBaseEnv); dir != "" {
		base = startBase(t, b, dir)
		rep.baseFigures = &baseFigures{BaseRevision: os.Getenv(benchBaseRevEnv)}
	}
	rep.AgentIdleRSS = settleRSS(t, "a2a-agent", agent.PID, set.settle)
	rep.GatewayIdleRSS = mustRSS(t, "mcp-gateway", gw.PID)
	rep.AgentIdleAnon = mustAnon(t, "a2a-agent", agent.PID)
	rep.GatewayIdleAnon = mustAnon(t, "mcp-gateway", gw.PID)
	t.Logf("idle after %s: a2a-agent RSS %.2f MiB, anonymous %.2f MiB; mcp-gateway RSS %.2f MiB, anonymous %.2f MiB",
		set.settle, rep.AgentIdleRSS, rep.AgentIdleAnon, rep.GatewayIdleRSS, rep.GatewayIdleAnon)
	if base != nil {
		rep.BaseAgentIdleAnon = mustAnon(t, "base a2a-agent", base.agent.PID)
		rep.BaseGatewayIdleAnon = mustAnon(t, "base mcp-gateway", base.gateway.PID)
		t.Logf("base %s idle: a2a-agent anonymous %.2f MiB, mcp-gateway anonymous %.2f MiB", rep.BaseRevision, rep.BaseAgentIdleAnon, rep.BaseGatewayIdleAnon)
	}

	mc := connectMCP(t, gw.URL, nil)
	lc := connectLegacyMCP(t, gw.URL)
	oauth := startOAuthGateway(t, b)
	if names := listNames(t, mc); !slices.Contains(names, "echo") || !slices.Contains(names, "bench_echo") {
		t.Fatalf("gateway tools: got %v, want echo and bench_echo", names)
	}
	nc := b.ns.Connect(t)
	tr := natsbus.NewTransport(nc)
	ac, err := a2a.NewClient(tr, a2a.Participant{Name: "bench-report"})
	if err != nil {
		t.Fatal(err)
	}

	// Calls, in rounds, with the transport floor of a call among them.
	echo := fisktest.DemoCommand(t, "echo")
	argv, err := echo.Argv(echoInput)
	if err != nil {
		t.Fatal(err)
	}
	a2aEcho := func(identity string) func(context.Context) error {
		return func(ctx context.Context) error {
			r, err := ac.CallTool(ctx, identity, "echo", echoInput)
			if err != nil || r.IsError || r.Output != "hi\n" {
				return fmt.Errorf("got %+v (%v), want output \"hi\\n\"", r, err)
			}
			return nil
		}
	}
	direct := &benchSeries{name: "exec_direct", run: func(context.Context) error {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || string(out) != "hi\n" {
			return fmt.Errorf("exec %v: got %q (%v), want \"hi\\n\"", argv, out, err)
		}
		return nil
	}}
	guarded := &benchSeries{name: "exec_guarded", run: func(ctx context.Context) error {
		o, err := echo.Call(ctx, tool.Request{Input: echoInput})
		if err != nil || o.Result == nil || o.Result.Output != "hi\n" {
			return fmt.Errorf("got %+v (%v), want output \"hi\\n\"", o, err)
		}
		return nil
	}}
	agentProc, gwProc := benchProc{"agent", agent.PID}, benchProc{"gateway", gw.PID}
	direct.procs = []benchProc{benchSelf}
	a2aCall := &benchSeries{name: "a2a_call", run: a2aEcho("bench"), procs: []benchProc{benchSelf, agentProc}}
	mcpCall := &benchSeries{name: "mcp_call", run: mcpEcho(mc, "echo"), procs: []benchProc{benchSelf, gwProc}}
	mcpRemote := &benchSeries{name: "mcp_remote_call", run: mcpEcho(mc, "bench_echo"), procs: []benchProc{benchSelf, gwProc, agentProc}}
	mcpLegacy := &benchSeries{name: "mcp_legacy_call", run: mcpEcho(lc, "echo"), procs: []benchProc{benchSelf, gwProc}}
	mcpRaw := &benchSeries{name: "mcp_raw_call", run: rawMCPEcho(gw.URL, "echo"), procs: []benchProc{benchSelf, gwProc}}
	a2aHTTP := &benchSeries{name: "agent2agent_call", run: rawAgent2AgentEcho(strings.TrimSuffix(gw.URL, "/mcp") + "/a2a")}
	// A gateway with a rate limit (one no call reaches) and an audit
	// spool, beside the plain one: what the two cost a call when nothing
	// is limited and the bus is up.
	guardedGW := startGateway(t, b.home.Env(), fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity: "guarded", ApplicationPath: fleettest.FiskDemo(t), NATSContext: fleetContext,
		MCP:   map[string]any{"policy": map[string]any{"roles": map[string]any{"default": map[string]any{"rate": "1000000/s", "tool_rates": map[string]any{"echo": "1000000/s"}}}}},
		Extra: map[string]any{"audit": map[string]any{"spool_dir": t.TempDir()}},
	}))
	mcpRawGuarded := &benchSeries{name: "mcp_raw_call_guarded", run: rawMCPEcho(guardedGW.URL, "echo")}
	mcpRemoteLegacy := &benchSeries{name: "mcp_remote_legacy_call", run: mcpEcho(lc, "bench_echo"), procs: []benchProc{benchSelf, gwProc, agentProc}}
	mcpRemoteRaw := &benchSeries{name: "mcp_remote_raw_call", run: rawMCPEcho(gw.URL, "bench_echo"), procs: []benchProc{benchSelf, gwProc, agentProc}}
	oauthCall := &benchSeries{name: "mcp_oauth_call", run: mcpEcho(oauth, "echo")}
	a2aStream := func(identity string) func(context.Context) error {
		return func(ctx context.Context) error {
			r, err := ac.StreamTool(ctx, identity, "echo", echoInput, nil)
			if err != nil || r.IsError || r.Output != "hi\n" {
				return fmt.Errorf("got %+v (%v), want output \"hi\n\"", r, err)
			}
			return nil
		}
	}
	stream := &benchSeries{name: "a2a_stream", run: a2aStream("bench")}
	floor, floorReq, floorReply := callFloor(t, b, tr, "bench")
	hfloor, hReq, hReply := httpFloor(t, b, gw.URL)
	idleFloor := &benchSeries{name: "call_floor_idle", run: floor.run, idle: callFloorIdle}
	idleHTTPFloor := &benchSeries{name: "http_floor_idle", run: hfloor.run, idle: callFloorIdle}
	rfloor := remoteFloor(t, b, gw.URL, "bench_echo", floorReq)
	idleRemoteFloor := &benchSeries{name: "remote_floor_idle", run: rfloor.run, idle: callFloorIdle}
	calls := []*benchSeries{direct, guarded, a2aCall, mcpCall, mcpLegacy, mcpRaw, a2aHTTP, mcpRawGuarded, mcpRemote, mcpRemoteLegacy, mcpRemoteRaw, oauthCall, stream,
		floor, idleFloor, hfloor, idleHTTPFloor, rfloor, idleRemoteFloor}
	paths := map[string]*benchSeries{"a2a_call": a2aCall, "mcp_call": mcpCall, "mcp_legacy_call": mcpLegacy, "mcp_raw_call": mcpRaw, "mcp_remote_call": mcpRemote,
		"mcp_remote_legacy_call": mcpRemoteLegacy, "mcp_remote_raw_call": mcpRemoteRaw}
	var (
		basePaths   map[string]*benchSeries
		baseStream  *benchSeries
		baseA2AHTTP *benchSeries
	)
	if base != nil {
		bc := connectMCP(t, base.gateway.URL, nil)
		blc := connectLegacyMCP(t, base.gateway.URL)
		if names := listNames(t, bc); !slices.Contains(names, baseIdentity+"_echo") {
			t.Fatalf("base gateway tools: got %v, want %s_echo", names, baseIdentity)
		}
		baseAgent, baseGateway := benchProc{"agent", base.agent.PID}, benchProc{"gateway", base.gateway.PID}
		basePaths = map[string]*benchSeries{
			"a2a_call":        {name: "base_a2a_call", run: a2aEcho(baseIdentity), procs: []benchProc{baseAgent}},
			"mcp_call":        {name: "base_mcp_call", run: mcpEcho(bc, "echo"), procs: []benchProc{baseGateway}},
			"mcp_legacy_call": {name: "base_mcp_legacy_call", run: mcpEcho(blc, "echo"), procs: []benchProc{baseGateway}},
			"mcp_raw_call":    {name: "base_mcp_raw_call", run: rawMCPEcho(base.gateway.URL, "echo"), procs: []benchProc{baseGateway}},
			"mcp_remote_call": {name: "base_mcp_remote_call", run: mcpEcho(bc, baseIdentity+"_echo"), procs: []benchProc{baseGateway, baseAgent}},
			"mcp_remote_legacy_call": {name: "base_mcp_remote_legacy_call", run: mcpEcho(blc, baseIdentity+"_echo"),
				procs: []benchProc{baseGateway, baseAgent}},
			"mcp_remote_raw_call": {name: "base_mcp_remote_raw_call", run: rawMCPEcho(base.gateway.URL, baseIdentity+"_echo"),
				procs: []benchProc{baseGateway, baseAgent}},
		}
		for _, path := range overheadPaths {
			calls = append(calls, basePaths[path])
		}
		// The base agent takes streamed calls too, as the current one
		// does: an agent called more often idles less, and would be
		// measured the faster for it.
		baseStream = &benchSeries{name: "base_a2a_stream", run: a2aStream(baseIdentity)}
		baseA2AHTTP = &benchSeries{name: "base_agent2agent_call", run: rawAgent2AgentEcho(strings.TrimSuffix(base.gateway.URL, "/mcp") + "/a2a")}
		calls = append(calls, baseStream, baseA2AHTTP)
	}
	interleaveRounds(t, calls, set.callWarmup, set.calls, set.callBatch, benchRounds)
	p := func(s *benchSeries, q float64) float64 { return micros(percentile(s.samples, q)) }
	direct50, direct99 := p(direct, 50), p(direct, 99)
	rep.ExecDirectP50, rep.ExecDirectP99 = direct50, direct99
	for _, c := range []struct {
		s                  *benchSeries
		p50, p99, r50, r99 *float64
	}{
		{guarded, &rep.ExecGuardedP50, &rep.ExecGuardedP99, &rep.ExecGuardedRatioP50, &rep.ExecGuardedRatioP99},
		{a2aCall, &rep.A2ACallP50, &rep.A2ACallP99, &rep.A2ACallRatioP50, &rep.A2ACallRatioP99},
		{mcpCall, &rep.MCPCallP50, &rep.MCPCallP99, &rep.MCPCallRatioP50, &rep.MCPCallRatioP99},
		{mcpRemote, &rep.MCPRemoteCallP50, &rep.MCPRemoteCallP99, &rep.MCPRemoteCallRatioP50, &rep.MCPRemoteCallRatioP99},
	} {
		*c.p50, *c.p99 = p(c.s, 50), p(c.s, 99)
		*c.r50, *c.r99 = ratio(*c.p50, direct50), ratio(*c.p99, direct99)
	}
	for _, s := range calls {
		t.Logf("%-27s p50 %9.1f µs  p99 %9.1f µs  (×%.3f / ×%.3f of exec_direct)", s.name, p(s, 50), p(s, 99), ratio(p(s, 50), direct50), ratio(p(s, 99), direct99))
	}
	rep.Rounds = benchRounds
	rep.CallFloorP50, rep.CallFloorP99 = p(floor, 50), p(floor, 99)
	rep.CallRequestBytes, rep.CallReplyBytes = len(floorReq), floorReply
	figures := map[string]pathFigures{
		"a2a_call":               {&rep.A2ACallP50, &rep.A2ACallP99, &rep.A2ACallRT, &rep.A2ACallRTs},
		"mcp_call":               {&rep.MCPCallP50, &rep.MCPCallP99, &rep.MCPCallRT, &rep.MCPCallRTs},
		"mcp_legacy_call":        {&rep.MCPLegacyCallP50, &rep.MCPLegacyCallP99, &rep.MCPLegacyCallRT, &rep.MCPLegacyCallRTs},
		"mcp_raw_call":           {&rep.MCPRawCallP50, &rep.MCPRawCallP99, &rep.MCPRawCallRT, &rep.MCPRawCallRTs},
		"mcp_remote_call":        {&rep.MCPRemoteCallP50, &rep.MCPRemoteCallP99, &rep.MCPRemoteCallRT, &rep.MCPRemoteCallRTs},
		"mcp_remote_legacy_call": {&rep.MCPRemoteLegacyCallP50, &rep.MCPRemoteLegacyCallP99, &rep.MCPRemoteLegacyCallRT, &rep.MCPRemoteLegacyCallRTs},
		"mcp_remote_raw_call":    {&rep.MCPRemoteRawCallP50, &rep.MCPRemoteRawCallP99, &rep.MCPRemoteRawCallRT, &rep.MCPRemoteRawCallRTs},
	}
	if base != nil {
		bf := rep.baseFigures
		figures["base_a2a_call"] = pathFigures{&bf.BaseA2ACallP50, &bf.BaseA2ACallP99, &bf.BaseA2ACallRT, &bf.BaseA2ACallRTs}
		figures["base_mcp_call"] = pathFigures{&bf.BaseMCPCallP50, &bf.BaseMCPCallP99, &bf.BaseMCPCallRT, &bf.BaseMCPCallRTs}
		figures["base_mcp_legacy_call"] = pathFigures{&bf.BaseMCPLegacyCallP50, &bf.BaseMCPLegacyCallP99, &bf.BaseMCPLegacyCallRT, &bf.BaseMCPLegacyCallRTs}
		figures["base_mcp_raw_call"] = pathFigures{&bf.BaseMCPRawCallP50, &bf.BaseMCPRawCallP99, &bf.BaseMCPRawCallRT, &bf.BaseMCPRawCallRTs}
		figures["base_mcp_remote_call"] = pathFigures{&bf.BaseMCPRemoteCallP50, &bf.BaseMCPRemoteCallP99, &bf.BaseMCPRemoteCallRT, &bf.BaseMCPRemoteCallRTs}
		figures["base_mcp_remote_legacy_call"] = pathFigures{&bf.BaseMCPRemoteLegacyCallP50, &bf.BaseMCPRemoteLegacyCallP99, &bf.BaseMCPRemoteLegacyCallRT, &bf.BaseMCPRemoteLegacyCallRTs}
		figures["base_mcp_remote_raw_call"] = pathFigures{&bf.BaseMCPRemoteRawCallP50, &bf.BaseMCPRemoteRawCallP99, &bf.BaseMCPRemoteRawCallRT, &bf.BaseMCPRemoteRawCallRTs}
	}
	var rows []overheadRow
	for _, path := range overheadPaths {
		series := []*benchSeries{paths[path]}
		if base != nil {
			series = append(series, basePaths[path])
		}
		for _, s := range series {
			f := figures[s.name]
			*f.p50, *f.p99 = p(s, 50), p(s, 99)
			*f.rts = roundOverheads(s, direct, floor)
			*f.rt = median(*f.rts)
			rows = append(rows, overheadRow{s.name, *f.p50, *f.p99, *f.rt, *f.rts})
		}
	}
	if base != nil {
		bf := rep.baseFigures
		var sb strings.Builder
		for _, d := range []struct {
			path          string
			delta, lo, hi *float64
		}{
			{"a2a_call", &bf.BaseA2ACallDelta, &bf.BaseA2ACallDeltaLo, &bf.BaseA2ACallDeltaHi},
			{"mcp_call", &bf.BaseMCPCallDelta, &bf.BaseMCPCallDeltaLo, &bf.BaseMCPCallDeltaHi},
			{"mcp_legacy_call", &bf.BaseMCPLegacyCallDelta, &bf.BaseMCPLegacyCallDeltaLo, &bf.BaseMCPLegacyCallDeltaHi},
			{"mcp_raw_call", &bf.BaseMCPRawCallDelta, &bf.BaseMCPRawCallDeltaLo, &bf.BaseMCPRawCallDeltaHi},
			{"mcp_remote_call", &bf.BaseMCPRemoteCallDelta, &bf.BaseMCPRemoteCallDeltaLo, &bf.BaseMCPRemoteCallDeltaHi},
			{"mcp_remote_legacy_call", &bf.BaseMCPRemoteLegacyCallDelta, &bf.BaseMCPRemoteLegacyCallDeltaLo, &bf.BaseMCPRemoteLegacyCallDeltaHi},
			{"mcp_remote_raw_call", &bf.BaseMCPRemoteRawCallDelta, &bf.BaseMCPRemoteRawCallDeltaLo, &bf.BaseMCPRemoteRawCallDeltaHi},
		} {
			var ci [2]float64
			*d.delta, ci = pairedDelta(paths[d.path], basePaths[d.path], set.callBatch, percentile(floor.samples, 50))
			*d.lo, *d.hi = ci[0], ci[1]
			fmt.Fprintf(&sb, ", %s %+.3f [%+.3f, %+.3f]", d.path, *d.delta, *d.lo, *d.hi)
		}
		t.Logf("current less base %s, paired by batch, in round trips, with the median's 95 %% interval: %s",
			bf.BaseRevision, strings.TrimPrefix(sb.String(), ", "))
	}
	// The Agent2Agent surface beside the plain MCP client: the same
	// gateway, tool and rounds, a JSON-RPC POST each.
	rep.Agent2AgentCallP50, rep.Agent2AgentCallP99 = p(a2aHTTP, 50), p(a2aHTTP, 99)
	rep.Agent2AgentCallRTs = roundOverheads(a2aHTTP, direct, floor)
	rep.Agent2AgentCallRT = median(rep.Agent2AgentCallRTs)
	for i, rt := range rep.Agent2AgentCallRTs {
		rep.Agent2AgentOverMCPRawRTs = append(rep.Agent2AgentOverMCPRawRTs, round(rt-rep.MCPRawCallRTs[i], 3))
	}
	rep.Agent2AgentOverMCPRawRT = median(rep.Agent2AgentOverMCPRawRTs)
	if base != nil {
		bf := rep.baseFigures
		bf.BaseAgent2AgentCallP50, bf.BaseAgent2AgentCallP99 = p(baseA2AHTTP, 50), p(baseA2AHTTP, 99)
		bf.BaseAgent2AgentCallRTs = roundOverheads(baseA2AHTTP, direct, floor)
		bf.BaseAgent2AgentCallRT = median(bf.BaseAgent2AgentCallRTs)
		var ci [2]float64
		bf.BaseAgent2AgentCallDelta, ci = pairedDelta(a2aHTTP, baseA2AHTTP, set.callBatch, percentile(floor.samples, 50))
		bf.BaseAgent2AgentCallDeltaLo, bf.BaseAgent2AgentCallDeltaHi = ci[0], ci[1]
		t.Logf("agent2agent_call, current less base %s, paired by batch, in round trips: %+.3f [%+.3f, %+.3f]",
			bf.BaseRevision, bf.BaseAgent2AgentCallDelta, bf.BaseAgent2AgentCallDeltaLo, bf.BaseAgent2AgentCallDeltaHi)
	}
	rep.MCPRawGuardedP50, rep.MCPRawGuardedP99 = p(mcpRawGuarded, 50), p(mcpRawGuarded, 99)
	rep.MCPRawGuardedRTs = roundOverheads(mcpRawGuarded, direct, floor)
	rep.MCPRawGuardedRT = median(rep.MCPRawGuardedRTs)
	for i, rt := range rep.MCPRawGuardedRTs {
		rep.MCPRawGuardedOverRawRTs = append(rep.MCPRawGuardedOverRawRTs, round(rt-rep.MCPRawCallRTs[i], 3))
	}
	rep.MCPRawGuardedOverRawRT = median(rep.MCPRawGuardedOverRawRTs)
	rows = append(rows,
		overheadRow{"agent2agent_call", rep.Agent2AgentCallP50, rep.Agent2AgentCallP99, rep.Agent2AgentCallRT, rep.Agent2AgentCallRTs},
		overheadRow{name: "agent2agent over mcp_raw", rt: rep.Agent2AgentOverMCPRawRT, rts: rep.Agent2AgentOverMCPRawRTs},
		overheadRow{"mcp_raw_call_guarded", rep.MCPRawGuardedP50, rep.MCPRawGuardedP99, rep.MCPRawGuardedRT, rep.MCPRawGuardedRTs},
		overheadRow{name: "guarded over mcp_raw", rt: rep.MCPRawGuardedOverRawRT, rts: rep.MCPRawGuardedOverRawRTs})
	if base != nil {
		bf := rep.baseFigures
		rows = append(rows, overheadRow{"base_agent2agent_call", bf.BaseAgent2AgentCallP50, bf.BaseAgent2AgentCallP99, bf.BaseAgent2AgentCallRT, bf.BaseAgent2AgentCallRTs})
	}
	rows = append(rows, overheadRow{name: "call_floor", p50: rep.CallFloorP50, p99: rep.CallFloorP99})
	rep.CallFloorIdleMS = float64(callFloorIdle) / float64(time.Millisecond)
	rep.CallFloorIdleP50, rep.CallFloorIdleP99 = p(idleFloor, 50), p(idleFloor, 99)
	rep.CallFloorIdleRT = median(roundRatios(idleFloor, floor))
	rows = append(rows, overheadRow{name: "call_floor_idle", p50: rep.CallFloorIdleP50, p99: rep.CallFloorIdleP99, rt: rep.CallFloorIdleRT})
	rep.HTTPRequestBytes, rep.HTTPReplyBytes = hReq, hReply
	rep.HTTPFloorP50, rep.HTTPFloorP99 = p(hfloor, 50), p(hfloor, 99)
	rep.HTTPFloorRT = median(roundRatios(hfloor, floor))
	rep.MCPBeyondHTTPRTs = roundBeyond(mcpCall, direct, floor, hfloor)
	rep.MCPBeyondHTTPRT = median(rep.MCPBeyondHTTPRTs)
	rep.HTTPFloorIdleP50, rep.HTTPFloorIdleP99 = p(idleHTTPFloor, 50), p(idleHTTPFloor, 99)
	rep.HTTPFloorIdleRT = median(roundRatios(idleHTTPFloor, floor))
	rep.MCPRemoteBeyondIdleRTs = roundBeyond(mcpRemoteRaw, direct, floor, idleFloor, idleHTTPFloor)
	rep.MCPRemoteBeyondIdleRT = median(rep.MCPRemoteBeyondIdleRTs)
	rep.RemoteFloorP50, rep.RemoteFloorP99 = p(rfloor, 50), p(rfloor, 99)
	rep.RemoteFloorRT = median(roundRatios(rfloor, floor))
	rep.RemoteFloorIdleP50, rep.RemoteFloorIdleP99 = p(idleRemoteFloor, 50), p(idleRemoteFloor, 99)
	rep.RemoteFloorIdleRT = median(roundRatios(idleRemoteFloor, floor))
	rep.MCPRemoteBeyondRemoteFloorRTs = roundBeyond(mcpRemoteRaw, direct, floor, idleRemoteFloor)
	rep.MCPRemoteBeyondRemoteFloorRT = median(rep.MCPRemoteBeyondRemoteFloorRTs)
	rep.A2ABeyondIdleRTs = roundBeyond(a2aCall, direct, floor, idleFloor)
	rep.A2ABeyondIdleRT = median(rep.A2ABeyondIdleRTs)
	rep.MCPRawBeyondIdleRTs = roundBeyond(mcpRaw, direct, floor, idleHTTPFloor)
	rep.MCPRawBeyondIdleRT = median(rep.MCPRawBeyondIdleRTs)
	rows = append(rows,
		overheadRow{name: "http_floor", p50: rep.HTTPFloorP50, p99: rep.HTTPFloorP99, rt: rep.HTTPFloorRT},
		overheadRow{name: "http_floor_idle", p50: rep.HTTPFloorIdleP50, p99: rep.HTTPFloorIdleP99, rt: rep.HTTPFloorIdleRT},
		overheadRow{name: "remote_floor", p50: rep.RemoteFloorP50, p99: rep.RemoteFloorP99, rt: rep.RemoteFloorRT},
		overheadRow{name: "remote_floor_idle", p50: rep.RemoteFloorIdleP50, p99: rep.RemoteFloorIdleP99, rt: rep.RemoteFloorIdleRT},
		overheadRow{name: "mcp_call beyond http", rt: rep.MCPBeyondHTTPRT, rts: rep.MCPBeyondHTTPRTs},
		overheadRow{name: "a2a_call beyond idle", rt: rep.A2ABeyondIdleRT, rts: rep.A2ABeyondIdleRTs},
		overheadRow{name: "mcp_raw beyond idle", rt: rep.MCPRawBeyondIdleRT, rts: rep.MCPRawBeyondIdleRTs},
		overheadRow{name: "mcp_remote_raw beyond idle", rt: rep.MCPRemoteBeyondIdleRT, rts: rep.MCPRemoteBeyondIdleRTs},
		overheadRow{name: "mcp_remote_raw beyond remote", rt: rep.MCPRemoteBeyondRemoteFloorRT, rts: rep.MCPRemoteBeyondRemoteFloorRTs})
	logOverheads(t, rows)
	for _, s := range calls {
		if len(s.procs) == 0 {
			continue
		}
		setFigures := rep.procFigures.set
		if strings.HasPrefix(s.name, "base_") {
			setFigures = rep.baseProcFigures.set
		}
		if err := setFigures(s); err != nil {
			t.Fatal(err)
		}
	}
	logProcFigures(t, calls)
	rep.MCPOAuthCallP50, rep.MCPOAuthCallP99 = p(oauthCall, 50), p(oauthCall, 99)
	rep.MCPOAuthOverMCPP50, rep.MCPOAuthOverMCPP99 = ratio(rep.MCPOAuthCallP50, rep.MCPCallP50), ratio(rep.MCPOAuthCallP99, rep.MCPCallP99)
	t.Logf("mcp_oauth_call over mcp_call: ×%.3f p50, ×%.3f p99", rep.MCPOAuthOverMCPP50, rep.MCPOAuthOverMCPP99)
	rep.A2AStreamP50, rep.A2AStreamP99 = p(stream, 50), p(stream, 99)
	if baseStream != nil {
		rep.BaseA2AStreamP50, rep.BaseA2AStreamP99 = p(baseStream, 50), p(baseStream, 99)
	}
	rep.A2AStreamRatioP50, rep.A2AStreamRatioP99 = ratio(rep.A2AStreamP50, rep.A2ACallP50), ratio(rep.A2AStreamP99, rep.A2ACallP99)
	t.Logf("a2a_stream over a2a_call: ×%.3f p50, ×%.3f p99", rep.A2AStreamRatioP50, rep.A2AStreamRatioP99)

	// First output of a ticker whose second line is far off: each run is
	// stopped once its first line is in.
	firstDirect, firstStream := firstOutput(t, ac, "bench", firstOutputIterations)
	rep.FirstOutputIterations = firstOutputIterations
	rep.FirstLineDirectP50, rep.FirstLineDirectP99 = micros(percentile(firstDirect, 50)), micros(percentile(firstDirect, 99))
	rep.FirstEventStreamP50, rep.FirstEventStreamP99 = micros(percentile(firstStream, 50)), micros(percentile(firstStream, 99))
	rep.FirstEventRatioP50, rep.FirstEventRatioP99 = ratio(rep.FirstEventStreamP50, rep.FirstLineDirectP50), ratio(rep.FirstEventStreamP99, rep.FirstLineDirectP99)
	t.Logf("first output: direct p50 %.1f µs p99 %.1f µs; stream p50 %.1f µs p99 %.1f µs (×%.3f / ×%.3f)",
		rep.FirstLineDirectP50, rep.FirstLineDirectP99, rep.FirstEventStreamP50, rep.FirstEventStreamP99, rep.FirstEventRatioP50, rep.FirstEventRatioP99)

	// Discovery against the transport floor: capture the agent's reply to
	// one encoded request, serve those bytes from natsreplier on the
	// discovery subject of an identity of the same length, then time the
	// same request through the same transport to both.
	reqBytes, err := a2a.Encode(a2a.NewDiscoveryRequest(a2a.Participant{Name: "bench-report"}, "bench"))
	if err != nil {
		t.Fatal(err)
	}
	replyBytes, err := tr.RoundTrip(ctx, "bench", a2a.RouteDiscovery, reqBytes)
	if err != nil {
		t.Fatalf("discovery of bench: %v", err)
	}
	if err := a2a.Decode(replyBytes, &a2a.DiscoveryReply{}); err != nil {
		t.Fatalf("discovery reply of bench: %v", err)
	}
	payload := fleettest.WriteFile(t, t.TempDir(), "discovery-reply.json", string(replyBytes))
	replier := fleettest.Start(t, b.home.Env(), fisktest.Build(t, natsReplierPackage, "natsreplier"),
		"--url", b.ns.URL(), "--subject", natsbus.DiscoverySubject(floorIdentity), "--payload", payload)
	replier.WaitOutput(t, "ready", fleettest.ReadyTimeout)
	rep.DiscoveryRequestBytes, rep.DiscoveryReplyBytes = len(reqBytes), len(replyBytes)

	// The agent stamps a fresh id and time into each reply, so its size
	// may differ from the captured one by a few bytes; the floor's never.
	disc := []*benchSeries{
		{name: "discovery", run: func(ctx context.Context) error {
			r, err := ac.Discover(ctx, "bench")
			if err != nil || r.Name != "bench" {
				return fmt.Errorf("got %+v (%v), want the card of bench", r, err)
			}
			return nil
		}},
		{name: "discovery_raw", run: rawRoundTrip(tr, "bench", a2a.RouteDiscovery, reqBytes, len(replyBytes), 16)},
		{name: "floor", run: rawRoundTrip(tr, floorIdentity, a2a.RouteDiscovery, reqBytes, len(replyBytes), 0)},
	}
	interleave(t, disc, set.discoveryWarmup, set.discoveries, set.discoveryBatch)
	rep.DiscoveryP50, rep.DiscoveryP99 = p(disc[0], 50), p(disc[0], 99)
	rep.DiscoveryRawP50, rep.DiscoveryRawP99 = p(disc[1], 50), p(disc[1], 99)
	rep.FloorP50, rep.FloorP99 = p(disc[2], 50), p(disc[2], 99)
	rep.DiscoveryRatioP50, rep.DiscoveryRatioP99 = ratio(rep.DiscoveryP50, rep.FloorP50), ratio(rep.DiscoveryP99, rep.FloorP99)
	rep.DiscoveryRawRatioP50, rep.DiscoveryRawRatioP99 = ratio(rep.DiscoveryRawP50, rep.FloorP50), ratio(rep.DiscoveryRawP99, rep.FloorP99)
	for _, s := range disc {
		t.Logf("%-16s p50 %9.1f µs  p99 %9.1f µs  (×%.3f / ×%.3f of floor; %d-byte request, %d-byte reply)", s.name, p(s, 50), p(s, 99), ratio(p(s, 50), rep.FloorP50), ratio(p(s, 99), rep.FloorP99), len(reqBytes), len(replyBytes))
	}
	rep.AgentRSSAfter = mustRSS(t, "a2a-agent", agent.PID)
	rep.GatewayRSSAfter = mustRSS(t, "mcp-gateway", gw.PID)
	rep.AgentAnonAfter = mustAnon(t, "a2a-agent", agent.PID)
	rep.GatewayAnonAfter = mustAnon(t, "mcp-gateway", gw.PID)
	t.Logf("after the load: a2a-agent RSS %.2f MiB, anonymous %.2f MiB (%s); mcp-gateway RSS %.2f MiB, anonymous %.2f MiB (%s)",
		rep.AgentRSSAfter, rep.AgentAnonAfter, goalMark(rep.AgentAnonAfter, agentAnonGoalMiB),
		rep.GatewayRSSAfter, rep.GatewayAnonAfter, goalMark(rep.GatewayAnonAfter, gatewayAnonGoalMiB))
	if base != nil {
		// The base agent has served the three call paths only: give it
		// the rest of the current agent's load too, then measure it as
		// the current one was measured, right after.
		baseLoad(t, ac, set)
		rep.BaseAgentAnonAfter = mustAnon(t, "base a2a-agent", base.agent.PID)
		rep.BaseGatewayAnonAft = mustAnon(t, "base mcp-gateway", base.gateway.PID)
		t.Logf("base %s after the same load: a2a-agent anonymous %.2f MiB (%s), mcp-gateway anonymous %.2f MiB (%s)", rep.BaseRevision,
			rep.BaseAgentAnonAfter, goalMark(rep.BaseAgentAnonAfter, agentAnonGoalMiB), rep.BaseGatewayAnonAft, goalMark(rep.BaseGatewayAnonAft, gatewayAnonGoalMiB))
	}
	quietAnon(t, &rep, agent.PID, gw.PID, base)

	// Where the calls spend their time: a second agent and gateway,
	// tracing into a receiver in this process.
	rep.stages = benchStages(t, b, ac, set)

	// Scaling: one agent (started with the fleet), then three more on
	// the same identity.
	rep.ScaleSleepMS = float64(set.sleep.Milliseconds())
	rep.ScaleSlots, rep.ScaleCallersSlot, rep.ScaleWindowS = scaleSlots, scaleCallersPerSlot, set.scaleWindow.Seconds()
	input := json.RawMessage(fmt.Sprintf(`{"duration":%q}`, set.sleep))
	measure := func(n int) float64 {
		t.Helper()
		pids := pidsOf(procs)
		var mu sync.Mutex
		perPID := map[int]int{}
		callers := n * scaleSlots * scaleCallersPerSlot
		tp, err := throughput(ctx, callers, set.scaleWarm, set.scaleWindow, func(ctx context.Context) error {
			r, err := ac.CallTool(ctx, "scale", "sleep", input)
			if err != nil {
				return err
			}
			pid, ok := servedBy(r)
			if !ok || !slices.Contains(pids, pid) {
				return fmt.Errorf("got %+v, want a sleep run by one of %v", r, pids)
			}
			mu.Lock()
			perPID[pid]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatalf("scaling over %d agents: %v", n, err)
		}
		t.Logf("scaling: %d agent(s) × %d slots, %d callers of sleep %s: %.2f calls/s (calls per agent %v)", n, scaleSlots, callers, set.sleep, tp, perPID)
		return round(tp, 2)
	}
	rep.Scale1PerS = measure(1)
	procs = append(procs, startAgentsAtOnce(t, b.home.Env(), slices.Repeat([]string{scaled}, scaleAgents-1)...)...)
	rep.Scale4PerS = measure(scaleAgents)
	rep.ScalingEfficiency = efficiency(rep.Scale1PerS, rep.Scale4PerS, scaleAgents)
	t.Logf("scaling efficiency: %.3f", rep.ScalingEfficiency)

	benchFleet(t, &rep, set)

	rep.knowledgeFigures = benchKnowledge(t, set.mode == quickBench.mode)
	rep.toolsListFigures = benchToolsList(t, set.mode == quickBench.mode)

	rep.Load1mEnd = load1m()
	rep.ElapsedS = round(time.Since(began).Seconds(), 1)
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		t.Fatalf("writing the report: %v", err)
	}
	t.Logf("report written to %s:\n%s", out, data)
}

// Gateway fleet bench shape: each gateway's slots, and the callers per
// slot of the three-gateway fleet, so that every slot always has a call
// waiting.
const (
	fleetBenchSlots          = 2
	fleetBenchCallersPerSlot = 4
)

// benchFleet measures calls per second through haproxy in front of one
// gateway, then of three gateways of a fleet, and fills in the fleet_*
// figures.
func benchFleet(t *testing.T, rep *benchReport, set benchSettings) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is not installed and CI is set: run `make tools`")
		}
		t.Log("gateway fleet: haproxy is not installed (`make tools`): fleet_* left at 0")
		return
	}
	ns := natstest.StartJetStream(t)
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, "fleet", nil)
	gws := newFleetGateways(t, 3, "fleet", map[string]any{
		"max_concurrent_tools": fleetBenchSlots,
		"fleet":                map[string]any{},
	})
	for _, g := range gws {
		g.start(t, home.Env())
	}
	rep.FleetSlots = fleetBenchSlots
	rep.FleetCallers = len(gws) * fleetBenchSlots * fleetBenchCallersPerSlot
	measure := func(behind []*fleetGateway) float64 {
		t.Helper()
		lb := startHAProxy(t, bin, behind)
		c := fleetClient(t, lb.url(), false)
		var mu sync.Mutex
		perPID := map[int]int{}
		tp, err := throughput(t.Context(), rep.FleetCallers, set.scaleWarm, set.scaleWindow, func(ctx context.Context) error {
			pid, err := callSleep(ctx, c, set.sleep)
			if err != nil {
				return err
			}
			mu.Lock()
			perPID[pid]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatalf("gateway fleet throughput: %v", err)
		}
		t.Logf("gateway fleet: %d distinct gateway(s) × %d slots behind haproxy, %d callers of sleep %s: %.2f calls/s (calls per gateway pid %v)",
			len(perPID), fleetBenchSlots, rep.FleetCallers, set.sleep, tp, perPID)
		lb.p.Signal(t, syscall.SIGTERM)
		lb.p.Wait(t, 10*time.Second)
		return round(tp, 2)
	}
	// One gateway: the balancer's three server lines all name it.
	one := []*fleetGateway{
		{name: "gw1", addr: gws[0].addr}, {name: "gw2", addr: gws[0].addr}, {name: "gw3", addr: gws[0].addr},
	}
	rep.Fleet1PerS = measure(one)
	rep.Fleet3PerS = measure(gws)
	rep.FleetRatio = ratio(rep.Fleet3PerS, rep.Fleet1PerS)
	t.Logf("gateway fleet: 3 gateways give %.2f× the calls per second of one (goal: at least 2.5)", rep.FleetRatio)
}

// startOAuthGateway starts a gateway like the bench's own, without remote
// tools, that accepts only access tokens of an OpenID provider running in
// this test, and returns an MCP client carrying a token minted for it.
func startOAuthGateway(tb testing.TB, b *bus) *client.Client {
	tb.Helper()
	op := oidctest.Start(tb, oidctest.Config{})
	cfg := fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(tb),
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             map[string]any{"auth": map[string]any{"issuer": op.Issuer()}},
	})
	gw := startGateway(tb, b.home.Env(), cfg)
	claims := op.Claims(gw.URL)
	// Outlives the longest bench run.
	claims["exp"] = time.Now().Add(2 * time.Hour).Unix()
	headers := map[string]string{"Authorization": "Bearer " + op.Mint(claims)}
	return newMCPClient(tb, gw.URL, []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers)}, nil, nil)
}

// firstOutputIterations is how many tickers each first-output series
// starts: each costs a process start and a stop, so far fewer than calls.
const firstOutputIterations = 30

// tickerInput is a ticker whose first line comes at once and whose second
// would come long after every measurement.
var tickerInput = json.RawMessage(`{"every":"1m","count":2}`)

// firstOutput measures the time to a ticker's first line n times on a
// direct exec and n times as the first output event of a streamed call on
// identity, alternating, and returns both series' samples.
func firstOutput(tb testing.TB, ac *a2a.Client, identity string, n int) (direct, stream []time.Duration) {
	tb.Helper()
	argv, err := fisktest.DemoCommand(tb, "ticker").Argv(tickerInput)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		d, err := firstLineDirect(argv)
		if err != nil {
			tb.Fatalf("first_line_direct iteration %d: %v", i, err)
		}
		direct = append(direct, d)
		d, err = firstEventStream(tb.Context(), ac, identity)
		if err != nil {
			tb.Fatalf("first_event_stream iteration %d: %v", i, err)
		}
		stream = append(stream, d)
	}
	return direct, stream
}

// firstLineDirect starts argv, times its first line on stdout, then kills
// it and reaps it.
func firstLineDirect(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	d := time.Since(start)
	if err != nil || !strings.HasPrefix(line, "tick 1 ") {
		return 0, fmt.Errorf("got first line %q (%v), want tick 1", line, err)
	}
	return d, nil
}

// firstEventStream times a streamed ticker call to its first output event,
// then cancels it and waits for the final reply.
func firstEventStream(ctx context.Context, ac *a2a.Client, identity string) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first time.Duration
		chunk string
	)
	start := time.Now()
	_, err := ac.StreamTool(ctx, identity, "ticker", tickerInput, func(s string) {
		once.Do(func() {
			first, chunk = time.Since(start), s
			cancel()
		})
	})
	switch {
	case first == 0:
		return 0, fmt.Errorf("no output event before the end (%v)", err)
	case !strings.HasPrefix(chunk, "tick 1 "):
		return 0, fmt.Errorf("got first event %q, want tick 1", chunk)
	case !errors.Is(err, context.Canceled):
		return 0, fmt.Errorf("got %v after the cancel, want the canceled final reply", err)
	}
	return first, nil
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration { return durations(time.Millisecond, v...) }
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted
	}
	tests := []struct {
		name    string
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99, 7 * time.Millisecond},
		{"median of odd count", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median of even count is the lower middle", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 50, 50 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"tiny p is the minimum", ms(9, 8, 7), 0.1, 7 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.samples)
			if got := percentile(tt.samples, tt.p); got != tt.want {
				t.Errorf("percentile(p%v): got %s, want %s", tt.p, got, tt.want)
			}
			if !slices.Equal(tt.samples, before) {
				t.Errorf("samples: got %v after the call, want them unsorted as given %v", tt.samples, before)
			}
		})
	}
}

func TestBenchRatios(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"ratio rounds to three decimals", ratio(2, 3), 0.667},
		{"ratio of equals", ratio(1234.5, 1234.5), 1},
		{"ratio over zero is zero", ratio(5, 0), 0},
		{"micros keeps a tenth", micros(1234567 * time.Nanosecond), 1234.6},
		{"perfect scaling", efficiency(10, 40, 4), 1},
		{"no scaling", efficiency(10, 10, 4), 0.25},
		{"nothing measured", efficiency(0, 40, 4), 0},
		{"most of it", efficiency(9.5, 36.1, 4), 0.95},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestBenchReportFlat keeps the report one flat object of numbers and
// strings (and the per-round lists of numbers) with unique keys, as its
// consumers (jq, a spreadsheet, the optimisation work comparing runs)
// read it.
func TestBenchReportFlat(t *testing.T) {
	data, err := json.Marshal(benchReport{})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := len(doc), reportKeys(reflect.TypeFor[benchReport]()); got != want {
		t.Errorf("keys: got %d, want one per field (%d)", got, want)
	}
	checkFlat(t, doc)
	for _, k := range []string{"go_version", "timestamp", "cpus", "iterations", "exec_direct_p50_us", "a2a_call_ratio_p50", "mcp_remote_call_p99_us", "discovery_ratio_p50", "floor_p99_us", "agent_idle_rss_mib", "gateway_idle_rss_mib", "scaling_efficiency", "a2a_stream_ratio_p50", "first_event_ratio_p50",
		"call_floor_p50_us", "a2a_call_overhead_rt", "mcp_call_overhead_rt_rounds", "mcp_remote_call_overhead_rt", "agent_anon_after_mib", "gateway_idle_anon_mib"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("key %s: missing", k)
		}
	}
	if _, ok := doc["base_a2a_call_overhead_rt"]; ok {
		t.Errorf("base_a2a_call_overhead_rt: present without a base measured, want absent")
	}

	// With a base and a stage breakdown, their keys join the same flat
	// object, the stages in the breakdown's order after every field.
	rep := benchReport{
		A2ACallRTs:  []float64{1.5, 2, 2.5},
		baseFigures: &baseFigures{BaseRevision: "18e3f28", BaseMCPCallRTs: []float64{3}},
		stages:      []stageFigure{{"stages_calls", 50}, {"stages_a2a_call_to_agent_p50_us", 101.5}},
	}
	data, err = json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	doc = nil
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("got %s (%v), want one JSON object", data, err)
	}
	checkFlat(t, doc)
	if got, want := len(doc), reportKeys(reflect.TypeFor[benchReport]())+reportKeys(reflect.TypeFor[baseFigures]())+2; got != want {
		t.Errorf("keys with a base and stages: got %d, want %d", got, want)
	}
	if doc["base_revision"] != "18e3f28" || doc["stages_a2a_call_to_agent_p50_us"] != 101.5 || doc["stages_calls"] != 50.0 {
		t.Errorf("got base_revision %v, stages %v and %v, want 18e3f28, 101.5 and 50", doc["base_revision"], doc["stages_a2a_call_to_agent_p50_us"], doc["stages_calls"])
	}
	if i, j := bytes.Index(data, []byte(`"base_revision"`)), bytes.Index(data, []byte(`"stages_calls"`)); i < 0 || j < i {
		t.Errorf("got the stages at %d before the fields' end at %d, want them last", j, i)
	}
}

// checkFlat fails t for a value that is neither a number nor a string,
// except the per-round lists (keys ending in _rounds), which are lists of
// numbers (or null when not measured).
func checkFlat(t *testing.T, doc map[string]any) {
	t.Helper()
	for k, v := range doc {
		switch v := v.(type) {
		case float64, string:
		case nil:
			if !strings.HasSuffix(k, "_rounds") {
				t.Errorf("%s: got null, want a number or a string", k)
			}
		case []any:
			if !strings.HasSuffix(k, "_rounds") {
				t.Errorf("%s: got a list, want a number or a string", k)
			}
			for _, x := range v {
				if _, ok := x.(float64); !ok {
					t.Errorf("%s: got %T in the list, want numbers", k, x)
				}
			}
		default:
			t.Errorf("%s: got %T, want a number or a string", k, v)
		}
	}
}

// TestThroughputStopsOnError returns the first failed call instead of a
// rate.
func TestThroughputStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	_, err := throughput(t.Context(), 3, 0, time.Minute, func(context.Context) error {
		calls.Add(1)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("throughput: got %v, want %v", err, boom)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("calls: got %d, want one per caller (3) before each stops", got)
	}
}
