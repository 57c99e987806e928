package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// errInput marks a case expecting call's invalid-input error, which wraps
// no sentinel.
var errInput = errors.New("invalid input")

// parse parses args with the real CLI model, as main does.
func parse(tb testing.TB, args ...string) (*root, string, error) {
	tb.Helper()
	var r root
	p, err := kong.New(&r, kong.Name("a2a-agent"), kong.Vars{"version": "test"}, kong.Writers(io.Discard, io.Discard))
	if err != nil {
		tb.Fatalf("building the CLI: %v", err)
	}
	kctx, err := p.Parse(args)
	if err != nil {
		return &r, "", err
	}
	return &r, kctx.Command(), nil
}

func TestParse(t *testing.T) {
	cfg := t.TempDir() + "/agent.yaml"
	if err := os.WriteFile(cfg, []byte("identity: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantCmd string
		check   func(*testing.T, *root)
		wantErr string
	}{
		{
			name: "call with defaults", args: []string{"call", "demo", "echo"}, wantCmd: "call <identity> <tool>",
			check: func(t *testing.T, r *root) {
				if r.Call.Input != "" || r.Call.Timeout != 60*time.Second || r.Call.Context != "" || r.Call.As != "operator" {
					t.Errorf("call: got %+v, want no input, 60s, no context, sender operator", r.Call)
				}
			},
		},
		{
			name: "call with input and flags", args: []string{"call", "demo", "echo", `{"message":"hi"}`, "--timeout", "5s", "--context", "prod", "--as", "ci"},
			wantCmd: "call <identity> <tool> <input>",
			check: func(t *testing.T, r *root) {
				if r.Call.Input != `{"message":"hi"}` || r.Call.Timeout != 5*time.Second || r.Call.Context != "prod" || r.Call.As != "ci" {
					t.Errorf("call: got %+v", r.Call)
				}
			},
		},
		{
			name: "NATS_CONTEXT selects the context", args: []string{"discover", "demo"}, env: map[string]string{"NATS_CONTEXT": "fromenv"},
			wantCmd: "discover <identity>",
			check: func(t *testing.T, r *root) {
				if got, want := r.Discover.Context, "fromenv"; got != want {
					t.Errorf("context: got %q, want %q", got, want)
				}
			},
		},
		{
			name: "--context beats NATS_CONTEXT", args: []string{"discover", "demo", "--context", "flag"}, env: map[string]string{"NATS_CONTEXT": "fromenv"},
			wantCmd: "discover <identity>",
			check: func(t *testing.T, r *root) {
				if got, want := r.Discover.Context, "flag"; got != want {
					t.Errorf("context: got %q, want %q", got, want)
				}
			},
		},
		{
			name: "json log format", args: []string{"--log-format", "json", "discover", "demo", "--json"}, wantCmd: "discover <identity>",
			check: func(t *testing.T, r *root) {
				if r.LogFormat != "json" || !r.Discover.JSON {
					t.Errorf("got log format %q json %t, want json and true", r.LogFormat, r.Discover.JSON)
				}
			},
		},
		{
			name: "serve", args: []string{"serve", "--config", cfg}, wantCmd: "serve",
			check: func(t *testing.T, r *root) {
				if r.Serve.Config != cfg || r.Serve.DrainTimeout != 10*time.Second {
					t.Errorf("serve: got %+v, want the config and a 10s drain", r.Serve)
				}
			},
		},
		{
			name: "audit tail with defaults", args: []string{"audit", "tail"}, wantCmd: "audit tail",
			check: func(t *testing.T, r *root) {
				if r.Audit.Tail != (auditTailCmd{}) {
					t.Errorf("audit tail: got %+v, want no flags set", r.Audit.Tail)
				}
			},
		},
		{
			name: "audit tail of one identity as JSON", args: []string{"audit", "tail", "--identity", "demo", "--json", "--context", "ops"}, wantCmd: "audit tail",
			check: func(t *testing.T, r *root) {
				if want := (auditTailCmd{natsFlags: natsFlags{Context: "ops"}, Identity: "demo", JSON: true}); r.Audit.Tail != want {
					t.Errorf("audit tail: got %+v, want %+v", r.Audit.Tail, want)
				}
			},
		},
		{
			name: "init with defaults", args: []string{"init", "--application", "fiskdemo", "--identity", "demo"}, wantCmd: "init",
			check: func(t *testing.T, r *root) {
				want := initCmd{Application: "fiskdemo", Identity: "demo", Output: "agent.yaml"}
				if got := r.Init; got.Application != want.Application || got.Identity != want.Identity || got.Output != want.Output ||
					got.A2A || got.MCP || got.Force || got.NATSContext != "" || len(got.ConfirmTag) != 0 {
					t.Errorf("init: got %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "init with every flag",
			args: []string{"init", "--application", "nats", "--identity", "n", "--a2a", "--mcp", "--force", "-o", "n.yaml",
				"--nats-context", "prod", "--confirm-tag", "impact:rw", "--confirm-tag", "scope:system"},
			env: map[string]string{"NATS_CONTEXT": "fromenv"}, wantCmd: "init",
			check: func(t *testing.T, r *root) {
				got := r.Init
				if !got.A2A || !got.MCP || !got.Force || got.Output != "n.yaml" || got.NATSContext != "prod" ||
					!slices.Equal(got.ConfirmTag, []string{"impact:rw", "scope:system"}) {
					t.Errorf("init: got %+v", got)
				}
			},
		},
		{
			name: "NATS_CONTEXT names init's context", args: []string{"init", "--application", "nats", "--identity", "n"},
			env: map[string]string{"NATS_CONTEXT": "fromenv"}, wantCmd: "init",
			check: func(t *testing.T, r *root) {
				if got, want := r.Init.NATSContext, "fromenv"; got != want {
					t.Errorf("init --nats-context: got %q, want %q", got, want)
				}
			},
		},
		{name: "init without an application", args: []string{"init", "--identity", "demo"}, wantErr: "--application"},
		{name: "init without an identity", args: []string{"init", "--application", "fiskdemo"}, wantErr: "--identity"},
		{name: "audit tail with identity and subject", args: []string{"audit", "tail", "--identity", "a", "--subject", "b"}, wantErr: "can't be used together"},
		{name: "serve without config", args: []string{"serve"}, wantErr: "--config"},
		{name: "serve with a missing config", args: []string{"serve", "--config", cfg + ".missing"}, wantErr: "agent.yaml.missing"},
		{name: "unknown log format", args: []string{"--log-format", "xml", "discover", "demo"}, wantErr: "log-format"},
		{name: "call without a tool", args: []string{"call", "demo"}, wantErr: "<tool>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATS_CONTEXT", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r, cmd, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse %v: got error %v, want one naming %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse %v: %v", tt.args, err)
			}
			if cmd != tt.wantCmd {
				t.Errorf("command: got %q, want %q", cmd, tt.wantCmd)
			}
			tt.check(t, r)
		})
	}
}

func TestServerConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     config.Config
		version string
		want    server.Config
	}{
		{
			name:    "no limits set: the server's defaults",
			cfg:     config.Config{Identity: "demo", ApplicationPath: "/bin/app", Expose: config.Expose{Agent: config.Agent{A2A: &config.A2A{ServeTools: true}}}},
			version: "dev",
			want:    server.Config{Identity: "demo", Version: natsbus.ServiceVersion},
		},
		{
			name: "limits from expose.agent.a2a",
			cfg: config.Config{Identity: "demo", ApplicationPath: "/bin/app", Expose: config.Expose{Agent: config.Agent{A2A: &config.A2A{
				ServeTools: true, MaxConcurrentTools: 4, ToolTimeout: config.Duration{Duration: 10 * time.Second},
			}}}},
			version: "1.2.3",
			want:    server.Config{Identity: "demo", Version: "1.2.3", MaxConcurrent: 4, Timeout: 10 * time.Second},
		},
		{
			name: "MCP limits do not apply",
			cfg: config.Config{Identity: "demo", ApplicationPath: "/bin/app", Expose: config.Expose{Agent: config.Agent{
				A2A: &config.A2A{ServeTools: true},
				MCP: &config.MCP{MaxConcurrentTools: 9, ToolTimeout: config.Duration{Duration: time.Minute}},
			}}},
			version: "",
			want:    server.Config{Identity: "demo", Version: natsbus.ServiceVersion},
		},
		{
			name: "audit.arguments: digest",
			cfg: config.Config{Identity: "demo", ApplicationPath: "/bin/app", Audit: &config.Audit{Arguments: config.AuditArgumentsDigest},
				Expose: config.Expose{Agent: config.Agent{A2A: &config.A2A{ServeTools: true}}}},
			version: "1.2.3",
			want:    server.Config{Identity: "demo", Version: "1.2.3", AuditDigestOnly: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := serverConfig(&tt.cfg, tt.version, nil)
			if got.AuditDigestOnly != tt.want.AuditDigestOnly {
				t.Errorf("audit digest only: got %t, want %t", got.AuditDigestOnly, tt.want.AuditDigestOnly)
			}
			if got.Identity != tt.want.Identity || got.Version != tt.want.Version || got.MaxConcurrent != tt.want.MaxConcurrent || got.Timeout != tt.want.Timeout {
				t.Errorf("got identity %q version %q max %d timeout %s, want %q %q %d %s",
					got.Identity, got.Version, got.MaxConcurrent, got.Timeout,
					tt.want.Identity, tt.want.Version, tt.want.MaxConcurrent, tt.want.Timeout)
			}
			if got, want := got.Metadata["fiskfleet.application"], tt.cfg.ApplicationPath; got != want {
				t.Errorf("metadata fiskfleet.application: got %q, want %q", got, want)
			}
		})
	}
}

// TestClientCommandsRender runs discover and call in-process against an
// agent serving in-process tools, whose output is not a CommandResult: the
// rendering paths the demo app cannot reach.
func TestClientCommandsRender(t *testing.T) {
	ns := natstest.Start(t)
	t.Setenv("XDG_CONFIG_HOME", ns.WriteContext(t, t.TempDir(), "cli-test", nil))
	t.Setenv("NATS_CONTEXT", "")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	mk := func(name, desc string, out tool.Outcome) tool.Tool {
		tl, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Description: desc, Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) { return out, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	srv, err := server.New(server.Config{Identity: "inproc", Logger: log}, []tool.Tool{
		mk("status", "Reports status\nin two lines", tool.Outcome{JSON: json.RawMessage(`{"ok":true}`)}),
		mk("broken", "Always fails", tool.Failure("nope")),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ns.Connect(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })

	flags := clientFlags{natsFlags: natsFlags{Context: "cli-test"}, Timeout: 10 * time.Second, As: "operator"}
	tests := []struct {
		name       string
		run        func(env) error
		wantErr    error
		wantStdout []string
		notStdout  string
	}{
		{
			name: "discover renders the first description line",
			run: func(e env) error {
				return (&discoverCmd{clientFlags: flags, Identity: "inproc"}).Run(t.Context(), log, e)
			},
			wantStdout: []string{"agent inproc version 0.0.0", "TOOL (2)", "status    Reports status\n", "broken    Always fails\n"},
			notStdout:  "in two lines",
		},
		{
			name: "call prints an in-process tool's JSON verbatim",
			run: func(e env) error {
				return (&callCmd{clientFlags: flags, Identity: "inproc", Tool: "status"}).Run(t.Context(), log, e)
			},
			wantStdout: []string{"{\"ok\":true}\n"},
		},
		{
			name: "an in-band failure exits 1",
			run: func(e env) error {
				return (&callCmd{clientFlags: flags, Identity: "inproc", Tool: "broken"}).Run(t.Context(), log, e)
			},
			wantErr:    exitCode(1),
			wantStdout: []string{"error: nope\n"},
		},
		{
			name: "input must be JSON",
			run: func(e env) error {
				return (&callCmd{clientFlags: flags, Identity: "inproc", Tool: "status", Input: "{"}).Run(t.Context(), log, e)
			},
			wantErr: errInput,
		},
		{
			name: "an absent agent is unavailable",
			run: func(e env) error {
				return (&callCmd{clientFlags: clientFlags{natsFlags: natsFlags{Context: "cli-test"}, Timeout: 2 * time.Second, As: "operator"}, Identity: "absent", Tool: "status"}).Run(t.Context(), log, e)
			},
			wantErr: a2a.ErrAgentUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := tt.run(env{stdout: &out, version: "test"})
			switch {
			case tt.wantErr == errInput:
				if err == nil || !strings.Contains(err.Error(), "input is not valid JSON") {
					t.Errorf("error: got %v, want invalid input", err)
				}
			case !errors.Is(err, tt.wantErr):
				t.Errorf("error: got %v, want %v", err, tt.wantErr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout: got %q, want it to contain %q", out.String(), want)
				}
			}
			if tt.notStdout != "" && strings.Contains(out.String(), tt.notStdout) {
				t.Errorf("stdout: got %q, want no %q", out.String(), tt.notStdout)
			}
		})
	}
}
