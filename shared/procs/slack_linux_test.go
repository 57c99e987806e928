//go:build linux

package procs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fiskfleet/fiskfleet/shared/procs"
)

// helperEnv makes the test binary a serving process's stand-in: it applies
// the slack its environment asks for and reports what it got (see
// TestMain).
const helperEnv = "PROCS_SLACK_HELPER"

// helperReport is what the helper process reports.
type helperReport struct {
	PID int `json:"pid"`
	// ReExecuted is set when the process found the marker of a
	// re-execution in its environment.
	ReExecuted bool `json:"re_executed"`
	// Err is ApplySlack's error.
	Err string `json:"err"`
	// Slack is the main thread's slack as procs.Slack and /proc report
	// it; Thread that of a thread started after ApplySlack.
	Slack  time.Duration `json:"slack"`
	Proc   time.Duration `json:"proc"`
	Thread time.Duration `json:"thread"`
	// Comm is the process's name, as ps shows it.
	Comm string `json:"comm"`
	// Child is a command's slack, started through StartChild, and
	// ChildEnv whether the marker reached its environment.
	Child    time.Duration `json:"child"`
	ChildEnv bool          `json:"child_env"`
}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "" {
		os.Exit(m.Run())
	}
	rep := helperReport{PID: os.Getpid()}
	_, rep.ReExecuted = os.LookupEnv(procs.InheritedEnv)
	d, err := procs.SlackSetting(os.LookupEnv)
	if err == nil {
		err = procs.ApplySlack(d)
	}
	if err != nil {
		rep.Err = err.Error()
	}
	rep.Slack = procs.Slack()
	rep.Proc = readSlack(fmt.Sprintf("/proc/%d/timerslack_ns", os.Getpid()))
	rep.Comm = strings.TrimSpace(readFile("/proc/self/comm"))
	thread := make(chan time.Duration)
	go func() {
		// A locked goroutine that exits takes its thread with it, so
		// the next one needs a thread of its own.
		runtime.LockOSThread()
		thread <- procs.Slack()
	}()
	rep.Thread = <-thread
	cmd := exec.Command("/bin/sh", "-c", `cat /proc/self/timerslack_ns; env | grep -c "^`+procs.InheritedEnv+`=" || true`)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := procs.StartChild(cmd.Start); err != nil {
		rep.Err = strings.TrimPrefix(rep.Err+"; starting the child: "+err.Error(), "; ")
	} else if err := cmd.Wait(); err != nil {
		rep.Err = strings.TrimPrefix(rep.Err+"; running the child: "+err.Error(), "; ")
	}
	if f := strings.Fields(out.String()); len(f) == 2 {
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		rep.Child = time.Duration(ns)
		rep.ChildEnv = f[1] != "0"
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	os.Exit(0)
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func readSlack(path string) time.Duration {
	ns, _ := strconv.ParseInt(strings.TrimSpace(readFile(path)), 10, 64)
	return time.Duration(ns)
}

// runHelper runs this test binary as the helper with env added, started
// with timer slack start (0: this process's own), and returns its report
// and the PID it was started as.
func runHelper(t *testing.T, start time.Duration, env ...string) (helperReport, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	startCmd := cmd.Start
	if start != 0 {
		// A thread's slack is inherited by what it starts: set it on
		// the thread that forks.
		startCmd = func() error {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			own := procs.Slack()
			if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(start), 0, 0, 0); err != nil {
				t.Fatalf("setting this thread's slack: %v", err)
			}
			defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(own), 0, 0, 0) //nolint:errcheck // restoring what was read
			return cmd.Start()
		}
	}
	if err := startCmd(); err != nil {
		t.Fatalf("starting the helper: %v", err)
	}
	pid := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\nstderr: %s", err, stderr.String())
	}
	var rep helperReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("helper report %q: %v\nstderr: %s", out.String(), err, stderr.String())
	}
	return rep, pid
}

func TestApplySlack(t *testing.T) {
	own := procs.Slack()
	if own == 0 {
		t.Skip("this process has no timer slack (a real-time scheduling policy): nothing to measure against")
	}
	name := filepath.Base(os.Args[0])
	if len(name) > 15 {
		name = name[:15] // the kernel keeps 15 bytes of a name
	}
	for _, tc := range []struct {
		name  string
		start time.Duration
		env   []string
		// want is the process's slack, child the command's.
		want, child time.Duration
		reExec      bool
	}{
		{name: "default", want: procs.DefaultSlack, child: own, reExec: own != procs.DefaultSlack},
		{name: "set", env: []string{procs.SlackEnv + "=250us"}, want: 250 * time.Microsecond, child: own, reExec: own != 250*time.Microsecond},
		{name: "zero keeps the slack started with", env: []string{procs.SlackEnv + "=0"}, want: own, child: own},
		// A systemd unit's TimerSlackNSec= starts the process with it:
		// nothing to re-execute, and the commands get the operator's
		// choice too.
		{name: "started with it", start: 3 * time.Millisecond, env: []string{procs.SlackEnv + "=3ms"}, want: 3 * time.Millisecond, child: 3 * time.Millisecond},
		{name: "started with another", start: 3 * time.Millisecond, want: procs.DefaultSlack, child: 3 * time.Millisecond, reExec: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, pid := runHelper(t, tc.start, tc.env...)
			if rep.Err != "" {
				t.Fatalf("helper error: %s", rep.Err)
			}
			if rep.ReExecuted != tc.reExec {
				t.Errorf("re-executed: %v, want %v", rep.ReExecuted, tc.reExec)
			}
			if rep.PID != pid {
				t.Errorf("the helper reported PID %d, started as %d: a re-execution must keep the PID", rep.PID, pid)
			}
			if rep.Slack != tc.want || rep.Proc != tc.want || rep.Thread != tc.want {
				t.Errorf("slack: %s (procs.Slack), %s (/proc), %s (a later thread), want %s", rep.Slack, rep.Proc, rep.Thread, tc.want)
			}
			if rep.Child != tc.child {
				t.Errorf("a command's slack: %s, want %s", rep.Child, tc.child)
			}
			if rep.ChildEnv {
				t.Errorf("%s reached a command's environment", procs.InheritedEnv)
			}
			if rep.Comm != name {
				t.Errorf("process name %q, want %q: the re-execution renamed the process", rep.Comm, name)
			}
		})
	}
}

func TestApplySlackRefused(t *testing.T) {
	for _, v := range []string{"abc", "1", "-1ms", "2s", "1ms5"} {
		rep, _ := runHelper(t, 0, procs.SlackEnv+"="+v)
		if !strings.Contains(rep.Err, procs.SlackEnv) {
			t.Errorf("%s=%s: error %q does not name %s", procs.SlackEnv, v, rep.Err, procs.SlackEnv)
		}
		if rep.ReExecuted || rep.Slack != procs.Slack() {
			t.Errorf("%s=%s: the refused setting changed the process (re-executed %v, slack %s)", procs.SlackEnv, v, rep.ReExecuted, rep.Slack)
		}
	}
}
