package integration_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// rolesPasswords are the passwords of the users of
// examples/nats-server-roles.conf, by user; the example reads each from
// the variable NAME_PASSWORD.
var rolesPasswords = map[string]string{
	"agent":   "agent-pw-7f3a",
	"gateway": "gateway-pw-91c2",
	"ops":     "ops-pw-4d8e",
}

// rolesExampleListen is the listen line of the example, which the test
// replaces with a random port.
const rolesExampleListen = "listen: 127.0.0.1:4222"

// startRolesServer runs the NATS server of examples/nats-server-roles.conf
// as an operator would, except that it listens on a random loopback port
// and its password variables are defined in the file rather than taken
// from the environment (t.Setenv would forbid t.Parallel).
func startRolesServer(t testing.TB) *natstest.Server {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join("examples", "nats-server-roles.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), rolesExampleListen) {
		t.Fatalf("examples/nats-server-roles.conf: got no %q line, want one for the test to move to a random port", rolesExampleListen)
	}
	text := strings.Replace(string(conf), rolesExampleListen, "listen: 127.0.0.1:-1", 1)
	var vars strings.Builder
	for _, user := range slices.Sorted(maps.Keys(rolesPasswords)) {
		fmt.Fprintf(&vars, "%s_PASSWORD: %q\n", strings.ToUpper(user), rolesPasswords[user])
	}
	return natstest.StartFromConfig(t, vars.String()+text)
}

// policyGatewayConfig writes examples/policy.yaml with the test's tool
// timeout, and with the default role's nats_context removed unless
// roleContext is set, and returns its path.
func policyGatewayConfig(t testing.TB, toolTimeout time.Duration, roleContext bool) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("examples/policy.yaml: %v", err)
	}
	mcpKey := yamlMapAt(t, doc, "expose", "agent", "mcp")
	mcpKey["tool_timeout"] = toolTimeout.String()
	def := yamlMapAt(t, mcpKey, "policy", "roles", "default")
	if !roleContext {
		// default: {} is still the role, now without a context of its
		// own: its remote calls go through the gateway's nats_context.
		delete(def, "nats_context")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return fleettest.WriteFile(t, t.TempDir(), "agent.yaml", string(out))
}

// yamlMapAt returns the map at keys of doc, failing t when one is missing.
func yamlMapAt(t testing.TB, doc map[string]any, keys ...string) map[string]any {
	t.Helper()
	m := doc
	for i, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("examples/policy.yaml: got %T at %s, want a mapping", m[k], strings.Join(keys[:i+1], "."))
		}
		m = next
	}
	return m
}

// policyEra is one protocol era of the mcp-go client.
type policyEra struct {
	name  string
	copts []client.ClientOption
}

var policyEras = []policyEra{
	{"modern", nil},
	{"legacy", []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}},
}

// connectPolicyClient starts an initialised mcp-go client of url in era,
// sending token as its bearer token.
func connectPolicyClient(t testing.TB, url, token string, era policyEra) *client.Client {
	t.Helper()
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}
	return newMCPClient(t, url, topts, era.copts, nil)
}

// startPolicyGateway starts `mcp-gateway serve --config cfg --port 0` in
// env and returns it with its MCP URL, taken from its log: with
// auth_token_env set, its claude mcp add line ends in a --header that
// [startGateway] does not expect.
func startPolicyGateway(t testing.TB, env []string, cfg string) *gatewayProcess {
	t.Helper()
	p := fleettest.Start(t, env, fleettest.MCPGateway(t), "serve", "--config", cfg, "--port", "0")
	return &gatewayProcess{Process: p, URL: loggedAddress(t, p, "serving over MCP") + "/mcp"}
}

// TestPolicyRoleNATSPermissions shows that a policy role's nats_context
// makes NATS subject permissions, not the gateway, decide which agents the
// role's callers reach. A NATS server runs examples/nats-server-roles.conf:
// user agent serves, user gateway may discover and call every agent, user
// ops may discover every agent but call only identity demo. Two
// `a2a-agent serve` processes (demo and secret, both fiskdemo) serve on
// user agent; `mcp-gateway serve` runs examples/policy.yaml: it imports
// both agents through its own context (user gateway) and its default role
// calls them through context ops.
//
// Through the real mcp-go client, in both protocol eras: demo's echo runs;
// secret's restart is refused in-band, the command never ran (its marker
// file is absent and secret's micro endpoints counted no request), and the
// gateway logged the server's permissions violation. A second gateway,
// whose default role names no nats_context, runs the same secret call:
// the refusal came from the role's NATS credentials.
//
// The refusal is immediate: the NATS server reports a publish the user
// may not make only asynchronously, to the connection's error handler, and
// the transport fails the calls waiting on that subject from there
// (natsbus, natsconn.OnPublishViolation) with a2a.ErrPermission, which the
// gateway answers in-band naming the permissions. Before that, the call
// waited out the whole tool_timeout (2.0 to 3.0 s here) and said only that
// the agent was unavailable; now it takes milliseconds.
func TestPolicyRoleNATSPermissions(t *testing.T) {
	t.Parallel()
	const toolTimeout = 2 * time.Second
	ns := startRolesServer(t)
	home := fleettest.NewHome(t)
	for user, pw := range rolesPasswords {
		home.AddContext(t, ns, user, map[string]string{"user": user, "password": pw})
	}

	agents := map[string]*fleettest.Process{}
	for _, id := range []string{"demo", "secret"} {
		cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
			Identity:        id,
			ApplicationPath: fleettest.FiskDemo(t),
			NATSContext:     "agent",
			A2A:             &fleettest.A2A{ServeTools: true},
		})
		agents[id] = fleettest.StartAgent(t, home.Env(), cfg)
	}

	// The example parses, validates for serving and says what the test
	// relies on: remote calls of the default role go through context ops.
	example, err := config.Load(filepath.Join("examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := example.Validate(config.ModeMCP); err != nil {
		t.Fatalf("examples/policy.yaml: validating for mcp: %v", err)
	}
	const roleKey = "expose.agent.mcp.policy.roles.default.nats_context"
	if got := example.PolicyContexts(); len(got) != 1 || got[roleKey] != "ops" {
		t.Fatalf("examples/policy.yaml: got policy contexts %v, want only %s: ops", got, roleKey)
	}
	token := "policy-nats-token"
	env := home.Env(example.Expose.Agent.MCP.AuthTokenEnv + "=" + token)

	// The test's own view of the bus, on user gateway: micro stats of
	// the agents.
	admin := ns.Connect(t, nats.UserInfo("gateway", rolesPasswords["gateway"]))
	requests := func(identity string) int {
		return natstest.EndpointRequests(t, admin, identity, "stream") + natstest.EndpointRequests(t, admin, identity, "tool")
	}

	gw := startPolicyGateway(t, env, policyGatewayConfig(t, toolTimeout, true))
	markers := t.TempDir()
	for _, era := range policyEras {
		t.Run("ops role/"+era.name, func(t *testing.T) {
			c := connectPolicyClient(t, gw.URL, token, era)
			t.Logf("protocol version %s", c.ProtocolVersion())
			// The role sees only what its own user reaches: ops may not
			// discover secret, so the gateway shows it none of secret's
			// tools (the gateway's own user imported them).
			names := listNames(t, c)
			for _, want := range []string{"demo_echo", "demo_restart"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list: got %v, want %s among them", names, want)
				}
			}
			for _, hidden := range []string{"secret_echo", "secret_restart"} {
				if slices.Contains(names, hidden) {
					t.Errorf("tools/list: got %v, want no %s: user ops may not reach secret", names, hidden)
				}
			}

			msg := "hello from ops over " + era.name
			res := callMCP(t, c, "demo_echo", map[string]any{"message": msg})
			cr := mcpCommandResult(t, "demo_echo", res)
			if cr.ExitCode != 0 || strings.TrimSpace(cr.Output) != msg {
				t.Errorf("demo_echo: got exit %d output %q, want exit 0 output %q", cr.ExitCode, cr.Output, msg)
			}

			before := requests("secret")
			marker := filepath.Join(markers, era.name)
			requireHiddenAsUnknown(t, c, "secret_restart", map[string]any{"marker": marker})
			if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("marker of secret_restart: got stat error %v, want it absent: the command ran", err)
			}
			if got := requests("secret"); got != before {
				t.Errorf("secret's stream and tool endpoints: got %d requests, want %d: the call reached the agent", got, before)
			}
		})
	}
	if got := natstest.EndpointRequests(t, admin, "demo", "tool"); got < len(policyEras) {
		t.Errorf("demo's tool endpoint: got %d requests, want at least %d (one unary echo per era)", got, len(policyEras))
	}
	// The operator can see why: the gateway logs the server's refusal of
	// the role connection's discovery, and that it hides the host.
	violation := `Permissions Violation for Publish to`
	fisktest.WaitFor(t, fleettest.ReadyTimeout, "the gateway to log the permissions violation", func() bool {
		return strings.Contains(gw.Stderr(), violation) && strings.Contains(gw.Stderr(), natsbus.DiscoverySubject("secret")) &&
			strings.Contains(gw.Stderr(), "its tools are hidden from the role")
	})
	// The same call from a role without a nats_context of its own goes
	// through the gateway's context, user gateway, and runs.
	t.Run("default role on the gateway's context", func(t *testing.T) {
		gw2 := startPolicyGateway(t, env, policyGatewayConfig(t, toolTimeout, false))
		c := connectPolicyClient(t, gw2.URL, token, policyEras[0])
		before := requests("secret")
		marker := filepath.Join(markers, "gateway")
		res := callMCP(t, c, "secret_restart", map[string]any{"marker": marker})
		cr := mcpCommandResult(t, "secret_restart", res)
		if cr.ExitCode != 0 || strings.TrimSpace(cr.Output) != "restarted" {
			t.Errorf("secret_restart: got exit %d output %q, want exit 0 output restarted", cr.ExitCode, cr.Output)
		}
		if b, err := os.ReadFile(marker); err != nil || !strings.Contains(string(b), "restarted") {
			t.Errorf("marker of secret_restart: got %q, %v, want it written by the command", b, err)
		}
		if got := requests("secret"); got != before+1 {
			t.Errorf("secret's stream and tool endpoints: got %d requests, want %d", got, before+1)
		}
		if strings.Contains(gw2.Stderr(), "Permissions Violation") {
			t.Errorf("gateway without a role context: got a permissions violation, want none:\n%s", gw2.Stderr())
		}
	})

	// A streamed call longer than a heartbeat is kept alive by probes: the
	// agent sends a request to the caller's inbox and the caller answers
	// it. Both caller users answer with allow_responses alone.
	t.Run("callers answer probes", func(t *testing.T) {
		agent := ns.Connect(t, nats.UserInfo("agent", rolesPasswords["agent"]))
		for _, user := range []string{"gateway", "ops"} {
			nc := ns.Connect(t, nats.UserInfo(user, rolesPasswords[user]))
			inbox := nc.NewInbox()
			sub, err := nc.Subscribe(inbox, func(m *nats.Msg) { _ = m.Respond(nil) })
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, err := agent.Request(inbox, []byte("probe"), 2*time.Second); err != nil {
				t.Errorf("probe of a %s inbox: got %v, want an answer", user, err)
			}
			_ = sub.Unsubscribe()
		}
	})

	// The users of the example cover every subject fiskfleet uses: the
	// only violations are the role's refused discoveries of secret.
	for _, line := range strings.Split(gw.Stderr(), "\n") {
		if strings.Contains(line, "Permissions Violation") && !(strings.Contains(line, "context=ops") && strings.Contains(line, natsbus.DiscoverySubject("secret"))) {
			t.Errorf("gateway: got %q, want no permissions violation but the role's discovery of secret", line)
		}
	}
	for id, a := range agents {
		if strings.Contains(a.Stderr(), "Permissions Violation") {
			t.Errorf("agent %s: got a permissions violation, want user agent to cover every subject it uses:\n%s", id, a.Stderr())
		}
	}
}
