package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

func TestMain(m *testing.M) { fisktest.Main(m) }

// writeConfig writes an agent.yaml serving the demo app with extra MCP
// settings (YAML lines under expose.agent.mcp) and top-level lines.
func writeConfig(tb testing.TB, mcpLines, topLines string) string {
	tb.Helper()
	body := "identity: demo\napplication_path: " + fisktest.FiskDemo(tb) + "\n" + topLines + "expose:\n  agent:\n    mcp:\n"
	if mcpLines == "" {
		mcpLines = "instructions: Use the demo tools.\n"
	}
	for line := range strings.SplitSeq(strings.TrimRight(mcpLines, "\n"), "\n") {
		body += "      " + line + "\n"
	}
	path := filepath.Join(tb.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		tb.Fatalf("writing the config: %v", err)
	}
	return path
}

// gatewayProc is a running mcp-gateway process.
type gatewayProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *fisktest.Buffer
	done   chan error
}

// startGateway runs the binary with args and extra environment. The process
// is killed by its PID when the test ends, if it is still running.
func startGateway(tb testing.TB, env []string, args ...string) *gatewayProc {
	tb.Helper()
	cmd := exec.Command(fisktest.Build(tb, fisktest.MCPGatewayPackage, "mcp-gateway"), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("piping stdout: %v", err)
	}
	g := &gatewayProc{cmd: cmd, lines: make(chan string, 64), stderr: &fisktest.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting mcp-gateway: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
		close(g.lines)
		g.done <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return g
}

var addLine = regexp.MustCompile(`^claude mcp add --transport http demo (http://127\.0\.0\.1:\d+/mcp)`)

// url waits for the claude mcp add line and returns the URL in it.
func (g *gatewayProc) url(tb testing.TB) (string, string) {
	tb.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-g.lines:
			if !ok {
				tb.Fatalf("mcp-gateway ended without printing its address; stderr:\n%s", g.stderr)
			}
			if m := addLine.FindStringSubmatch(line); m != nil {
				return m[1], line
			}
		case <-timeout:
			tb.Fatalf("got no claude mcp add line within 30s; stderr:\n%s", g.stderr)
		}
	}
}

// wait waits for the process to end and returns its error and how long
// that took from now.
func (g *gatewayProc) wait(tb testing.TB, limit time.Duration) (error, time.Duration) {
	tb.Helper()
	start := time.Now()
	for range g.lines {
	}
	select {
	case err := <-g.done:
		return err, time.Since(start)
	case <-time.After(limit):
		tb.Fatalf("mcp-gateway still running after %s; stderr:\n%s", limit, g.stderr)
	}
	return nil, 0
}

func connect(tb testing.TB, url string, headers map[string]string) *client.Client {
	tb.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(headers))
	if err != nil {
		tb.Fatalf("creating the transport: %v", err)
	}
	c := client.NewClient(tr)
	if err := c.Start(tb.Context()); err != nil {
		tb.Fatalf("starting the client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "main-test", Version: "0"}
	if _, err := c.Initialize(tb.Context(), req); err != nil {
		tb.Fatalf("initialising: %v", err)
	}
	return c
}

func callText(tb testing.TB, c *client.Client, name string, args any) (string, bool) {
	tb.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(tb.Context(), req)
	if err != nil {
		tb.Fatalf("calling %s: %v", name, err)
	}
	var parts []string
	for _, ct := range res.Content {
		if tc, ok := mcp.AsTextContent(ct); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError
}

// TestServeShutdown runs the real binary with an event stream held open
// and shows one SIGINT ends it promptly.
func TestServeShutdown(t *testing.T) {
	g := startGateway(t, nil, "serve", "--config", writeConfig(t, "", ""), "--port", "0")
	url, _ := g.url(t)

	sessionID := initSession(t, url)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("opening the event stream: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("got HTTP %d %q, want an open event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()

	if err := syscall.Kill(g.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("sending SIGINT to %d: %v", g.cmd.Process.Pid, err)
	}
	err, took := g.wait(t, 10*time.Second)
	if err != nil {
		t.Errorf("got exit %v, want a clean exit; stderr:\n%s", err, g.stderr)
	}
	if took >= 6*time.Second {
		t.Errorf("got exit after %s, want under 6s", took)
	}
	if !strings.Contains(g.stderr.String(), "msg=stopped") {
		t.Errorf("got stderr %q, want the stopped line", g.stderr)
	}
}

// initSession initialises a session-based client by hand and returns its
// session id.
func initSession(tb testing.TB, url string) string {
	tb.Helper()
	send := func(body, session string) *http.Response {
		req, _ := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatalf("posting: %v", err)
		}
		resp.Body.Close()
		return resp
	}
	resp := send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcp.LATEST_LEGACY_PROTOCOL_VERSION+`","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, "")
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		tb.Fatalf("got no Mcp-Session-Id from initialize (HTTP %d)", resp.StatusCode)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, id)
	return id
}

func TestServeToken(t *testing.T) {
	path := writeConfig(t, "auth_token_env: DEMO_MCP_TOKEN\n", "")

	t.Run("missing token variable names the key", func(t *testing.T) {
		g := startGateway(t, []string{"DEMO_MCP_TOKEN="}, "serve", "--config", path, "--port", "0")
		err, _ := g.wait(t, 30*time.Second)
		if err == nil || !strings.Contains(g.stderr.String(), "expose.agent.mcp.auth_token_env names DEMO_MCP_TOKEN, which is not set") {
			t.Errorf("got exit %v and stderr %q, want a refusal naming expose.agent.mcp.auth_token_env", err, g.stderr)
		}
	})

	t.Run("token required, hinted and scrubbed", func(t *testing.T) {
		const token = "tok-123"
		g := startGateway(t, []string{"DEMO_MCP_TOKEN=" + token}, "serve", "--config", path, "--port", "0")
		url, line := g.url(t)
		if want := ` --header "Authorization: Bearer $DEMO_MCP_TOKEN"`; !strings.HasSuffix(line, want) {
			t.Errorf("got %q, want it to end with %q", line, want)
		}
		resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err != nil {
			t.Fatalf("posting: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("got HTTP %d without the token, want 401", resp.StatusCode)
		}
		c := connect(t, url, map[string]string{"Authorization": "Bearer " + token})
		if out, isErr := callText(t, c, "getenv", map[string]any{"name": "DEMO_MCP_TOKEN"}); isErr || !strings.Contains(out, "DEMO_MCP_TOKEN unset") {
			t.Errorf("got %q, want the command not to see the token", out)
		}
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		if err, _ := g.wait(t, 10*time.Second); err != nil {
			t.Errorf("got exit %v after SIGTERM, want a clean exit", err)
		}
	})
}

func TestServeRefusals(t *testing.T) {
	// A fisk application whose one command is named like a built-in: the
	// command claims the name first, and serve refuses to guess.
	dir := t.TempDir()
	app := filepath.Join(dir, "fakeapp")
	script := "#!/bin/sh\ncat <<'EOF'\n" +
		`{"name":"fakeapp","help":"A fake app","commands":[{"name":"knowledge_search","help":"Searches something else"}]}` +
		"\nEOF\n"
	if err := os.WriteFile(app, []byte(script), 0o755); err != nil {
		t.Fatalf("writing the fake app: %v", err)
	}
	docs := filepath.Join(dir, "docs")
	if err := os.Mkdir(docs, 0o755); err != nil {
		t.Fatalf("creating the knowledge directory: %v", err)
	}

	// A port another listener holds: serve names the address it could not
	// bind.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	defer taken.Close()
	takenPort := strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)

	tests := []struct {
		name   string
		config string
		port   string
		want   []string
	}{
		{
			name:   "built-in colliding with a command",
			config: "identity: demo\napplication_path: " + app + "\nknowledge:\n  directory: " + docs + "\nexpose:\n  agent:\n    mcp:\n      builtins: [knowledge_search]\n",
			want:   []string{"tool name collision", `command "knowledge_search"`, `in-process tool "knowledge_search"`},
		},
		{
			name:   "MCP not enabled",
			config: "identity: demo\napplication_path: " + fisktest.FiskDemo(t) + "\n",
			want:   []string{"expose.agent.mcp"},
		},
		{
			name:   "nothing to serve",
			config: "identity: demo\nexpose:\n  agent:\n    mcp: {}\n",
			want:   []string{"nothing to serve over MCP", "application_path"},
		},
		{
			name:   "address in use",
			config: "identity: demo\napplication_path: " + fisktest.FiskDemo(t) + "\nexpose:\n  agent:\n    mcp: {}\n",
			port:   takenPort,
			want:   []string{"listening on 127.0.0.1:" + takenPort},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatalf("writing the config: %v", err)
			}
			port := tt.port
			if port == "" {
				port = "0"
			}
			g := startGateway(t, nil, "serve", "--config", path, "--port", port)
			err, _ := g.wait(t, 30*time.Second)
			if err == nil {
				t.Fatal("got a clean exit, want serve to refuse")
			}
			for _, w := range tt.want {
				if !strings.Contains(g.stderr.String(), w) {
					t.Errorf("got stderr %q, want it to contain %q", g.stderr, w)
				}
			}
		})
	}
}

func TestInfo(t *testing.T) {
	g := startGateway(t, nil, "info", "--config", writeConfig(t, "port: 9999\n", "human_in_the_loop: true\n"))
	var out strings.Builder
	for line := range g.lines {
		out.WriteString(line + "\n")
	}
	if err := <-g.done; err != nil {
		t.Fatalf("got exit %v; stderr:\n%s", err, g.stderr)
	}
	for _, want := range []string{
		"agent demo over MCP at http://127.0.0.1:9999/mcp",
		"SERVED (10)",
		"deploy",
		"DROPPED (3)",
		"destroy      tagged ai:deny",
		"noop         empty description: a model has nothing to decide on",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("got listing:\n%s\nwant it to contain %q", out.String(), want)
		}
	}
	if !strings.Contains(g.stderr.String(), "human_in_the_loop has no effect") {
		t.Errorf("got stderr %q, want the human_in_the_loop warning", g.stderr)
	}
}

func intp(n int) *int { return &n }

func TestResolveAddress(t *testing.T) {
	tests := []struct {
		name     string
		flagAddr string
		flagPort *int
		mcp      *config.MCP
		want     string
	}{
		{name: "defaults", mcp: &config.MCP{}, want: "127.0.0.1:8080"},
		{name: "config address and port", mcp: &config.MCP{Address: "0.0.0.0", Port: 9000}, want: "0.0.0.0:9000"},
		{name: "config port only", mcp: &config.MCP{Port: 9000}, want: "127.0.0.1:9000"},
		{name: "flag beats config", flagAddr: "::1", flagPort: intp(7000), mcp: &config.MCP{Address: "0.0.0.0", Port: 9000}, want: "[::1]:7000"},
		{name: "flag port zero is explicit", flagPort: intp(0), mcp: &config.MCP{Port: 9000}, want: "127.0.0.1:0"},
		{name: "address with its own port", flagAddr: "localhost:7001", mcp: &config.MCP{Port: 9000}, want: "localhost:7001"},
		{name: "explicit port beats the address's", flagAddr: "localhost:7001", flagPort: intp(7002), mcp: &config.MCP{}, want: "localhost:7002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveAddress(tt.flagAddr, tt.flagPort, tt.mcp)
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
	if _, err := resolveAddress("", intp(70000), &config.MCP{}); err == nil {
		t.Error("got no error for port 70000, want one")
	}
}

func ExampleaddHint() {
	fmt.Println(addHint("ops", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, ""))
	fmt.Println(addHint("ops", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9000}, "OPS_MCP_TOKEN"))
	// Output:
	// claude mcp add --transport http ops http://127.0.0.1:8080/mcp
	// claude mcp add --transport http ops http://127.0.0.1:9000/mcp --header "Authorization: Bearer $OPS_MCP_TOKEN"
}

// TestServeRefusesUnknownOTLPProtocol: a protocol value the exporters do
// not speak stops serve at start, naming the variable, rather than
// losing every trace in silence.
func TestServeRefusesUnknownOTLPProtocol(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", name + "=http/json"},
				"serve", "--config", writeConfig(t, "", ""), "--port", "0")
			err, _ := g.wait(t, 30*time.Second)
			if err == nil {
				t.Fatal("got a clean exit, want serve to refuse")
			}
			for _, w := range []string{name, `"http/json"`, "grpc", "http/protobuf"} {
				if !strings.Contains(g.stderr.String(), w) {
					t.Errorf("got stderr %q, want it to contain %q", g.stderr, w)
				}
			}
		})
	}
}
