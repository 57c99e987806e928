package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// longRun makes TestClusterServerOutage run its load for 30 s instead of
// the short default that keeps make test fast:
//
//	go test -race -run TestClusterServerOutage -v . -long
var longRun = flag.Bool("long", false, "run the cluster outage load for 30s instead of 12s")

// Bounds of every call the cluster tests make. The gateway's remote tools
// and the A2A client both give up after clusterCallTimeout; clusterSlack
// covers scheduling on a loaded machine past that deadline. A call that
// takes longer than both has hung.
const (
	clusterCallTimeout = 3 * time.Second
	clusterSlack       = 2 * time.Second
	// clusterWait bounds waits for something that normally takes well
	// under a second: an agent reconnecting, interest crossing a route.
	clusterWait = 30 * time.Second
)

// agentConnName and gatewayConnName are the names a2a-agent and
// mcp-gateway give their NATS connections, which the servers list: how a
// test sees which server a process is connected to.
func agentConnName(identity string) string   { return "a2a-agent " + identity }
func gatewayConnName(identity string) string { return "mcp-gateway " + identity }

// serverContext names the context that holds only srv's URL: a process
// using it connects to srv first and learns the rest of the cluster from
// srv.
func serverContext(srv *natstest.Server) string { return "on-" + srv.Name() }

// clusterHome returns a home with a context per server (serverContext)
// and fleetContext listing every server, as an operator writes a cluster.
func clusterHome(tb testing.TB, servers ...*natstest.Server) *fleettest.Home {
	tb.Helper()
	home := fleettest.NewHome(tb)
	for _, s := range servers {
		home.AddClusterContext(tb, serverContext(s), []*natstest.Server{s}, nil)
	}
	home.AddClusterContext(tb, fleetContext, servers, nil)
	return home
}

// clusterAgent is the agent.yaml of an agent serving the demo's echo and
// sleep; startAgentsOn sets its context.
func clusterAgent(tb testing.TB, identity string) fleettest.Agent {
	tb.Helper()
	return fleettest.Agent{
		Identity:        identity,
		ApplicationPath: fleettest.FiskDemo(tb),
		IncludeTools:    []string{"echo", "sleep"},
		A2A:             &fleettest.A2A{ServeTools: true, MaxConcurrentTools: 4},
	}
}

// startAgentsOn starts an agent of a on each of servers (a server listed
// twice gets two), all at once, each through its server's context, and
// waits until every one serves.
func startAgentsOn(tb testing.TB, home *fleettest.Home, a fleettest.Agent, servers ...*natstest.Server) []*fleettest.Process {
	tb.Helper()
	procs := make([]*fleettest.Process, len(servers))
	for i, s := range servers {
		a.NATSContext = serverContext(s)
		procs[i] = fleettest.Start(tb, home.Env(), fleettest.A2AAgent(tb), "serve", "--config", fleettest.WriteAgentConfig(tb, a))
	}
	for _, p := range procs {
		p.WaitOutput(tb, fleettest.A2AServingLog, fleettest.ReadyTimeout)
	}
	return procs
}

// connectionsOn returns how many connections named name each server has,
// in the order of servers.
func connectionsOn(tb testing.TB, name string, servers ...*natstest.Server) []int {
	tb.Helper()
	out := make([]int, len(servers))
	for i, s := range servers {
		out[i] = s.ConnectionsNamed(tb, name)
	}
	return out
}

// waitConnected waits until want connections named name are spread over
// the running servers: every process named so has reconnected.
func waitConnected(tb testing.TB, name string, want int, servers ...*natstest.Server) {
	tb.Helper()
	fisktest.WaitFor(tb, clusterWait, fmt.Sprintf("%d connections named %q on the running servers", want, name), func() bool {
		n := 0
		for _, c := range connectionsOn(tb, name, servers...) {
			n += c
		}
		return n == want
	})
}

// clusterGatewayConfig writes the agent.yaml of gateway gw on the nats
// context ctx: it serves the demo's fail locally and imports hosts, with
// remote calls bounded by clusterCallTimeout and room for the calls a load
// keeps in flight while a server is down.
func clusterGatewayConfig(tb testing.TB, ctx, refresh string, hosts ...string) string {
	tb.Helper()
	remote := make([]map[string]any, len(hosts))
	for i, h := range hosts {
		remote[i] = map[string]any{"host": h}
	}
	return fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     ctx,
		IncludeTools:    []string{"fail"},
		MCP:             map[string]any{"tool_timeout": clusterCallTimeout.String(), "max_concurrent_tools": 64},
		Extra:           map[string]any{"remote_tools": remote, "remote_refresh_interval": refresh},
	})
}

// natsOn runs the real nats CLI with the home's context ctx.
func natsOn(tb testing.TB, home *fleettest.Home, ctx string, args ...string) string {
	tb.Helper()
	r := fleettest.Run(tb, home.Env(), fleettest.NATSCLI(tb), append([]string{"--context", ctx}, args...)...)
	if r.ExitCode != 0 {
		tb.Fatalf("nats --context %s %v: exit %d\nstdout:\n%s\nstderr:\n%s", ctx, args, r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// microInstances returns the fiskfleet.pid of every instance of identity
// that `nats micro ls` lists through the context ctx, sorted.
func microInstances(tb testing.TB, home *fleettest.Home, ctx, identity string) []int {
	tb.Helper()
	var pids []int
	for _, info := range decodeJSON[[]micro.Info](tb, "micro ls --json", natsOn(tb, home, ctx, "micro", "ls", "--json")) {
		if info.Name == identity {
			pid, _ := strconv.Atoi(info.Metadata["fiskfleet.pid"])
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// checkMicroInstances asserts that `nats micro ls` through the context ctx
// lists exactly the instances want (fiskfleet.pid, sorted) of identity.
// The CLI stops listening 300 ms after the latest answer, so on a busy
// machine an answer from across a gateway can miss one run: it asks again
// until the list is complete or clusterWait has passed.
func checkMicroInstances(tb testing.TB, home *fleettest.Home, ctx, identity string, want []int) {
	tb.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		got := microInstances(tb, home, ctx, identity)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("micro ls through %s, %s: got pids %v, want %v", ctx, identity, got, want)
			return
		}
	}
}

// toolRequests returns the calls (unary and streamed) each instance of
// identity has handled, by fiskfleet.pid, from `nats micro stats`, asking until all
// want instances answer.
func toolRequests(tb testing.TB, home *fleettest.Home, ctx, identity string, want int) map[int]int {
	tb.Helper()
	var got map[int]int
	fisktest.WaitFor(tb, clusterWait, fmt.Sprintf("micro ls and stats from %d instances of %s", want, identity), func() bool {
		// Stats carry the instance id, not the metadata: match each to
		// its pid through micro ls.
		pids := map[string]int{}
		for _, info := range decodeJSON[[]micro.Info](tb, "micro ls --json", natsOn(tb, home, ctx, "micro", "ls", "--json")) {
			if info.Name == identity {
				pids[info.ID], _ = strconv.Atoi(info.Metadata["fiskfleet.pid"])
			}
		}
		got = map[int]int{}
		for _, s := range decodeJSON[[]micro.Stats](tb, "micro stats --json", natsOn(tb, home, ctx, "micro", "stats", identity, "--json")) {
			if pid, ok := pids[s.ID]; ok {
				// A call is unary (tool) or, from the gateway's remote
				// tools, streamed (stream).
				got[pid] = statsRequests(s, "tool") + statsRequests(s, "stream")
			}
		}
		return len(got) == want
	})
	return got
}

func statsRequests(s micro.Stats, endpoint string) int {
	for _, e := range s.Endpoints {
		if e.Name == endpoint {
			return e.NumRequests
		}
	}
	return 0
}

// callerOn returns an A2A client as the test's own caller, on srv.
func callerOn(tb testing.TB, srv *natstest.Server) *a2a.Client {
	tb.Helper()
	c, err := a2a.NewClient(natsbus.NewTransport(srv.Connect(tb)), a2a.Participant{Name: "tester"})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// loadOutcome classifies how a call ended. Results, in-band errors and an
// agent reported unavailable are clear outcomes; anything else (a protocol
// error, another Go error, a wrong answer, a call past its deadline) is
// broken and fails the test.
type loadOutcome int

const (
	loadOK loadOutcome = iota
	loadInBand
	loadUnavailable
	loadBroken
)

// loadCall is one call a load made.
type loadCall struct {
	via     string // "mcp" or "a2a"
	start   time.Time
	elapsed time.Duration
	kind    loadOutcome
	pid     int    // the agent that ran a sleep, when known
	detail  string // what went wrong
}

// callLog collects the calls of a load; safe for concurrent use.
type callLog struct {
	mu    sync.Mutex // guards calls
	calls []loadCall
}

func (r *callLog) add(c loadCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

// snapshot returns the calls so far, by start time.
func (r *callLog) snapshot() []loadCall {
	r.mu.Lock()
	out := slices.Clone(r.calls)
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b loadCall) int { return a.start.Compare(b.start) })
	return out
}

// okSince counts the successful calls that started after t.
func (r *callLog) okSince(t time.Time) int {
	n := 0
	for _, c := range r.snapshot() {
		if c.kind == loadOK && c.start.After(t) {
			n++
		}
	}
	return n
}

// endedSince counts the calls that started after t and have ended,
// whatever their outcome.
func (r *callLog) endedSince(t time.Time) int {
	n := 0
	for _, c := range r.snapshot() {
		if c.start.After(t) {
			n++
		}
	}
	return n
}

// clusterEcho calls a remote echo through the gateway with a message of its
// own and checks that exactly that message comes back.
func clusterEcho(c *client.Client, name, msg string) loadCall {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), clusterCallTimeout+clusterSlack)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = map[string]any{"message": msg}
	res, err := c.CallTool(ctx, req)
	rec := loadCall{via: "mcp", start: start, elapsed: time.Since(start)}
	switch {
	case err != nil:
		rec.kind, rec.detail = loadBroken, fmt.Sprintf("protocol error: %v", err)
	case res.IsError:
		rec.kind, rec.detail = loadInBand, mcpText(res)
	default:
		var cr tool.CommandResult
		if err := json.Unmarshal([]byte(mcpText(res)), &cr); err != nil || cr.Output != msg+"\n" {
			rec.kind, rec.detail = loadBroken, fmt.Sprintf("got %q, want the command result of echo %q", mcpText(res), msg)
		}
	}
	return rec
}

// clusterSleep calls identity's sleep with the A2A client and notes the agent
// that ran it.
func clusterSleep(c *a2a.Client, identity string) loadCall {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), clusterCallTimeout)
	defer cancel()
	reply, err := c.CallTool(ctx, identity, "sleep", json.RawMessage(`{"duration":"1ms"}`))
	rec := loadCall{via: "a2a", start: start, elapsed: time.Since(start)}
	switch {
	case errors.Is(err, a2a.ErrAgentUnavailable):
		rec.kind, rec.detail = loadUnavailable, err.Error()
	case err != nil:
		rec.kind, rec.detail = loadBroken, err.Error()
	case reply.IsError:
		rec.kind, rec.detail = loadInBand, reply.Output
	default:
		pid, ok := servedBy(reply)
		if !ok {
			rec.kind, rec.detail = loadBroken, fmt.Sprintf("got %+v, want a sleep result", reply)
		}
		rec.pid = pid
	}
	return rec
}

// runClusterLoad starts the calls of each of calls every interval until ctx is
// done, each in its own goroutine so a slow call does not slow the rate,
// and records them in rec. It returns once every call has ended.
func runClusterLoad(ctx context.Context, rec *callLog, interval time.Duration, calls ...func(n int) loadCall) {
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		for _, call := range calls {
			wg.Go(func() { rec.add(call(n)) })
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
	}
}

// loadReport is what a load's calls came to.
type loadReport struct {
	counts map[string]map[loadOutcome]int // via -> kind -> calls
	// recovery is the time from the disruption until the start of the
	// final run of successes that lasts to the end; zero when no call
	// failed after it.
	recovery time.Duration
	// finalRun is the number of calls in that run.
	finalRun int
	// lastFailure is when the last failed call started.
	lastFailure time.Time
}

// summarizeLoad checks every call ended clearly within its deadline and
// counts them; disrupted is when the disruption began.
func summarizeLoad(tb testing.TB, calls []loadCall, disrupted time.Time) loadReport {
	tb.Helper()
	s := loadReport{counts: map[string]map[loadOutcome]int{}}
	last := -1
	for i, c := range calls {
		if s.counts[c.via] == nil {
			s.counts[c.via] = map[loadOutcome]int{}
		}
		s.counts[c.via][c.kind]++
		if c.kind == loadBroken {
			tb.Errorf("%s call started %s: %s", c.via, relative(c.start, disrupted), c.detail)
		}
		if c.elapsed > clusterCallTimeout+clusterSlack {
			tb.Errorf("%s call started %s: took %s, want it to end within its %s timeout", c.via, relative(c.start, disrupted), c.elapsed, clusterCallTimeout)
		}
		if c.kind != loadOK {
			last = i
		}
	}
	s.finalRun = len(calls) - last - 1
	if last >= 0 {
		s.lastFailure = calls[last].start
		if s.finalRun > 0 {
			s.recovery = max(calls[last+1].start.Sub(disrupted), 0)
		}
	}
	return s
}

// relative says when t was with respect to ref, to the millisecond.
func relative(t, ref time.Time) string {
	d := t.Sub(ref).Round(time.Millisecond)
	if d < 0 {
		return fmt.Sprintf("%s before the disruption", -d)
	}
	return fmt.Sprintf("%s after the disruption", d)
}

func (s loadReport) String() string {
	out := ""
	for _, via := range slices.Sorted(maps.Keys(s.counts)) {
		out += fmt.Sprintf("%s: %d ok, %d in-band errors, %d unavailable, %d broken; ", via,
			s.counts[via][loadOK], s.counts[via][loadInBand], s.counts[via][loadUnavailable], s.counts[via][loadBroken])
	}
	return out + fmt.Sprintf("final run of %d successes", s.finalRun)
}

// TestClusterRemoteTools spreads the agents of one identity over all
// three servers of a cluster and puts a second identity's only agent on
// the third: the gateway, connected to the first server, calls both
// through its remote tools, and `nats micro ls` against each server shows
// every instance.
func TestClusterRemoteTools(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	s1, s2, s3 := c.Servers[0], c.Servers[1], c.Servers[2]
	home := clusterHome(t, c.Servers...)
	spread := startAgentsOn(t, home, clusterAgent(t, "spread"), s1, s2, s3)
	far := startAgentsOn(t, home, clusterAgent(t, "far"), s3)[0]

	if got, want := connectionsOn(t, agentConnName("spread"), c.Servers...), []int{1, 1, 1}; !slices.Equal(got, want) {
		t.Fatalf("spread agents per server: got %v, want %v", got, want)
	}
	if got, want := connectionsOn(t, agentConnName("far"), c.Servers...), []int{0, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("far agents per server: got %v, want %v", got, want)
	}

	gw := startGateway(t, home.Env(), clusterGatewayConfig(t, serverContext(s1), "30s", "spread", "far"))
	if got, want := connectionsOn(t, gatewayConnName("gw"), c.Servers...), []int{1, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("gateway connections per server: got %v, want %v", got, want)
	}
	mc := connectMCP(t, gw.URL, nil)
	names := listNames(t, mc)
	for _, want := range []string{"far_echo", "far_sleep", "spread_echo", "spread_sleep"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools/list: got %v, want %s among them", names, want)
		}
	}

	sleptBy := func(t *testing.T, name string) int {
		t.Helper()
		cr := mcpCommandResult(t, name, callMCP(t, mc, name, map[string]any{"duration": "1ms"}))
		m := sleptRE.FindStringSubmatch(cr.Output)
		if m == nil {
			t.Fatalf("%s: got output %q, want a sleep report", name, cr.Output)
		}
		pid, _ := strconv.Atoi(m[1])
		return pid
	}

	t.Run("a tool served only on server 3", func(t *testing.T) {
		for range 5 {
			if pid := sleptBy(t, "far_sleep"); pid != far.PID {
				t.Errorf("far_sleep: ran under pid %d, want the agent on %s (pid %d)", pid, s3.Name(), far.PID)
			}
		}
		cr := mcpCommandResult(t, "far_echo", callMCP(t, mc, "far_echo", map[string]any{"message": "across the cluster"}))
		if cr.Output != "across the cluster\n" {
			t.Errorf("far_echo: got %q, want %q", cr.Output, "across the cluster\n")
		}
	})

	t.Run("one identity on every server", func(t *testing.T) {
		const calls = 30
		perPID := map[int]int{}
		for range calls {
			perPID[sleptBy(t, "spread_sleep")]++
		}
		t.Logf("%d spread_sleep calls from the gateway on %s, per agent pid (on %s, %s, %s): %v",
			calls, s1.Name(), s1.Name(), s2.Name(), s3.Name(), perPID)
		for i, p := range spread {
			if perPID[p.PID] == 0 {
				t.Errorf("agent on %s (pid %d): served none of %d calls, want NATS to spread the queue group over the cluster (%v)", c.Servers[i].Name(), p.PID, calls, perPID)
			}
		}
		if got, want := slices.Sorted(maps.Keys(perPID)), slices.Sorted(slices.Values(pidsOf(spread))); !slices.Equal(got, want) {
			t.Errorf("agents serving spread_sleep: got %v, want %v", got, want)
		}
	})

	t.Run("nats micro ls on every server", func(t *testing.T) {
		wantSpread := slices.Sorted(slices.Values(pidsOf(spread)))
		for _, s := range c.Servers {
			checkMicroInstances(t, home, serverContext(s), "spread", wantSpread)
			checkMicroInstances(t, home, serverContext(s), "far", []int{far.PID})
		}
	})
}

// TestClusterServerOutage stops the server half the agents are connected
// to while a steady load runs through the gateway's remote tools over MCP
// and through an A2A client: every call ends clearly within its deadline,
// the agents reconnect to the survivors, and the calls succeed again to
// the end. -long runs the load for 30 s.
func TestClusterServerOutage(t *testing.T) {
	t.Parallel()
	// Ten calls a second each way, twenty in all; the server stops after
	// a quarter of the load.
	const interval = 100 * time.Millisecond
	duration := 12 * time.Second
	if *longRun {
		duration = 30 * time.Second
	}
	setup := time.Now()
	c := natstest.StartCluster(t, 3)
	s1, s2, s3 := c.Servers[0], c.Servers[1], c.Servers[2]
	home := clusterHome(t, c.Servers...)
	agents := startAgentsOn(t, home, clusterAgent(t, "steady"), s1, s2, s3, s3)
	onVictim := pidsOf(agents[2:])
	if got, want := connectionsOn(t, agentConnName("steady"), c.Servers...), []int{1, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("agents per server: got %v, want %v", got, want)
	}
	// The gateway and the caller know every server, as operators configure
	// them; wherever they land, they must ride out the outage.
	gw := startGateway(t, home.Env(), clusterGatewayConfig(t, fleetContext, "1s", "steady"))
	mc := connectMCP(t, gw.URL, nil)
	nc := c.Connect(t)
	caller, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet up in %s; gateway connections per server %v; the A2A caller is on %s (servers %s)",
		time.Since(setup).Round(time.Millisecond), connectionsOn(t, gatewayConnName("gw"), c.Servers...), nc.ConnectedUrl(), c.URLs())

	rec := &callLog{}
	ctx, cancel := context.WithTimeout(t.Context(), duration)
	defer cancel()
	loadDone := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(loadDone)
		runClusterLoad(ctx, rec, interval,
			func(n int) loadCall { return clusterEcho(mc, "echo", fmt.Sprintf("call %d", n)) },
			func(int) loadCall { return clusterSleep(caller, "steady") },
		)
	}()
	t.Cleanup(func() { cancel(); <-loadDone })

	// Let a quarter of the load pass, with calls succeeding, then stop s3.
	fisktest.WaitFor(t, clusterWait, "a quarter of the load to pass", func() bool { return time.Since(started) >= duration/4 })
	if rec.okSince(started) == 0 {
		t.Fatalf("no call succeeded before the outage: %v", summarizeLoad(t, rec.snapshot(), started))
	}
	stoppedAt := time.Now()
	s3.Stop()
	waitConnected(t, agentConnName("steady"), len(agents), s1, s2)
	reconnected := time.Since(stoppedAt)
	t.Logf("stopped %s at +%s; its %d agents reconnected to the survivors within %s; agents per server now %v",
		s3.Name(), stoppedAt.Sub(started).Round(time.Millisecond), len(onVictim), reconnected.Round(time.Millisecond),
		connectionsOn(t, agentConnName("steady"), s1, s2))

	<-loadDone
	calls := rec.snapshot()
	sum := summarizeLoad(t, calls, stoppedAt)
	t.Logf("%d calls over %s: %v; recovery %s after the stop", len(calls), duration, sum, sum.recovery.Round(time.Millisecond))
	if !sum.lastFailure.IsZero() {
		t.Logf("last failed call started %s (the stop)", relative(sum.lastFailure, stoppedAt))
	}
	recovered := map[int]int{}
	for _, cl := range calls {
		if cl.via == "a2a" && cl.kind == loadOK && cl.start.After(stoppedAt.Add(sum.recovery)) {
			recovered[cl.pid]++
		}
	}
	t.Logf("A2A calls served after the recovery, per agent pid: %v (pids %v were on %s)", recovered, onVictim, s3.Name())
	// Success returns to 100 %: the final run of successes covers at
	// least the last few seconds of the load, every call of both kinds.
	const tail = 3 * time.Second
	if end := started.Add(duration); !sum.lastFailure.IsZero() && sum.lastFailure.After(end.Add(-tail)) {
		t.Errorf("last failure at +%s of %s: want every call of the last %s to succeed", sum.lastFailure.Sub(started).Round(time.Millisecond), duration, tail)
	}

	// Each call was handled at most once: the agents handled no more tool
	// requests than were made, and at least every one that succeeded.
	statsAt := time.Now()
	handled := toolRequests(t, home, serverContext(s1), "steady", len(agents))
	t.Logf("micro ls and stats took %s", time.Since(statsAt).Round(time.Millisecond))
	total := 0
	for _, n := range handled {
		total += n
	}
	succeeded := sum.counts["mcp"][loadOK] + sum.counts["a2a"][loadOK]
	t.Logf("tool requests handled per agent pid %v: %d in all for %d calls, %d of which succeeded", handled, total, len(calls), succeeded)
	if total > len(calls) || total < succeeded {
		t.Errorf("tool requests handled: got %d, want between the %d successes and the %d calls made", total, succeeded, len(calls))
	}

	// The agents that moved serve again: a burst reaches all four.
	perPID := map[int]int{}
	for i, o := range callMany(caller, 40, "steady", "sleep", `{"duration":"20ms"}`, clusterWait, nil) {
		pid, ok := 0, false
		if o.err == nil {
			pid, ok = servedBy(o.reply)
		}
		if !ok {
			t.Fatalf("call %d after the outage: got %+v, %v, want a sleep result", i, o.reply, o.err)
		}
		perPID[pid]++
	}
	t.Logf("40 calls after the outage, per agent pid: %v (pids %v were on %s)", perPID, onVictim, s3.Name())
	for _, pid := range onVictim {
		if perPID[pid] == 0 {
			t.Errorf("agent pid %d, moved off %s: served none of 40 calls, want it serving again", pid, s3.Name())
		}
	}
}

// TestLeafNodeAgents puts agents behind a leaf node: one discovered and
// called from the hub, and a queue group with members on both sides,
// called from both sides and then from the hub with its own member gone.
func TestLeafNodeAgents(t *testing.T) {
	t.Parallel()
	hl := natstest.StartHubLeaf(t)
	home := clusterHome(t, hl.Hub, hl.Leaf)
	behind := startAgentsOn(t, home, clusterAgent(t, "behind"), hl.Leaf)[0]
	edge := startAgentsOn(t, home, clusterAgent(t, "edge"), hl.Hub, hl.Leaf)
	onHub, onLeaf := edge[0], edge[1]
	hubCaller, leafCaller := callerOn(t, hl.Hub), callerOn(t, hl.Leaf)

	t.Run("discovered and called from the hub", func(t *testing.T) {
		var card *a2a.DiscoveryReply
		fisktest.WaitFor(t, clusterWait, "the hub to discover the agent behind the leaf node", func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), clusterCallTimeout)
			defer cancel()
			var err error
			card, err = hubCaller.Discover(ctx, "behind")
			return err == nil
		})
		var tools []string
		for _, td := range card.Tools {
			tools = append(tools, td.Name)
		}
		if slices.Sort(tools); !slices.Equal(tools, []string{"echo", "sleep"}) {
			t.Errorf("discovered tools: got %v, want [echo sleep]", tools)
		}
		o := callMany(hubCaller, 1, "behind", "sleep", `{"duration":"1ms"}`, clusterWait, nil)[0]
		if o.err != nil {
			t.Fatal(o.err)
		}
		if pid, ok := servedBy(o.reply); !ok || pid != behind.PID {
			t.Errorf("sleep from the hub: got %+v (pid %d), want a result from the agent behind the leaf node (pid %d)", o.reply, pid, behind.PID)
		}
		checkMicroInstances(t, home, serverContext(hl.Hub), "behind", []int{behind.PID})
	})

	// spread makes n calls from caller and counts the agents that ran them.
	spread := func(t *testing.T, caller *a2a.Client, n int) map[int]int {
		t.Helper()
		perPID := map[int]int{}
		for i, o := range callMany(caller, n, "edge", "sleep", `{"duration":"1ms"}`, clusterWait, nil) {
			pid, ok := 0, false
			if o.err == nil {
				pid, ok = servedBy(o.reply)
			}
			if !ok {
				t.Fatalf("call %d: got %+v, %v, want a sleep result", i, o.reply, o.err)
			}
			perPID[pid]++
		}
		return perPID
	}

	t.Run("the queue group spans hub and leaf", func(t *testing.T) {
		const calls = 20
		fromHub, fromLeaf := spread(t, hubCaller, calls), spread(t, leafCaller, calls)
		t.Logf("%d calls from each side, per agent (hub pid %d, leaf pid %d): from the hub %v, from the leaf %v",
			calls, onHub.PID, onLeaf.PID, fromHub, fromLeaf)
		// NATS gives a queue message to a member on the publisher's own
		// server before one across the leaf node: each side serves its
		// own callers, and the two sides share the whole load.
		if fromHub[onHub.PID] != calls {
			t.Errorf("calls from the hub run on the hub's agent: got %d of %d (%v)", fromHub[onHub.PID], calls, fromHub)
		}
		if fromLeaf[onLeaf.PID] != calls {
			t.Errorf("calls from the leaf run on the leaf's agent: got %d of %d (%v)", fromLeaf[onLeaf.PID], calls, fromLeaf)
		}
	})

	t.Run("the hub's calls cross to the leaf when its own member is gone", func(t *testing.T) {
		onHub.Kill(t)
		// Calls made before the hub notices would go to the dead agent.
		waitConnected(t, agentConnName("edge"), 0, hl.Hub)
		const calls = 20
		fromHub := spread(t, hubCaller, calls)
		t.Logf("%d calls from the hub with its agent killed, per agent: %v", calls, fromHub)
		if fromHub[onLeaf.PID] != calls {
			t.Errorf("calls from the hub run on the leaf's agent: got %d of %d (%v)", fromHub[onLeaf.PID], calls, fromHub)
		}
	})
}

// TestSuperclusterAgents runs one identity in both clusters of a
// supercluster: calls made in cluster A are served by A's agents while
// any exist, and by B's across the gateway once A's are killed.
func TestSuperclusterAgents(t *testing.T) {
	t.Parallel()
	sc := natstest.StartSupercluster(t)
	a1, a2 := sc.A.Servers[0], sc.A.Servers[1]
	b1, b2 := sc.B.Servers[0], sc.B.Servers[1]
	home := clusterHome(t, a1, a2, b1, b2)
	agents := startAgentsOn(t, home, clusterAgent(t, "global"), a1, a2, b1, b2)
	inA, inB := agents[:2], agents[2:]
	caller := callerOn(t, a1)
	// B's agents are visible from A, so serving only from A below is
	// NATS's choice, not a gateway that is not there yet.
	checkMicroInstances(t, home, serverContext(a1), "global", slices.Sorted(slices.Values(pidsOf(agents))))
	if t.Failed() {
		t.FailNow()
	}

	const calls = 30
	served := func(t *testing.T) (map[int]int, int) {
		t.Helper()
		perPID, unavailable := map[int]int{}, 0
		for i, o := range callMany(caller, calls, "global", "sleep", `{"duration":"1ms"}`, clusterCallTimeout, nil) {
			switch {
			case o.elapsed > clusterCallTimeout+clusterSlack:
				t.Errorf("call %d: took %s, want it to end within %s", i, o.elapsed, clusterCallTimeout)
			case errors.Is(o.err, a2a.ErrAgentUnavailable):
				unavailable++
			case o.err != nil:
				t.Errorf("call %d: got %v, want a result or %v", i, o.err, a2a.ErrAgentUnavailable)
			default:
				pid, ok := servedBy(o.reply)
				if !ok {
					t.Errorf("call %d: got %+v, want a sleep result", i, o.reply)
				}
				perPID[pid]++
			}
		}
		return perPID, unavailable
	}

	t.Run("cluster A serves its own callers", func(t *testing.T) {
		perPID, unavailable := served(t)
		t.Logf("%d calls from %s, per agent (A %v, B %v): %v, %d unavailable", calls, a1.Name(), pidsOf(inA), pidsOf(inB), perPID, unavailable)
		for _, p := range inA {
			if perPID[p.PID] == 0 {
				t.Errorf("agent pid %d in A: served none, want A's agents to share the calls (%v)", p.PID, perPID)
			}
		}
		for _, p := range inB {
			if perPID[p.PID] != 0 {
				t.Errorf("agent pid %d in B: served %d, want none while A has agents", p.PID, perPID[p.PID])
			}
		}
		if unavailable != 0 {
			t.Errorf("unavailable: got %d, want 0", unavailable)
		}
	})

	t.Run("cluster B takes over when A's agents die", func(t *testing.T) {
		killed := time.Now()
		for _, p := range inA {
			p.Kill(t)
		}
		waitConnected(t, agentConnName("global"), 0, a1, a2)
		dropped := time.Since(killed)
		// Probe until B answers: the time the failover takes once A's
		// servers have let go of the dead agents. A short probe timeout
		// keeps the measure fine-grained; a probe that times out is
		// simply made again.
		fisktest.WaitFor(t, clusterWait, "a call from A to reach B's agents", func() bool {
			o := callMany(caller, 1, "global", "sleep", `{"duration":"1ms"}`, 500*time.Millisecond, nil)[0]
			return o.err == nil && !o.reply.IsError
		})
		t.Logf("A's servers dropped the killed agents %s after the kill; the first call served by B ended %s after the kill",
			dropped.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
		perPID, unavailable := served(t)
		t.Logf("%d calls from %s after the kill, per agent (B %v): %v, %d unavailable", calls, a1.Name(), pidsOf(inB), perPID, unavailable)
		if got, want := slices.Sorted(maps.Keys(perPID)), slices.Sorted(slices.Values(pidsOf(inB))); !slices.Equal(got, want) {
			t.Errorf("agents serving after A's died: got %v, want both of B's %v", got, want)
		}
		if unavailable != 0 {
			t.Errorf("unavailable: got %d, want 0", unavailable)
		}
	})
}

// listMisses returns what is wrong with a tools/list that must hold
// every name of want, or "".
func listMisses(mc *client.Client, want []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), clusterCallTimeout+clusterSlack)
	defer cancel()
	res, err := mc.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err.Error()
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			return fmt.Sprintf("got %v, want %s among them", names, w)
		}
	}
	return ""
}

// TestRollingRestart restarts the three servers of a cluster one at a time
// under a steady load through the gateway: tools/list always holds the
// remote tools, and every call ends with a result or an in-band error
// within its deadline, never a protocol error or a hang.
func TestRollingRestart(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	c := natstest.StartCluster(t, 3)
	home := clusterHome(t, c.Servers...)
	agents := startAgentsOn(t, home, clusterAgent(t, "rolling"), c.Servers...)
	gw := startGateway(t, home.Env(), clusterGatewayConfig(t, fleetContext, "500ms", "rolling"))
	mc := connectMCP(t, gw.URL, nil)
	remote := []string{"echo", "sleep"} // one host, no local echo or sleep: bare names

	rec := &callLog{}
	// lists and listErr are written by the load goroutine and read once
	// it is done.
	var (
		lists   int
		listErr []string
	)
	ctx, cancel := context.WithCancel(t.Context())
	loadDone := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(loadDone)
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			runClusterLoad(ctx, rec, interval, func(n int) loadCall { return clusterEcho(mc, "echo", fmt.Sprintf("call %d", n)) })
		})
		// tools/list as a client polls it, one at a time.
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if msg := listMisses(mc, remote); msg != "" {
				listErr = append(listErr, fmt.Sprintf("tools/list at +%s: %s", time.Since(started).Round(time.Millisecond), msg))
			}
			lists++
		}
	}()
	t.Cleanup(func() { cancel(); <-loadDone })

	fisktest.WaitFor(t, clusterWait, "the first calls to succeed", func() bool { return rec.okSince(started) >= 5 })
	for _, s := range c.Servers {
		stopped := time.Now()
		s.Stop()
		survivors := slices.DeleteFunc(slices.Clone(c.Servers), func(o *natstest.Server) bool { return o == s })
		waitConnected(t, agentConnName("rolling"), len(agents), survivors...)
		waitConnected(t, gatewayConnName("gw"), 1, survivors...)
		moved := time.Since(stopped)
		// Keep it down while the load goes on, as a real restart takes a
		// while.
		fisktest.WaitFor(t, clusterWait, "calls made while "+s.Name()+" is down", func() bool { return rec.endedSince(stopped) >= 5 })
		s.Resume()
		c.WaitRoutes(t)
		back := time.Now()
		fisktest.WaitFor(t, clusterWait, "calls to succeed after "+s.Name()+" is back", func() bool { return rec.okSince(back) >= 5 })
		t.Logf("%s: down %s (agents and gateway on the survivors after %s); 5 calls succeeded within %s of its return",
			s.Name(), back.Sub(stopped).Round(time.Millisecond), moved.Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	}
	end := time.Now()
	fisktest.WaitFor(t, clusterWait, "calls to succeed after the rolling restart", func() bool { return rec.okSince(end) >= 10 })
	cancel()
	<-loadDone

	calls := rec.snapshot()
	sum := summarizeLoad(t, calls, started)
	t.Logf("%d calls over %s of rolling restart: %v", len(calls), time.Since(started).Round(time.Millisecond), sum)
	t.Logf("%d tools/list polls, %d without the remote tools or failed", lists, len(listErr))
	for _, e := range listErr {
		t.Error(e)
	}
	if lists == 0 {
		t.Error("tools/list polls: got none, want the list checked throughout")
	}
}
