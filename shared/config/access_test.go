package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// withMCP is an identity serving over MCP with the given expose.agent.mcp
// body (a YAML flow mapping's contents).
func withMCP(body string) string {
	return "identity: ops\napplication_path: /bin/app\nnats_context: ops\nexpose: {agent: {mcp: {" + body + "}}}\n"
}

func TestValidateAccessRefusals(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"auth and token", withMCP("auth_token_env: TOK, auth: {issuer: 'https://id.example.com'}"), "expose.agent.mcp.auth",
			"expose.agent.mcp.auth and expose.agent.mcp.auth_token_env are both set"},
		{"issuer missing", withMCP("auth: {scopes: [a]}"), "expose.agent.mcp.auth.issuer", "expose.agent.mcp.auth.issuer is required"},
		{"issuer in clear text", withMCP("auth: {issuer: 'http://id.example.com'}"), "expose.agent.mcp.auth.issuer", "want https"},
		{"issuer relative", withMCP("auth: {issuer: '/realms/ops'}"), "expose.agent.mcp.auth.issuer", "want an absolute URL"},
		{"issuer with query", withMCP("auth: {issuer: 'https://id.example.com/?a=b'}"), "expose.agent.mcp.auth.issuer", "want no user or query"},
		{"resource fragment", withMCP("auth: {issuer: 'https://id.example.com', resource: 'https://mcp.example.com/mcp#x'}"), "expose.agent.mcp.auth.resource", "fragment"},
		{"jwks in clear text", withMCP("auth: {issuer: 'https://id.example.com', jwks_url: 'http://keys.example.com/jwks'}"), "expose.agent.mcp.auth.jwks_url", "want https"},
		{"alg none", withMCP("auth: {issuer: 'https://id.example.com', algorithms: [RS256, none]}"), "expose.agent.mcp.auth.algorithms[1]",
			"none and HMAC are never accepted"},
		{"alg hmac", withMCP("auth: {issuer: 'https://id.example.com', algorithms: [HS256]}"), "expose.agent.mcp.auth.algorithms[0]", `"HS256" is not accepted`},
		{"leeway too long", withMCP("auth: {issuer: 'https://id.example.com', leeway: 1h}"), "expose.agent.mcp.auth.leeway", "between 0 and 5m0s"},
		{"scope with a space", withMCP("auth: {issuer: 'https://id.example.com', scopes: ['a b']}"), "expose.agent.mcp.auth.scopes[0]", "is not a scope token"},
		{"policy without roles", withMCP("policy: {claim: groups}"), "expose.agent.mcp.policy.roles", "a policy without roles would refuse every caller"},
		{"role without match", withMCP("policy: {roles: {ops: {include: {tools: [a]}}}}"), "expose.agent.mcp.policy.roles.ops.match",
			"expose.agent.mcp.policy.roles.ops.match is empty"},
		{"role empty", withMCP("policy: {roles: {ops: }}"), "expose.agent.mcp.policy.roles.ops.match", "add expose.agent.mcp.policy.roles.ops.match"},
		{"role match blank", withMCP("policy: {roles: {ops: {match: [sre, ' ']}}}"), "expose.agent.mcp.policy.roles.ops.match[1]", "is empty"},
		{"role name", withMCP("policy: {roles: {'o ps': {match: [sre]}}}"), "expose.agent.mcp.policy.roles.o ps", "a role name is"},
		{"role rate", withMCP("policy: {roles: {ops: {match: [sre], rate: 10/d}}}"), "expose.agent.mcp.policy.roles.ops.rate", "is not a rate: write N/s, N/m or N/h"},
		{"role rate zero", withMCP("policy: {roles: {ops: {match: [sre], rate: 0/s}}}"), "expose.agent.mcp.policy.roles.ops.rate", "with N from 1"},
		{"tool rate", withMCP("policy: {roles: {ops: {match: [sre], tool_rates: {deploy: fast}}}}"), "expose.agent.mcp.policy.roles.ops.tool_rates.deploy", `"fast" is not a rate`},
		{"tool rate glob", withMCP("policy: {roles: {ops: {match: [sre], tool_rates: {'[': 1/s}}}}"), "expose.agent.mcp.policy.roles.ops.tool_rates.[", "is not a tool name glob"},
		{"role glob", withMCP("policy: {roles: {ops: {match: [sre], include: {tools: ['[']}}}}"), "expose.agent.mcp.policy.roles.ops.include.tools[0]", "is not a valid glob"},
		{"role share over the gateway's", withMCP("max_concurrent_tools: 2, policy: {roles: {ops: {match: [sre], max_concurrent_tools: 3}}}"),
			"expose.agent.mcp.policy.roles.ops.max_concurrent_tools", "more than the gateway has"},
		{"role share negative", withMCP("policy: {roles: {ops: {match: [sre], max_concurrent_tools: -1}}}"),
			"expose.agent.mcp.policy.roles.ops.max_concurrent_tools", "must be at least 1"},
		{"audit wildcard", withMCP("") + "audit: {subject: 'audit.>'}\n", "audit.subject", "is not a NATS subject to publish on"},
		{"audit empty token", withMCP("") + "audit: {subject: 'audit..ops'}\n", "audit.subject", "is not a NATS subject"},
		{"approvals timeout", withMCP("") + "approvals: {operator: true, timeout: 2h}\n", "approvals.timeout", "between 0 and 1h0m0s"},
		{"approver without name", withMCP("") + "approvals: {operator: true, approvers: [{token_env: A}]}\n", "approvals.approvers[0].name", "approvals.approvers[0].name is required"},
		{"approver repeated", withMCP("") + "approvals: {operator: true, approvers: [{name: ann, token_env: A}, {name: ann, token_env: B}]}\n", "approvals.approvers[1].name", "repeats approvals.approvers[0]"},
		{"approver token env", withMCP("") + "approvals: {operator: true, approvers: [{name: ann, token_env: 'A-B'}]}\n", "approvals.approvers[0].token_env", "is not an environment variable name"},
		{"approvals web without auth", withMCP("") + "approvals: {operator: true, web: {client_id: page}}\n", "approvals.web", "add expose.agent.mcp.auth"},
		{"approvals web without client", withMCP("auth: {issuer: 'https://id.example.com'}") + "approvals: {operator: true, web: {}}\n", "approvals.web.client_id", "approvals.web.client_id is required"},
		{"approvers with auth", withMCP("auth: {issuer: 'https://id.example.com'}") + "approvals: {operator: true, approvers: [{name: ann, token_env: A}]}\n", "approvals.approvers", "remove their token_env"},
		{"approver with neither", withMCP("") + "approvals: {operator: true, approvers: [{name: ann}]}\n", "approvals.approvers[0].token_env", "needs token_env"},
		{"approver nkey", withMCP("") + "approvals: {operator: true, approvers: [{name: ann, nkey: SUABC}]}\n", "approvals.approvers[0].nkey", "is not a public user nkey"},
		{"approvals without nats", "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {}}}\napprovals: {operator: true}\n", "nats_context", "approvals.operator reaches operators over NATS"},
		{"audit arguments", withMCP("") + "audit: {arguments: none}\n", "audit.arguments", `audit.arguments "none" is not one of full, digest`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRefusal(t, ModeMCP, tt.yaml, tt.wantKey, tt.wantMsg)
		})
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{"1/s": {1, time.Second}, " 60/m ": {60, time.Minute}, "1000/h": {1000, time.Hour}} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q): got %+v, %v, want %+v", in, got, err, want)
		}
		if back, _ := ParseRate(got.String()); back != got {
			t.Errorf("%+v.String() = %q does not parse back", got, got.String())
		}
	}
	for _, in := range []string{"", "5", "/s", "-1/s", "1.5/s", "5/d", "5 / s", "2000000/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q): got no error", in)
		}
	}
	if !MustRate("10/s").More(MustRate("100/m")) || MustRate("1/s").More(Rate{}) || !(Rate{}).More(MustRate("1/s")) || (Rate{}).More(Rate{}) {
		t.Error("More: got a wrong order of 10/s, 100/m and unlimited")
	}
}

func TestParseUnknownRoleKey(t *testing.T) {
	_, err := Parse([]byte(withMCP("policy: {roles: {ops: {match: [sre], aprove: true}}}")), testFile)
	if err == nil {
		t.Fatal("got no error for an unknown key in a role, want one naming it")
	}
	for _, want := range []string{"expose.agent.mcp.policy.roles.ops.aprove", "did you mean approve?"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
}

func TestAccessDefaults(t *testing.T) {
	c := mustParse(t, withMCP("auth: {issuer: 'http://127.0.0.1:9000/realms/ops'}, policy: {roles: {ops: {match: [sre], nats_context: ops-sre}, default: {}}}")+"audit: {}\n")
	if _, err := c.Validate(ModeMCP); err != nil {
		t.Fatalf("validating: %v", err)
	}
	m := c.Expose.Agent.MCP
	if got := m.Auth.Leeway.Duration; got != time.Minute {
		t.Errorf("leeway: got %s, want 1m", got)
	}
	if got := m.Auth.Algorithms; !slices.Equal(got, DefaultAuthAlgorithms) {
		t.Errorf("algorithms: got %v, want %v", got, DefaultAuthAlgorithms)
	}
	if got := m.Policy.Claim; got != "groups" {
		t.Errorf("claim: got %q, want groups", got)
	}
	if got := c.Audit.Arguments; got != AuditArgumentsFull {
		t.Errorf("audit.arguments: got %q, want full", got)
	}
	if got := c.AuditSubject(); got != "choria.fisk-ai.audit.ops" {
		t.Errorf("audit subject: got %q, want choria.fisk-ai.audit.ops", got)
	}
	if c.AuditDigestOnly() {
		t.Error("digest only: got true, want false by default")
	}
	want := map[string]string{"expose.agent.mcp.policy.roles.ops.nats_context": "ops-sre"}
	if got := c.PolicyContexts(); len(got) != 1 || got["expose.agent.mcp.policy.roles.ops.nats_context"] != "ops-sre" {
		t.Errorf("policy contexts: got %v, want %v", got, want)
	}
}
