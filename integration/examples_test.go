package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// TestExamplesLoad keeps integration/examples from rotting: every agent
// file parses strictly and validates for the modes it is meant for.
func TestExamplesLoad(t *testing.T) {
	tests := []struct {
		file  string
		modes []config.Mode
		check func(t *testing.T, c *config.Config)
	}{
		{"demo.yaml", []config.Mode{config.ModeMCP, config.ModeA2AServe, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if c.Identity != "demo" || len(c.RemoteTools) != 1 || c.RemoteTools[0].Host != "demo" {
				t.Errorf("got identity %q remote_tools %v, want demo importing demo", c.Identity, c.RemoteTools)
			}
			if c.Expose.Agent.MCP.Port != 8080 || c.Expose.Agent.MCP.Address != "127.0.0.1" {
				t.Errorf("got MCP on %s:%d, want 127.0.0.1:8080", c.Expose.Agent.MCP.Address, c.Expose.Agent.MCP.Port)
			}
		}},
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
		}},
		{"nats-cli-readonly.yaml", []config.Mode{config.ModeA2AServe, config.ModeInfo}, func(t *testing.T, c *config.Config) {
			if !slices.Equal(c.Include.Tags, []string{"impact:ro"}) {
				t.Errorf("include.tags: got %v, want [impact:ro]", c.Include.Tags)
			}
		}},
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
