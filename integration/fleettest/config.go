package fleettest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// Agent describes an agent.yaml. Zero fields are left out of the file, so
// a test can leave out any key to see the refusal that names it.
type Agent struct {
	// Identity is identity.
	Identity string
	// ApplicationPath is application_path, usually [FiskDemo].
	ApplicationPath string
	// NATSContext is nats_context, a context added with [Home.AddContext].
	NATSContext string
	// IncludeTools and ExcludeTools are include.tools and exclude.tools
	// (name globs).
	IncludeTools []string
	ExcludeTools []string
	// ConfirmTags is confirm_tags.
	ConfirmTags []string
	// CredentialEnv is credential_env.
	CredentialEnv []string
	// A2A is expose.agent.a2a; nil leaves it out.
	A2A *A2A
	// MCP is expose.agent.mcp, written as given (keys as in agent.yaml); a
	// non-nil empty map writes `mcp: {}`, which enables MCP with defaults.
	MCP map[string]any
	// Metrics is expose.agent.metrics, written as given; nil leaves it
	// out.
	Metrics map[string]any
	// Extra adds top-level keys as given, replacing a generated key of the
	// same name: remote_tools, knowledge, or a deliberately wrong key.
	Extra map[string]any
}

// A2A is expose.agent.a2a. ServeTools false leaves serve_tools out.
type A2A struct {
	ServeTools         bool
	MaxConcurrentTools int
	ToolTimeout        time.Duration
}

// YAML renders the agent.yaml text.
func (a Agent) YAML() ([]byte, error) {
	doc := map[string]any{}
	set := func(key string, v any, present bool) {
		if present {
			doc[key] = v
		}
	}
	set("identity", a.Identity, a.Identity != "")
	set("application_path", a.ApplicationPath, a.ApplicationPath != "")
	set("nats_context", a.NATSContext, a.NATSContext != "")
	set("include", map[string]any{"tools": a.IncludeTools}, len(a.IncludeTools) > 0)
	set("exclude", map[string]any{"tools": a.ExcludeTools}, len(a.ExcludeTools) > 0)
	set("confirm_tags", a.ConfirmTags, len(a.ConfirmTags) > 0)
	set("credential_env", a.CredentialEnv, len(a.CredentialEnv) > 0)
	agent := map[string]any{}
	if a.A2A != nil {
		a2a := map[string]any{}
		if a.A2A.ServeTools {
			a2a["serve_tools"] = true
		}
		if a.A2A.MaxConcurrentTools != 0 {
			a2a["max_concurrent_tools"] = a.A2A.MaxConcurrentTools
		}
		if a.A2A.ToolTimeout != 0 {
			a2a["tool_timeout"] = a.A2A.ToolTimeout.String()
		}
		agent["a2a"] = a2a
	}
	if a.MCP != nil {
		agent["mcp"] = a.MCP
	}
	if a.Metrics != nil {
		agent["metrics"] = a.Metrics
	}
	set("expose", map[string]any{"agent": agent}, len(agent) > 0)
	for k, v := range a.Extra {
		doc[k] = v
	}
	return yaml.Marshal(doc)
}

// WriteAgentConfig writes a as agent.yaml in a new temporary directory of
// tb and returns its path.
func WriteAgentConfig(tb testing.TB, a Agent) string {
	tb.Helper()
	b, err := a.YAML()
	if err != nil {
		tb.Fatalf("fleettest: rendering agent.yaml: %v", err)
	}
	return WriteFile(tb, tb.TempDir(), "agent.yaml", string(b))
}

// WriteFile writes content to dir/name and returns the path, for configs a
// test writes by hand.
func WriteFile(tb testing.TB, dir, name, content string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatalf("fleettest: writing %s: %v", p, err)
	}
	return p
}
