package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/fiskv1test"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// busWatch counts what is published on the tool, stream and control
// subjects of every identity.
type busWatch struct{ *natstest.SubjectCounter }

func watchBus(tb testing.TB, nc *nats.Conn) busWatch {
	tb.Helper()
	return busWatch{natstest.CountSubjects(tb, nc, natsbus.ToolSubject("*"), natsbus.StreamSubject("*"), "choria.fisk-ai.control.>")}
}

// settle waits until subject was seen at least once, then returns every
// count since the last take.
func (w busWatch) settle(tb testing.TB, subject string) map[string]int {
	tb.Helper()
	fisktest.WaitFor(tb, 10*time.Second, "a message on "+subject, func() bool { return w.Seen(subject) > 0 })
	// A moment for anything else the call sent to arrive too.
	time.Sleep(100 * time.Millisecond)
	return w.Take()
}

// ppid returns the parent of pid, from /proc.
func ppid(tb testing.TB, pid int) int {
	tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("reading the stat of %d: %v", pid, err)
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, err := strconv.Atoi(fields[1])
	if err != nil {
		tb.Fatalf("parent of %d: %v", pid, err)
	}
	return p
}

// spawnArgs is the demo spawn's arguments: a grandchild that ignores
// SIGTERM, its PID written to pidfile, and a minute's sleep.
func spawnArgs(pidfile string) map[string]any {
	return map[string]any{"duration": "1m", "pidfile": pidfile}
}

// callSpawn starts an MCP call of name (a remote spawn) under ctx and
// returns the grandchild's PID and the call's outcome to come.
func callSpawn(tb testing.TB, ctx context.Context, c mcpCaller, name string) (int, <-chan error) {
	tb.Helper()
	pidfile := filepath.Join(tb.TempDir(), "child.pid")
	done := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = name
		req.Params.Arguments = spawnArgs(pidfile)
		res, err := c.CallTool(ctx, req)
		if err == nil && res.IsError {
			err = errors.New(mcpText(res))
		}
		done <- err
	}()
	return fisktest.WaitPIDFile(tb, pidfile), done
}

// waitCanceled waits for the outcome of a call its caller cancelled:
// context.Canceled, within 20 s.
func waitCanceled(tb testing.TB, done <-chan error) {
	tb.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			tb.Errorf("the cancelled call: got %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		tb.Fatal("the cancelled call did not return within 20s")
	}
}

type mcpCaller interface {
	CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
}

// TestMCPRemoteUnary drives `mcp-gateway serve` in front of one `a2a-agent
// serve`, both real, and watches the bus: a remote call without a
// progressToken is one request on the tool subject (nothing on the stream
// subject, no control message); one with a progressToken streams and
// relays progress; a unary call cancelled by the MCP client
// (notifications/cancelled) sends one cancel on the identity's shared
// control subject and the agent kills the command's process group within
// seconds.
func TestMCPRemoteUnary(t *testing.T) {
	t.Parallel()
	f := startStreamFleet(t)
	w := watchBus(t, f.ns.Connect(t))
	var notes progressNotes
	c := connectMCP(t, f.gw.URL, notes.notify)
	tool, stream, control := natsbus.ToolSubject("demo"), natsbus.StreamSubject("demo"), natsbus.CallControlSubject("demo")

	t.Run("no progressToken: unary", func(t *testing.T) {
		w.Take()
		if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "hi"})); cr.Output != "hi\n" {
			t.Fatalf("demo_echo: got %+v, want the echo", cr)
		}
		if got := w.settle(t, tool); got[tool] != 1 || got[stream] != 0 || len(got) != 1 {
			t.Errorf("on the bus: got %v, want one request on %s and nothing else", got, tool)
		}
	})

	t.Run("progressToken: streamed with progress", func(t *testing.T) {
		w.Take()
		req := mcp.CallToolRequest{}
		req.Params.Name = "demo_ticker"
		req.Params.Arguments = map[string]any{"every": "100ms", "count": 10}
		req.Params.Meta = &mcp.Meta{ProgressToken: "p-unary-test"}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if cr := mcpCommandResult(t, "demo_ticker", res); !strings.HasSuffix(cr.Output, "tick 10 of 10\n") {
			t.Fatalf("demo_ticker: got %+v", cr)
		}
		if n := len(notes.of("p-unary-test")); n < 2 {
			t.Errorf("progress notifications: got %d, want several", n)
		}
		if got := w.settle(t, stream); got[stream] != 1 || got[tool] != 0 {
			t.Errorf("on the bus: got %v, want one request on %s and none on %s", got, stream, tool)
		}
	})

	t.Run("notifications/cancelled kills the remote group", func(t *testing.T) {
		w.Take()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		pid, done := callSpawn(t, ctx, c, "demo_spawn")
		if got := w.Take(); got[tool] != 1 || got[stream] != 0 || got[control] != 0 {
			t.Errorf("on the bus before the cancel: got %v, want one unary request", got)
		}
		cancelled := time.Now()
		cancel()
		waitCanceled(t, done)
		// The demo's grandchild ignores SIGTERM: the agent's kill grace
		// (2 s) passes before SIGKILL.
		fisktest.WaitFor(t, 8*time.Second, "the agent to kill the cancelled command's group", func() bool { return fisktest.ProcessGone(pid) })
		t.Logf("MCP call cancelled; the remote grandchild was gone %s later", time.Since(cancelled).Round(time.Millisecond))
		if got := w.settle(t, control); got[control] != 1 || got[stream] != 0 {
			t.Errorf("on the bus: got %v, want one cancel on %s", got, control)
		}
		f.agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
		if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "after"})); cr.Output != "after\n" {
			t.Errorf("a call after the cancel: got %q, want the echo", cr.Output)
		}
	})
}

// TestMCPRemoteUnaryToolTimeout gives the gateway a tool_timeout of 3s: a
// unary remote call running past it is cancelled like a client's cancel,
// and the remote process group dies within seconds of the timeout rather
// than at the agent's own.
func TestMCPRemoteUnaryToolTimeout(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, "demo", 2))[0]
	const toolTimeout = 3 * time.Second
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             map[string]any{"tool_timeout": toolTimeout.String()},
		Extra:           map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	w := watchBus(t, b.ns.Connect(t))
	c := connectMCP(t, gw.URL, nil)

	started := time.Now()
	pid, done := callSpawn(t, t.Context(), c, "demo_spawn")
	var err error
	select {
	case err = <-done:
	case <-time.After(toolTimeout + 20*time.Second):
		t.Fatal("the call did not return after its tool_timeout")
	}
	if err == nil {
		t.Fatal("the call past tool_timeout: got a result, want an error")
	}
	t.Logf("answered %s after the call started: %v", time.Since(started).Round(time.Millisecond), err)
	fisktest.WaitFor(t, 8*time.Second, "the remote grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
	t.Logf("the remote grandchild was gone %s after the call started", time.Since(started).Round(time.Millisecond))
	control := natsbus.CallControlSubject("demo")
	if got := w.settle(t, control); got[natsbus.ToolSubject("demo")] != 1 || got[control] != 1 || got[natsbus.StreamSubject("demo")] != 0 {
		t.Errorf("on the bus: got %v, want one unary request and one cancel", got)
	}
	agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
}

// TestMCPRemoteUnaryTwoInstances runs two `a2a-agent serve` processes on
// one identity: a cancelled unary call's cancel goes to both, and the one
// running the command (the parent of its process) kills it and logs it;
// the other ignores it.
func TestMCPRemoteUnaryTwoInstances(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agents := b.startAgents(t, 2, b.demoAgent(t, "demo", 2))
	gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, "", "demo"))
	c := connectMCP(t, gw.URL, nil)

	// logged counts the cancels each agent, by PID, has logged so far.
	logged := map[int]int{}
	for round := 0; round < 8 && len(logged) < 2; round++ {
		ctx, cancel := context.WithCancel(t.Context())
		pid, done := callSpawn(t, ctx, c, "demo_spawn")
		// The grandchild's parent is the spawn command, whose parent is
		// the agent that runs it.
		runner := ppid(t, ppid(t, pid))
		var running, idle *fleettest.Process
		for _, a := range agents {
			if a.PID == runner {
				running = a
			} else {
				idle = a
			}
		}
		if running == nil || idle == nil {
			t.Fatalf("the command's agent %d is not one of %v", runner, pidsOf(agents))
		}
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the cancelled call did not return within 20s")
		}
		fisktest.WaitFor(t, 8*time.Second, "the remote grandchild to die", func() bool { return fisktest.ProcessGone(pid) })
		logged[runner]++
		want := logged[runner]
		fisktest.WaitFor(t, 10*time.Second, "the running agent to log the cancel", func() bool {
			return strings.Count(running.Output(), "call canceled by its caller") >= want
		})
		if got := strings.Count(idle.Output(), "call canceled by its caller"); got != logged[idle.PID] {
			t.Errorf("the idle agent %d logged %d cancels, want %d: it canceled a call it does not run", idle.PID, got, logged[idle.PID])
		}
	}
	t.Logf("cancels taken by agent PID: %v", logged)
}

// TestMCPRemoteNoUnaryCancel calls the tools of an agent whose card does
// not offer the unary cancel (a stand-in for Fisk AI's own v1 agents,
// which serve no streams either): the gateway calls them as before, one
// request on the tool subject, and nothing goes to a control subject.
func TestMCPRemoteNoUnaryCancel(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	v1 := fiskv1test.Start(t, b.ns.Connect(t), "legacy")
	gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, "", "legacy"))
	w := watchBus(t, b.ns.Connect(t))
	c := connectMCP(t, gw.URL, nil)
	tool := natsbus.ToolSubject("legacy")
	if cr := mcpCommandResult(t, "legacy_echo", callMCP(t, c, "legacy_echo", map[string]any{"message": "old path"})); cr.Output != "old path\n" {
		t.Fatalf("legacy_echo: got %+v", cr)
	}
	if got := w.settle(t, tool); got[tool] != 1 || len(got) != 1 {
		t.Errorf("on the bus: got %v, want one request on %s and nothing else", got, tool)
	}
	if n := v1.Calls.Load(); n != 1 {
		t.Errorf("calls the v1 agent answered: got %d, want 1", n)
	}
}

// TestMCPRemoteUnaryGatewayKilled kills the gateway (SIGKILL, by its PID)
// while a unary remote call runs: the gateway's tool requests name the
// subject it answers caller probes on, and once no one answers there the
// agent kills the command's process group within a heartbeat interval or
// two, records the call as its caller gone, and frees its only slot,
// rather than run the command on to its tool_timeout.
func TestMCPRemoteUnaryGatewayKilled(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, "demo", 1))[0]
	gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, "0", "demo"))
	c := connectMCP(t, gw.URL, nil)

	// The gateway names its probe subject once its first call has had
	// its reply and the server has taken the subscription.
	watcher := b.ns.Connect(t)
	requests, err := watcher.SubscribeSync(natsbus.ToolSubject("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	var probe string
	fisktest.WaitFor(t, 20*time.Second, "a tool request naming the gateway's probe subject", func() bool {
		if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "hi"})); cr.Output != "hi\n" {
			t.Fatalf("demo_echo: got %+v, want the echo", cr)
		}
		for {
			m, err := requests.NextMsg(100 * time.Millisecond)
			if err != nil {
				return probe != ""
			}
			if p := m.Header.Get(natsbus.CallerProbeHeader); p != "" {
				probe = p
			}
		}
	})
	t.Logf("the gateway's probe subject: %s", probe)

	pid, _ := callSpawn(t, t.Context(), c, "demo_spawn")
	killed := time.Now()
	gw.Kill(t)
	fisktest.WaitFor(t, 2*a2a.HeartbeatInterval+15*time.Second, "the agent to kill the abandoned command's group", func() bool { return fisktest.ProcessGone(pid) })
	t.Logf("gateway killed; the remote grandchild was gone %s later", time.Since(killed).Round(time.Millisecond))
	agent.WaitOutput(t, "caller gone: cancelling its call", 10*time.Second)
	agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if r, err := b.client.CallTool(ctx, "demo", "echo", json.RawMessage(`{"message":"after"}`)); err != nil || r.Output != "after\n" {
		t.Errorf("the only slot after the abandoned call: got %+v, %v, want the echo", r, err)
	}
}

// accountsPasswords are the passwords of the users of
// examples/nats-server-accounts.conf, which reads each from NAME_PASSWORD.
var accountsPasswords = map[string]string{"agent": "agent-pw-5e1a", "gateway": "gateway-pw-a93c"}

// accountsListen is the example's listen line, which the tests move to a
// random port.
const accountsListen = "listen: 127.0.0.1:4222"

// accountsFleet starts the NATS server of
// examples/nats-server-accounts.conf on a random loopback port (without
// the caller-probe export and import unless liveness is set), one
// `a2a-agent serve` on identity demo with one slot in the agents' account,
// and a gateway importing demo's tools in the gateways' account, with an
// MCP client of it.
func accountsFleet(tb testing.TB, liveness bool) (*natstest.Server, *fleettest.Process, *gatewayProcess, *client.Client) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("examples", "nats-server-accounts.conf"))
	if err != nil {
		tb.Fatal(err)
	}
	conf := string(raw)
	if !strings.Contains(conf, accountsListen) {
		tb.Fatalf("examples/nats-server-accounts.conf: got no %q line, want one for the test to move to a random port", accountsListen)
	}
	conf = strings.Replace(conf, accountsListen, "listen: 127.0.0.1:-1", 1)
	if !liveness {
		var kept []string
		for l := range strings.Lines(conf) {
			if !strings.Contains(l, `"_INBOX.*.@caller"`) {
				kept = append(kept, l)
			}
		}
		conf = strings.Join(kept, "")
	}
	var vars strings.Builder
	for _, user := range slices.Sorted(maps.Keys(accountsPasswords)) {
		fmt.Fprintf(&vars, "%s_PASSWORD: %q\n", strings.ToUpper(user), accountsPasswords[user])
	}
	ns := natstest.StartFromConfig(tb, vars.String()+conf)
	home := fleettest.NewHome(tb)
	home.AddContext(tb, ns, "agents", map[string]string{"user": "agent", "password": accountsPasswords["agent"]})
	home.AddContext(tb, ns, fleetContext, map[string]string{"user": "gateway", "password": accountsPasswords["gateway"]})
	b := &bus{ns: ns, home: home}
	demo := b.demoAgent(tb, "demo", 1)
	demo.NATSContext = "agents"
	agent := b.startAgents(tb, 1, demo)[0]
	gw := startGateway(tb, home.Env(), b.gatewayConfig(tb, "0", "demo"))
	return ns, agent, gw, connectMCP(tb, gw.URL, nil)
}

// awaitProbeSubject makes echo calls until a tool request that reaches the
// agents' account names the gateway's probe subject.
func awaitProbeSubject(tb testing.TB, ns *natstest.Server, c *client.Client) {
	tb.Helper()
	tap := ns.Connect(tb, nats.UserInfo("agent", accountsPasswords["agent"]))
	requests, err := tap.SubscribeSync(natsbus.ToolSubject("demo"))
	if err != nil {
		tb.Fatal(err)
	}
	// In place on the server before the first call.
	if err := tap.Flush(); err != nil {
		tb.Fatal(err)
	}
	fisktest.WaitFor(tb, 20*time.Second, "a tool request naming the gateway's probe subject", func() bool {
		if cr := mcpCommandResult(tb, "demo_echo", callMCP(tb, c, "demo_echo", map[string]any{"message": "hi"})); cr.Output != "hi\n" {
			tb.Fatalf("demo_echo: got %+v, want the echo", cr)
		}
		m, err := requests.NextMsg(5 * time.Second)
		if err != nil {
			tb.Fatalf("no tool request reached the agents' account: %v", err)
		}
		return m.Header.Get(natsbus.CallerProbeHeader) != ""
	})
}

// TestMCPRemoteUnaryAcrossAccounts: a gateway in another account than its
// agents, importing their services (examples/nats-server-accounts.conf
// without the caller-probe export), lists and calls their tools; a unary
// call longer than a heartbeat interval runs to its end, though the probe
// subject the gateway names is one of its own account, which the agent's
// probes cannot reach; so does a streamed one, whose service is exported
// with response_type stream; and a cancel crosses over to kill the
// command of a unary call.
func TestMCPRemoteUnaryAcrossAccounts(t *testing.T) {
	t.Parallel()
	ns, agent, gw, c := accountsFleet(t, false)
	awaitProbeSubject(t, ns, c)
	cr := mcpCommandResult(t, "demo_sleep", callMCP(t, c, "demo_sleep", map[string]any{"duration": "7s"}))
	if cr.ExitCode != 0 || !strings.HasPrefix(cr.Output, "slept 7s ") {
		t.Fatalf("demo_sleep: got %+v, want the sleep's result", cr)
	}
	agent.WaitOutput(t, "caller probes do not reach", 10*time.Second)

	// A call with a progress token is streamed, and outlives a heartbeat
	// too: the agent probes the stream's reply subject, which the import
	// maps back to the gateway.
	var notes progressNotes
	pc := connectMCP(t, gw.URL, notes.notify)
	req := mcp.CallToolRequest{}
	req.Params.Name = "demo_ticker"
	req.Params.Arguments = map[string]any{"every": "500ms", "count": 14}
	req.Params.Meta = &mcp.Meta{ProgressToken: "across"}
	res, err := pc.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("tools/call demo_ticker: %v", err)
	}
	if cr := mcpCommandResult(t, "demo_ticker", res); !strings.HasSuffix(cr.Output, "tick 14 of 14\n") {
		t.Fatalf("demo_ticker: got %+v, want 14 ticks", cr)
	}
	if got := notes.of("across"); len(got) < 3 {
		t.Errorf("progress notifications of the streamed call: got %d, want several", len(got))
	}

	// A unary call cancelled by its MCP client: the cancel crosses to the
	// agents' account, and the command, which would run a minute, is
	// killed, the grandchild that ignores SIGTERM with it.
	ctx, cancel := context.WithCancel(t.Context())
	grandchild, done := callSpawn(t, ctx, c, "demo_spawn")
	cancel()
	waitCanceled(t, done)
	fisktest.WaitFor(t, 20*time.Second, "the agent to kill the cancelled command's group", func() bool { return fisktest.ProcessGone(grandchild) })
	agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
}

// TestMCPRemoteUnaryGatewayKilledAcrossAccounts: with the gateways'
// caller-probe subjects exported to the agents' account as a service
// (examples/nats-server-accounts.conf as it is), the
// agent's probes reach a gateway of another account, and a unary call
// whose gateway is killed is cancelled as in one account.
func TestMCPRemoteUnaryGatewayKilledAcrossAccounts(t *testing.T) {
	t.Parallel()
	ns, agent, gw, c := accountsFleet(t, true)
	awaitProbeSubject(t, ns, c)
	pid, _ := callSpawn(t, t.Context(), c, "demo_spawn")
	// Alive for more than one probe: the call runs on.
	time.Sleep(a2a.HeartbeatInterval + a2a.HeartbeatInterval/2)
	if fisktest.ProcessGone(pid) {
		t.Fatal("the call stopped while its gateway answered the probes")
	}
	gw.Kill(t)
	fisktest.WaitFor(t, 2*a2a.HeartbeatInterval+15*time.Second, "the agent to kill the abandoned command's group", func() bool { return fisktest.ProcessGone(pid) })
	agent.WaitOutput(t, "caller gone: cancelling its call", 10*time.Second)
	if strings.Contains(agent.Stderr(), "caller probes do not reach") {
		t.Error("the agent found the exported probe subject unreachable")
	}
}
