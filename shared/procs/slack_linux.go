//go:build linux

package procs

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ApplySlack gives every thread of the process timer slack d; 0 changes
// nothing.
//
// A thread's slack is its own and is inherited by the threads it starts,
// and the runtime starts sysmon before any of the program's code runs, so
// setting it now would miss the one thread it is for. ApplySlack sets it
// on its own thread and re-executes the binary from there (the same
// arguments and environment, the same PID), so that every thread of the
// new image has it. It returns at once when the process already has d (a
// systemd unit's TimerSlackNSec=) and after the re-execution. An error
// means the re-execution failed and nothing changed: the process runs on
// with the slack it has.
func ApplySlack(d time.Duration) error {
	if v, ok := os.LookupEnv(inheritedEnv); ok {
		// The re-executed image: its commands get back what the
		// process was started with.
		_ = os.Unsetenv(inheritedEnv)
		if ns, err := strconv.ParseInt(v, 10, 64); err == nil && ns >= 0 {
			childSlack, restoreChildSlack = time.Duration(ns), true
		}
		return nil
	}
	if d == 0 {
		return nil
	}
	cur, err := threadSlack()
	if err != nil {
		return err
	}
	if cur == d {
		return nil
	}
	// Executed by its path, not /proc/self/exe, so that the process keeps
	// its name (ps, top and pgrep show the file name execve was given);
	// and only while that path is still the running binary, not one an
	// upgrade has put in its place.
	path, err := os.Executable()
	if err != nil {
		return fmt.Errorf("re-executing with a timer slack of %s: %w", d, err)
	}
	if !sameFile(path, "/proc/self/exe") {
		return fmt.Errorf("re-executing with a timer slack of %s: %s is no longer the running binary", d, path)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setThreadSlack(d); err != nil {
		return err
	}
	_ = os.Setenv(inheritedEnv, strconv.FormatInt(int64(cur), 10))
	err = syscall.Exec(path, os.Args, os.Environ())
	// Only a failed execve returns.
	_ = os.Unsetenv(inheritedEnv)
	_ = setThreadSlack(cur)
	return fmt.Errorf("re-executing with a timer slack of %s: %w", d, err)
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// Slack is the calling thread's timer slack, for the serving log line; 0
// where it cannot be read.
func Slack() time.Duration {
	d, _ := threadSlack()
	return d
}

// StartChild runs start, which starts a command, on a thread with the
// timer slack the process was started with, which the command inherits: a
// command's sleeps and timeouts are its own business, and keep the
// precision they have when it runs by hand.
func StartChild(start func() error) error {
	if !restoreChildSlack {
		return start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := threadSlack()
	if err != nil || own == childSlack {
		return start()
	}
	setThreadSlackNow(childSlack)
	defer setThreadSlackNow(own)
	return start()
}

// threadSlack reads the calling thread's slack. prctl cannot block, so it
// is made as a raw system call, which, unlike a plain one, does not wake
// sysmon on a call's path (see fiskapp's epollWaitNow).
func threadSlack() (time.Duration, error) {
	ns, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_GET_TIMERSLACK, 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, fmt.Errorf("reading the timer slack: %w (%w)", e, errNoSlack)
	}
	return time.Duration(ns), nil
}

func setThreadSlack(d time.Duration) error {
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("setting a timer slack of %s: %w (%w)", d, err, errNoSlack)
	}
	return nil
}

// setThreadSlackNow is setThreadSlack on a call's path, raw as
// threadSlack is.
func setThreadSlackNow(d time.Duration) {
	_, _, _ = unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0, 0)
}
