package fleettest_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// TestAgentConfig checks that what Agent writes is what the strict parser
// reads, and that a left-out field is a key the file does not have.
func TestAgentConfig(t *testing.T) {
	full := fleettest.Agent{
		Identity:        "demo",
		ApplicationPath: "/bin/app",
		NATSContext:     "fleet",
		IncludeTools:    []string{"echo", "sleep*"},
		ExcludeTools:    []string{"flood"},
		ConfirmTags:     []string{"impact:rw"},
		CredentialEnv:   []string{"SECRET_TOKEN"},
		A2A:             &fleettest.A2A{ServeTools: true, MaxConcurrentTools: 3, ToolTimeout: 1500 * time.Millisecond},
		MCP:             map[string]any{"port": 18080},
		Extra:           map[string]any{"knowledge": map[string]any{"directory": "/tmp/docs"}},
	}
	cfg, err := config.Load(fleettest.WriteAgentConfig(t, full))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"identity", cfg.Identity, "demo"},
		{"application_path", cfg.ApplicationPath, "/bin/app"},
		{"nats_context", cfg.NATSContext, "fleet"},
		{"include.tools", strings.Join(cfg.Include.Tools, ","), "echo,sleep*"},
		{"exclude.tools", strings.Join(cfg.Exclude.Tools, ","), "flood"},
		{"confirm_tags", strings.Join(cfg.ConfirmTags, ","), "impact:rw"},
		{"credential_env", strings.Join(cfg.CredentialEnv, ","), "SECRET_TOKEN"},
		{"serve_tools", cfg.Expose.Agent.A2A != nil && cfg.Expose.Agent.A2A.ServeTools, true},
		{"a2a.max_concurrent_tools", cfg.Expose.Agent.A2A.MaxConcurrentTools, 3},
		{"a2a.tool_timeout", cfg.Expose.Agent.A2A.ToolTimeout.Duration, 1500 * time.Millisecond},
		{"mcp.port", cfg.Expose.Agent.MCP != nil && cfg.Expose.Agent.MCP.Port == 18080, true},
		{"knowledge.directory", cfg.Knowledge != nil && cfg.Knowledge.Directory == "/tmp/docs", true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	tests := []struct {
		name    string
		agent   fleettest.Agent
		wantErr string
	}{
		{"complete", fleettest.Agent{Identity: "x", ApplicationPath: "/bin/app", NATSContext: "c", A2A: &fleettest.A2A{ServeTools: true}}, ""},
		{"serve_tools false is left out", fleettest.Agent{Identity: "x", ApplicationPath: "/bin/app", NATSContext: "c", A2A: &fleettest.A2A{MaxConcurrentTools: 2}}, "expose.agent.a2a.serve_tools"},
		{"no nats_context", fleettest.Agent{Identity: "x", ApplicationPath: "/bin/app", A2A: &fleettest.A2A{ServeTools: true}}, "nats_context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(fleettest.WriteAgentConfig(t, tt.agent))
			if err != nil {
				t.Fatalf("config.Load: %v", err)
			}
			_, err = cfg.Validate(config.ModeA2AServe)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: got %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestHomeEnv(t *testing.T) {
	t.Setenv("NATS_CONTEXT", "the-users-own")
	t.Setenv("A2A_AGENT_CONFIG", "/etc/agent.yaml")
	ns := natstest.Start(t)
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, "fleet", nil)
	env := home.Env("EXTRA=1")
	want := map[string]string{"XDG_CONFIG_HOME": home.Dir, "EXTRA": "1"}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("env: %s set twice", k)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s: got %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"NATS_CONTEXT", "A2A_AGENT_CONFIG"} {
		if v, ok := got[k]; ok {
			t.Errorf("env %s: got %q, want it removed", k, v)
		}
	}
	r := fleettest.Run(t, env, fleettest.NATSCLI(t), "--context", "fleet", "rtt")
	if r.ExitCode != 0 {
		t.Errorf("nats rtt through the home's context: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
}

func TestProcess(t *testing.T) {
	home := fleettest.NewHome(t)
	demo := fleettest.FiskDemo(t)

	t.Run("run captures both streams and the exit code", func(t *testing.T) {
		r := fleettest.Run(t, home.Env(), demo, "fail", "--code", "4")
		if r.ExitCode != 4 || r.Stdout != "about to fail\n" || r.Stderr != "failing with exit code 4\n" {
			t.Errorf("got exit %d stdout %q stderr %q, want 4, the stdout line, the stderr line", r.ExitCode, r.Stdout, r.Stderr)
		}
	})

	t.Run("wait for output", func(t *testing.T) {
		p := fleettest.Start(t, home.Env(), demo, "echo", "ready", "--count", "2")
		p.WaitOutput(t, "ready\nready\n", 30*time.Second)
		if got := p.Wait(t, 30*time.Second); got != 0 {
			t.Errorf("exit code: got %d, want 0", got)
		}
		if got, want := p.Stdout(), "ready\nready\n"; got != want {
			t.Errorf("stdout: got %q, want %q", got, want)
		}
	})

	t.Run("kill -9 by pid", func(t *testing.T) {
		p := fleettest.Start(t, home.Env(), demo, "sleep", "--duration", "1m")
		if p.Exited() || p.ExitCode() != -1 {
			t.Fatalf("running process: got exited %t code %d", p.Exited(), p.ExitCode())
		}
		p.Kill(t)
		if got, want := p.ExitCode(), 128+int(syscall.SIGKILL); got != want {
			t.Errorf("exit code: got %d, want %d", got, want)
		}
	})

	t.Run("signal and wait", func(t *testing.T) {
		p := fleettest.Start(t, home.Env(), demo, "sleep", "--duration", "1m")
		p.Signal(t, syscall.SIGTERM)
		if got, want := p.Wait(t, 30*time.Second), 128+int(syscall.SIGTERM); got != want {
			t.Errorf("exit code: got %d, want %d", got, want)
		}
	})
}
