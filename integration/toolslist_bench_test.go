package integration_test

// The tools/list part of the benchmark report (see benchreport_test.go): a
// gateway in front of three agents that each serve the real nats CLI, all
// its commands and none gated, listed over raw HTTP the way any client's
// request reaches the gateway, without a client library's own decoding in
// the timing.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
)

// toolsListAgents is how many agents of the nats CLI the gateway imports:
// three, the fleet of about 690 tools.
const toolsListAgents = 3

// Timed tools/list requests per era, and the untimed ones before them
// (the first builds whatever the gateway keeps).
const (
	toolsListFullIterations  = 1000
	toolsListQuickIterations = 200
	toolsListWarmup          = 10
)

// toolsListFigures are the report's tools_list keys, embedded in
// [benchReport] so they stay flat. Units as there: _us microseconds, _mib
// mebibytes.
//
//   - tools_list_agents, tools_list_tools: the agents serving the nats CLI
//     and the tools the gateway lists from them (all remote, none gated).
//   - tools_list_bytes: the size of one answer, as the session-based
//     (2025-11-25) request gets it.
//   - tools_list_p50_us, _p99_us: one tools/list on an initialised
//     session of the 2025-11-25 era, as a raw HTTP POST: from writing the
//     request to having read the whole answer (goal: p50 of 5 ms or less).
//   - tools_list_modern_p50_us, _p99_us, tools_list_modern_bytes: the same
//     as a stateless 2026-07-28 request, whose answer carries ttlMs and
//     cacheScope (tools_list_ttl_ms, tools_list_cache_scope).
//   - tools_list_gateway_anon_idle_mib: the gateway's anonymous memory
//     (Anonymous: of /proc/PID/smaps_rollup, what the process holds of its
//     own beyond the binary's shared pages) with the tools imported and
//     nothing listed yet; _after_mib: the same right after the timed
//     lists; _quiet_mib: the same once they have been over for
//     quietWait, what a gateway holds between bursts of lists (the
//     answers it keeps, without the garbage of making them).
//   - tools_list_load_1m: the one-minute load average when the lists
//     were timed.
type toolsListFigures struct {
	ToolsListAgents       int     `json:"tools_list_agents"`
	ToolsListTools        int     `json:"tools_list_tools"`
	ToolsListIterations   int     `json:"tools_list_iterations"`
	ToolsListBytes        int     `json:"tools_list_bytes"`
	ToolsListP50          float64 `json:"tools_list_p50_us"`
	ToolsListP99          float64 `json:"tools_list_p99_us"`
	ToolsListModernBytes  int     `json:"tools_list_modern_bytes"`
	ToolsListModernP50    float64 `json:"tools_list_modern_p50_us"`
	ToolsListModernP99    float64 `json:"tools_list_modern_p99_us"`
	ToolsListTTLMs        int64   `json:"tools_list_ttl_ms"`
	ToolsListCacheScope   string  `json:"tools_list_cache_scope"`
	ToolsListAnonIdleMiB  float64 `json:"tools_list_gateway_anon_idle_mib"`
	ToolsListAnonAfterMiB float64 `json:"tools_list_gateway_anon_after_mib"`
	ToolsListAnonQuietMiB float64 `json:"tools_list_gateway_anon_quiet_mib"`
	ToolsListLoad1m       float64 `json:"tools_list_load_1m"`
}

// TestToolsListBench measures only the tools/list figures, under the
// report's environment, and logs them: a quicker loop than the whole
// report while working on the list path.
func TestToolsListBench(t *testing.T) {
	if os.Getenv(benchOutEnv) == "" {
		t.Skipf("set %s (make bench, make bench-quick) to measure tools/list", benchOutEnv)
	}
	f := benchToolsList(t, os.Getenv(benchQuickEnv) == "1")
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tools/list figures:\n%s", data)
}

// benchToolsList starts the fleet of [toolsListAgents] nats CLI agents and
// one gateway importing them all, then times tools/list in both protocol
// eras. It fails tb when an answer is not a complete list of every tool,
// and asserts nothing about the figures.
func benchToolsList(tb testing.TB, quick bool) toolsListFigures {
	tb.Helper()
	iterations := toolsListFullIterations
	if quick {
		iterations = toolsListQuickIterations
	}
	// No periodic refresh: no discovery traffic runs beside the timing.
	gw, _ := startNATSCLIFleet(tb, newBus(tb), nil, map[string]any{}, "0s")

	f := toolsListFigures{ToolsListAgents: toolsListAgents, ToolsListIterations: iterations}
	f.ToolsListAnonIdleMiB = settleAnon(tb, gw.PID, time.Second)

	legacy := newRawLister(tb, gw.URL, false)
	modern := newRawLister(tb, gw.URL, true)
	names := legacy.check(tb)
	if mnames := modern.check(tb); !slices.Equal(names, mnames) {
		tb.Fatalf("tools/list: got %d tools in the 2025-11-25 era and %d in 2026-07-28, want the same list", len(names), len(mnames))
	}
	f.ToolsListTools = len(names)
	f.ToolsListBytes, f.ToolsListModernBytes = len(legacy.first), len(modern.first)
	var head struct {
		Result struct {
			TTLMs      *int64 `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
		} `json:"result"`
	}
	if err := json.Unmarshal(modern.first, &head); err != nil || head.Result.TTLMs == nil || head.Result.CacheScope == "" {
		tb.Fatalf("tools/list of 2026-07-28: got ttlMs %v and cacheScope %q (%v), want both", head.Result.TTLMs, head.Result.CacheScope, err)
	}
	f.ToolsListTTLMs, f.ToolsListCacheScope = *head.Result.TTLMs, head.Result.CacheScope
	tb.Logf("tools/list: %d tools from %d nats CLI agents; %d bytes (2025-11-25), %d bytes (2026-07-28), ttlMs %d, cacheScope %s",
		f.ToolsListTools, toolsListAgents, f.ToolsListBytes, f.ToolsListModernBytes, f.ToolsListTTLMs, f.ToolsListCacheScope)

	series := []*benchSeries{
		{name: "tools_list", run: legacy.run},
		{name: "tools_list_modern", run: modern.run},
	}
	f.ToolsListLoad1m = load1m()
	interleave(tb, series, toolsListWarmup, iterations, 10)
	f.ToolsListP50, f.ToolsListP99 = micros(percentile(series[0].samples, 50)), micros(percentile(series[0].samples, 99))
	f.ToolsListModernP50, f.ToolsListModernP99 = micros(percentile(series[1].samples, 50)), micros(percentile(series[1].samples, 99))
	f.ToolsListAnonAfterMiB = mustAnon(tb, "mcp-gateway", gw.PID)
	for _, s := range series {
		tb.Logf("%-18s p50 %9.1f µs  p99 %9.1f µs  (%d tools, load %.2f)", s.name, micros(percentile(s.samples, 50)), micros(percentile(s.samples, 99)), f.ToolsListTools, f.ToolsListLoad1m)
	}
	f.ToolsListAnonQuietMiB = settleAnon(tb, gw.PID, quietWait)
	tb.Logf("gateway anonymous memory: %.2f MiB idle, %.2f MiB after %d lists of each era, %.2f MiB quiet for %s after them",
		f.ToolsListAnonIdleMiB, f.ToolsListAnonAfterMiB, iterations+toolsListWarmup, f.ToolsListAnonQuietMiB, quietWait)
	return f
}

// rawLister sends tools/list as a plain HTTP POST, on a session of the
// 2025-11-25 era or as a stateless 2026-07-28 request.
type rawLister struct {
	url, session string
	modern       bool
	hc           *http.Client
	// first is the first answer's body; every later one must be as long
	// (request ids are numbered to keep their length).
	first []byte
	buf   bytes.Buffer
	id    int
}

func newRawLister(tb testing.TB, url string, modern bool) *rawLister {
	tb.Helper()
	l := &rawLister{url: url, modern: modern, hc: &http.Client{Timeout: 30 * time.Second}, id: 1_000_000}
	tb.Cleanup(l.hc.CloseIdleConnections)
	if modern {
		return l
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, err := l.post(body, "")
	if err != nil {
		tb.Fatalf("initialize: %v", err)
	}
	l.session = resp.Header.Get("Mcp-Session-Id")
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || l.session == "" {
		tb.Fatalf("initialize: got status %d and session %q (%v)", resp.StatusCode, l.session, err)
	}
	resp.Body.Close()
	resp, err = l.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	if err != nil {
		tb.Fatalf("notifications/initialized: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		tb.Fatalf("notifications/initialized: got status %d, want 202", resp.StatusCode)
	}
	return l
}

func (l *rawLister) post(body, method string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, l.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if l.modern {
		req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20260728)
		req.Header.Set("Mcp-Method", method)
	} else if l.session != "" {
		req.Header.Set("Mcp-Session-Id", l.session)
		req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	return l.hc.Do(req)
}

// list sends one tools/list and reads the whole answer into l.buf.
func (l *rawLister) list() error {
	l.id++
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(l.id) + `,"method":"tools/list"}`
	if l.modern {
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(l.id) + `,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
			mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}`
	}
	resp, err := l.post(body, "tools/list")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	l.buf.Reset()
	if _, err := l.buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("tools/list: got status %d: %.300s", resp.StatusCode, l.buf.Bytes())
	}
	return nil
}

// run is one timed list, checked by its size and its start.
func (l *rawLister) run(context.Context) error {
	if err := l.list(); err != nil {
		return err
	}
	got := l.buf.Bytes()
	if len(got) != len(l.first) || !bytes.HasPrefix(got, []byte(`{"jsonrpc":"2.0","id":`)) {
		return fmt.Errorf("tools/list: got %d bytes starting %.60q, want %d like the first", len(got), got, len(l.first))
	}
	return nil
}

// check lists once, decodes the answer, and returns the names listed,
// sorted. A paged answer fails tb: the report's gateway keeps the default
// page size, all in one page.
func (l *rawLister) check(tb testing.TB) []string {
	tb.Helper()
	if err := l.list(); err != nil {
		tb.Fatal(err)
	}
	l.first = bytes.Clone(l.buf.Bytes())
	var res struct {
		Result mcp.ListToolsResult `json:"result"`
	}
	if err := json.Unmarshal(l.first, &res); err != nil {
		tb.Fatalf("tools/list: decoding %d bytes: %v", len(l.first), err)
	}
	if res.Result.NextCursor != "" {
		tb.Fatalf("tools/list: got a nextCursor, want all %d tools in one page", len(res.Result.Tools))
	}
	names := make([]string, 0, len(res.Result.Tools))
	for _, t := range res.Result.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	if len(names) < 600 {
		tb.Fatalf("tools/list: got %d tools, want about 690 from %d nats CLI agents", len(names), toolsListAgents)
	}
	return names
}

// natsCLIAgent is the config of an agent serving the nats CLI as
// identity, all of its commands unless include narrows them. No
// confirm_tags: nothing is gated.
func natsCLIAgent(tb testing.TB, identity string, include []string) string {
	tb.Helper()
	return fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        identity,
		ApplicationPath: fleettest.NATSCLI(tb),
		NATSContext:     fleetContext,
		IncludeTools:    include,
		A2A:             &fleettest.A2A{ServeTools: true},
	})
}

// startNATSCLIFleet starts [toolsListAgents] agents of the nats CLI, nats1
// to nats3 (nats3 serving only include when it is set), and a gateway with
// no application of its own importing them all, with expose.agent.mcp
// mcpCfg and remote_refresh_interval refresh. It returns the gateway and
// the agents.
func startNATSCLIFleet(tb testing.TB, b *bus, include []string, mcpCfg map[string]any, refresh string) (*gatewayProcess, []*fleettest.Process) {
	tb.Helper()
	hosts := make([]string, toolsListAgents)
	configs := make([]string, toolsListAgents)
	remote := make([]map[string]any, toolsListAgents)
	for i := range hosts {
		hosts[i] = "nats" + strconv.Itoa(i+1)
		var inc []string
		if i == toolsListAgents-1 {
			inc = include
		}
		configs[i] = natsCLIAgent(tb, hosts[i], inc)
		remote[i] = map[string]any{"host": hosts[i]}
	}
	agents := startAgentsAtOnce(tb, b.home.Env(), configs...)
	gw := startGateway(tb, b.home.Env(), fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:    "gw",
		NATSContext: fleetContext,
		MCP:         mcpCfg,
		Extra:       map[string]any{"remote_tools": remote, "remote_refresh_interval": refresh},
	}))
	return gw, agents
}

// settleAnon waits d, then returns pid's anonymous memory in MiB.
func settleAnon(tb testing.TB, pid int, d time.Duration) float64 {
	tb.Helper()
	select {
	case <-time.After(d):
	case <-tb.Context().Done():
		tb.Fatal("interrupted while the gateway settled")
	}
	return mustAnon(tb, "mcp-gateway", pid)
}
