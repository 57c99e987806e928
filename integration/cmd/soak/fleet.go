package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goccy/go-yaml"
)

// stopGrace is how long the launcher gets to stop its children after
// SIGTERM (its own budget is 5 s per child) before it is killed.
const stopGrace = 15 * time.Second

// The launcher's ready block, as integration/cmd/devfleet prints it.
var (
	readyMarker = "Stop:         Ctrl-C"
	mcpURLRE    = regexp.MustCompile(`Claude Code:\s+claude mcp add --transport http \S+ (http://\S+/mcp)\n`)
	contextRE   = regexp.MustCompile(`NATS:\s+nats --context (\S+) micro ls\n`)
)

// process is one watched process of the fleet.
type process struct {
	name string
	pid  int
}

// fleet is a running dev fleet launcher and what it printed.
type fleet struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{} // closed when the launcher has exited
	mcpURL         string
	natsURL        string
	// procs are the launcher (which also runs the NATS server), its
	// agents and its gateway.
	procs []process
}

// lockedBuffer collects a child's output while it runs.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// soakConfig writes the dev fleet's demo.yaml with the gateway moved to a
// free loopback port, so a soak runs beside `make run` or anything else
// on 8080, and returns its path.
func soakConfig(root, dir string) (string, error) {
	src := filepath.Join(root, "integration", "examples", "demo.yaml")
	b, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("reading the dev fleet config: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("parsing %s: %w", src, err)
	}
	expose, _ := doc["expose"].(map[string]any)
	agent, _ := expose["agent"].(map[string]any)
	mcp, _ := agent["mcp"].(map[string]any)
	if mcp == nil {
		return "", fmt.Errorf("%s: no expose.agent.mcp to serve the soak's MCP calls", src)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	mcp["address"], mcp["port"] = "127.0.0.1", port
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("rendering the soak config: %w", err)
	}
	path := filepath.Join(dir, "soak.yaml")
	return path, os.WriteFile(path, out, 0o600)
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startFleet runs the launcher at bin with the config cfg and its files
// in dir, waits for its ready block and finds its children. On error the
// launcher is stopped.
func startFleet(ctx context.Context, bin, dir, cfg string, agents int, timeout time.Duration) (*fleet, error) {
	natsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	f := &fleet{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	f.cmd = exec.Command(bin, "--dir", dir, "--config", cfg, "--nats-port", strconv.Itoa(natsPort), "--agents", strconv.Itoa(agents))
	f.cmd.Stdout, f.cmd.Stderr = f.stdout, f.stderr
	// The launcher, and through it the fleet, must not outlive the soak.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = f.cmd.Wait()
		close(f.done)
	}()
	if err := f.ready(ctx, agents, timeout); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func (f *fleet) ready(ctx context.Context, agents int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(f.stdout.String(), readyMarker) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.done:
			return fmt.Errorf("the dev fleet exited while starting (%s):\n%s", f.cmd.ProcessState, f.stderr)
		case <-deadline.C:
			return fmt.Errorf("the dev fleet was not ready after %s:\n%s", timeout, f.stderr)
		case <-tick.C:
		}
	}
	out := f.stdout.String()
	u, c := mcpURLRE.FindStringSubmatch(out), contextRE.FindStringSubmatch(out)
	if u == nil || c == nil {
		return fmt.Errorf("the dev fleet's ready block has no MCP URL or nats context:\n%s", out)
	}
	f.mcpURL = u[1]
	var nctx struct {
		URL string `json:"url"`
	}
	b, err := os.ReadFile(c[1])
	if err == nil {
		err = json.Unmarshal(b, &nctx)
	}
	if err != nil || nctx.URL == "" {
		return fmt.Errorf("reading the fleet's nats context %s: got %q (%v), want a url", c[1], b, err)
	}
	f.natsURL = nctx.URL

	launcher := f.cmd.Process.Pid
	f.procs = []process{{name: "devfleet+nats", pid: launcher}}
	var gateways []int
	agentPIDs, err := childrenOf(launcher)
	if err != nil {
		return err
	}
	n := 0
	for _, pid := range agentPIDs {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(comm)) {
		case "a2a-agent":
			n++
			f.procs = append(f.procs, process{name: fmt.Sprintf("agent-%d", n), pid: pid})
		case "mcp-gateway":
			gateways = append(gateways, pid)
		}
	}
	if n != agents || len(gateways) != 1 {
		return fmt.Errorf("the launcher (pid %d) has %d a2a-agent and %d mcp-gateway children, want %d and 1", launcher, n, len(gateways), agents)
	}
	f.procs = append(f.procs, process{name: "gateway", pid: gateways[0]})
	return nil
}

// childrenOf lists the live processes whose parent is ppid, in PID order.
func childrenOf(ppid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("reading /proc: %w", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …"; comm may hold spaces or ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		if parent, err := strconv.Atoi(fields[1]); err == nil && parent == ppid {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out, nil
}

// exited reports whether the launcher has exited; it stops the fleet when
// any child dies.
func (f *fleet) exited() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// stop sends the launcher SIGTERM by its PID, which stops every child,
// and kills it after stopGrace. It returns an error when the launcher
// had to be killed.
func (f *fleet) stop() error {
	if f.exited() {
		return nil
	}
	_ = syscall.Kill(f.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-f.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(f.cmd.Process.Pid, syscall.SIGKILL)
	<-f.done
	return errors.New("the dev fleet did not stop on SIGTERM and was killed")
}
