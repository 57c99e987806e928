package fisktest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// ScriptEvent is one line of JSON a test script prints on stdout, such
// as integration/browser/approvals.mjs: an event name and what it saw.
type ScriptEvent struct {
	Event   string `json:"event"`
	Who     string `json:"who"`
	ID      string `json:"id"`
	Tool    string `json:"tool"`
	Command string `json:"command"`
	Caller  string `json:"caller"`
	Message string `json:"message"`
	Path    string `json:"path"`
	Feed    string `json:"feed"`
}

// Script is a running script: its events, its exit, its stderr.
type Script struct {
	events chan ScriptEvent
	done   chan error
	stderr *Buffer
}

// StartScript runs script under node with env added to this process's
// environment, in a process group of its own that is killed whole (node
// and any browser it started) by its id when the test ends or after
// timeout. Lines of stdout that are not JSON events are ignored.
func StartScript(tb testing.TB, node, script string, env map[string]string, timeout time.Duration) *Script {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	s := &Script{events: make(chan ScriptEvent, 16), done: make(chan error, 1), stderr: &Buffer{}}
	cmd.Stderr = s.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("starting %s: %v", script, err)
	}
	tb.Cleanup(func() {
		cancel()
		err := <-s.done
		s.done <- err
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev ScriptEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event != "" {
				s.events <- ev
			}
		}
		close(s.events)
		err := cmd.Wait()
		// The group may hold a browser the script left behind.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		s.done <- err
	}()
	return s
}

// Next waits for the script's next event and fails tb unless it is want.
func (s *Script) Next(tb testing.TB, want string) ScriptEvent {
	tb.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			tb.Fatalf("the script ended before %q:\n%s", want, s.stderr)
		}
		if ev.Event != want {
			tb.Fatalf("the script said %+v, want %q", ev, want)
		}
		return ev
	case <-time.After(time.Minute):
		tb.Fatalf("the script said nothing within a minute, waiting for %q:\n%s", want, s.stderr)
	}
	return ScriptEvent{}
}

// Wait waits for the script to exit and fails tb unless it succeeded.
func (s *Script) Wait(tb testing.TB) {
	tb.Helper()
	for range s.events {
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			tb.Fatalf("the script failed: %v\n%s", err, s.stderr)
		}
	case <-time.After(time.Minute):
		tb.Fatal("the script did not exit within a minute")
	}
}
