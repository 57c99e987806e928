package fleettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// Timeouts of the process helpers. They are generous because a loaded
// two-core CI machine can be slow to start a Go binary; none is a sleep,
// each only bounds a wait for something that normally takes milliseconds.
const (
	// StopGrace is how long a process gets to exit after SIGTERM when the
	// test ends, before it is killed. a2a-agent drains in-flight calls on
	// SIGTERM, so this is longer than any call a test leaves running.
	StopGrace = 15 * time.Second
	// ReadyTimeout bounds [StartAgent]'s wait for the serving log line.
	ReadyTimeout = 30 * time.Second
	// RunTimeout bounds a [Run]; the process is killed after it.
	RunTimeout = 60 * time.Second
)

// A2AServingLog is what `a2a-agent serve` logs once its service is
// registered on the NATS server and reachable.
const A2AServingLog = "serving over A2A"

// Process is a child process started by [Start]. Its stdout and stderr are
// captured in memory, separately and interleaved. It is safe for
// concurrent use.
type Process struct {
	// Name is the binary's base name, for messages.
	Name string
	// PID is the child's process id. The commands an agent runs see it as
	// their parent: fiskdemo's sleep prints it as ppid=.
	PID int

	cmd                    *exec.Cmd
	stdout, stderr, output *fisktest.Buffer
	// done is closed once the process has exited and its output is read;
	// state and waitErr are set before.
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
}

// Start starts the binary at path with args in env (see [Home.Env]),
// capturing its output. When the test ends the process gets SIGTERM, then
// SIGKILL after [StopGrace], and its output is logged if the test failed.
func Start(tb testing.TB, env []string, path string, args ...string) *Process {
	tb.Helper()
	p := &Process{
		Name:   filepath.Base(path),
		stdout: &fisktest.Buffer{},
		stderr: &fisktest.Buffer{},
		output: &fisktest.Buffer{},
		done:   make(chan struct{}),
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = io.MultiWriter(p.stdout, p.output)
	cmd.Stderr = io.MultiWriter(p.stderr, p.output)
	// Stop waiting for output a grandchild might still hold once the child
	// itself has exited.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		tb.Fatalf("fleettest: starting %s: %v", path, err)
	}
	p.cmd, p.PID = cmd, cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		p.state, p.waitErr = cmd.ProcessState, err
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.stop()
		if tb.Failed() {
			tb.Logf("fleettest: output of %s %s (pid %d, %s):\n%s", p.Name, strings.Join(args, " "), p.PID, p.status(), p.Output())
		}
	})
	return p
}

// stop ends the process if it still runs: SIGTERM, then SIGKILL after
// StopGrace, always by its PID.
func (p *Process) stop() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(StopGrace):
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	<-p.done
}

// Stdout returns what the process has written to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr returns what the process has written to stderr so far (the
// services' logs).
func (p *Process) Stderr() string { return p.stderr.String() }

// Output returns stdout and stderr interleaved as written so far.
func (p *Process) Output() string { return p.output.String() }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode returns the exit status once the process has exited: its code,
// or 128 plus the signal number when a signal ended it (as a shell
// reports it). It returns -1 while the process runs.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return exitStatus(p.state)
}

func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (p *Process) status() string {
	if !p.Exited() {
		return "running"
	}
	return fmt.Sprintf("exit status %d", p.ExitCode())
}

// WaitOutput waits until the process's output contains substr, failing tb
// if timeout passes or the process exits first.
func (p *Process) WaitOutput(tb testing.TB, substr string, timeout time.Duration) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.Output(), substr) {
		select {
		case <-p.done:
			if strings.Contains(p.Output(), substr) {
				return
			}
			tb.Fatalf("fleettest: %s (pid %d) exited with status %d before printing %q:\n%s", p.Name, p.PID, p.ExitCode(), substr, p.Output())
		case <-deadline.C:
			tb.Fatalf("fleettest: %s (pid %d) did not print %q within %s:\n%s", p.Name, p.PID, substr, timeout, p.Output())
		case <-tick.C:
		}
	}
}

// Signal sends sig to the process by its PID.
func (p *Process) Signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := syscall.Kill(p.PID, sig); err != nil {
		tb.Fatalf("fleettest: signalling %s (pid %d) with %s: %v", p.Name, p.PID, sig, err)
	}
}

// Kill kills the process with SIGKILL by its PID, as kill -9 does, and
// waits until it is gone.
func (p *Process) Kill(tb testing.TB) {
	tb.Helper()
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		tb.Fatalf("fleettest: killing %s (pid %d): %v", p.Name, p.PID, err)
	}
	p.Wait(tb, StopGrace)
}

// Wait waits until the process exits and returns its [Process.ExitCode],
// failing tb if it is still running after timeout.
func (p *Process) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-p.done:
		return p.ExitCode()
	case <-time.After(timeout):
		tb.Fatalf("fleettest: %s (pid %d) still running after %s:\n%s", p.Name, p.PID, timeout, p.Output())
		return -1
	}
}

// StartAgent starts `a2a-agent serve --config config` with extra args in
// env and waits until it logs [A2AServingLog], failing tb with its output
// if it exits or takes longer than [ReadyTimeout].
func StartAgent(tb testing.TB, env []string, config string, args ...string) *Process {
	tb.Helper()
	p := Start(tb, env, A2AAgent(tb), append([]string{"serve", "--config", config}, args...)...)
	p.WaitOutput(tb, A2AServingLog, ReadyTimeout)
	return p
}

// Result is what a finished [Run] produced.
type Result struct {
	Stdout   string
	Stderr   string
	ExitCode int
	// Elapsed is the wall time the process took.
	Elapsed time.Duration
}

// Run runs the binary at path with args in env to completion and returns
// its output and exit status. A non-zero exit is a result, not a failure;
// a process still running after [RunTimeout] is killed and fails tb.
func Run(tb testing.TB, env []string, path string, args ...string) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), RunTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: exitStatus(cmd.ProcessState), Elapsed: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		tb.Fatalf("fleettest: %s %s did not finish within %s:\nstdout:\n%s\nstderr:\n%s", path, strings.Join(args, " "), RunTimeout, res.Stdout, res.Stderr)
	case err != nil && !errors.As(err, &exitErr):
		tb.Fatalf("fleettest: running %s: %v", path, err)
	}
	return res
}
