package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// fleetToken is the bearer token of the fleet tests' gateways: with one,
// a caller's tasks are bound to the caller (the token's holders), not to
// a session, so another gateway serves them.
const fleetToken = "fleet-s3cret"

// fleetInstanceTTL is the fleet tests' expose.agent.mcp.fleet.instance_ttl:
// short, so that a dead gateway's tasks fail within the test's patience.
const fleetInstanceTTL = 3 * time.Second

// fleetGateway is one `mcp-gateway serve` of a test fleet, on an address
// of its own that survives a restart (the balancer knows it by it).
type fleetGateway struct {
	name    string
	addr    string
	metrics string
	cfg     string
	p       *fleettest.Process
	// instance is the name the gateway gives itself in the fleet, from
	// its log.
	instance string
}

var fleetMemberRE = regexp.MustCompile(`msg="serving as a member of a gateway fleet".* instance=(\S+)`)

// freeAddr returns a loopback address free at the time of asking.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newFleetGateways writes the configs of n gateways of identity demo on
// context ctxName, each with its own metrics listener.
func newFleetGateways(tb testing.TB, n int, ctxName string, mcpExtra map[string]any) []*fleetGateway {
	tb.Helper()
	var out []*fleetGateway
	for i := range n {
		g := &fleetGateway{name: fmt.Sprintf("gw%d", i+1), addr: freeAddr(tb), metrics: freeAddr(tb)}
		host, port, _ := net.SplitHostPort(g.metrics)
		p, _ := strconv.Atoi(port)
		m := map[string]any{
			"auth_token_env":       "FLEET_TOKEN",
			"max_concurrent_tools": 4,
			"fleet":                map[string]any{"instance_ttl": fleetInstanceTTL.String(), "replicas": 3},
		}
		for k, v := range mcpExtra {
			m[k] = v
		}
		g.cfg = fleettest.WriteAgentConfig(tb, fleettest.Agent{
			Identity:        "demo",
			ApplicationPath: fleettest.FiskDemo(tb),
			NATSContext:     ctxName,
			MCP:             m,
			Metrics:         map[string]any{"address": host, "port": p},
		})
		out = append(out, g)
	}
	return out
}

// start runs the gateway and waits until it is ready (/readyz 200).
func (g *fleetGateway) start(tb testing.TB, env []string) {
	tb.Helper()
	g.p = fleettest.Start(tb, append(env, "FLEET_TOKEN="+fleetToken), fleettest.MCPGateway(tb), "serve", "--config", g.cfg, "--address", g.addr)
	fisktest.WaitFor(tb, fleettest.ReadyTimeout, g.name+" to be ready", func() bool {
		if g.p.Exited() {
			return true
		}
		status, _ := probe(tb, "http://"+g.addr+"/readyz", nil)
		return status == http.StatusOK && fleetMemberRE.MatchString(g.p.Stderr())
	})
	m := fleetMemberRE.FindStringSubmatch(g.p.Stderr())
	if g.p.Exited() || m == nil {
		tb.Fatalf("%s (pid %d) did not become a ready fleet member:\n%s", g.name, g.p.PID, g.p.Output())
	}
	g.instance = m[1]
}

func (g *fleetGateway) url() string { return "http://" + g.addr + "/mcp" }

// callsServed reads the gateway's own count of successful MCP calls of
// tool from its metrics listener.
func (g *fleetGateway) callsServed(tb testing.TB, tool string) int {
	tb.Helper()
	status, body := probe(tb, "http://"+g.metrics+"/metrics", nil)
	if status != http.StatusOK {
		tb.Fatalf("%s metrics: got HTTP %d", g.name, status)
	}
	total := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "fiskfleet_calls_total{") && strings.Contains(line, `tool="`+tool+`"`) &&
			strings.Contains(line, `outcome="ok"`) && strings.Contains(line, `surface="mcp"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int(v)
		}
	}
	return total
}

// haproxy is Debian's haproxy running integration/examples/haproxy.cfg.
type haproxy struct {
	addr  string
	stats string
	p     *fleettest.Process
}

// requireHAProxy returns the haproxy binary, skipping the test when it is
// not installed, unless CI is set, where it must be.
func requireHAProxy(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("haproxy")
	if err == nil {
		return path
	}
	fisktest.SkipUnlessCI(tb, "haproxy is not installed: run `make tools` (apt-get install haproxy as root) to run the gateway fleet behind a load balancer")
	return ""
}

// startHAProxy checks and runs the example config in front of gws and
// waits until it sees every gateway up.
func startHAProxy(tb testing.TB, bin string, gws []*fleetGateway) *haproxy {
	tb.Helper()
	cfg, err := filepath.Abs(filepath.Join("examples", "haproxy.cfg"))
	if err != nil {
		tb.Fatal(err)
	}
	h := &haproxy{addr: freeAddr(tb), stats: freeAddr(tb)}
	env := append(os.Environ(), "FISK_LB_BIND="+h.addr, "FISK_LB_STATS="+h.stats)
	for i, g := range gws {
		env = append(env, fmt.Sprintf("FISK_GW%d=%s", i+1, g.addr))
	}
	if r := fleettest.Run(tb, env, bin, "-c", "-f", cfg); r.ExitCode != 0 {
		tb.Fatalf("haproxy -c %s: exit %d:\n%s%s", cfg, r.ExitCode, r.Stdout, r.Stderr)
	}
	h.p = fleettest.Start(tb, env, bin, "-db", "-f", cfg)
	h.waitUp(tb, gws...)
	return h
}

func (h *haproxy) url() string { return "http://" + h.addr + "/mcp" }

// serverStatus returns each gateway's status in the balancer (UP, DOWN…).
func (h *haproxy) serverStatus(tb testing.TB) map[string]string {
	tb.Helper()
	status, body := probe(tb, "http://"+h.stats+"/stats;csv", nil)
	out := map[string]string{}
	if status != http.StatusOK {
		return out
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) > 17 && f[0] == "gateways" && strings.HasPrefix(f[1], "gw") {
			out[f[1]] = f[17]
		}
	}
	return out
}

// waitUp waits until the balancer has every one of gws up.
func (h *haproxy) waitUp(tb testing.TB, gws ...*fleetGateway) {
	tb.Helper()
	fisktest.WaitFor(tb, fleettest.ReadyTimeout, "haproxy to see the gateways up", func() bool {
		st := h.serverStatus(tb)
		for _, g := range gws {
			if !strings.HasPrefix(st[g.name], "UP") {
				return false
			}
		}
		return true
	})
}

// fleetClient is an initialised mcp-go client of url carrying the fleet's
// token; legacy picks the 2025-11-25 era, else it speaks 2026-07-28.
func fleetClient(tb testing.TB, url string, legacy bool) *client.Client {
	tb.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + fleetToken})}
	var copts []client.ClientOption
	if legacy {
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	c := newMCPClient(tb, url, topts, copts, nil)
	if got := mcp.IsModernProtocol(c.ProtocolVersion()); got == legacy {
		tb.Fatalf("client of %s negotiated %q, want legacy %t", url, c.ProtocolVersion(), legacy)
	}
	return c
}

// callSleep calls sleep through c and returns the pid of the gateway that
// ran it (the command's parent, as sleptRE reads it), or the error of a call that failed (in-band or not).
func callSleep(ctx context.Context, c *client.Client, d time.Duration) (int, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "sleep"
	req.Params.Arguments = map[string]any{"duration": d.String()}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return 0, err
	}
	text := ""
	for _, ct := range res.Content {
		if t, ok := mcp.AsTextContent(ct); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return 0, fmt.Errorf("in-band error: %s", text)
	}
	m := sleptRE.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("unexpected output %q", text)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid, nil
}

// fleetTaskRequest sends a tasks/* request through c and returns its
// result, failing tb on a protocol error.
func fleetTaskRequest(tb testing.TB, c *client.Client, method string, id string) json.RawMessage {
	tb.Helper()
	resp, err := c.GetTransport().SendRequest(tb.Context(), transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(method + id),
		Method:  method,
		Params:  map[string]any{"taskId": id},
	})
	if err != nil {
		tb.Fatalf("%s %s: %v", method, id, err)
	}
	if resp.Error != nil {
		tb.Fatalf("%s %s: got error %q", method, id, resp.Error.Message)
	}
	return resp.Result
}

func fleetGetTask(tb testing.TB, c *client.Client, id string) mcp.Task {
	tb.Helper()
	var got mcp.GetTaskResult
	if err := json.Unmarshal(fleetTaskRequest(tb, c, string(mcp.MethodTasksGet), id), &got); err != nil {
		tb.Fatal(err)
	}
	return got.Task
}

// fleetModernCall is one raw 2026-07-28 tools/call with the fleet's token,
// for driving the approval round trip by hand; state and responses are
// the retry's requestState and inputResponses.
func fleetModernCall(tb testing.TB, url, name string, args any, state string, responses map[string]any) map[string]any {
	tb.Helper()
	params := map[string]any{
		"name":      name,
		"arguments": args,
		"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
			mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
		},
	}
	if state != "" {
		params["requestState"] = state
	}
	if responses != nil {
		params["inputResponses"] = responses
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+fleetToken)
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "tools/call")
	req.Header.Set(mcp.HeaderName, name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("posting tools/call to %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Result == nil {
		tb.Fatalf("tools/call to %s: got HTTP %d %s, want a JSON-RPC result", url, resp.StatusCode, raw)
	}
	return msg.Result
}

// TestGatewayFleetReadyz: a gateway of a fleet is not ready while its
// bucket is unreachable (its NATS server down), naming the check, and is
// ready again once the server is back.
func TestGatewayFleetReadyz(t *testing.T) {
	ns := natstest.StartJetStream(t)
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, "fleet", nil)
	g := newFleetGateways(t, 1, "fleet", map[string]any{"fleet": map[string]any{"instance_ttl": "3s"}})[0]
	g.start(t, home.Env())

	ns.Stop()
	fisktest.WaitFor(t, 10*time.Second, "/readyz to report the bucket unreachable", func() bool {
		status, body := probe(t, "http://"+g.addr+"/readyz", nil)
		return status == http.StatusServiceUnavailable && strings.Contains(body, "fleet_bucket")
	})
	ns.Resume()
	fisktest.WaitFor(t, 20*time.Second, "/readyz to be ready again", func() bool {
		status, _ := probe(t, "http://"+g.addr+"/readyz", nil)
		return status == http.StatusOK
	})
}

// TestGatewayFleet runs three `mcp-gateway serve` of one identity on a
// three-server JetStream cluster behind Debian's haproxy with
// integration/examples/haproxy.cfg, and shows what the fleet promises.
func TestGatewayFleet(t *testing.T) {
	bin := requireHAProxy(t)
	cluster := natstest.StartJetStreamCluster(t, 3)
	home := fleettest.NewHome(t)
	home.AddClusterContext(t, "fleet", cluster.Servers, nil)
	gws := newFleetGateways(t, 3, "fleet", nil)
	for _, g := range gws {
		g.start(t, home.Env())
	}
	lb := startHAProxy(t, bin, gws)
	// A gateway restarted in a subtest must outlive it: it is started on
	// the whole test's t.
	top := t
	pidOf := func() map[int]*fleetGateway {
		m := map[int]*fleetGateway{}
		for _, g := range gws {
			m[g.p.PID] = g
		}
		return m
	}

	t.Run("300 calls served by all three", func(t *testing.T) {
		c := fleetClient(t, lb.url(), false)
		const workers, each = 10, 30
		var (
			mu     sync.Mutex
			served = map[int]int{}
			errs   []error
			wg     sync.WaitGroup
		)
		for range workers {
			wg.Go(func() {
				for range each {
					pid, err := callSleep(t.Context(), c, 10*time.Millisecond)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						served[pid]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("got %d failed calls of %d (first: %v), want none", len(errs), workers*each, errs[0])
		}
		byPID := pidOf()
		total := 0
		for _, g := range gws {
			n := g.callsServed(t, "sleep")
			t.Logf("%s (pid %d) served %d calls (its metrics), %d by the commands' parent pid", g.name, g.p.PID, n, served[g.p.PID])
			if n == 0 || served[g.p.PID] != n {
				t.Errorf("%s: got %d calls in its metrics and %d by parent pid, want the same, more than 0", g.name, n, served[g.p.PID])
			}
			total += n
		}
		for pid := range served {
			if byPID[pid] == nil {
				t.Errorf("a call ran under pid %d, which is none of the gateways", pid)
			}
		}
		if total != workers*each {
			t.Errorf("calls counted over the three gateways: got %d, want %d", total, workers*each)
		}
	})

	t.Run("approval retried on another gateway runs once", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "deployed")
		args := map[string]any{"service": "web", "marker": marker}
		yes := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
		before := 0
		for _, g := range gws {
			before += g.callsServed(t, "deploy")
		}
		res := fleetModernCall(t, gws[0].url(), "deploy", args, "", nil)
		state, _ := res["requestState"].(string)
		if res["resultType"] != "input_required" || state == "" {
			t.Fatalf("asking through %s: got %v, want input_required with a requestState", gws[0].name, res)
		}
		res = fleetModernCall(t, gws[1].url(), "deploy", args, state, yes)
		if res["isError"] == true {
			t.Fatalf("the retry through %s: got %v, want deploy to run", gws[1].name, res)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the retry through %s: no marker (%v), want deploy to have run", gws[1].name, err)
		}
		res = fleetModernCall(t, lb.url(), "deploy", args, state, yes)
		if text, _ := json.Marshal(res["content"]); res["isError"] != true || !bytes.Contains(text, []byte("unknown or was already used")) {
			t.Errorf("the answer replayed through the balancer: got %s, want it refused as used", text)
		}
		after := 0
		for _, g := range gws {
			after += g.callsServed(t, "deploy")
		}
		if after-before != 1 {
			t.Errorf("deploy runs over the fleet: got %d, want 1", after-before)
		}
	})

	t.Run("task read through another gateway, also after its gateway died", func(t *testing.T) {
		onGW1 := fleetClient(t, gws[0].url(), true)
		task := mcpTask(t, onGW1, "fleet-task", "sleep", map[string]any{"duration": "300ms"})
		onGW2 := fleetClient(t, gws[1].url(), true) // a new session, another gateway
		var got mcp.Task
		fisktest.WaitFor(t, 10*time.Second, "the task to complete, polled through gw2", func() bool {
			got = fleetGetTask(t, onGW2, task.TaskId)
			return got.Status.IsTerminal()
		})
		if got.Status != mcp.TaskStatusCompleted {
			t.Fatalf("the task through gw2: got %q %q, want completed", got.Status, got.StatusMessage)
		}
		readResult := func(c *client.Client, through string) {
			t.Helper()
			var res mcp.CallToolResult
			if err := json.Unmarshal(fleetTaskRequest(t, c, string(mcp.MethodTasksResult), task.TaskId), &res); err != nil {
				t.Fatal(err)
			}
			cr := mcpCommandResult(t, "sleep", &res)
			if m := sleptRE.FindStringSubmatch(cr.Output); m == nil || m[1] != strconv.Itoa(gws[0].p.PID) {
				t.Errorf("tasks/result through %s: got %q, want the output of the sleep gw1 (pid %d) ran", through, cr.Output, gws[0].p.PID)
			}
		}
		readResult(onGW2, "gw2")

		gws[0].p.Kill(t)
		onGW3 := fleetClient(t, gws[2].url(), true)
		readResult(onGW3, "gw3 after gw1 was killed")

		// gw1 rejoins on its address, and the balancer takes it back.
		gws[0].start(top, home.Env())
		lb.waitUp(t, gws[0])
	})

	t.Run("rolling restart keeps finished results", func(t *testing.T) {
		// One finished task on each gateway.
		var ids []string
		for i, g := range gws {
			c := fleetClient(t, g.url(), true)
			task := mcpTask(t, c, fmt.Sprintf("rolling-%d", i), "echo", map[string]any{"message": g.name})
			fisktest.WaitFor(t, 10*time.Second, "the task on "+g.name+" to finish", func() bool {
				return fleetGetTask(t, c, task.TaskId).Status.IsTerminal()
			})
			ids = append(ids, task.TaskId)
		}
		// Each gateway in turn: stopped (SIGTERM, as a deployment does),
		// started again, taken back by the balancer.
		for _, g := range gws {
			g.p.Signal(t, syscall.SIGTERM)
			if code := g.p.Wait(t, 10*time.Second); code != 0 {
				t.Errorf("%s stopped with status %d, want 0", g.name, code)
			}
			g.start(top, home.Env())
			lb.waitUp(t, g)
		}
		c := fleetClient(t, gws[2].url(), true)
		for i, id := range ids {
			var res mcp.CallToolResult
			if err := json.Unmarshal(fleetTaskRequest(t, c, string(mcp.MethodTasksResult), id), &res); err != nil {
				t.Fatal(err)
			}
			if cr := mcpCommandResult(t, "echo", &res); cr.Output != gws[i].name+"\n" {
				t.Errorf("the result of the task run on %s, after the rolling restart: got %q, want its echo", gws[i].name, cr.Output)
			}
		}
	})

	t.Run("kill -9 under load", func(t *testing.T) {
		c := fleetClient(t, lb.url(), false)
		victim := gws[1]
		onVictim := fleetClient(t, victim.url(), true)
		long := mcpTask(t, onVictim, "fleet-long", "sleep", map[string]any{"duration": "1m"})
		onGW3 := fleetClient(t, gws[2].url(), true)

		type outcome struct {
			at  time.Time
			pid int
			err error
		}
		var (
			mu       sync.Mutex
			outcomes []outcome
			stop     atomic.Bool
			wg       sync.WaitGroup
		)
		const workers = 8
		for range workers {
			wg.Go(func() {
				for !stop.Load() {
					pid, err := callSleep(t.Context(), c, 100*time.Millisecond)
					mu.Lock()
					outcomes = append(outcomes, outcome{time.Now(), pid, err})
					mu.Unlock()
				}
			})
		}
		fisktest.WaitFor(t, 10*time.Second, "calls to reach the victim", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, o := range outcomes {
				if o.pid == victim.p.PID {
					return true
				}
			}
			return false
		})
		victimPID := victim.p.PID
		killed := time.Now()
		victim.p.Kill(t)

		var failed mcp.Task
		fisktest.WaitFor(t, fleetInstanceTTL+5*time.Second, "the dead gateway's task to fail", func() bool {
			failed = fleetGetTask(t, onGW3, long.TaskId)
			return failed.Status.IsTerminal()
		})
		if failed.Status != mcp.TaskStatusFailed || !strings.Contains(failed.StatusMessage, victim.instance) {
			t.Errorf("the killed gateway's task: got %q %q, want failed naming instance %s", failed.Status, failed.StatusMessage, victim.instance)
		}
		if at, err := time.Parse(time.RFC3339Nano, failed.LastUpdatedAt); err == nil {
			t.Logf("the killed gateway's task failed %s after the kill (instance_ttl %s)", at.Sub(killed).Round(10*time.Millisecond), fleetInstanceTTL)
			if at.Sub(killed) > fleetInstanceTTL {
				t.Errorf("failed %s after the kill, want within instance_ttl %s", at.Sub(killed), fleetInstanceTTL)
			}
		}
		// Load goes on for a while after the kill.
		fisktest.WaitFor(t, 30*time.Second, "load to go on after the kill", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(outcomes) > 0 && outcomes[len(outcomes)-1].at.Sub(killed) > 2*time.Second
		})
		stop.Store(true)
		wg.Wait()

		var fails, okAfter int
		for _, o := range outcomes {
			switch {
			case o.err != nil:
				fails++
				t.Logf("failed call %s after the kill: %v", o.at.Sub(killed).Round(time.Millisecond), o.err)
				if o.at.Before(killed) {
					t.Errorf("a call failed before the kill: %v", o.err)
				}
			case o.at.After(killed):
				okAfter++
				// A response on its way as the process died may arrive
				// a moment after the kill; later ones cannot.
				if o.pid == victimPID && o.at.Sub(killed) > 500*time.Millisecond {
					t.Errorf("a call finished after the kill was served by the killed gateway")
				}
			}
		}
		t.Logf("%d calls, %d failed (those the killed gateway was running), %d served after the kill", len(outcomes), fails, okAfter)
		// At most the calls in flight on the victim fail: one per worker.
		if fails > workers {
			t.Errorf("failed calls: got %d, want at most the %d the killed gateway could have been running", fails, workers)
		}
		if okAfter == 0 {
			t.Error("no call was served after the kill, want the others to keep serving")
		}

		victim.start(top, home.Env())
		lb.waitUp(t, victim)
		fisktest.WaitFor(t, 20*time.Second, "the restarted gateway to serve calls", func() bool {
			pid, err := callSleep(t.Context(), c, time.Millisecond)
			return err == nil && pid == victim.p.PID
		})
	})

	t.Run("legacy session with affinity, 404 after its gateway died", func(t *testing.T) {
		c := fleetClient(t, lb.url(), true)
		var home int
		for i := range 10 {
			pid, err := callSleep(t.Context(), c, time.Millisecond)
			if err != nil {
				t.Fatalf("legacy call %d through the balancer: %v", i, err)
			}
			if home == 0 {
				home = pid
			}
			if pid != home {
				t.Fatalf("legacy call %d: served by pid %d, want every call on the session's gateway %d", i, pid, home)
			}
		}
		g := pidOf()[home]
		if g == nil {
			t.Fatalf("the session's gateway pid %d is none of the fleet", home)
		}
		t.Logf("the session lives on %s (pid %d): killing it", g.name, home)
		g.p.Kill(t)
		// Until the balancer has seen the gateway go (two failed health
		// checks), a request may still be sent its way and fail as a
		// connection error (502/503), which the client may retry; then
		// another gateway answers 404: the session is unknown there.
		var err error
		fisktest.WaitFor(t, 10*time.Second, "a 404 for the dead gateway's session", func() bool {
			var pid int
			pid, err = callSleep(t.Context(), c, time.Millisecond)
			if err == nil {
				t.Fatalf("a call on the dead gateway's session was served by pid %d, want it refused", pid)
			}
			t.Logf("call on the dead gateway's session: %.120v", err)
			return errors.Is(err, transport.ErrSessionTerminated) || strings.Contains(err.Error(), "404")
		})
		t.Logf("the call after the session's gateway died: %v", err)
		again := fleetClient(t, lb.url(), true)
		pid, err := callSleep(t.Context(), again, time.Millisecond)
		if err != nil || pid == home {
			t.Errorf("after re-initializing: got pid %d, %v, want a call served by another gateway", pid, err)
		}
	})
}
