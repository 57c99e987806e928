package main

import (
	"strings"
	"testing"
)

// runInfo runs `mcp-gateway info` with args and returns its stdout, its
// stderr and whether it succeeded.
func runInfo(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	g := startGateway(t, nil, append([]string{"info"}, args...)...)
	var out strings.Builder
	for line := range g.lines {
		out.WriteString(line + "\n")
	}
	err := <-g.done
	return out.String(), g.stderr.String(), err
}

func TestInfoRole(t *testing.T) {
	cfg := writeConfig(t, `max_concurrent_tools: 4
policy:
  roles:
    readers:
      match: [dev]
      include: {tags: ["impact:ro"]}
      exclude: {tools: [getenv]}
      max_concurrent_tools: 1
    deployers:
      match: [sre]
      include: {tools: [deploy, restart]}
      approve: true
`, "")
	out, stderr, err := runInfo(t, "--config", cfg, "--role", "readers")
	if err != nil {
		t.Fatalf("got exit %v; stderr:\n%s", err, stderr)
	}
	for _, want := range []string{
		"role readers: 7 tools, at most 1 at once per caller",
		"remote tools carry no tags",
		"SERVED (7)",
		"getenv       not granted to role readers by expose.agent.mcp.policy",
		"deploy       not granted to role readers by expose.agent.mcp.policy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("got listing:\n%s\nwant it to contain %q", out, want)
		}
	}

	out, stderr, err = runInfo(t, "--config", cfg, "--role", "deployers")
	if err != nil {
		t.Fatalf("got exit %v; stderr:\n%s", err, stderr)
	}
	for _, want := range []string{"role deployers: 2 tools, may approve others' gated calls", "SERVED (2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("got listing:\n%s\nwant it to contain %q", out, want)
		}
	}

	_, stderr, err = runInfo(t, "--config", cfg, "--role", "nobody")
	if err == nil || !strings.Contains(stderr, "expose.agent.mcp.policy.roles has no such role (roles: deployers, readers)") {
		t.Errorf("unknown role: got exit %v, stderr %q; want a refusal listing the roles", err, stderr)
	}
}

func TestServeRefusesMissingRoleContext(t *testing.T) {
	cfg := writeConfig(t, `policy:
  roles:
    ops:
      match: [sre]
      nats_context: no-such-context-here
`, "")
	g := startGateway(t, []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}, "serve", "--config", cfg, "--port", "0")
	err, _ := g.wait(t, 30e9)
	if err == nil || !strings.Contains(g.stderr.String(), `expose.agent.mcp.policy.roles.ops.nats_context "no-such-context-here"`) {
		t.Errorf("got exit %v, stderr %q; want a refusal naming the role's nats_context", err, g.stderr)
	}
}
