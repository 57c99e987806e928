package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/fiskfleet/fiskfleet/integration/internal/workspace"
)

// Names the fleet uses; demo.yaml refers to the context and the binary by
// these names, resolved through XDG_CONFIG_HOME and PATH in the children's
// environment.
const (
	contextName = "fiskfleet-dev"
	identity    = "demo"
	// stopBudget is how long children get to exit after SIGTERM before
	// they are killed.
	stopBudget = 5 * time.Second
	// tailLines is how much of a crashed child's log is shown.
	tailLines = 20
)

type options struct {
	Dir          string
	NATSPort     int
	Agents       int
	Config       string
	StartTimeout time.Duration
	// Knowledge serves the repository's docs/ as knowledge with the
	// vector tier on: tools/embedder is started on EmbedderPort first.
	Knowledge    bool
	EmbedderPort int
}

// child is one started process and its log file.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// run builds, starts and supervises the fleet until ctx is done or a child
// exits; it always stops every child it started before returning.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	root, err := workspace.Root("devfleet")
	if err != nil {
		return err
	}
	if o.Config == "" {
		o.Config = filepath.Join(root, "integration", "examples", "demo.yaml")
		if o.Knowledge {
			o.Config = filepath.Join(root, "integration", "examples", "knowledge.yaml")
		}
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "fiskfleet-dev-"); err != nil {
			return err
		}
	}
	binDir := filepath.Join(o.Dir, "bin")
	cfgDir := filepath.Join(o.Dir, "config")
	logDir := filepath.Join(o.Dir, "logs")
	for _, d := range []string{binDir, cfgDir, logDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}

	fmt.Fprintln(stderr, "devfleet: building a2a-agent, mcp-gateway and fiskdemo …")
	if err := build(ctx, root, binDir); err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		return err
	}

	ns, note, err := startNATS(o.NATSPort)
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	if note != "" {
		fmt.Fprintln(stderr, "devfleet: "+note)
	}
	ctxFile, err := writeContext(cfgDir, ns.ClientURL())
	if err != nil {
		return err
	}

	env := append(childEnviron(),
		"XDG_CONFIG_HOME="+cfgDir,
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	var children []*child
	defer func() { stopAll(children, stderr) }()
	exited := make(chan *child, o.Agents+2)

	start := func(name, ready string, args ...string) error {
		c, err := startChild(name, filepath.Join(logDir, name+".log"), env, exited, args...)
		if err != nil {
			return err
		}
		children = append(children, c)
		if err := waitReady(ctx, c, ready, o.StartTimeout); err != nil {
			if ctx.Err() != nil {
				return errStopped
			}
			return fmt.Errorf("%s did not start: %w\n%s", name, err, tail(c.log))
		}
		return nil
	}
	if o.Knowledge {
		node := filepath.Join(root, "bin", "npm", "node_modules", ".bin", "node")
		script := filepath.Join(root, "tools", "embedder", "server.js")
		if _, err := os.Stat(filepath.Join(root, "tools", "embedder", "node_modules")); err != nil {
			return fmt.Errorf("the embeddings server's packages are not installed: run make tools-node (make run-knowledge does)")
		}
		if err := start("embedder", "listening http://", node, script, "--port", strconv.Itoa(o.EmbedderPort)); err != nil {
			return fmt.Errorf("%w (is port %d taken? the knowledge config names it in knowledge.embeddings.base_url)", err, o.EmbedderPort)
		}
	}
	for i := 1; i <= o.Agents; i++ {
		if err := start(fmt.Sprintf("agent-%d", i), "serving over A2A", filepath.Join(binDir, "a2a-agent"), "serve", "--config", o.Config); err != nil {
			return err
		}
	}
	if err := start("gateway", "claude mcp add", filepath.Join(binDir, "mcp-gateway"), "serve", "--config", o.Config); err != nil {
		return err
	}

	addLine := findLine(children[len(children)-1].log, "claude mcp add")
	fmt.Fprintf(stdout, `
fiskfleet dev fleet is up (%d agents on identity %q, gateway in front).

  Claude Code:  %s
  NATS:         nats --context %s micro ls
  Config:       %s
  Logs:         %s
  Stop:         Ctrl-C

`, o.Agents, identity, addLine, ctxFile, o.Config, logDir)

	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "devfleet: stopping the fleet …")
		return nil
	case c := <-exited:
		return fmt.Errorf("%s (pid %d) exited: %v; its last log lines:\n%s", c.name, c.cmd.Process.Pid, c.err, tail(c.log))
	}
}

// errStopped is a Ctrl-C before the fleet was up: not a failure.
var errStopped = errors.New("stopped while starting")

// childEnviron is this process's environment less the variables that would
// point the children somewhere else than the fleet: an operator's own nats
// context or gateway address must not move the dev fleet.
func childEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "NATS_CONTEXT", name == "NATS_URL", name == "XDG_CONFIG_HOME",
			strings.HasPrefix(name, "MCP_GATEWAY_"), strings.HasPrefix(name, "A2A_AGENT_"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

func build(ctx context.Context, root, binDir string) error {
	for name, pkg := range map[string]string{
		"a2a-agent":   "./services/a2a-agent",
		"mcp-gateway": "./services/mcp-gateway",
		"fiskdemo":    "./integration/fiskdemo",
	} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(binDir, name), pkg)
		cmd.Dir = root
		// Linked statically, as make build links them.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", name, err, out)
		}
	}
	return nil
}

// startNATS runs an embedded server on 127.0.0.1:port, or on a free port
// when port is taken (saying so).
func startNATS(port int) (*server.Server, string, error) {
	note := ""
	if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		note = fmt.Sprintf("port %d is taken; NATS uses a free port instead (the printed context points at it)", port)
		port = server.RANDOM_PORT
	} else {
		ln.Close()
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true, ServerName: "fiskfleet-dev"})
	if err != nil {
		return nil, "", fmt.Errorf("starting NATS: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, "", errors.New("starting NATS: not ready after 10s")
	}
	return ns, note, nil
}

// writeContext writes the fleet's nats context where the nats CLI looks
// under XDG_CONFIG_HOME, and returns its path (usable with --context).
func writeContext(cfgDir, url string) (string, error) {
	dir := filepath.Join(cfgDir, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, contextName+".json")
	body := fmt.Sprintf("{\n  \"description\": \"fiskfleet dev fleet\",\n  \"url\": %q\n}\n", url)
	return path, os.WriteFile(path, []byte(body), 0o600)
}

func startChild(name, logPath string, env []string, exited chan<- *child, args ...string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdout = f
	cmd.Stderr = f
	// A child must not outlive the launcher, even if the launcher is
	// killed without a chance to stop it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
		exited <- c
	}()
	return c, nil
}

// waitReady polls the child's log for marker.
func waitReady(ctx context.Context, c *child, marker string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if findLine(c.log, marker) != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return fmt.Errorf("exited: %v", c.err)
		case <-deadline.C:
			return fmt.Errorf("no %q in its log after %s", marker, timeout)
		case <-tick.C:
		}
	}
}

// stopAll sends SIGTERM to every running child by PID, waits up to
// stopBudget, then kills what is left.
func stopAll(children []*child, stderr io.Writer) {
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(stopBudget)
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() {
			select {
			case <-c.done:
			case <-deadline:
				fmt.Fprintf(stderr, "devfleet: %s (pid %d) did not stop in %s; killing it\n", c.name, c.cmd.Process.Pid, stopBudget)
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		})
	}
	wg.Wait()
}

// findLine returns the first line of the file at path containing marker,
// trimmed, or "".
func findLine(path, marker string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), marker); i >= 0 {
			return strings.TrimSpace(sc.Text()[i:])
		}
	}
	return ""
}

// tail returns the last tailLines lines of the file at path, indented.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
