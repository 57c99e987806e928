package fiskapp_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// testGrace is the kill grace of these tests; with the one-second margin
// past it, a call whose pipe a descendant holds ends about 1.2 s after the
// command does.
const testGrace = 200 * time.Millisecond

// hangBound is far longer than any call here takes when it works, and far
// shorter than the minute the lingering processes sleep: a call taking
// longer waited for them.
const hangBound = 30 * time.Second

// collectors runs f once for each way of collecting a command: with a
// pidfd in the calling goroutine, and as on systems without pidfds.
func collectors(t *testing.T, f func(t *testing.T, portable bool)) {
	t.Helper()
	for _, portable := range []bool{false, true} {
		name := "poll"
		if portable {
			name = "portable"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, portable)
		})
	}
}

// sh runs script with /bin/sh as a command call would, and returns its
// result, its error and how long it took.
func sh(ctx context.Context, opts fiskapp.Options, portable bool, script string, live *liveBuffer) (*tool.CommandResult, error, time.Duration) {
	start := time.Now()
	var res *tool.CommandResult
	var err error
	if live == nil {
		res, err = fiskapp.RunArgv(ctx, opts, portable, []string{"/bin/sh", "-c", script}, nil)
	} else {
		res, err = fiskapp.RunArgv(ctx, opts, portable, []string{"/bin/sh", "-c", script}, live)
	}
	return res, err, time.Since(start)
}

// readPID waits for a script to write a PID to path and returns it, with a
// cleanup that kills it (or its group, when group is true) if still alive.
func readPID(t *testing.T, path string, group bool) int {
	t.Helper()
	var pid int
	fisktest.WaitFor(t, hangBound, "a PID in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	t.Cleanup(func() {
		if group {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// groupGone reports whether no process is left running in process group
// pgid. Zombies count as gone: a member whose parent died first waits for
// the system's init to reap it, which may take a while.
func groupGone(t *testing.T, pgid int) bool {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		// State, parent and group follow the parenthesised command
		// name, which may itself contain spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return false
		}
	}
	return true
}

func TestRunExitAndOutput(t *testing.T) {
	t.Parallel()
	big := 200 << 10 // past the 64 KiB of a pipe's buffer, on each stream
	tests := []struct {
		name          string
		script        string
		cap           int
		wantCode      int
		wantOutput    string
		wantTruncated bool
	}{
		{
			name:       "exit code and both streams in order",
			script:     "echo out; echo err >&2; echo out again; exit 7",
			wantCode:   7,
			wantOutput: "out\nerr\nout again\n",
		},
		{
			name:       "killed by a signal",
			script:     "echo dying; kill -KILL $$",
			wantCode:   128 + int(syscall.SIGKILL),
			wantOutput: "dying\n",
		},
		{
			// Every command shares one open null device (devNull).
			name:       "reads the null device as its standard input",
			script:     "cat; readlink /proc/$$/fd/0",
			wantOutput: "/dev/null\n",
		},
		{
			name:       "no output",
			script:     "exit 0",
			wantOutput: "",
		},
		{
			name:       "more than a pipe holds on both streams",
			script:     "head -c " + strconv.Itoa(big) + " /dev/zero | tr '\\0' o; head -c " + strconv.Itoa(big) + " /dev/zero | tr '\\0' e >&2; exit 4",
			cap:        1 << 20,
			wantCode:   4,
			wantOutput: strings.Repeat("o", big) + strings.Repeat("e", big),
		},
		{
			name:          "more than a pipe holds on both streams, capped",
			script:        "head -c " + strconv.Itoa(big) + " /dev/zero | tr '\\0' o; head -c " + strconv.Itoa(big) + " /dev/zero | tr '\\0' e >&2; exit 4",
			cap:           big + 10,
			wantCode:      4,
			wantOutput:    strings.Repeat("o", big) + strings.Repeat("e", 10),
			wantTruncated: true,
		},
		{
			// The pipe reaches end of file long before the exit:
			// the exit must still be waited for.
			name:       "closes its output and keeps running",
			script:     "echo before; exec >&- 2>&-; sleep 0.3; exit 3",
			wantCode:   3,
			wantOutput: "before\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			collectors(t, func(t *testing.T, portable bool) {
				var live liveBuffer
				res, err, _ := sh(t.Context(), fiskapp.Options{OutputCap: tt.cap}, portable, tt.script, &live)
				if err != nil {
					t.Fatalf("got %v, want a result", err)
				}
				if res.ExitCode != tt.wantCode || res.Truncated != tt.wantTruncated {
					t.Errorf("got exit code %d, truncated %t, want %d, %t", res.ExitCode, res.Truncated, tt.wantCode, tt.wantTruncated)
				}
				if res.Output != tt.wantOutput {
					t.Errorf("got %d bytes of output %.40q, want %d bytes %.40q", len(res.Output), res.Output, len(tt.wantOutput), tt.wantOutput)
				}
				if live.all.String() != res.Output {
					t.Errorf("got %d bytes of live output, want the %d of the result", live.all.Len(), len(res.Output))
				}
			})
		})
	}
}

// TestRunDescendantHoldsPipe checks that a descendant keeping the output
// pipe after the command exited delays the call by at most the kill grace
// plus the margin, with the command's own result, and that output it
// writes meanwhile is kept.
func TestRunDescendantHoldsPipe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// launch starts the lingering descendant, which writes its PID
		// to $1.
		launch string
		group  bool
	}{
		{name: "left the group", launch: `setsid sh -c 'echo $$ > "$1"; sleep 0.1; echo late; exec sleep 60' sh "$1" &`},
		{name: "in the group", launch: `sh -c 'echo $$ > "$1"; sleep 0.1; echo late; exec sleep 60' sh "$1" &`, group: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			collectors(t, func(t *testing.T, portable bool) {
				pidfile := filepath.Join(t.TempDir(), "pid")
				argv := []string{"/bin/sh", "-c", tt.launch + " echo started; exit 5", "sh", pidfile}
				start := time.Now()
				res, err := fiskapp.RunArgv(t.Context(), fiskapp.Options{KillGrace: testGrace}, portable, argv, nil)
				took := time.Since(start)
				pid := readPID(t, pidfile, false)
				if err != nil {
					t.Fatalf("got %v, want the command's result", err)
				}
				if res.ExitCode != 5 || res.Output != "started\nlate\n" {
					t.Errorf("got exit code %d and output %q, want 5 and %q", res.ExitCode, res.Output, "started\nlate\n")
				}
				if took > hangBound {
					t.Errorf("got the call returning after %s: it waited for the descendant", took)
				}
				if fisktest.ProcessGone(pid) {
					t.Errorf("descendant %d gone, want it still sleeping (the test proves nothing otherwise)", pid)
				}
			})
		})
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		{
			// Both streams flood the pipe; the cancel comes with the
			// first piece of output.
			name:   "mid-output",
			script: `echo $$ > "$1"; yes out & yes err >&2; wait`,
		},
		{
			// Only the group SIGKILL after the grace ends it.
			name:   "mid-output ignoring SIGTERM",
			script: `trap '' TERM; echo $$ > "$1"; yes out & yes err >&2; wait`,
		},
		{
			name:   "with its output closed",
			script: `echo $$ > "$1"; echo ready; exec >&- 2>&-; exec sleep 60`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			collectors(t, func(t *testing.T, portable bool) {
				pidfile := filepath.Join(t.TempDir(), "pid")
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				live := &cancelOnWrite{cancel: cancel}
				argv := []string{"/bin/sh", "-c", tt.script, "sh", pidfile}
				start := time.Now()
				res, err := fiskapp.RunArgv(ctx, fiskapp.Options{KillGrace: testGrace, OutputCap: 4096}, portable, argv, live)
				took := time.Since(start)
				pgid := readPID(t, pidfile, true)
				if !errors.Is(err, fiskapp.ErrInterrupted) || !errors.Is(err, context.Canceled) {
					t.Fatalf("got %+v, %v, want an error wrapping %v and %v", res, err, fiskapp.ErrInterrupted, context.Canceled)
				}
				if took > hangBound {
					t.Errorf("got the call returning after %s, want it within the kill grace", took)
				}
				fisktest.WaitFor(t, hangBound, "the command's process group to be gone", func() bool { return groupGone(t, pgid) })
			})
		})
	}
}

// cancelOnWrite cancels a context on its first write.
type cancelOnWrite struct {
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return len(p), nil
}

// TestRunCancelEscapedGroup checks the last resort: a command that moved
// out of its process group and ignores SIGTERM outlives the group kill, and
// is killed itself once the kill grace and the margin have passed.
func TestRunCancelEscapedGroup(t *testing.T) {
	t.Parallel()
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("perl, which moves a process to another group, is not installed")
	}
	// The group of this test process, in the same session, is one the
	// command may join.
	script := `$SIG{TERM} = "IGNORE"; setpgrp(0, ` + strconv.Itoa(syscall.Getpgrp()) + `) or die "setpgrp: $!"; open(my $f, ">", $ARGV[0]) or die; print $f "$$\n"; close $f; $| = 1; print "moved\n"; sleep 60;`
	collectors(t, func(t *testing.T, portable bool) {
		pidfile := filepath.Join(t.TempDir(), "pid")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		live := &cancelOnWrite{cancel: cancel}
		start := time.Now()
		res, err := fiskapp.RunArgv(ctx, fiskapp.Options{KillGrace: testGrace}, portable, []string{perl, "-e", script, pidfile}, live)
		took := time.Since(start)
		pid := readPID(t, pidfile, false)
		if !errors.Is(err, fiskapp.ErrInterrupted) || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %+v, %v, want an error wrapping %v and %v", res, err, fiskapp.ErrInterrupted, context.Canceled)
		}
		if took > hangBound {
			t.Errorf("got the call returning after %s, want it within the kill grace and margin", took)
		}
		if !fisktest.ProcessGone(pid) {
			t.Errorf("command %d still running after the call returned", pid)
		}
	})
}

// TestRunStageEvents checks the stage events a recording span gets.
func TestRunStageEvents(t *testing.T) {
	t.Parallel()
	collectors(t, func(t *testing.T, portable bool) {
		exp := tracetest.NewInMemoryExporter()
		sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
		ctx, span := sdk.Tracer("test").Start(t.Context(), "call")
		if _, err, _ := sh(ctx, fiskapp.Options{}, portable, "echo hi", nil); err != nil {
			t.Fatal(err)
		}
		span.End()
		var got []string
		for _, ev := range exp.GetSpans()[0].Events {
			got = append(got, ev.Name)
		}
		want := []string{tracing.EventStarting, tracing.EventStarted, tracing.EventExited}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("got events %q, want %q", got, want)
		}
	})
}
