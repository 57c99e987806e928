package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// gatewayProcess is a running `mcp-gateway serve` and the MCP URL it
// printed in its `claude mcp add` line.
type gatewayProcess struct {
	*fleettest.Process
	URL string
}

// addLineRE matches the ready-to-paste line the gateway prints once it
// listens; with auth_token_env set, the line ends in
// ` --header "Authorization: Bearer $ENV"`.
var addLineRE = regexp.MustCompile(`claude mcp add --transport http \S+ (http://\S+/mcp)(?: --header "[^"\n]*")?\n`)

// startGateway starts `mcp-gateway serve --config cfg --port 0` in env and
// waits for the URL it prints, failing tb with its output if it exits or
// takes longer than [fleettest.ReadyTimeout].
func startGateway(tb testing.TB, env []string, cfg string) *gatewayProcess {
	tb.Helper()
	return startGatewayBinary(tb, env, fleettest.MCPGateway(tb), cfg)
}

// startGatewayBinary is [startGateway] of the mcp-gateway binary at bin.
func startGatewayBinary(tb testing.TB, env []string, bin, cfg string) *gatewayProcess {
	tb.Helper()
	p := fleettest.Start(tb, env, bin, "serve", "--config", cfg, "--port", "0")
	fisktest.WaitFor(tb, fleettest.ReadyTimeout, "mcp-gateway to print its claude mcp add line", func() bool {
		return addLineRE.MatchString(p.Stdout()) || p.Exited()
	})
	m := addLineRE.FindStringSubmatch(p.Stdout())
	if m == nil {
		tb.Fatalf("mcp-gateway (pid %d) exited with status %d before listening:\n%s", p.PID, p.ExitCode(), p.Output())
	}
	return &gatewayProcess{Process: p, URL: m[1]}
}

// connectMCP starts an initialised mcp-go client of url. With notify set it
// speaks the legacy era over a continuously listening stream, the way an
// IDE keeps one open, and hands every server notification to notify.
func connectMCP(tb testing.TB, url string, notify func(mcp.JSONRPCNotification)) *client.Client {
	tb.Helper()
	var (
		topts []transport.StreamableHTTPCOption
		copts []client.ClientOption
	)
	if notify != nil {
		topts = append(topts, transport.WithContinuousListening())
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	return newMCPClient(tb, url, topts, copts, notify)
}

// connectLegacyMCP starts an initialised mcp-go client of url on the
// 2025-11-25 era: one session, which the gateway keeps for all its
// requests, as the clients in use today open.
func connectLegacyMCP(tb testing.TB, url string) *client.Client {
	tb.Helper()
	return newMCPClient(tb, url, nil, []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}, nil)
}

// listenMCP starts an initialised mcp-go client of url on the 2026-07-28
// era, where there is no standalone stream and a client hears nothing it
// did not ask for, and opens a subscriptions/listen stream for tools list
// changes, the way a modern IDE asks for them. It returns once the gateway
// has acknowledged that subscription, failing tb if the client ends up on
// another era or the gateway declines; notify gets every later server
// notification. The stream is closed on cleanup.
func listenMCP(tb testing.TB, url string, notify func(mcp.JSONRPCNotification)) *client.Client {
	tb.Helper()
	acks := make(chan mcp.JSONRPCNotification, 1)
	c := newMCPClient(tb, url, nil, nil, func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationSubscriptionsAcknowledged {
			select {
			case acks <- n:
			default:
			}
			return
		}
		notify(n)
	})
	if v := c.ProtocolVersion(); !mcp.IsModernProtocol(v) {
		tb.Fatalf("protocol version: got %q, want %s or later", v, mcp.ProtocolVersion20260728)
	}
	listenErr := make(chan error, 1)
	stop, err := c.ListenAsync(tb.Context(), mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { listenErr <- err })
	if err != nil {
		tb.Fatalf("subscriptions/listen on %s: %v", url, err)
	}
	tb.Cleanup(stop)
	select {
	case ack := <-acks:
		// The gateway grants only what it advertises: without the
		// tools listChanged capability it would acknowledge nothing.
		granted, _ := ack.Params.AdditionalFields["notifications"].(map[string]any)
		if granted["toolsListChanged"] != true {
			tb.Fatalf("subscriptions/acknowledged: got notifications %v, want toolsListChanged true", ack.Params.AdditionalFields["notifications"])
		}
	case err := <-listenErr:
		tb.Fatalf("subscriptions/listen on %s: got %v before the acknowledgement, want an open stream", url, err)
	case <-time.After(10 * time.Second):
		tb.Fatalf("subscriptions/listen on %s: got no notifications/subscriptions/acknowledged within 10s", url)
	}
	return c
}

// newMCPClient starts an mcp-go client of url with the given options,
// hands server notifications to notify when it is set, and initialises it,
// letting the client negotiate the era.
func newMCPClient(tb testing.TB, url string, topts []transport.StreamableHTTPCOption, copts []client.ClientOption, notify func(mcp.JSONRPCNotification)) *client.Client {
	tb.Helper()
	// The transport logs reconnects and the gateway ending its stream; the
	// log is shown only when the test fails.
	clientLog := &fisktest.Buffer{}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("mcp-go client log for %s:\n%s", url, clientLog)
		}
	})
	topts = append(slices.Clone(topts), transport.WithHTTPLogger(slog.New(slog.NewTextHandler(clientLog, nil))))
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		tb.Fatalf("creating the MCP transport for %s: %v", url, err)
	}
	c := client.NewClient(tr, copts...)
	if notify != nil {
		c.OnNotification(notify)
	}
	if err := c.Start(tb.Context()); err != nil {
		tb.Fatalf("starting the MCP client for %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "integration-test", Version: "0"}
	if _, err := c.Initialize(tb.Context(), req); err != nil {
		tb.Fatalf("initialising the MCP client for %s: %v", url, err)
	}
	return c
}

// listNames returns the names tools/list gives, sorted.
func listNames(tb testing.TB, c *client.Client) []string {
	tb.Helper()
	res, err := c.ListTools(tb.Context(), mcp.ListToolsRequest{})
	if err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// callMCP calls name with args, failing tb on a protocol error: every
// failure of a tool must come back in-band.
func callMCP(tb testing.TB, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	tb.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(tb.Context(), req)
	if err != nil {
		tb.Fatalf("tools/call %s: got protocol error %v, want a result", name, err)
	}
	return res
}

// requireHiddenAsUnknown calls name, a tool the caller's policy hides,
// and fails tb unless the answer is the one a name no one serves gets,
// byte for byte apart from the name: a caller must not be able to probe
// which hidden tools exist.
func requireHiddenAsUnknown(tb testing.TB, c *client.Client, name string, args map[string]any) {
	tb.Helper()
	call := func(n string) error {
		req := mcp.CallToolRequest{}
		req.Params.Name = n
		req.Params.Arguments = args
		res, err := c.CallTool(tb.Context(), req)
		if err == nil {
			tb.Fatalf("tools/call %s: got a result %q, want the protocol error of an unknown tool", n, mcpText(res))
		}
		return err
	}
	hidden, unknown := call(name), call("no_such_tool_at_all")
	if strings.ReplaceAll(hidden.Error(), name, "NAME") != strings.ReplaceAll(unknown.Error(), "no_such_tool_at_all", "NAME") || !strings.Contains(hidden.Error(), "not found") {
		tb.Errorf("tools/call of the hidden %s: got %q, want what an unknown name gets, %q", name, hidden, unknown)
	}
}

// mcpText joins a result's text content.
func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpCommandResult decodes a command tool's successful result.
func mcpCommandResult(tb testing.TB, name string, res *mcp.CallToolResult) tool.CommandResult {
	tb.Helper()
	if res.IsError {
		tb.Fatalf("%s: got isError %q, want a command result", name, mcpText(res))
	}
	var cr tool.CommandResult
	if err := json.Unmarshal([]byte(mcpText(res)), &cr); err != nil {
		tb.Fatalf("%s: decoding the command result %q: %v", name, mcpText(res), err)
	}
	return cr
}

// jsonShape lists a JSON object's top-level keys in the order they appear,
// each with the kind of its value ("exit_code:number"), so two results
// compare by shape whatever their values.
func jsonShape(tb testing.TB, what string, data []byte) []string {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		tb.Fatalf("%s: got %q, want a JSON object", what, data)
	}
	var shape []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			tb.Fatalf("%s: reading a key of %q: %v", what, data, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			tb.Fatalf("%s: reading the value of %v in %q: %v", what, key, data, err)
		}
		shape = append(shape, fmt.Sprintf("%v:%s", key, jsonKind(v)))
	}
	return shape
}

func jsonKind(v json.RawMessage) string {
	switch v[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// infoServed parses the SERVED table of an info listing into name ->
// origin.
func infoServed(tb testing.TB, listing string) map[string]string {
	tb.Helper()
	served := map[string]string{}
	in := false
	for _, line := range strings.Split(listing, "\n") {
		switch {
		case strings.HasPrefix(line, "SERVED ("):
			in = true
		case in && strings.TrimSpace(line) == "":
			return served
		case in:
			f := strings.Fields(line)
			if len(f) < 2 {
				tb.Fatalf("info: got row %q, want a name and an origin", line)
			}
			served[f[0]] = f[1]
		}
	}
	if !in {
		tb.Fatalf("info: got no SERVED table in\n%s", listing)
	}
	return served
}

// remoteFleet is a bus with the agents of TestRemoteTools: two processes on
// identity demo serving every ungated fiskdemo command, and one on ops
// serving only cluster_node_status and sleep.
type remoteFleet struct {
	*bus
	demo []*fleettest.Process
	ops  *fleettest.Process
}

func startRemoteFleet(tb testing.TB) *remoteFleet {
	tb.Helper()
	b := newBus(tb)
	demo := b.demoAgent(tb, "demo", 2)
	demo.ConfirmTags = []string{"impact:rw"}
	ops := b.demoAgent(tb, "ops", 2)
	ops.ConfirmTags = []string{"impact:rw"}
	ops.IncludeTools = []string{"cluster_node_status", "sleep"}
	return &remoteFleet{bus: b, demo: b.startAgents(tb, 2, demo), ops: b.startAgents(tb, 1, ops)[0]}
}

// gatewayConfig writes the agent.yaml of a gateway on identity gw that
// serves fiskdemo locally except getenv and cluster_*, and imports hosts.
func (b *bus) gatewayConfig(tb testing.TB, refresh string, hosts ...string) string {
	tb.Helper()
	return b.gatewayConfigMCP(tb, map[string]any{}, refresh, hosts...)
}

// gatewayConfigMCP is gatewayConfig with mcp as expose.agent.mcp.
func (b *bus) gatewayConfigMCP(tb testing.TB, mcp map[string]any, refresh string, hosts ...string) string {
	tb.Helper()
	remote := make([]map[string]any, len(hosts))
	for i, h := range hosts {
		remote[i] = map[string]any{"host": h}
	}
	extra := map[string]any{"remote_tools": remote}
	if refresh != "" {
		extra["remote_refresh_interval"] = refresh
	}
	return fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     fleetContext,
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             mcp,
		Extra:           extra,
	})
}

// TestRemoteTools drives the gateway as the front door to the fleet: an
// mcp-go client, `mcp-gateway serve`, NATS and three `a2a-agent serve`
// processes on two identities, all real.
func TestRemoteTools(t *testing.T) {
	t.Parallel()
	f := startRemoteFleet(t)
	cfg := f.gatewayConfig(t, "", "demo", "ops")
	gw := startGateway(t, f.home.Env(), cfg)
	c := connectMCP(t, gw.URL, nil)
	names := listNames(t, c)

	t.Run("names", func(t *testing.T) {
		want := []string{
			// The gateway's own commands keep their names; its deploy
			// (ai:confirm) is served gated, asking over MCP.
			// noop has no description: served on neither surface.
			"deploy", "echo", "fail", "flood", "restart", "sleep", "spawn", "ticker",
			// demo's tools that a local tool holds are prefixed.
			"demo_echo", "demo_fail", "demo_flood", "demo_spawn", "demo_ticker",
			// sleep is local and on both hosts; cluster_node_status is on
			// both hosts only: each host's copy is prefixed.
			"demo_sleep", "ops_sleep",
			"demo_cluster_node_status", "ops_cluster_node_status",
			// Only demo has getenv and the gateway excludes it: bare.
			"getenv",
		}
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("tools/list: got %v, want %v", names, want)
		}
		for _, n := range names {
			if strings.Contains(n, "destroy") {
				t.Errorf("tools/list: got %q, want destroy (ai:deny) nowhere", n)
			}
		}
		// The agents refuse gated commands over A2A (deploy is ai:confirm,
		// restart carries confirm_tags impact:rw), so none is importable.
		for _, gated := range []string{"demo_deploy", "ops_deploy", "demo_restart", "ops_restart"} {
			if slices.Contains(names, gated) {
				t.Errorf("tools/list: got %s, want no gated command of an agent imported", gated)
			}
		}
	})

	t.Run("calls reach the right host", func(t *testing.T) {
		demoPIDs, opsPID := pidsOf(f.demo), f.ops.PID
		tests := []struct {
			name     string
			args     map[string]any
			want     string // the output; unchecked when byPIDs is set
			byPIDs   []int  // the agents one of which must have run it
			wantExit int
		}{
			{name: "echo", args: map[string]any{"message": "local"}, want: "local\n"},
			{name: "demo_echo", args: map[string]any{"message": "remote", "upper": true}, want: "REMOTE\n"},
			{name: "getenv", args: map[string]any{"name": "FISKFLEET_UNSET_VARIABLE"}, want: "FISKFLEET_UNSET_VARIABLE unset\n"},
			{name: "ops_cluster_node_status", args: map[string]any{"node": "n7"}, want: "node n7: status ok\n"},
			{name: "demo_cluster_node_status", args: map[string]any{"node": "n8"}, want: "node n8: status ok\n"},
			{name: "demo_sleep", args: map[string]any{"duration": "1ms"}, byPIDs: demoPIDs},
			{name: "ops_sleep", args: map[string]any{"duration": "1ms"}, byPIDs: []int{opsPID}},
			{name: "demo_fail", args: map[string]any{"code": 4}, want: "about to fail\nfailing with exit code 4\n", wantExit: 4},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := callMCP(t, c, tt.name, tt.args)
				// A non-zero exit is a result carrying the code, not isError.
				cr := mcpCommandResult(t, tt.name, res)
				if cr.ExitCode != tt.wantExit {
					t.Errorf("exit_code: got %d, want %d (output %q)", cr.ExitCode, tt.wantExit, cr.Output)
				}
				if tt.byPIDs == nil {
					if cr.Output != tt.want {
						t.Errorf("output: got %q, want %q", cr.Output, tt.want)
					}
					return
				}
				m := sleptRE.FindStringSubmatch(cr.Output)
				if m == nil {
					t.Fatalf("output: got %q, want a sleep report", cr.Output)
				}
				if pid, _ := strconv.Atoi(m[1]); !slices.Contains(tt.byPIDs, pid) {
					t.Errorf("run by pid %d, want one of %v", pid, tt.byPIDs)
				}
			})
		}
	})

	t.Run("a remote result has the local shape", func(t *testing.T) {
		args := map[string]any{"code": 4}
		local, remote := callMCP(t, c, "fail", args), callMCP(t, c, "demo_fail", args)
		for _, r := range []struct {
			name string
			res  *mcp.CallToolResult
		}{{"fail", local}, {"demo_fail", remote}} {
			if r.res.IsError {
				t.Fatalf("%s: got isError %q, want a result with exit code 4", r.name, mcpText(r.res))
			}
		}
		wantShape := []string{"command:string", "exit_code:number", "output:string", "truncated:boolean"}
		shapes := []struct {
			what      string
			got, want []string
		}{
			{"local text", jsonShape(t, "fail text", []byte(mcpText(local))), wantShape},
			{"remote text", jsonShape(t, "demo_fail text", []byte(mcpText(remote))), wantShape},
			{"local structured content", jsonShape(t, "fail structured content", local.RawStructuredContent), wantShape},
			{"remote structured content", jsonShape(t, "demo_fail structured content", remote.RawStructuredContent), wantShape},
		}
		for _, s := range shapes {
			if !slices.Equal(s.got, s.want) {
				t.Errorf("%s: got %v, want %v", s.what, s.got, s.want)
			}
		}
		t.Logf("local fail: %s\nremote demo_fail: %s", mcpText(local), mcpText(remote))
		lr, rr := mcpCommandResult(t, "fail", local), mcpCommandResult(t, "demo_fail", remote)
		if lr.ExitCode != 4 || lr != rr {
			t.Errorf("results: got local %+v and remote %+v, want the same command result with exit code 4", lr, rr)
		}
	})

	t.Run("runs give the same names", func(t *testing.T) {
		runs := []struct {
			name string
			cfg  string
		}{
			{"same config", cfg},
			{"hosts listed the other way round", f.gatewayConfig(t, "", "ops", "demo")},
		}
		for _, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				again := startGateway(t, f.home.Env(), r.cfg)
				if got := listNames(t, connectMCP(t, again.URL, nil)); !slices.Equal(got, names) {
					t.Errorf("tools/list: got %v, want the first run's %v", got, names)
				}
				again.Signal(t, syscall.SIGTERM)
				if code := again.Wait(t, fleettest.StopGrace); code != 0 {
					t.Errorf("exit status after SIGTERM: got %d, want 0", code)
				}
			})
		}
	})

	unreachable := f.gatewayConfig(t, "", "demo", "nobody")

	t.Run("serve refuses an unreachable host", func(t *testing.T) {
		r := fleettest.Run(t, f.home.Env(), fleettest.MCPGateway(t), "serve", "--config", unreachable, "--port", "0")
		if r.ExitCode == 0 {
			t.Fatalf("exit status: got 0, want non-zero\nstdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stderr, "remote_tools host nobody") {
			t.Errorf("stderr: got\n%s\nwant the error to name remote_tools host nobody", r.Stderr)
		}
		if strings.Contains(r.Stdout, "claude mcp add") {
			t.Errorf("stdout: got %q, want no claude mcp add line from a gateway that did not serve", r.Stdout)
		}
	})

	t.Run("info lists what it can reach", func(t *testing.T) {
		r := fleettest.Run(t, f.home.Env(), fleettest.MCPGateway(t), "info", "--config", unreachable)
		if r.ExitCode != 0 {
			t.Fatalf("exit status: got %d, want 0\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Stdout, r.Stderr)
		}
		want := map[string]string{
			"deploy": "local", "echo": "local", "fail": "local", "flood": "local",
			"restart": "local", "sleep": "local", "spawn": "local", "ticker": "local",
			"demo_echo": "demo", "demo_fail": "demo", "demo_flood": "demo", "demo_sleep": "demo", "demo_spawn": "demo", "demo_ticker": "demo",
			// Without ops, demo is the only host with cluster_node_status.
			"cluster_node_status": "demo", "getenv": "demo",
		}
		got := infoServed(t, r.Stdout)
		if !maps.Equal(got, want) {
			t.Errorf("info SERVED name -> origin: got %v, want %v\n%s", got, want, r.Stdout)
		}
		if !regexp.MustCompile(`(?m)^.*WARN.*host=nobody.*$`).MatchString(r.Stderr) {
			t.Errorf("stderr: got\n%s\nwant a warning naming host=nobody", r.Stderr)
		}
	})
}

// TestRemoteToolsRefresh restarts the agents a running gateway imports with
// a different tool set: while they are down their tools stay listed and
// calls fail in-band naming the host; once they are back a connected
// client is told the list changed and sees the new set. It runs once per
// protocol era, each against its own fleet: a legacy client hears over its
// standalone stream, a 2026-07-28 one over the subscriptions/listen stream
// it opened.
func TestRemoteToolsRefresh(t *testing.T) {
	t.Parallel()
	// refresh is the gateway's remote_refresh_interval. quiet spans a few
	// of its ticks: a gateway that wrongly announced the outage would do
	// so on the tick that logs it, just before or after the test sees the
	// log line.
	const (
		refresh = 300 * time.Millisecond
		quiet   = 3 * refresh
	)
	eras := []struct {
		name    string
		connect func(tb testing.TB, url string, notify func(mcp.JSONRPCNotification)) *client.Client
	}{
		{"legacy", connectMCP},
		{"2026-07-28", listenMCP},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t)
			before := b.demoAgent(t, "demo", 2)
			before.IncludeTools = []string{"echo", "sleep", "fail"}
			after := before
			after.IncludeTools = []string{"echo", "fail", "getenv"}
			agents := b.startAgents(t, 2, before)

			gw := startGateway(t, b.home.Env(), b.gatewayConfig(t, refresh.String(), "demo"))
			changed := make(chan struct{}, 16)
			c := era.connect(t, gw.URL, func(n mcp.JSONRPCNotification) {
				if n.Method == mcp.MethodNotificationToolsListChanged {
					changed <- struct{}{}
				}
			})
			local := []string{"deploy", "echo", "fail", "flood", "restart", "sleep", "spawn", "ticker"}
			// The set before adds demo's echo, sleep and fail, all prefixed
			// since the gateway has them; the set after drops sleep and adds
			// getenv, which keeps its bare name since the gateway excludes
			// its own.
			wantBefore := slices.Sorted(slices.Values(append([]string{"demo_echo", "demo_fail", "demo_sleep"}, local...)))
			wantAfter := slices.Sorted(slices.Values(append([]string{"demo_echo", "demo_fail", "getenv"}, local...)))
			if got := listNames(t, c); !slices.Equal(got, wantBefore) {
				t.Fatalf("tools/list at start: got %v, want %v", got, wantBefore)
			}

			for _, a := range agents {
				a.Signal(t, syscall.SIGTERM)
				if code := a.Wait(t, fleettest.StopGrace); code != 0 {
					t.Fatalf("agent pid %d: exit status after SIGTERM: got %d, want 0", a.PID, code)
				}
			}
			// The gateway logs once when a refresh finds the host gone.
			gw.WaitOutput(t, "remote host unreachable", 10*time.Second)

			t.Run("while the agents are down", func(t *testing.T) {
				if got := listNames(t, c); !slices.Equal(got, wantBefore) {
					t.Errorf("tools/list: got %v, want the last good set %v", got, wantBefore)
				}
				res := callMCP(t, c, "demo_echo", map[string]any{"message": "anyone?"})
				if !res.IsError {
					t.Errorf("demo_echo: got result %q, want isError", mcpText(res))
				}
				if msg := mcpText(res); !strings.Contains(msg, "demo") || !strings.Contains(msg, "unavailable") {
					t.Errorf("demo_echo: got %q, want a message saying host demo is unavailable", msg)
				}
				select {
				case <-changed:
					t.Errorf("got notifications/tools/list_changed while the agents were down, want the list kept")
				case <-time.After(quiet):
				}
			})

			t.Run("after the agents return with other tools", func(t *testing.T) {
				b.startAgents(t, 2, after)
				select {
				case <-changed:
				case <-time.After(10 * time.Second):
					t.Fatalf("got no notifications/tools/list_changed within 10s of the agents' return\n%s", gw.Output())
				}
				if got := listNames(t, c); !slices.Equal(got, wantAfter) {
					t.Errorf("tools/list: got %v, want %v", got, wantAfter)
				}
				cr := mcpCommandResult(t, "getenv", callMCP(t, c, "getenv", map[string]any{"name": "FISKFLEET_UNSET_VARIABLE"}))
				if want := "FISKFLEET_UNSET_VARIABLE unset\n"; cr.ExitCode != 0 || cr.Output != want {
					t.Errorf("getenv: got exit %d output %q, want 0 and %q", cr.ExitCode, cr.Output, want)
				}
			})
		})
	}
}
