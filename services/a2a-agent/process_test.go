package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// TestMain (fisktest.Main, which builds the binaries) is in
// approvals_test.go.

// process is a running a2a-agent.
type process struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *fisktest.Buffer
	done   chan error
}

// startAgent runs the a2a-agent binary with args and extra environment.
// The process is killed by its PID at the end of the test if it still
// runs.
func startAgent(tb testing.TB, env []string, args ...string) *process {
	tb.Helper()
	cmd := exec.Command(fisktest.Build(tb, fisktest.A2AAgentPackage, "a2a-agent"), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("piping stdout: %v", err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 256), stderr: &fisktest.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting a2a-agent: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// waitStderr waits until the process has written want to stderr.
func (p *process) waitStderr(tb testing.TB, want string) {
	tb.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.stderr.String(), want) {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("a2a-agent did not write %q within 30s; stderr:\n%s", want, p.stderr)
		}
	}
}

// line returns the next line of stdout, failing tb after 10 s.
func (p *process) line(tb testing.TB) string {
	tb.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			tb.Fatalf("a2a-agent ended; stderr:\n%s", p.stderr)
		}
		return l
	case <-time.After(10 * time.Second):
		tb.Fatalf("no line on stdout within 10s; stderr:\n%s", p.stderr)
	}
	return ""
}

// stop sends sig and waits for the process to end, failing tb unless it
// ends with status 0 within 15 s.
func (p *process) stop(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("signalling a2a-agent: %v", err)
	}
	for range p.lines {
	}
	select {
	case err := <-p.done:
		if err != nil {
			tb.Errorf("a2a-agent exit: got %v, want status 0; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		tb.Fatalf("a2a-agent still running 15s after %s; stderr:\n%s", sig, p.stderr)
	}
}
