package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestExamplesLoad keeps integration/examples from rotting: every agent
// file parses strictly and validates for the modes it is meant for, with
// no warning but those it is expected to give.
func TestExamplesLoad(t *testing.T) {
	tests := []struct {
		file  string
		modes []config.Mode
		check func(t *testing.T, c *config.Config)
		// warning, when set, is in the one warning each mode gives.
		warning string
	}{
		{"demo.yaml", []config.Mode{config.ModeMCP, config.ModeA2AServe, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if c.Identity != "demo" || len(c.RemoteTools) != 1 || c.RemoteTools[0].Host != "demo" {
				t.Errorf("got identity %q remote_tools %v, want demo importing demo", c.Identity, c.RemoteTools)
			}
			if c.Expose.Agent.MCP.Port != 8080 || c.Expose.Agent.MCP.Address != "127.0.0.1" {
				t.Errorf("got MCP on %s:%d, want 127.0.0.1:8080", c.Expose.Agent.MCP.Address, c.Expose.Agent.MCP.Port)
			}
		}, ""},
		{"nats-cli.yaml", []config.Mode{config.ModeMCP, config.ModeA2AServe, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if !slices.Equal(c.ConfirmTags, []string{"impact:rw"}) {
				t.Errorf("confirm_tags: got %v, want [impact:rw]", c.ConfirmTags)
			}
			if len(c.Include.Tags) == 0 {
				t.Error("include: want a tag include")
			}
			if c.Expose.Agent.MCP == nil || c.Expose.Agent.A2A == nil || !c.Expose.Agent.A2A.ServeTools {
				t.Error("want both MCP and A2A exposed")
			}
		}, ""},
		{"nats-cli-readonly.yaml", []config.Mode{config.ModeA2AServe, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if !slices.Equal(c.Include.Tags, []string{"impact:ro"}) {
				t.Errorf("include.tags: got %v, want [impact:ro]", c.Include.Tags)
			}
		}, ""},
		{"policy.yaml", []config.Mode{config.ModeMCP, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if c.Identity != "gw" || c.NATSContext != "gateway" {
				t.Errorf("got identity %q nats_context %q, want gw on gateway", c.Identity, c.NATSContext)
			}
			var hosts []string
			for _, r := range c.RemoteTools {
				hosts = append(hosts, r.Host)
			}
			if !slices.Equal(hosts, []string{"demo", "secret"}) {
				t.Errorf("remote_tools hosts: got %v, want [demo secret]", hosts)
			}
			const roleKey = "expose.agent.mcp.policy.roles.default.nats_context"
			if got := c.PolicyContexts(); len(got) != 1 || got[roleKey] != "ops" {
				t.Errorf("policy contexts: got %v, want only %s: ops", got, roleKey)
			}
			if m := c.Expose.Agent.MCP; m == nil || m.Address != "127.0.0.1" || m.AuthTokenEnv == "" {
				t.Errorf("expose.agent.mcp: got %+v, want it on 127.0.0.1 with auth_token_env", m)
			}
		}, "no application_path"}, // a gateway in front of agents serves no application of its own
		{"fleet.yaml", []config.Mode{config.ModeMCP, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			f := c.Expose.Agent.MCP.Fleet
			if f == nil || f.Bucket != config.DefaultFleetBucket || f.InstanceTTL.Duration != config.DefaultFleetInstanceTTL || f.Replicas != 3 {
				t.Errorf("expose.agent.mcp.fleet: got %+v, want the default bucket and ttl, 3 replicas", f)
			}
			if c.NATSContext == "" || c.Expose.Agent.MCP.AuthTokenEnv == "" {
				t.Errorf("got nats_context %q auth_token_env %q, want both set", c.NATSContext, c.Expose.Agent.MCP.AuthTokenEnv)
			}
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := config.Load(filepath.Join("examples", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tt.modes {
				warnings, err := c.Validate(m)
				if err != nil {
					t.Errorf("validating for %s: %v", m, err)
				}
				if tt.warning != "" {
					if len(warnings) != 1 || !strings.Contains(warnings[0], tt.warning) {
						t.Errorf("validating for %s: got warnings %v, want one about %s", m, warnings, tt.warning)
					}
					continue
				}
				for _, w := range warnings {
					t.Errorf("validating for %s: unexpected warning %s", m, w)
				}
			}
			tt.check(t, c)
		})
	}
}

// TestExampleServerConfig parses the NATS server example and checks the
// discovery-only user cannot publish tool calls.
func TestExampleServerConfig(t *testing.T) {
	for _, v := range []string{"AGENT_PASSWORD", "CALLER_PASSWORD", "DISCO_PASSWORD"} {
		t.Setenv(v, "pw-"+strings.ToLower(v))
	}
	opts, err := server.ProcessConfigFile(filepath.Join("examples", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Host != "127.0.0.1" {
		t.Errorf("listen host: got %q, want loopback", opts.Host)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	disco := users["disco"]
	if disco == nil || disco.Permissions == nil || disco.Permissions.Publish == nil {
		t.Fatalf("got users %v, want a disco user with publish permissions", users)
	}
	pub := disco.Permissions.Publish.Allow
	if !slices.Contains(pub, "choria.fisk-ai.discovery.*") {
		t.Errorf("disco publish: got %v, want discovery allowed", pub)
	}
	for _, s := range pub {
		if strings.Contains(s, "tool") || s == ">" || s == "choria.>" || s == "choria.fisk-ai.>" {
			t.Errorf("disco publish: got %q, want no way to publish tool calls", s)
		}
	}
}

// examplePasswords are the passwords of the users of
// examples/nats-server.conf, by user; the example reads each from the
// variable NAME_PASSWORD.
var examplePasswords = map[string]string{
	"agent":  "agent-pw-2b7e",
	"caller": "caller-pw-c41d",
	"disco":  "disco-pw-90fa",
}

// exampleListen is the listen line of examples/nats-server.conf, which the
// test moves to a random port.
const exampleListen = "listen: 127.0.0.1:4222"

// TestExampleServerServesStreams runs the NATS server of
// examples/nats-server.conf, with its passwords defined in the file (as
// nats-server would take them from the environment) on a random loopback
// port, and an `a2a-agent serve` process (fiskdemo as identity demo) on
// user agent. As user caller, a streamed ticker call runs to its final
// reply with its ticks streamed, and a second one is cancelled after its
// first tick, which takes a publish to the control subject; an inbox of
// user caller answers a probe from user agent, as a stream's liveness
// check needs. User disco discovers demo, and its streamed call is refused
// by the server at once. Neither the agent nor user caller meets a
// permissions violation.
func TestExampleServerServesStreams(t *testing.T) {
	t.Parallel()
	conf, err := os.ReadFile(filepath.Join("examples", "nats-server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), exampleListen) {
		t.Fatalf("examples/nats-server.conf: got no %q line, want one for the test to move to a random port", exampleListen)
	}
	var vars strings.Builder
	for _, user := range slices.Sorted(maps.Keys(examplePasswords)) {
		fmt.Fprintf(&vars, "%s_PASSWORD: %q\n", strings.ToUpper(user), examplePasswords[user])
	}
	ns := natstest.StartFromConfig(t, vars.String()+strings.Replace(string(conf), exampleListen, "listen: 127.0.0.1:-1", 1))

	home := fleettest.NewHome(t)
	home.AddContext(t, ns, "agent", map[string]string{"user": "agent", "password": examplePasswords["agent"]})
	agent := fleettest.StartAgent(t, home.Env(), fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "demo",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     "agent",
		A2A:             &fleettest.A2A{ServeTools: true},
	}))

	// connect connects as user, keeping the async errors its connection
	// gets.
	var (
		mu       sync.Mutex
		asyncErr = map[string][]string{}
	)
	connect := func(user string) *a2a.Client {
		nc := ns.Connect(t, nats.UserInfo(user, examplePasswords[user]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			asyncErr[user] = append(asyncErr[user], err.Error())
			mu.Unlock()
		}))
		c, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: "example-" + user})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	caller := connect("caller")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if ok, err := caller.Streams(ctx, "demo"); err != nil || !ok {
		t.Fatalf("Streams(demo) as caller: got %v, %v, want true", ok, err)
	}
	var ticks []string
	reply, err := caller.StreamTool(ctx, "demo", "ticker", json.RawMessage(`{"every":"20ms","count":3}`), func(s string) { ticks = append(ticks, s) })
	if err != nil || reply.IsError {
		t.Fatalf("streamed ticker as caller: got %+v, %v, want its reply", reply, err)
	}
	// The agent may send ticks that come close together as one event.
	if len(ticks) == 0 || strings.Join(ticks, "") != reply.Output || !strings.Contains(reply.Output, "tick 3 of 3") {
		t.Errorf("streamed ticker as caller: got events %q and output %q, want streamed events adding up to the three ticks", ticks, reply.Output)
	}

	// Cancelled after its first tick: the cancel goes to the instance's
	// control subject, and the agent's final reply says it stopped.
	callCtx, stop := context.WithCancel(ctx)
	var once sync.Once
	_, err = caller.StreamTool(callCtx, "demo", "ticker", json.RawMessage(`{"every":"50ms","count":1000}`), func(string) { once.Do(stop) })
	stop()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ticker as caller: got %v, want %v with the agent's final reply", err, context.Canceled)
	}

	// A probe: a request from user agent to an inbox of user caller, which
	// answers it through allow_responses.
	probeAgent := ns.Connect(t, nats.UserInfo("agent", examplePasswords["agent"]))
	probed := ns.Connect(t, nats.UserInfo("caller", examplePasswords["caller"]))
	inbox := probed.NewInbox()
	sub, err := probed.Subscribe(inbox, func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := probed.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := probeAgent.Request(inbox, []byte("probe"), 5*time.Second); err != nil {
		t.Errorf("probe of a caller inbox by user agent: got %v, want an answer", err)
	}

	// Discovery only: disco sees demo's tools, and its call is refused by
	// the server, at once.
	disco := connect("disco")
	card, err := disco.Discover(ctx, "demo")
	if err != nil || len(card.Tools) == 0 {
		t.Fatalf("Discover(demo) as disco: got %+v, %v, want demo's card", card, err)
	}
	start := time.Now()
	_, err = disco.StreamTool(ctx, "demo", "ticker", json.RawMessage(`{"every":"20ms","count":3}`), nil)
	if !errors.Is(err, a2a.ErrPermission) || !strings.Contains(err.Error(), natsbus.StreamSubject("demo")) {
		t.Errorf("streamed ticker as disco: got %v, want %v naming %s", err, a2a.ErrPermission, natsbus.StreamSubject("demo"))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("streamed ticker as disco: got refused after %s, want at once", took)
	}

	mu.Lock()
	defer mu.Unlock()
	if got := asyncErr["caller"]; len(got) != 0 {
		t.Errorf("user caller: got async errors %q, want none", got)
	}
	if stderr := agent.Stderr(); strings.Contains(stderr, "Permissions Violation") {
		t.Errorf("agent on user agent: got a permissions violation, want the example to cover every subject it uses:\n%s", stderr)
	}
}
