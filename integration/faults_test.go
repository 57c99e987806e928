package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// procStatusKiB reads a kB field of /proc/<pid>/status, such as VmRSS
// (resident memory now) or VmHWM (its peak so far).
func procStatusKiB(tb testing.TB, pid int, field string) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatalf("reading the status of pid %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			tb.Fatalf("/proc/%d/status %s: got %q, want a number of kB", pid, field, rest)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			tb.Fatalf("/proc/%d/status %s: %v", pid, field, err)
		}
		return n
	}
	tb.Fatalf("/proc/%d/status: no %s line in\n%s", pid, field, b)
	return 0
}

// settledRSS polls pid's VmRSS every 250 ms until two readings in a row
// differ by less than 256 KiB, or timeout passes, and returns the last.
func settledRSS(tb testing.TB, pid int, timeout time.Duration) int {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	last := procStatusKiB(tb, pid, "VmRSS")
	for time.Now().Before(deadline) {
		<-time.After(250 * time.Millisecond)
		now := procStatusKiB(tb, pid, "VmRSS")
		if d := now - last; d > -256 && d < 256 {
			return now
		}
		last = now
	}
	return last
}

// childPIDs lists the processes whose parent is pid, from the children
// lists of its threads: cheap enough to read every few milliseconds,
// unlike a scan of /proc. A child that exited and is not yet reaped is
// still listed, as it still holds its caller's slot.
func childPIDs(pid int) map[string]bool {
	lists, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	out := map[string]bool{}
	for _, l := range lists {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			out[f] = true
		}
	}
	return out
}

// childCount counts the children of pid that all ran at one instant: it
// reads the lists twice and keeps the children seen both times. A child
// lives from fork to reap without a gap, so each of those was alive when
// the first reading ended; a child reaped, and another forked, while one
// reading was under way cannot both be counted.
func childCount(pid int) int {
	first, second := childPIDs(pid), childPIDs(pid)
	n := 0
	for c := range first {
		if second[c] {
			n++
		}
	}
	return n
}

// sampleChildren counts pid's children every few milliseconds until stop
// is called, which returns how many samples saw each count.
func sampleChildren(pid int) (stop func() map[int]int) {
	seen := map[int]int{}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				seen[childCount(pid)]++
			}
		}
	}()
	return func() map[int]int {
		close(done)
		<-finished
		return seen
	}
}

// floodReply is what came back for one request of the flood.
type floodReply struct {
	// count is how many replies arrived for the request: at most one.
	count int
	at    time.Time
	reply *a2a.ToolReply
	// err is a reply that is not a valid tool.reply answering the
	// request, or a micro error header.
	err error
}

// TestFaultFlood publishes 10,000 echo calls at once at one agent with two
// slots, each with its own reply inbox and a deadline of its own. The
// agent can run only a few hundred of them before the deadlines pass;
// every request must still end in exactly one outcome (a correct result,
// an in-band error, or no reply by its deadline), no reply may arrive
// twice or answer another request, and the requests queued in the agent
// must not grow its resident memory by 20 MiB or more.
//
// The calls are published from one loop, encoded beforehand, rather than
// made by thousands of a2a.Client callers: under the race detector those
// callers would starve each other of the CPU the deadlines measure.
func TestFaultFlood(t *testing.T) {
	t.Parallel()
	const (
		identity  = "flooded"
		requests  = 10_000
		timeout   = 8 * time.Second
		maxGrowth = 20 << 10 // KiB
	)
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, identity, 2))[0]
	nc := b.ns.Connect(t)

	// Warm the agent up with a few calls, so the baseline includes the
	// code and buffers any call touches.
	for i, o := range callMany(b.client, 4, identity, "echo", `{"message":"warm"}`, 30*time.Second, nil) {
		if o.err != nil || o.reply.IsError {
			t.Fatalf("warm-up call %d: %+v, %v", i, o.reply, o.err)
		}
	}
	before := settledRSS(t, agent.PID, 5*time.Second)

	encodeStart := time.Now()
	self := a2a.Participant{Name: "flooder"}
	ids := make([]string, requests)
	payloads := make([][]byte, requests)
	for i := range payloads {
		req := a2a.NewToolRequest(self, identity, "echo", fmt.Appendf(nil, `{"message":"flood-%d"}`, i))
		data, err := a2a.Encode(req)
		if err != nil {
			t.Fatalf("encoding request %d: %v", i, err)
		}
		ids[i], payloads[i] = req.ID, data
	}
	encoding := time.Since(encodeStart)

	var (
		mu      sync.Mutex // guards replies and strays
		replies = make([]floodReply, requests)
		strays  []string
	)
	inbox := nats.NewInbox()
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		at := time.Now()
		reply := &a2a.ToolReply{}
		var rerr error
		if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
			rerr = fmt.Errorf("%w: %s %s", a2a.ErrRejected, code, m.Header.Get(micro.ErrorHeader))
		} else {
			rerr = a2a.Decode(m.Data, reply)
		}
		mu.Lock()
		defer mu.Unlock()
		i, err := strconv.Atoi(strings.TrimPrefix(m.Subject, inbox+"."))
		if err != nil || i < 0 || i >= requests {
			strays = append(strays, m.Subject)
			return
		}
		r := &replies[i]
		r.count++
		if r.count > 1 {
			return
		}
		if rerr == nil && reply.Request != ids[i] {
			rerr = fmt.Errorf("reply answers request %q, sent %q", reply.Request, ids[i])
		}
		r.at, r.reply, r.err = at, reply, rerr
	})
	if err != nil {
		t.Fatalf("subscribing to the reply inboxes: %v", err)
	}
	// The test must never drop a reply as a slow consumer.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}

	subject := natsbus.ToolSubject(identity)
	sent := make([]time.Time, requests)
	start := time.Now()
	for i, data := range payloads {
		sent[i] = time.Now()
		if err := nc.PublishRequest(subject, inbox+"."+strconv.Itoa(i), data); err != nil {
			t.Fatalf("publishing request %d: %v", i, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flushing the requests: %v", err)
	}
	publishing := time.Since(start)
	// Wait out the last deadline, or less if every request has its reply.
	last := sent[requests-1].Add(timeout)
	fisktest.WaitFor(t, time.Until(last)+10*time.Second, "every request's deadline to pass", func() bool {
		if time.Now().After(last) {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range replies {
			if r.count == 0 {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)

	mu.Lock()
	var answered, inBand, timedOut, lateReplies int
	var firstInBand string
	for i, r := range replies {
		switch {
		case r.count > 1:
			t.Errorf("request %d: got %d replies, want at most one", i, r.count)
		case r.count == 1 && r.err != nil:
			t.Errorf("request %d: got %v, want a tool.reply answering it", i, r.err)
		}
		switch {
		case r.count == 0 || r.at.After(sent[i].Add(timeout)):
			timedOut++
			if r.count > 0 {
				lateReplies++
			}
		case r.reply.IsError:
			inBand++
			if firstInBand == "" {
				firstInBand = r.reply.Output
			}
		default:
			res, ok := r.reply.CommandResult()
			if want := fmt.Sprintf("flood-%d\n", i); !ok || res.ExitCode != 0 || res.Output != want {
				t.Errorf("request %d: got %+v, want exit 0 and output %q", i, r.reply, want)
			}
			answered++
		}
	}
	if len(strays) > 0 {
		t.Errorf("replies to no request sent: got %d (%v), want none", len(strays), strays[:min(len(strays), 5)])
	}
	mu.Unlock()

	if sum := answered + inBand + timedOut; sum != requests {
		t.Errorf("outcomes: got %d answered + %d in-band errors + %d timed out = %d, want %d", answered, inBand, timedOut, sum, requests)
	}
	if answered == 0 {
		t.Errorf("answered: got 0, want the agent to serve some calls while flooded")
	}
	if inBand > 0 {
		t.Logf("first in-band error: %s", firstInBand)
	}
	taken := natstest.EndpointRequests(t, nc, identity, "tool")
	after := settledRSS(t, agent.PID, 10*time.Second)
	peak := procStatusKiB(t, agent.PID, "VmHWM")
	t.Logf("%d requests encoded in %s, published in %s, each with a %s deadline, at an agent with 2 slots: after %s, %d answered, %d in-band errors, %d timed out (%d of them answered late); the agent had taken %d tool requests off its queue",
		requests, encoding.Round(time.Millisecond), publishing.Round(time.Millisecond), timeout, elapsed.Round(time.Millisecond), answered, inBand, timedOut, lateReplies, taken)
	t.Logf("agent RSS: %d KiB before, %d KiB after (growth %d KiB), peak %d KiB (growth %d KiB)",
		before, after, after-before, peak, peak-before)
	if growth := after - before; growth >= maxGrowth {
		t.Errorf("agent RSS growth: got %d KiB, want under %d KiB", growth, maxGrowth)
	}

	// The flood left a backlog in the agent: it still stops cleanly.
	stopAt := time.Now()
	agent.Signal(t, syscall.SIGTERM)
	if code := agent.Wait(t, fleettest.StopGrace); code != 0 {
		t.Errorf("agent exit status after SIGTERM with a backlog: got %d, want 0", code)
	}
	stopped := time.Since(stopAt)
	// A round trip to the server: whatever the agent sent before it
	// exited has reached the subscription by the time it returns.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every request the agent had taken off NATS is answered before it
	// exits: the backlog is told the agent is stopping, not dropped. The
	// replies may still be waiting for the subscription's handler.
	fisktest.WaitFor(t, 20*time.Second, "the reply handler to take every reply delivered", func() bool {
		msgs, _, err := sub.Pending()
		return err == nil && msgs == 0
	})
	mu.Lock()
	var stopping, atStop, unanswered int
	for i, r := range replies {
		if r.count == 0 {
			unanswered++
			if unanswered <= 5 {
				t.Errorf("request %d: got no reply at all after the agent stopped, want one", i)
			}
			continue
		}
		if !r.at.After(stopAt) {
			continue
		}
		atStop++
		if r.err == nil && r.reply.IsError && strings.Contains(r.reply.Output, "stopping") {
			stopping++
		}
	}
	mu.Unlock()
	if unanswered > 0 {
		t.Errorf("requests never answered: got %d, want 0", unanswered)
	}
	t.Logf("agent stopped %s after SIGTERM with about %d requests queued; %d replies came after the signal, %d of them saying it is stopping",
		stopped.Round(time.Millisecond), requests-taken, atStop, stopping)
}

// killCall is one call made while an agent of the fleet is killed.
type killCall struct {
	issued  time.Time
	reply   *a2a.ToolReply
	err     error
	elapsed time.Duration
}

// TestFaultKillMidLoad kills one of three agents with SIGKILL while
// callers keep every slot of the fleet busy with sleeps. Each call issued
// ends in exactly one outcome: a result, an in-band error, or, for the
// calls the dead instance held, ErrAgentUnavailable naming the tool
// subject once the call's timeout passes. Calls made afterwards all
// succeed, on the two survivors.
func TestFaultKillMidLoad(t *testing.T) {
	t.Parallel()
	const (
		identity = "killable"
		// callers is twice the fleet's slots, so every instance has calls
		// running and calls waiting when one dies.
		callers = 12
		timeout = 5 * time.Second
		slack   = 5 * time.Second
	)
	b := newBus(t)
	procs := b.startAgents(t, 3, b.demoAgent(t, identity, 2))
	victim, survivors := procs[0], pidsOf(procs[1:])
	subject := natsbus.ToolSubject(identity)
	clientsBefore := b.ns.NumClients()

	var (
		mu       sync.Mutex // guards calls
		calls    []*killCall
		issued   atomic.Int32
		finished atomic.Int32
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := &killCall{issued: time.Now()}
				issued.Add(1)
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				r, err := b.client.CallTool(ctx, identity, "sleep", json.RawMessage(`{"duration":"300ms"}`))
				cancel()
				mu.Lock()
				c.reply, c.err, c.elapsed = r, err, time.Since(c.issued)
				mu.Unlock()
				finished.Add(1)
			}
		})
	}
	stopCallers := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopCallers)

	fisktest.WaitFor(t, 60*time.Second, "18 calls to finish before the kill", func() bool { return finished.Load() >= 18 })
	// Kill it while it runs a command, so some call is in flight on it.
	fisktest.WaitFor(t, 20*time.Second, "the victim to be running a call", func() bool { return childCount(victim.PID) > 0 })
	killedAt := time.Now()
	victim.Kill(t)
	t.Logf("killed pid %d with %d calls issued, %d finished", victim.PID, issued.Load(), finished.Load())
	fisktest.WaitFor(t, 10*time.Second, "the server to drop the killed agent's connection", func() bool {
		return b.ns.NumClients() == clientsBefore-1
	})
	// The server counts the connection out just before it removes its
	// subscriptions; calls issued a little later can only reach the
	// survivors.
	dropSeen := time.Now()
	droppedAt := dropSeen.Add(100 * time.Millisecond)
	t.Logf("server dropped the connection %s after the kill", dropSeen.Sub(killedAt).Round(time.Millisecond))
	// Keep the load on until every call issued before the drop has had
	// its full timeout, then stop issuing.
	fisktest.WaitFor(t, timeout+slack+10*time.Second, "the calls issued before the drop to end", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range calls {
			if c.issued.Before(droppedAt) && c.elapsed == 0 {
				return false
			}
		}
		return true
	})
	stopCallers()

	var ok, byVictim, afterDrop, inBand, unavailable int
	for i, c := range calls {
		if c.elapsed > timeout+slack {
			t.Errorf("call %d: took %s, want it to end within its %s timeout", i, c.elapsed, timeout)
		}
		switch {
		case c.err != nil && errors.Is(c.err, a2a.ErrAgentUnavailable):
			unavailable++
			if !strings.Contains(c.err.Error(), subject) {
				t.Errorf("call %d: got %q, want the error to name %s", i, c.err, subject)
			}
			if c.issued.After(droppedAt) {
				t.Errorf("call %d, issued after the server dropped the victim: got %v, want a result from a survivor", i, c.err)
			}
		case c.err != nil:
			t.Errorf("call %d: got error %v, want a reply or %v", i, c.err, a2a.ErrAgentUnavailable)
		case c.reply == nil:
			t.Errorf("call %d: got no outcome, want exactly one", i)
		case c.reply.IsError:
			inBand++
			t.Logf("call %d: in-band error %q", i, c.reply.Output)
		default:
			pid, served := servedBy(c.reply)
			switch {
			case !served:
				t.Errorf("call %d: got %+v, want a sleep result", i, c.reply)
			case pid == victim.PID:
				byVictim++
				if c.issued.After(killedAt) {
					t.Errorf("call %d: issued after the kill, got a result from the dead pid %d", i, pid)
				}
			case !slices.Contains(survivors, pid):
				t.Errorf("call %d: ran under pid %d, not one of the agents", i, pid)
			}
			if c.issued.After(droppedAt) {
				afterDrop++
			}
			ok++
		}
	}
	total := int(issued.Load())
	t.Logf("%d calls issued: %d results (%d from the victim before it died, %d issued after the drop), %d in-band errors, %d unavailable",
		total, ok, byVictim, afterDrop, inBand, unavailable)
	if got := ok + inBand + unavailable; got != total || len(calls) != total {
		t.Errorf("outcomes: got %d (%d recorded calls), want one per issued call, %d", got, len(calls), total)
	}
	if unavailable == 0 {
		t.Errorf("unavailable: got 0, want the calls the killed instance held to fail with %v", a2a.ErrAgentUnavailable)
	}

	perPID := callSurvivors(t, b, identity, 24, survivors)
	t.Logf("24 calls after the kill, per survivor: %v", perPID)
}

// sleptPIDsRE matches a demo sleep's report: its own PID and its parent's
// (and, on Linux, its timer slack).
var sleptPIDsRE = regexp.MustCompile(`^slept \S+ pid=(\d+) ppid=(\d+)( slack=\d+)?\n$`)

// TestFaultSessions opens 100 MCP sessions on one gateway with two slots
// and has each call sleep at once. The gateway queues a call that finds
// every slot busy until one frees (it answers "was not run" in-band only
// when the request ends while waiting), so every call succeeds, no call
// gets a protocol error, and the gateway never runs more than two
// commands at a time while keeping both slots busy.
func TestFaultSessions(t *testing.T) {
	t.Parallel()
	const (
		sessions      = 100
		maxConcurrent = 2
		sleep         = 100 * time.Millisecond
	)
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "sessions",
		ApplicationPath: fleettest.FiskDemo(t),
		IncludeTools:    []string{"sleep"},
		MCP:             map[string]any{"max_concurrent_tools": maxConcurrent},
	})
	gw := startGateway(t, fleettest.NewHome(t).Env(), cfg)

	// Session-based protocol revisions: each client holds its own
	// Mcp-Session-Id.
	clients := make([]*client.Client, sessions)
	ids := map[string]bool{}
	for i := range clients {
		clients[i] = connectLegacyMCP(t, gw.URL)
		ids[clients[i].GetSessionId()] = true
	}
	if len(ids) != sessions || ids[""] {
		t.Fatalf("session ids: got %d distinct (empty among them: %t), want %d", len(ids), ids[""], sessions)
	}

	type result struct {
		res     *mcp.CallToolResult
		err     error
		elapsed time.Duration
	}
	results := make([]result, sessions)
	stopSampling := sampleChildren(gw.PID)
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = "sleep"
			req.Params.Arguments = map[string]any{"duration": sleep.String()}
			began := time.Now()
			res, err := c.CallTool(ctx, req)
			results[i] = result{res, err, time.Since(began)}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	concurrency := stopSampling()

	var ok, busy, protocolErrors, otherErrors int
	var slowest time.Duration
	pids := map[string]bool{}
	for i, r := range results {
		slowest = max(slowest, r.elapsed)
		switch {
		case r.err != nil:
			protocolErrors++
			t.Errorf("session %d: got protocol error %v, want a result", i, r.err)
		case r.res.IsError && strings.Contains(mcpText(r.res), "was not run"):
			busy++
		case r.res.IsError:
			otherErrors++
			t.Errorf("session %d: got isError %q, want a sleep result", i, mcpText(r.res))
		default:
			cr := mcpCommandResult(t, "sleep", r.res)
			m := sleptPIDsRE.FindStringSubmatch(cr.Output)
			if cr.ExitCode != 0 || m == nil || m[2] != strconv.Itoa(gw.PID) {
				t.Errorf("session %d: got exit %d output %q, want a sleep the gateway (pid %d) ran", i, cr.ExitCode, cr.Output, gw.PID)
				continue
			}
			pids[m[1]] = true
			ok++
		}
	}
	logged := strings.Count(gw.Stderr(), "outcome=ok")
	peak := slices.Max(slices.Collect(maps.Keys(concurrency)))
	t.Logf("%d sessions calling sleep %s through %d slots: %s in all, slowest call %s; %d results (%d distinct command pids), %d busy answers, %d protocol errors, %d other errors; gateway logged %d ok calls",
		sessions, sleep, maxConcurrent, elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond), ok, len(pids), busy, protocolErrors, otherErrors, logged)
	t.Logf("commands running at once (count: samples): %v", concurrency)
	if ok != sessions || len(pids) != sessions {
		t.Errorf("results: got %d from %d distinct commands, want %d each", ok, len(pids), sessions)
	}
	if busy != 0 {
		t.Errorf("busy answers: got %d, want 0: a call waits for a slot while its request lasts", busy)
	}
	if logged != sessions {
		t.Errorf("gateway log: got %d calls with outcome=ok, want %d", logged, sessions)
	}
	if peak != maxConcurrent {
		t.Errorf("most commands running at once: got %d, want the cap, %d", peak, maxConcurrent)
	}
	// With two slots the sleeps alone take half their sum; slowness can
	// only add to that.
	if floor := sessions * sleep / maxConcurrent; elapsed < floor {
		t.Errorf("elapsed: got %s, want at least %s, the sleeps' sum over %d slots", elapsed, floor, maxConcurrent)
	}
}

// TestFaultNATSLost takes the NATS server away under a gateway that
// imports an agent's tools, then brings it back on the same port. While
// it is down the remote tools stay listed, local tools keep working, and a
// remote call fails in-band naming the host within the tool timeout;
// once the gateway and the agent have reconnected, remote calls succeed
// again.
func TestFaultNATSLost(t *testing.T) {
	t.Parallel()
	const toolTimeout = 5 * time.Second
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, "demo", 2))[0]
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		IncludeTools:    []string{"echo"},
		MCP:             map[string]any{"tool_timeout": toolTimeout.String()},
		Extra: map[string]any{
			"remote_tools":            []map[string]any{{"host": "demo", "include": map[string]any{"tools": []string{"echo", "fail"}}}},
			"remote_refresh_interval": "1s",
		},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	c := connectMCP(t, gw.URL, nil)
	want := []string{"demo_echo", "echo", "fail"}
	if got := listNames(t, c); !slices.Equal(got, want) {
		t.Fatalf("tools/list: got %v, want %v", got, want)
	}
	remoteEcho := func(t *testing.T, msg string) *mcp.CallToolResult {
		t.Helper()
		return callMCP(t, c, "demo_echo", map[string]any{"message": msg})
	}
	if cr := mcpCommandResult(t, "demo_echo", remoteEcho(t, "before")); cr.Output != "before\n" {
		t.Fatalf("demo_echo before the outage: got %q, want %q", cr.Output, "before\n")
	}

	tcp, ok := b.ns.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("server address: got %v, want a TCP address", b.ns.Addr())
	}
	natsPort := tcp.Port
	downAt := time.Now()
	b.ns.Server.Shutdown()
	b.ns.Server.WaitForShutdown()
	for _, p := range []*fleettest.Process{gw.Process, agent} {
		p.WaitOutput(t, "nats disconnected", 10*time.Second)
	}

	t.Run("while the server is down", func(t *testing.T) {
		if got := listNames(t, c); !slices.Equal(got, want) {
			t.Errorf("tools/list: got %v, want %v kept", got, want)
		}
		if cr := mcpCommandResult(t, "echo", callMCP(t, c, "echo", map[string]any{"message": "local"})); cr.Output != "local\n" {
			t.Errorf("local echo: got %q, want %q", cr.Output, "local\n")
		}
		start := time.Now()
		res := remoteEcho(t, "lost")
		took := time.Since(start)
		t.Logf("demo_echo while down: isError %t after %s: %s", res.IsError, took.Round(time.Millisecond), mcpText(res))
		// The gateway does not wait out tool_timeout: a call it cannot
		// send fails once the reconnect wait is over, saying why.
		if msg := mcpText(res); !res.IsError || !strings.Contains(msg, "demo") || !strings.Contains(msg, "unavailable") || !strings.Contains(msg, "not connected to NATS") {
			t.Errorf("demo_echo: got isError %t %q, want isError saying host demo is unavailable, not connected to NATS", res.IsError, msg)
		}
		if limit := toolTimeout + 10*time.Second; took > limit {
			t.Errorf("demo_echo: took %s, want an answer within the tool timeout %s (limit %s)", took, toolTimeout, limit)
		}
	})

	natstest.StartWithOptions(t, server.Options{Port: natsPort})
	upAt := time.Now()
	t.Logf("server down for %s, back on port %d", upAt.Sub(downAt).Round(time.Millisecond), natsPort)
	for _, p := range []*fleettest.Process{gw.Process, agent} {
		p.WaitOutput(t, "nats reconnected", 30*time.Second)
	}
	t.Logf("gateway and agent reconnected %s after the restart", time.Since(upAt).Round(time.Millisecond))

	t.Run("after the server is back", func(t *testing.T) {
		attempts := 0
		fisktest.WaitFor(t, 30*time.Second, "demo_echo to succeed after the restart", func() bool {
			attempts++
			return !remoteEcho(t, "back").IsError
		})
		t.Logf("demo_echo succeeded %s after the restart, on attempt %d", time.Since(upAt).Round(time.Millisecond), attempts)
		for i := range 5 {
			msg := fmt.Sprintf("again-%d", i)
			if cr := mcpCommandResult(t, "demo_echo", remoteEcho(t, msg)); cr.Output != msg+"\n" {
				t.Errorf("demo_echo %d: got %q, want %q", i, cr.Output, msg+"\n")
			}
		}
		if got := listNames(t, c); !slices.Equal(got, want) {
			t.Errorf("tools/list: got %v, want %v", got, want)
		}
	})

	// Stop both while the server is up, so neither waits on a lost
	// connection at cleanup.
	for _, p := range []*fleettest.Process{gw.Process, agent} {
		p.Signal(t, syscall.SIGTERM)
		if code := p.Wait(t, fleettest.StopGrace); code != 0 {
			t.Errorf("%s pid %d: exit status after SIGTERM: got %d, want 0", p.Name, p.PID, code)
		}
	}
}
