package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// opsTimeout bounds each wait on a probe or a gauge: generous, since the
// machine is shared.
const opsTimeout = 30 * time.Second

// loggedAddress waits for a process's log line msg and returns the address
// it names.
func loggedAddress(tb testing.TB, p *fleettest.Process, msg string) string {
	tb.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* address=(\S+)`)
	fisktest.WaitFor(tb, fleettest.ReadyTimeout, "pid "+fmt.Sprint(p.PID)+" to log "+msg, func() bool {
		return re.MatchString(p.Stderr()) || p.Exited()
	})
	m := re.FindStringSubmatch(p.Stderr())
	if m == nil {
		tb.Fatalf("pid %d exited before logging %q:\n%s", p.PID, msg, p.Output())
	}
	return "http://" + m[1]
}

// probe sends a GET to url with the given headers and returns the status
// and body; a connection error is status 0.
func probe(tb testing.TB, url string, header map[string]string) (int, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitProbe polls url until it answers want, failing tb with the last
// answer when it does not within opsTimeout.
func waitProbe(tb testing.TB, url string, want int) string {
	tb.Helper()
	var status int
	var body string
	fisktest.WaitFor(tb, opsTimeout, fmt.Sprintf("%s to answer %d", url, want), func() bool {
		status, body = probe(tb, url, nil)
		return status == want
	})
	return body
}

// TestOpsHealth: the gateway's and the agent's probes follow the NATS
// server as it stops and starts, and the gateway's answer without the
// bearer token, which /mcp still demands, and whatever Origin a caller
// sends.
func TestOpsHealth(t *testing.T) {
	b := newBus(t)
	agent := fleettest.StartAgent(t, b.home.Env(), fleettest.WriteAgentConfig(t, b.demoAgent(t, "demo", 2)), "--health-address", "127.0.0.1:0")
	agentURL := loggedAddress(t, agent, "serving health probes")

	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		IncludeTools:    []string{"echo"},
		MCP:             map[string]any{"auth_token_env": "GW_TOKEN"},
		Extra:           map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}},
	})
	gw := fleettest.Start(t, append(b.home.Env(), "GW_TOKEN=s3cret-token"), fleettest.MCPGateway(t), "serve", "--config", cfg, "--port", "0")
	gwURL := loggedAddress(t, gw, "serving over MCP")
	mcpURL := gwURL + "/mcp"

	if status, body := probe(t, mcpURL, nil); status != http.StatusUnauthorized {
		t.Errorf("GET /mcp without the token: got %d %q, want 401", status, body)
	}
	checks := []struct {
		name   string
		url    string
		header map[string]string
		want   int
		body   string
	}{
		{"gateway live", gwURL + "/healthz", nil, 200, "ok\n"},
		{"gateway ready", gwURL + "/readyz", nil, 200, "tools: ok\nnats: ok\nremote_hosts: ok\nready\n"},
		{"gateway ready, foreign Origin", gwURL + "/readyz", map[string]string{"Origin": "https://evil.example"}, 200, "tools: ok\nnats: ok\nremote_hosts: ok\nready\n"},
		{"gateway ready, wrong token", gwURL + "/readyz", map[string]string{"Authorization": "Bearer wrong"}, 200, "tools: ok\nnats: ok\nremote_hosts: ok\nready\n"},
		{"agent live", agentURL + "/healthz", nil, 200, "ok\n"},
		{"agent ready", agentURL + "/readyz", nil, 200, "nats: ok\nservice: ok\nready\n"},
	}
	for _, c := range checks {
		if status, body := probe(t, c.url, c.header); status != c.want || body != c.body {
			t.Errorf("%s: got %d %q, want %d %q", c.name, status, body, c.want, c.body)
		}
	}

	start := time.Now()
	b.ns.Stop()
	gwBody := waitProbe(t, gwURL+"/readyz", http.StatusServiceUnavailable)
	agentBody := waitProbe(t, agentURL+"/readyz", http.StatusServiceUnavailable)
	t.Logf("both not ready %s after the NATS server stopped", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(gwBody, "nats: not connected") || !strings.Contains(gwBody, "remote_hosts: ok") || strings.Contains(gwBody, "echo") {
		t.Errorf("gateway /readyz with NATS down: got %q, want nats failing, remote_hosts ok and no tool names", gwBody)
	}
	if !strings.Contains(agentBody, "nats: not connected") {
		t.Errorf("agent /readyz with NATS down: got %q, want nats failing", agentBody)
	}
	for _, u := range []string{gwURL + "/healthz", agentURL + "/healthz"} {
		if status, body := probe(t, u, nil); status != http.StatusOK {
			t.Errorf("%s with NATS down: got %d %q, want 200: the process still serves", u, status, body)
		}
	}

	start = time.Now()
	b.ns.Resume()
	waitProbe(t, gwURL+"/readyz", http.StatusOK)
	waitProbe(t, agentURL+"/readyz", http.StatusOK)
	t.Logf("both ready again %s after the NATS server resumed", time.Since(start).Round(time.Millisecond))
	if status, _ := probe(t, mcpURL, nil); status != http.StatusUnauthorized {
		t.Errorf("GET /mcp without the token after the restart: got %d, want 401", status)
	}
}

// scrapeMetrics fetches base/metrics and parses it with the Prometheus
// text parser.
func scrapeMetrics(tb testing.TB, base string) map[string]*dto.MetricFamily {
	tb.Helper()
	status, body := probe(tb, base+"/metrics", nil)
	if status != http.StatusOK {
		tb.Fatalf("GET %s/metrics: got %d %q, want 200", base, status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		tb.Fatalf("parsing %s/metrics: %v", base, err)
	}
	return fams
}

// seriesOf maps each series of the fiskfleet_ families to its value
// (counters and gauges) or sample count (histograms), keyed by the family
// name and the labels that are not the same on every series.
func seriesOf(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "fiskfleet_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "service" && l.GetName() != "identity" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// waitSeries polls base's metrics until key has value want.
func waitSeries(tb testing.TB, base, key string, want float64) {
	tb.Helper()
	fisktest.WaitFor(tb, opsTimeout, fmt.Sprintf("%s to be %v", key, want), func() bool {
		return seriesOf(scrapeMetrics(tb, base))[key] == want
	})
}

// declineAll answers every approval form with decline.
type declineAll struct{}

func (declineAll) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
}

// TestOpsMetrics drives a known sequence through a real gateway and agent
// and checks every counter they expose: ok, a non-zero exit, a declined
// approval, a timeout, a call that gave up waiting for the one slot, a
// remote call, and hostile A2A messages; then 1,000 calls with invented
// tool names on each surface add no series.
func TestOpsMetrics(t *testing.T) {
	b := newBus(t)
	demo := b.demoAgent(t, "demo", 2)
	demo.Metrics = map[string]any{"port": 0}
	agent := b.startAgents(t, 1, demo)[0]
	agentMetrics := loggedAddress(t, agent, "serving metrics")

	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		IncludeTools:    []string{"echo", "fail", "sleep", "deploy"},
		MCP:             map[string]any{"max_concurrent_tools": 1, "tool_timeout": "5s"},
		Metrics:         map[string]any{"port": 0},
		Extra: map[string]any{
			"remote_tools":            []map[string]any{{"host": "demo", "include": map[string]any{"tools": []string{"echo"}}}},
			"remote_refresh_interval": "0s",
		},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	gwMetrics := loggedAddress(t, gw.Process, "serving metrics")
	c := newMCPClient(t, gw.URL, nil, []client.ClientOption{
		client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION),
		client.WithElicitationHandler(declineAll{}),
	}, nil)

	if cr := mcpCommandResult(t, "echo", callMCP(t, c, "echo", map[string]any{"message": "hi"})); cr.ExitCode != 0 {
		t.Fatalf("echo: got exit code %d, want 0", cr.ExitCode)
	}
	if cr := mcpCommandResult(t, "fail", callMCP(t, c, "fail", map[string]any{"code": 4})); cr.ExitCode != 4 {
		t.Fatalf("fail: got exit code %d, want 4", cr.ExitCode)
	}
	marker := filepath.Join(t.TempDir(), "deployed")
	if res := callMCP(t, c, "deploy", map[string]any{"service": "web", "marker": marker}); !res.IsError || !strings.Contains(mcpText(res), "declined") {
		t.Fatalf("deploy: got %q, want a declined approval", mcpText(res))
	}
	if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "remote"})); cr.ExitCode != 0 {
		t.Fatalf("demo_echo: got exit code %d, want 0", cr.ExitCode)
	}

	// The timeout holds the one slot for 5s; a second call waits for it
	// and its client gives up: busy.
	var wg sync.WaitGroup
	wg.Go(func() {
		res := callMCP(t, c, "sleep", map[string]any{"duration": "1m"})
		if !res.IsError || !strings.Contains(mcpText(res), "tool_timeout") {
			t.Errorf("sleep 1m: got %q, want the tool timeout", mcpText(res))
		}
	})
	waitSeries(t, gwMetrics, "fiskfleet_free_slots{surface=mcp}", 0)
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "sleep"
		_, err := c.CallTool(ctx, req)
		waited <- err
	}()
	waitSeries(t, gwMetrics, "fiskfleet_calls_in_flight{surface=mcp}", 2)
	cancel()
	if err := <-waited; err == nil {
		t.Errorf("sleep called with a cancelled context: got a result, want the client's error")
	}
	wg.Wait()
	waitSeries(t, gwMetrics, "fiskfleet_calls_in_flight{surface=mcp}", 0)

	// Hostile A2A messages straight at the agent's tool subject.
	nc := b.ns.Connect(t)
	hostile := []struct {
		name string
		data []byte
	}{
		{"oversize", []byte(`{"pad":"` + strings.Repeat("x", a2a.MaxMessageSize) + `"}`)},
		{"not JSON", []byte(`{"protocol":`)},
		{"schema", []byte(`{"protocol":"io.choria.fisk-ai.v1.tool.request","name":7}`)},
		{"protocol", []byte(`{"protocol":"io.choria.fisk-ai.v1.discovery.request","id":"x"}`)},
	}
	for _, h := range hostile {
		msg, err := nc.Request(natsbus.ToolSubject("demo"), h.data, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: got %v, want an error reply", h.name, err)
		}
		if msg.Header.Get("Nats-Service-Error-Code") == "" {
			t.Errorf("%s: got reply %q without a service error, want a rejection", h.name, msg.Data)
		}
	}

	want := func(pairs ...any) map[string]float64 {
		m := map[string]float64{}
		for i := 0; i < len(pairs); i += 2 {
			m[pairs[i].(string)] = float64(pairs[i+1].(int))
		}
		return m
	}
	gwWant := want(
		"fiskfleet_calls_total{outcome=ok,surface=mcp,tool=echo}", 1,
		"fiskfleet_calls_total{outcome=exit_nonzero,surface=mcp,tool=fail}", 1,
		"fiskfleet_calls_total{outcome=denied,surface=mcp,tool=deploy}", 1,
		"fiskfleet_calls_total{outcome=ok,surface=remote,tool=demo_echo}", 1,
		"fiskfleet_calls_total{outcome=timeout,surface=mcp,tool=sleep}", 1,
		"fiskfleet_calls_total{outcome=busy,surface=mcp,tool=sleep}", 1,
		"fiskfleet_approvals_total{answer=declined}", 1,
		"fiskfleet_approvals_total{answer=accepted}", 0,
		"fiskfleet_approvals_total{answer=canceled}", 0,
		"fiskfleet_approvals_total{answer=timeout}", 0,
		"fiskfleet_approvals_total{answer=unsupported}", 0,
		"fiskfleet_remote_hosts{}", 1,
		"fiskfleet_remote_host_reachable{host=demo}", 1,
		"fiskfleet_remote_host_discovered{host=demo}", 1,
		"fiskfleet_free_slots{surface=mcp}", 1,
		"fiskfleet_calls_in_flight{surface=mcp}", 0,
	)
	agentWant := want(
		"fiskfleet_calls_total{outcome=ok,surface=a2a,tool=echo}", 1,
		"fiskfleet_a2a_rejected_total{reason=oversize}", 1,
		"fiskfleet_a2a_rejected_total{reason=schema}", 2,
		"fiskfleet_a2a_rejected_total{reason=protocol}", 1,
		"fiskfleet_a2a_rejected_total{reason=unknown_tool}", 0,
		"fiskfleet_free_slots{surface=a2a}", 2,
	)
	checkSeries(t, "gateway", seriesOf(scrapeMetrics(t, gwMetrics)), gwWant, "fiskfleet_calls_total")
	checkSeries(t, "agent", seriesOf(scrapeMetrics(t, agentMetrics)), agentWant, "fiskfleet_calls_total")
	gwBefore := seriesOf(scrapeMetrics(t, gwMetrics))
	agentBefore := seriesOf(scrapeMetrics(t, agentMetrics))

	// 1,000 invented names on each surface: answered, never counted under
	// their own names.
	start := time.Now()
	names := make(chan string)
	go func() {
		defer close(names)
		for range 1000 {
			names <- fmt.Sprintf("tool_%016x", rand.Uint64())
		}
	}()
	var mcpErrors, a2aAnswers sync.Map
	var workers sync.WaitGroup
	for range 8 {
		workers.Go(func() {
			for name := range names {
				req := mcp.CallToolRequest{}
				req.Params.Name = name
				res, err := c.CallTool(t.Context(), req)
				if err == nil && !res.IsError {
					mcpErrors.Store(name, "answered as a tool")
				}
				reply, err := b.client.CallTool(t.Context(), "demo", name, json.RawMessage(`{}`))
				if err != nil || !reply.IsError {
					a2aAnswers.Store(name, fmt.Sprint(err))
				}
			}
		})
	}
	workers.Wait()
	t.Logf("1,000 unknown names over MCP and A2A in %s", time.Since(start).Round(time.Millisecond))
	mcpErrors.Range(func(k, v any) bool { t.Errorf("MCP call of %v: %v, want an error", k, v); return false })
	a2aAnswers.Range(func(k, v any) bool { t.Errorf("A2A call of %v: %v, want an in-band error", k, v); return false })

	gwAfter := seriesOf(scrapeMetrics(t, gwMetrics))
	agentAfter := seriesOf(scrapeMetrics(t, agentMetrics))
	if got, want := sortedKeys(gwAfter), sortedKeys(gwBefore); !slices.Equal(got, want) {
		t.Errorf("gateway series after 1,000 unknown names: got %v, want %v", got, want)
	}
	if got, want := sortedKeys(agentAfter), sortedKeys(agentBefore); !slices.Equal(got, want) {
		t.Errorf("agent series after 1,000 unknown names: got %v, want %v", got, want)
	}
	agentWant["fiskfleet_a2a_rejected_total{reason=unknown_tool}"] = 1000
	checkSeries(t, "agent after the unknown names", agentAfter, agentWant, "fiskfleet_calls_total")
	checkSeries(t, "gateway after the unknown names", gwAfter, gwWant, "fiskfleet_calls_total")
	if n := gwAfter["fiskfleet_call_duration_seconds{surface=mcp,tool=sleep}"]; n != 2 {
		t.Errorf("gateway call_duration_seconds{sleep} samples: got %v, want 2", n)
	}
	if marker != "" && fileExists(marker) {
		t.Errorf("deploy ran although its approval was declined: %s exists", marker)
	}
}

// checkSeries compares got with want, and requires the family exact to
// hold no series besides those want names.
func checkSeries(tb testing.TB, what string, got, want map[string]float64, exact string) {
	tb.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok || g != v {
			tb.Errorf("%s: %s: got %v (present %t), want %v", what, k, g, ok, v)
		}
	}
	for k, v := range got {
		if strings.HasPrefix(k, exact+"{") {
			if _, ok := want[k]; !ok {
				tb.Errorf("%s: got unexpected series %s = %v", what, k, v)
			}
		}
	}
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestAgentProcs checks that a serving agent runs on one P with GOGC=50
// and a millisecond of timer slack unless GOMAXPROCS, GOGC and
// FISKFLEET_TIMER_SLACK say otherwise, and says which on its serving line;
// that calls on it are served concurrently all the same (a command that
// waits holds no P); and that its commands run with the timer slack it
// was started with, not its own.
func TestAgentProcs(t *testing.T) {
	b := newBus(t)
	cfg := fleettest.WriteAgentConfig(t, b.demoAgent(t, "procs", 4))
	// The agent is started with this process's slack.
	started := strings.TrimSpace(readFileString(t, "/proc/self/timerslack_ns"))
	for _, tt := range []struct {
		name string
		env  []string
		want string
	}{
		{"default", nil, "gomaxprocs=1 gogc=50 timer_slack=1ms"},
		{"GOMAXPROCS, GOGC and the slack set", []string{"GOMAXPROCS=3", "GOGC=80", "FISKFLEET_TIMER_SLACK=250us"}, "gomaxprocs=3 gogc=80 timer_slack=250µs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := fleettest.StartAgent(t, append(withoutProcs(b.home.Env()), tt.env...), cfg)
			line := ""
			for l := range strings.Lines(p.Stderr()) {
				if strings.Contains(l, fleettest.A2AServingLog) {
					line = l
				}
			}
			if !strings.Contains(line, tt.want) {
				t.Fatalf("serving line: got %q, want %s", line, tt.want)
			}
			start := time.Now()
			outs := callMany(b.client, 4, "procs", "sleep", `{"duration":"2s"}`, 60*time.Second, nil)
			for _, o := range outs {
				if o.err != nil || o.reply.IsError {
					t.Fatalf("sleep call: got %+v (%v)", o.reply, o.err)
				}
				if !strings.Contains(o.reply.Output, " slack="+started+"\n") {
					t.Errorf("sleep call: got %q, want the command to run with slack=%s, the agent's own at its start", o.reply.Output, started)
				}
			}
			// Four two-second sleeps on four slots: together, not one after
			// another, which would take eight seconds.
			if took := time.Since(start); took >= 6*time.Second {
				t.Errorf("four concurrent sleeps took %s, want them to overlap", took)
			}
			p.Signal(t, syscall.SIGTERM)
			p.Wait(t, fleettest.StopGrace)
		})
	}
}

// TestGatewayProcs checks that a serving gateway runs on one P unless
// GOMAXPROCS says otherwise or it keeps a knowledge index, with a
// millisecond of timer slack, and says which on its serving line.
func TestGatewayProcs(t *testing.T) {
	b := newBus(t)
	plain := b.gatewayConfig(t, "0")
	withKnowledge := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "kb",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"builtins": []string{"knowledge_search"}},
		Extra:           map[string]any{"knowledge": map[string]any{"directory": t.TempDir()}},
	})
	for _, tt := range []struct {
		name string
		cfg  string
		env  []string
		want string
	}{
		{"default", plain, nil, "gomaxprocs=1 timer_slack=1ms"},
		{"GOMAXPROCS set", plain, []string{"GOMAXPROCS=3"}, "gomaxprocs=3"},
		// The runtime's own default: GOMAXPROCS=2 names it on a machine
		// of any size.
		{"knowledge index", withKnowledge, []string{"GOMAXPROCS=2"}, "gomaxprocs=2"},
		{"knowledge index, runtime default", withKnowledge, nil, fmt.Sprintf("gomaxprocs=%d", runtime.GOMAXPROCS(0))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, set := os.LookupEnv("GOMAXPROCS"); set && tt.env == nil && tt.cfg == withKnowledge {
				t.Skip("GOMAXPROCS is set for this test process: the runtime's default is not known here")
			}
			gw := startGateway(t, append(withoutProcs(b.home.Env()), tt.env...), tt.cfg)
			// The address line on stdout can come before the log line.
			gw.WaitOutput(t, "serving over MCP", fleettest.ReadyTimeout)
			line := ""
			for l := range strings.Lines(gw.Stderr()) {
				if strings.Contains(l, "serving over MCP") {
					line = l
				}
			}
			if !strings.Contains(line, tt.want) {
				t.Fatalf("serving line: got %q, want %s", line, tt.want)
			}
			if err := rawMCPEcho(gw.URL, "echo")(t.Context()); err != nil {
				t.Fatalf("echo call: %v", err)
			}
		})
	}
}

// TestServingSlackRefused checks that a service refuses to start with a
// timer slack that is not a duration from 0 to a second, naming the
// variable.
func TestServingSlackRefused(t *testing.T) {
	b := newBus(t)
	agentCfg := fleettest.WriteAgentConfig(t, b.demoAgent(t, "slack", 1))
	gatewayCfg := b.gatewayConfig(t, "0")
	for _, bin := range []struct{ path, cfg string }{
		{fleettest.A2AAgent(t), agentCfg},
		{fleettest.MCPGateway(t), gatewayCfg},
	} {
		for _, v := range []string{"fast", "-1ms", "2s"} {
			// Bounded: a value taken by mistake would serve for ever.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin.path, "serve", "--config", bin.cfg)
			cmd.Env = append(b.home.Env(), "FISKFLEET_TIMER_SLACK="+v)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("%s serve with FISKFLEET_TIMER_SLACK=%s: started, want it refused", filepath.Base(bin.path), v)
			}
			if !strings.Contains(string(out), "FISKFLEET_TIMER_SLACK") {
				t.Errorf("%s serve with FISKFLEET_TIMER_SLACK=%s: %v, output %q does not name the variable", filepath.Base(bin.path), v, err, out)
			}
		}
	}
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return string(b)
}

// withoutProcs is env without a GOMAXPROCS, GOGC or timer slack this test
// process may have been given, so that a service started in it picks its
// own.
func withoutProcs(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "FISKFLEET_TIMER_SLACK=")
	})
}
