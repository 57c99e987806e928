package main

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// takenPort listens on a free loopback port for the rest of the test and
// returns it.
func takenPort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listening on a free port: %v", err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// freePort returns a port nothing listened on a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listening on a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDevFleetStartNATS(t *testing.T) {
	tests := []struct {
		name     string
		port     func(testing.TB) int
		taken    bool
		wantNote string
	}{
		{name: "free port", port: freePort},
		{name: "taken port falls back", port: takenPort, taken: true, wantNote: "is taken; NATS uses a free port instead (the printed context points at it)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := tt.port(t)
			ns, note, err := startNATS(port)
			if err != nil {
				t.Fatalf("startNATS(%d): %v", port, err)
			}
			defer ns.Shutdown()
			u, err := url.Parse(ns.ClientURL())
			if err != nil {
				t.Fatalf("client URL %q: %v", ns.ClientURL(), err)
			}
			if u.Hostname() != "127.0.0.1" {
				t.Errorf("host: got %s, want 127.0.0.1", u.Hostname())
			}
			gotPort, _ := strconv.Atoi(u.Port())
			if tt.taken == (gotPort == port) {
				t.Errorf("port: got %d asking for %d (taken %t), want the asked port only when it is free", gotPort, port, tt.taken)
			}
			switch {
			case tt.wantNote == "" && note != "":
				t.Errorf("note: got %q, want none", note)
			case tt.wantNote != "" && note != fmt.Sprintf("port %d %s", port, tt.wantNote):
				t.Errorf("note: got %q, want %q", note, fmt.Sprintf("port %d %s", port, tt.wantNote))
			}
		})
	}
}

func TestDevFleetTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines int) string {
		var b strings.Builder
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"short log whole", write("short.log", 2), "  line 1\n  line 2"},
		{"long log last lines", write("long.log", tailLines+5), lastLines(6, tailLines+5)},
		{"missing log", filepath.Join(dir, "none.log"), "  (no log: open " + filepath.Join(dir, "none.log") + ": no such file or directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tail(tt.path); got != tt.want {
				t.Errorf("tail: got %q, want %q", got, tt.want)
			}
		})
	}
}

// lastLines is how tail shows lines from to to of a log written by
// TestDevFleetTail.
func lastLines(from, to int) string {
	var ls []string
	for i := from; i <= to; i++ {
		ls = append(ls, fmt.Sprintf("  line %d", i))
	}
	return strings.Join(ls, "\n")
}

func TestDevFleetFindLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gateway.log")
	log := "level=INFO msg=starting\nclaude mcp add --transport http demo http://127.0.0.1:8080/mcp  \n"
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		marker, want string
	}{
		{"claude mcp add", "claude mcp add --transport http demo http://127.0.0.1:8080/mcp"},
		{"msg=starting", "msg=starting"},
		{"absent", ""},
	}
	for _, tt := range tests {
		if got := findLine(p, tt.marker); got != tt.want {
			t.Errorf("findLine(%q): got %q, want %q", tt.marker, got, tt.want)
		}
	}
}

// TestDevFleetStopsOnAChildThatDoesNotStart runs the whole launcher on a config
// whose application is not a fisk app: the first agent exits, and run
// fails naming it with its last log lines, after saying that the NATS port
// it was given is taken. The fleet never reaches the gateway, so this test
// binds neither 8080 nor 4222.
func TestDevFleetStopsOnAChildThatDoesNotStart(t *testing.T) {
	dir := t.TempDir()
	app := filepath.Join(dir, "not-fisk")
	if err := os.WriteFile(app, []byte("#!/bin/sh\necho 'this is not a fisk application'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	yaml := fmt.Sprintf("identity: demo\napplication_path: %s\nnats_context: %s\nexpose:\n  agent:\n    a2a:\n      serve_tools: true\n", app, contextName)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	port := takenPort(t)
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), options{
		Dir:          filepath.Join(dir, "fleet"),
		NATSPort:     port,
		Agents:       2,
		Config:       cfg,
		StartTimeout: time.Minute,
	}, &stdout, &stderr)
	if err == nil {
		t.Fatalf("run: got nil, want an error naming agent-1\nstderr:\n%s", stderr.String())
	}
	msg := err.Error()
	for _, want := range []string{
		"agent-1 did not start: exited: exit status 1\n",
		// The agent's own last log line, indented, naming the cause.
		"  a2a-agent: " + cfg + ": application_path: ",
		"not a fisk application",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("run error: got\n%s\nwant it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "agent-2") {
		t.Errorf("run error: got\n%s\nwant no second agent started after the first failed", msg)
	}
	if want := fmt.Sprintf("devfleet: port %d is taken; NATS uses a free port instead", port); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr: got\n%s\nwant %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: got %q, want no ready block from a fleet that did not start", stdout.String())
	}
}

// TestDevFleetChildEnviron keeps an operator's own NATS and gateway
// settings from moving the dev fleet's children.
func TestDevFleetChildEnviron(t *testing.T) {
	t.Setenv("NATS_CONTEXT", "production")
	t.Setenv("MCP_GATEWAY_PORT", "9999")
	t.Setenv("A2A_AGENT_CONFIG", "/etc/agent.yaml")
	t.Setenv("DEVFLEET_KEEP", "yes")
	env := childEnviron()
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "NATS_CONTEXT" || name == "MCP_GATEWAY_PORT" || name == "A2A_AGENT_CONFIG" {
			t.Errorf("child environment keeps %s", kv)
		}
	}
	if !slices.Contains(env, "DEVFLEET_KEEP=yes") {
		t.Error("child environment lost an unrelated variable")
	}
}
