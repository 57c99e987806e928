package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestMain builds the binaries once for every test of this package,
// whichever service it covers.
func TestMain(m *testing.M) { fleettest.Main(m) }

// fleetContext is the nats context name the tests' homes hold.
const fleetContext = "fleet"

// bus is an embedded NATS server, a home whose context points at it, and an
// A2A client on it.
type bus struct {
	ns     *natstest.Server
	home   *fleettest.Home
	client *a2a.Client
}

func newBus(tb testing.TB) *bus {
	tb.Helper()
	ns := natstest.Start(tb)
	home := fleettest.NewHome(tb)
	home.AddContext(tb, ns, fleetContext, nil)
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(tb)), a2a.Participant{Name: "tester"})
	if err != nil {
		tb.Fatal(err)
	}
	return &bus{ns: ns, home: home, client: c}
}

// demoAgent is the agent.yaml of an agent serving the demo app.
func (b *bus) demoAgent(tb testing.TB, identity string, maxConcurrent int) fleettest.Agent {
	tb.Helper()
	return fleettest.Agent{
		Identity:        identity,
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     fleetContext,
		A2A:             &fleettest.A2A{ServeTools: true, MaxConcurrentTools: maxConcurrent},
	}
}

// startAgents starts n `a2a-agent serve` processes from one config.
func (b *bus) startAgents(tb testing.TB, n int, a fleettest.Agent) []*fleettest.Process {
	tb.Helper()
	cfg := fleettest.WriteAgentConfig(tb, a)
	procs := make([]*fleettest.Process, n)
	for i := range procs {
		procs[i] = fleettest.StartAgent(tb, b.home.Env(), cfg)
	}
	return procs
}

var sleptRE = regexp.MustCompile(`slept \S+ pid=\d+ ppid=(\d+)`)

// servedBy returns the PID of the agent that ran a demo sleep: the parent
// of the command, which fiskdemo prints.
func servedBy(reply *a2a.ToolReply) (int, bool) {
	res, ok := reply.CommandResult()
	if !ok || res.ExitCode != 0 {
		return 0, false
	}
	m := sleptRE.FindStringSubmatch(res.Output)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, err == nil
}

type outcome struct {
	reply   *a2a.ToolReply
	err     error
	elapsed time.Duration
}

// callMany makes n concurrent calls of name with input, each bounded by
// timeout, and returns their outcomes once all have finished. done, when
// not nil, is incremented as each call finishes.
func callMany(c *a2a.Client, n int, identity, name, input string, timeout time.Duration, done *atomic.Int32) []outcome {
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			r, err := c.CallTool(ctx, identity, name, json.RawMessage(input))
			out[i] = outcome{r, err, time.Since(start)}
			if done != nil {
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return out
}

func pidsOf(procs []*fleettest.Process) []int {
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = p.PID
	}
	return out
}

// TestA2AAgentScaling runs three processes on one identity: NATS spreads
// 60 concurrent calls over all three (each command's parent is one of
// them), and they finish in well under what one process would take.
func TestA2AAgentScaling(t *testing.T) {
	const (
		calls         = 60
		sleep         = 200 * time.Millisecond
		maxConcurrent = 2
		agents        = 3
	)
	b := newBus(t)
	procs := b.startAgents(t, agents, b.demoAgent(t, "scaled", maxConcurrent))
	pids := pidsOf(procs)

	start := time.Now()
	outs := callMany(b.client, calls, "scaled", "sleep", `{"duration":"200ms"}`, 60*time.Second, nil)
	elapsed := time.Since(start)

	perPID := map[int]int{}
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("call %d: %v", i, o.err)
		}
		pid, ok := servedBy(o.reply)
		if !ok {
			t.Fatalf("call %d: got %+v, want a sleep result naming its parent", i, o.reply)
		}
		if !slices.Contains(pids, pid) {
			t.Fatalf("call %d: ran under pid %d, want one of the agents %v", i, pid, pids)
		}
		perPID[pid]++
	}
	serial := calls * sleep / maxConcurrent
	t.Logf("%d calls of %s over %d agents (%d slots each): %s; per agent %v; one agent alone needs at least %s",
		calls, sleep, agents, maxConcurrent, elapsed.Round(time.Millisecond), perPID, serial)
	for _, pid := range pids {
		if perPID[pid] == 0 {
			t.Errorf("agent pid %d: served no call, want some (spread %v)", pid, perPID)
		}
	}
	if elapsed >= serial {
		t.Errorf("elapsed: got %s, want under %s, one agent's serial time at its concurrency", elapsed, serial)
	}
}

// TestA2AAgentFailover kills one of three agents with SIGKILL while calls
// run: every call still ends within its timeout, with a result, an in-band
// error or ErrAgentUnavailable, and the calls made afterwards all go to the
// two survivors.
func TestA2AAgentFailover(t *testing.T) {
	const (
		calls   = 90
		timeout = 5 * time.Second
		// slack covers scheduling on a loaded machine past the deadline.
		slack = 2 * time.Second
	)
	b := newBus(t)
	procs := b.startAgents(t, 3, b.demoAgent(t, "resilient", 2))
	victim, survivors := procs[0], pidsOf(procs[1:])
	clientsBefore := b.ns.NumClients()

	var finished atomic.Int32
	results := make(chan []outcome, 1)
	go func() {
		results <- callMany(b.client, calls, "resilient", "sleep", `{"duration":"200ms"}`, timeout, &finished)
	}()
	// Mid-run: some calls have finished, most have not.
	deadline := time.Now().Add(30 * time.Second)
	for finished.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls finished in 30s", finished.Load())
		}
		<-time.After(10 * time.Millisecond)
	}
	killedAt := time.Now()
	victim.Kill(t)
	t.Logf("killed pid %d after %d of %d calls finished", victim.PID, finished.Load(), calls)

	// The server notices the dead connection at once on loopback; from
	// then on new calls can only reach the survivors.
	fisktest.WaitFor(t, 10*time.Second, "the server to drop the killed agent's connection", func() bool {
		return b.ns.NumClients() == clientsBefore-1
	})
	t.Logf("server dropped the connection %s after the kill", time.Since(killedAt).Round(time.Millisecond))

	var ok, inBand, unavailable, byVictim int
	for i, o := range <-results {
		if o.elapsed > timeout+slack {
			t.Errorf("call %d: took %s, want it to end within its %s timeout", i, o.elapsed, timeout)
		}
		switch {
		case o.err != nil && errors.Is(o.err, a2a.ErrAgentUnavailable):
			unavailable++
		case o.err != nil:
			t.Errorf("call %d: got error %v, want a reply or %v", i, o.err, a2a.ErrAgentUnavailable)
		case o.reply.IsError:
			inBand++
		default:
			pid, served := servedBy(o.reply)
			switch {
			case !served:
				t.Errorf("call %d: got %+v, want a sleep result", i, o.reply)
			case pid == victim.PID:
				byVictim++
			case !slices.Contains(survivors, pid):
				t.Errorf("call %d: ran under pid %d, not one of the agents", i, pid)
			}
			ok++
		}
	}
	t.Logf("during the kill: %d results (%d from the victim before it died), %d in-band errors, %d unavailable", ok, byVictim, inBand, unavailable)
	if ok == 0 {
		t.Errorf("results: got none, want the survivors to serve")
	}

	// New calls all succeed, on the two survivors.
	callSurvivors(t, b, "resilient", 30, survivors)
}

// callSurvivors makes n concurrent sleep calls of identity after one of
// its agents was killed: every one must succeed on one of survivors, and
// every survivor must serve some. It returns the calls each served.
func callSurvivors(tb testing.TB, b *bus, identity string, n int, survivors []int) map[int]int {
	tb.Helper()
	perPID := map[int]int{}
	for i, o := range callMany(b.client, n, identity, "sleep", `{"duration":"50ms"}`, 30*time.Second, nil) {
		if o.err != nil {
			tb.Fatalf("call %d after the kill: %v", i, o.err)
		}
		pid, served := servedBy(o.reply)
		if !served || !slices.Contains(survivors, pid) {
			tb.Fatalf("call %d after the kill: got %+v (pid %d), want a result from a survivor %v", i, o.reply, pid, survivors)
		}
		perPID[pid]++
	}
	if got := slices.Sorted(maps.Keys(perPID)); !slices.Equal(got, slices.Sorted(slices.Values(survivors))) {
		tb.Errorf("agents serving after the kill: got %v, want every survivor %v", got, survivors)
	}
	return perPID
}

// natsCLI runs the real nats CLI against the home's context.
func (b *bus) natsCLI(tb testing.TB, args ...string) fleettest.Result {
	tb.Helper()
	r := fleettest.Run(tb, b.home.Env(), fleettest.NATSCLI(tb), append([]string{"--context", fleetContext}, args...)...)
	if r.ExitCode != 0 {
		tb.Fatalf("nats %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
	}
	return r
}

func decodeJSON[T any](tb testing.TB, what, data string) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		tb.Fatalf("decoding %s: %v\n%s", what, err, data)
	}
	return v
}

// checkEndpoints asserts the three endpoints of identity with their
// subjects and queue group.
func checkEndpoints(tb testing.TB, what, identity string, got []micro.EndpointInfo) {
	tb.Helper()
	want := []struct{ name, subject string }{
		{"discovery", natsbus.DiscoverySubject(identity)},
		{"tool", natsbus.ToolSubject(identity)},
		{"stream", natsbus.StreamSubject(identity)},
	}
	if len(got) != len(want) {
		tb.Errorf("%s endpoints: got %+v, want %d", what, got, len(want))
		return
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Subject != w.subject || got[i].QueueGroup != identity {
			tb.Errorf("%s endpoint %d: got %s on %s in group %s, want %s on %s in group %s",
				what, i, got[i].Name, got[i].Subject, got[i].QueueGroup, w.name, w.subject, identity)
		}
	}
}

// TestA2AAgentNATSMicroCLI checks what an operator sees with the real nats
// CLI: both instances of an identity in `micro ls`, their endpoints and
// subjects in `micro info`, and the requests made in `micro stats`.
func TestA2AAgentNATSMicroCLI(t *testing.T) {
	b := newBus(t)
	procs := b.startAgents(t, 2, b.demoAgent(t, "observed", 2))
	pids := pidsOf(procs)

	ls := decodeJSON[[]micro.Info](t, "micro ls --json", b.natsCLI(t, "micro", "ls", "--json").Stdout)
	var instances []int
	for _, info := range ls {
		if info.Name != "observed" {
			continue
		}
		if info.Version != natsbus.ServiceVersion {
			t.Errorf("micro ls version: got %q, want %q", info.Version, natsbus.ServiceVersion)
		}
		checkEndpoints(t, "micro ls", "observed", info.Endpoints)
		pid, _ := strconv.Atoi(info.Metadata["fiskfleet.pid"])
		instances = append(instances, pid)
	}
	if got, want := slices.Sorted(slices.Values(instances)), slices.Sorted(slices.Values(pids)); !slices.Equal(got, want) {
		t.Errorf("micro ls instances of observed (by fiskfleet.pid): got %v, want %v", got, want)
	}
	if table := b.natsCLI(t, "micro", "ls").Stdout; strings.Count(table, "observed") != 2 {
		t.Errorf("micro ls table: got\n%s\nwant two rows for observed", table)
	}

	info := decodeJSON[struct {
		Info  micro.Info  `json:"info"`
		Stats micro.Stats `json:"stats"`
	}](t, "micro info --json", b.natsCLI(t, "micro", "info", "observed", "--json").Stdout)
	if info.Info.Name != "observed" {
		t.Errorf("micro info name: got %q, want observed", info.Info.Name)
	}
	checkEndpoints(t, "micro info", "observed", info.Info.Endpoints)
	text := b.natsCLI(t, "micro", "info", "observed").Stdout
	for _, want := range []string{"Name: discovery", "Subject: " + natsbus.DiscoverySubject("observed"), "Name: tool", "Subject: " + natsbus.ToolSubject("observed"), `in group "observed"`} {
		if !strings.Contains(text, want) {
			t.Errorf("micro info: got\n%s\nwant it to contain %q", text, want)
		}
	}

	const discoveries, toolCalls = 2, 5
	for range discoveries {
		if _, err := b.client.Discover(t.Context(), "observed"); err != nil {
			t.Fatalf("Discover: %v", err)
		}
	}
	for i, o := range callMany(b.client, toolCalls, "observed", "echo", `{"message":"counted"}`, 30*time.Second, nil) {
		if o.err != nil || o.reply.IsError {
			t.Fatalf("call %d: %+v, %v", i, o.reply, o.err)
		}
	}
	stats := decodeJSON[[]micro.Stats](t, "micro stats --json", b.natsCLI(t, "micro", "stats", "observed", "--json").Stdout)
	counts := map[string]int{}
	for _, s := range stats {
		for _, e := range s.Endpoints {
			counts[e.Name] += e.NumRequests
			if e.NumErrors != 0 {
				t.Errorf("micro stats %s errors: got %d, want 0", e.Name, e.NumErrors)
			}
		}
	}
	if got, want := len(stats), 2; got != want {
		t.Errorf("micro stats instances: got %d, want %d", got, want)
	}
	if got := counts["discovery"]; got != discoveries {
		t.Errorf("micro stats discovery requests: got %d, want %d", got, discoveries)
	}
	if got := counts["tool"]; got != toolCalls {
		t.Errorf("micro stats tool requests: got %d, want %d", got, toolCalls)
	}
}

// TestA2AAgentScrubsCredentials starts an agent whose own environment holds
// a model provider key and an operator-named secret: a command run for a
// caller sees neither, and still sees the rest of the environment.
func TestA2AAgentScrubsCredentials(t *testing.T) {
	b := newBus(t)
	a := b.demoAgent(t, "scrubbed", 2)
	a.CredentialEnv = []string{"DEMO_SECRET"}
	cfg := fleettest.WriteAgentConfig(t, a)
	fleettest.StartAgent(t, b.home.Env("ANTHROPIC_API_KEY=sk-test", "DEMO_SECRET=hunter2", "DEMO_PLAIN=visible"), cfg)

	tests := []struct{ name, want string }{
		{"ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY unset\n"},
		{"DEMO_SECRET", "DEMO_SECRET unset\n"},
		{"DEMO_PLAIN", "DEMO_PLAIN=visible\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := callMany(b.client, 1, "scrubbed", "getenv", `{"name":"`+tt.name+`"}`, 30*time.Second, nil)[0]
			if o.err != nil {
				t.Fatal(o.err)
			}
			if res, ok := o.reply.CommandResult(); !ok || res.Output != tt.want {
				t.Errorf("getenv %s: got %+v, want output %q", tt.name, o.reply, tt.want)
			}
		})
	}
}
