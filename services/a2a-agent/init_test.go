package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// dropped is a command a written file lists as not served.
type dropped struct{ reason, tags string }

// listing reads the selection a written file lists in its comments: the
// served commands, in order, and the dropped ones with their reason and
// tags.
func listing(tb testing.TB, file string) (served []string, drop map[string]dropped) {
	tb.Helper()
	drop = map[string]dropped{}
	section, reason := "", ""
	for l := range strings.Lines(file) {
		l = strings.TrimRight(l, "\n")
		switch {
		case strings.HasPrefix(l, "# Served over A2A ("):
			section = "served"
		case strings.HasPrefix(l, "# Not served ("):
			section = "dropped"
		case l == "#" || !strings.HasPrefix(l, "# "):
			section = ""
		case section == "served":
			served = append(served, strings.Fields(l)[1])
		case section == "dropped" && !strings.HasPrefix(l, "#     "):
			reason = strings.TrimSpace(strings.TrimPrefix(l, "#"))
		case section == "dropped":
			f := strings.Fields(l)
			d := dropped{reason: reason}
			if len(f) > 2 {
				d.tags = f[2]
			}
			drop[f[1]] = d
		}
	}
	if len(served) == 0 {
		tb.Fatalf("got no served commands listed in the file, want its selection:\n%s", file)
	}
	return served, drop
}

// infoListing reads what `a2a-agent info` printed: the served tools, in
// order, and each dropped one's reason.
func infoListing(out string) (served []string, reasons map[string]string) {
	reasons = map[string]string{}
	section := ""
	for l := range strings.Lines(out) {
		l = strings.TrimRight(l, "\n")
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "SERVED ("):
			section = "served"
		case strings.HasPrefix(l, "DROPPED ("):
			section = "dropped"
		case len(f) == 0:
			section = ""
		case section == "served":
			served = append(served, f[0])
		case section == "dropped":
			reasons[f[0]] = strings.TrimSpace(strings.TrimPrefix(l, f[0]))
		}
	}
	return served, reasons
}

// TestInitServes writes a file with `a2a-agent init` for the demo
// application and for the real nats CLI, and shows that it is what the
// services take: info accepts it unchanged and lists exactly what its
// comments list, with the same reasons; serve starts from it against a
// NATS server, and discovery answers with the commands the file lists as
// served. The comments name the gated and denied commands with why.
func TestInitServes(t *testing.T) {
	ns := natstest.Start(t)
	h := newCLIHome(t)
	ns.WriteContext(t, h.dir, "init-test", nil)
	const gated = "gated (ai:confirm or confirm_tags)"
	tests := []struct {
		name     string
		app      string
		identity string
		args     []string
		served   []string
		// drop is a reason the file must list each command under, and
		// tags, when set, a tag its row must show.
		drop map[string]dropped
	}{
		{
			name: "demo application, both surfaces", app: fisktest.FiskDemo(t), identity: "demo",
			served: []string{"echo", "restart", "cluster_node_status"},
			drop: map[string]dropped{
				"deploy":  {reason: gated, tags: "ai:confirm"},
				"destroy": {reason: "tagged ai:deny"},
				"linger":  {reason: "hidden command"},
				"noop":    {reason: "empty description"},
			},
		},
		{
			name: "nats CLI gated by impact:rw", app: fisktest.NATSCLI(t), identity: "natscli",
			args:   []string{"--a2a", "--confirm-tag", "impact:rw"},
			served: []string{"stream_info", "stream_ls", "server_ping"},
			drop: map[string]dropped{
				"stream_add":     {reason: gated, tags: "impact:rw"},
				"stream_rm":      {reason: gated, tags: "impact:rw"},
				"kv_put":         {reason: gated, tags: "impact:rw"},
				"account_backup": {reason: "hidden command"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			args := append([]string{"init", "--application", tt.app, "--identity", tt.identity, "--nats-context", "init-test", "--output", path}, tt.args...)
			r := h.run(t, args...)
			if r.code != 0 {
				t.Fatalf("init: exit code %d, stderr:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stdout, "wrote "+path) {
				t.Errorf("init stdout: got %q, want it to name the file written", r.stdout)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file := string(raw)
			served, drop := listing(t, file)
			for _, name := range tt.served {
				if !slices.Contains(served, name) {
					t.Errorf("got served %v, want %s among them", served, name)
				}
			}
			for name, want := range tt.drop {
				got, ok := drop[name]
				if !ok || !strings.HasPrefix(got.reason, want.reason) || !strings.Contains(got.tags, want.tags) {
					t.Errorf("%s: got %+v (listed %t), want it dropped as %q with tag %q", name, got, ok, want.reason, want.tags)
				}
			}

			info := h.run(t, "info", "--config", path)
			if info.code != 0 {
				t.Fatalf("info: exit code %d, stderr:\n%s", info.code, info.stderr)
			}
			infoServed, reasons := infoListing(info.stdout)
			if !slices.Equal(infoServed, served) {
				t.Errorf("info lists served %v, the file %v: want the same", infoServed, served)
			}
			if len(reasons) != len(drop) {
				t.Errorf("info lists %d dropped, the file %d: want the same", len(reasons), len(drop))
			}
			for name, d := range drop {
				if reasons[name] != d.reason {
					t.Errorf("%s: info gives reason %q, the file %q: want the same", name, reasons[name], d.reason)
				}
			}

			agent := h.start(t, "serve", "--config", path)
			fisktest.WaitFor(t, 30*time.Second, "a2a-agent serve to serve", func() bool {
				return strings.Contains(agent.stderr.String(), "serving over A2A")
			})
			c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "tester"})
			if err != nil {
				t.Fatal(err)
			}
			card, err := c.Discover(t.Context(), tt.identity)
			if err != nil {
				t.Fatalf("discover: %v\nstderr:\n%s", err, agent.stderr)
			}
			var tools []string
			for _, tl := range card.Tools {
				tools = append(tools, tl.Name)
			}
			if !slices.Equal(tools, served) {
				t.Errorf("discovery: got tools %v, want the file's served %v", tools, served)
			}
			if err := syscall.Kill(agent.cmd.Process.Pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := agent.exit(t); code != 0 {
				t.Errorf("serve: exit code %d after SIGTERM, want 0; stderr:\n%s", code, agent.stderr)
			}
		})
	}
}

// TestInitSurfaces checks what each choice of surfaces writes, and that
// info takes every such file while serve names the key it still needs; a
// file enabling MCP is taken by mcp-gateway info too.
func TestInitSurfaces(t *testing.T) {
	h := newCLIHome(t)
	app := fisktest.FiskDemo(t)
	tests := []struct {
		name      string
		args      []string
		want      []string
		wantNot   []string
		serveErr  string // what serve's refusal names; empty: not run
		wantHints []string
		// gateway runs mcp-gateway info on the file, which must take it
		// and list the gated deploy as served, as the file's note says.
		gateway bool
	}{
		{
			name:    "neither flag enables both",
			args:    []string{"--nats-context", "somewhere"},
			want:    []string{"\nnats_context: somewhere ", "\n    mcp: ", "\n    a2a: ", "\n      serve_tools: true "},
			wantNot: []string{"# nats_context:"},
			gateway: true,
		},
		{
			name:     "a2a without a nats context",
			args:     []string{"--a2a"},
			want:     []string{"\n# nats_context: NAME ", "\n    # mcp: ", "\n      serve_tools: true "},
			wantNot:  []string{"\nnats_context:", "\n    mcp:"},
			serveErr: "add nats_context: NAME",
			wantHints: []string{
				"a2a-agent serve needs nats_context",
			},
		},
		{
			name:     "mcp only",
			args:     []string{"--mcp"},
			want:     []string{"\n    mcp: ", "\n    # a2a: ", "\n    #   serve_tools: false "},
			wantNot:  []string{"serve_tools: true"},
			serveErr: "add expose.agent.a2a.serve_tools: true",
			gateway:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			r := h.run(t, append([]string{"init", "--application", app, "--identity", "demo", "--output", path}, tt.args...)...)
			if r.code != 0 {
				t.Fatalf("init: exit code %d, stderr:\n%s", r.code, r.stderr)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file := string(raw)
			for _, w := range tt.want {
				if !strings.Contains(file, w) {
					t.Errorf("got a file without %q, want it:\n%s", w, file)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(file, w) {
					t.Errorf("got a file with %q, want none", w)
				}
			}
			for _, w := range tt.wantHints {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("init stdout: got %q, want %q", r.stdout, w)
				}
			}
			if info := h.run(t, "info", "--config", path); info.code != 0 {
				t.Errorf("info: exit code %d, stderr:\n%s", info.code, info.stderr)
			}
			if tt.gateway {
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, fisktest.Build(t, fisktest.MCPGatewayPackage, "mcp-gateway"), "info", "--config", path)
				cmd.Env = h.env()
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("mcp-gateway info: %v\n%s", err, out)
				}
				if !regexp.MustCompile(`(?m)^deploy +local +yes `).Match(out) {
					t.Errorf("mcp-gateway info: got\n%s\nwant deploy served, gated", out)
				}
			}
			if tt.serveErr != "" {
				serve := h.run(t, "serve", "--config", path)
				if serve.code == 0 || !strings.Contains(serve.stderr, tt.serveErr) {
					t.Errorf("serve: got exit code %d and stderr %q, want a refusal naming %q", serve.code, serve.stderr, tt.serveErr)
				}
			}
		})
	}
}

// TestInitOverwrite shows that init leaves an existing file alone unless
// told, that --force replaces it, and that a failing init with --force
// loses nothing: the old file stays and no temporary file is left.
func TestInitOverwrite(t *testing.T) {
	h := newCLIHome(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	const mine = "identity: mine\n"
	if err := os.WriteFile(path, []byte(mine), 0o600); err != nil {
		t.Fatal(err)
	}
	initArgs := func(app string, extra ...string) []string {
		return append([]string{"init", "--application", app, "--identity", "demo", "--output", path}, extra...)
	}
	check := func(t *testing.T, want string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if want != "" && string(got) != want {
			t.Errorf("file: got %q, want %q", got, want)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("directory: got %v, want only agent.yaml", names)
		}
	}

	r := h.run(t, initArgs(fisktest.FiskDemo(t))...)
	if r.code == 0 || !strings.Contains(r.stderr, "--force") || !strings.Contains(r.stderr, path+" exists") {
		t.Errorf("without --force: got exit code %d and stderr %q, want a refusal naming the file and --force", r.code, r.stderr)
	}
	check(t, mine)

	r = h.run(t, initArgs(fisktest.FiskDemo(t), "--force")...)
	if r.code != 0 {
		t.Fatalf("with --force: exit code %d, stderr:\n%s", r.code, r.stderr)
	}
	check(t, "")
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), "\nidentity: demo ") {
		t.Errorf("with --force: got\n%s\nwant the new file", written)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("with --force: got mode %v (%v), want 0644", fi.Mode(), err)
	}

	r = h.run(t, initArgs("/bin/true", "--force")...)
	if r.code == 0 {
		t.Fatal("with --force and an application that is not a fisk application: got exit code 0, want a refusal")
	}
	check(t, string(written))
}

// TestInitRefuses runs init on bad input: each refusal says what is wrong
// and writes nothing, not even a temporary file.
func TestInitRefuses(t *testing.T) {
	h := newCLIHome(t)
	files := t.TempDir()
	plain := filepath.Join(files, "plain")
	script := filepath.Join(files, "script")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	demo := fisktest.FiskDemo(t)
	tests := []struct {
		name     string
		app      string
		identity string
		output   string // relative to the test's directory
		want     []string
	}{
		{name: "missing application", app: filepath.Join(files, "missing"), identity: "demo", want: []string{"--application", "no such file or directory"}},
		{name: "not on PATH", app: "no-such-fisk-application", identity: "demo", want: []string{"--application", "not found in $PATH"}},
		{name: "not executable", app: plain, identity: "demo", want: []string{"--application", "permission denied"}},
		{name: "a directory", app: files, identity: "demo", want: []string{"--application", "is a directory"}},
		{name: "not a fisk application", app: script, identity: "demo", want: []string{"--application", "not a fisk application"}},
		{name: "identity with a dot", app: demo, identity: "a.b", want: []string{"--identity", `"a.b" does not match`}},
		{name: "empty identity", app: demo, identity: "", want: []string{"--identity", "does not match"}},
		{name: "identity too long", app: demo, identity: strings.Repeat("x", 65), want: []string{"--identity", "does not match"}},
		{name: "missing output directory", app: demo, identity: "demo", output: "missing/agent.yaml", want: []string{"writing", "no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			output := tt.output
			if output == "" {
				output = "agent.yaml"
			}
			r := h.run(t, "init", "--application", tt.app, "--identity", tt.identity, "--output", filepath.Join(dir, output))
			if r.code == 0 {
				t.Fatalf("got exit code 0, want a refusal; stdout:\n%s", r.stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr: got %q, want it to contain %q", r.stderr, w)
				}
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
				t.Errorf("directory: got %v (%v), want it empty", entries, err)
			}
		})
	}
}
