package fiskapp_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// awaitTimeout bounds a wait for awaitExit that must return: far longer
// than any of these processes takes, so only a hang fails it.
const awaitTimeout = 20 * time.Second

// zombie reports whether pid has exited and is not reaped yet.
func zombie(t *testing.T, pid int) bool {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v, want it exited and unreaped", pid, err)
	}
	s := string(stat)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// startDemo starts the demo app with args, its output discarded.
func startDemo(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(demoPath(t), args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// await runs AwaitExit on cmd's process and returns a channel closed when
// it returns.
func await(cmd *exec.Cmd) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fiskapp.AwaitExit(cmd.Process)
	}()
	return done
}

// TestAwaitExit checks that the wait before Wait returns only once the
// process has exited, leaves it for Wait to reap (so its exit status is
// not lost), and also returns for a process that exited before the wait
// began or was killed during it.
func TestAwaitExit(t *testing.T) {
	t.Parallel()
	t.Run("exit code", func(t *testing.T) {
		t.Parallel()
		cmd := startDemo(t, "fail", "--code", "7")
		select {
		case <-await(cmd):
		case <-time.After(awaitTimeout):
			t.Fatalf("awaitExit still waiting %s after starting a command that exits at once", awaitTimeout)
		}
		if !zombie(t, cmd.Process.Pid) {
			t.Fatal("awaitExit returned before the process exited")
		}
		var exitErr *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
			t.Fatalf("Wait after awaitExit: got %v, want exit status 7", err)
		}
	})
	t.Run("exited before", func(t *testing.T) {
		t.Parallel()
		cmd := startDemo(t, "echo", "hi")
		for deadline := time.Now().Add(awaitTimeout); !zombie(t, cmd.Process.Pid); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("echo did not exit within %s", awaitTimeout)
			}
		}
		select {
		case <-await(cmd):
		case <-time.After(awaitTimeout):
			t.Fatal("awaitExit waits for a process that had already exited")
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("Wait after awaitExit: %v", err)
		}
	})
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		cmd := startDemo(t, "sleep", "--duration", "1h")
		done := await(cmd)
		// The process runs for an hour: awaitExit has no reason to
		// return in the meantime.
		select {
		case <-done:
			t.Fatal("awaitExit returned while the process runs")
		case <-time.After(200 * time.Millisecond):
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(awaitTimeout):
			t.Fatalf("awaitExit still waiting %s after the process was killed", awaitTimeout)
		}
		var exitErr *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("Wait after awaitExit: got %v, want killed by SIGKILL", err)
		}
	})
}
