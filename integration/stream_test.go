package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// parentOf returns pid's parent from /proc.
func parentOf(tb testing.TB, pid int) int {
	tb.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatalf("reading the stat of pid %d: %v", pid, err)
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		tb.Fatalf("parsing the parent of pid %d: %v", pid, err)
	}
	return ppid
}

// TestStreamFollowCLI runs `a2a-agent call --follow` on the demo ticker:
// its first line is printed while the command still runs, and it ends
// with every line and the exit code.
func TestStreamFollowCLI(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	b.startAgents(t, 1, b.demoAgent(t, "follow", 2))
	cli := fleettest.Start(t, b.home.Env(), fleettest.A2AAgent(t), "call", "--follow", "--context", fleetContext, "follow", "ticker", `{"every":"300ms","count":8}`)
	cli.WaitOutput(t, "tick 1 of 8", 20*time.Second)
	if cli.Exited() {
		t.Errorf("the first line came only once the call had ended, want it while the command runs")
	}
	if code := cli.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit status: got %d, want 0\n%s", code, cli.Output())
	}
	for i := 1; i <= 8; i++ {
		if want := "tick " + strconv.Itoa(i) + " of 8\n"; !strings.Contains(cli.Stdout(), want) {
			t.Errorf("stdout: got %q, want %q", cli.Stdout(), want)
		}
	}
	if !strings.Contains(cli.Stderr(), "exit code 0") {
		t.Errorf("stderr: got %q, want the exit code", cli.Stderr())
	}
}

// TestStreamCallerKilled kills the caller of a streamed spawn: the agent
// notices within three heartbeats, kills the process group (the grandchild
// that ignores SIGTERM too) and frees its only slot.
func TestStreamCallerKilled(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, "orphaned", 1))[0]
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	cli := fleettest.Start(t, b.home.Env(), fleettest.A2AAgent(t), "call", "--follow", "--context", fleetContext, "orphaned", "spawn", `{"duration":"1m","pidfile":`+strconv.Quote(pidfile)+`}`)
	grandchild := fisktest.WaitPIDFile(t, pidfile)
	killedAt := time.Now()
	cli.Kill(t)
	fisktest.WaitFor(t, 3*a2a.HeartbeatInterval+15*time.Second, "the agent to kill the abandoned command's group", func() bool { return fisktest.ProcessGone(grandchild) })
	t.Logf("caller killed; the grandchild was gone %s later", time.Since(killedAt).Round(time.Millisecond))
	agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if r, err := b.client.CallTool(ctx, "orphaned", "echo", json.RawMessage(`{"message":"after"}`)); err != nil || r.Output != "after\n" {
		t.Errorf("the slot after the abandoned stream: got %+v, %v, want the echo", r, err)
	}
}

// TestStreamAgentKilled kills -9 the agent serving a stream: the caller
// fails within three heartbeats naming the instance, and a new call
// succeeds on the other instance.
func TestStreamAgentKilled(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agents := b.startAgents(t, 2, b.demoAgent(t, "fragile", 2))
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	type result struct {
		reply *a2a.ToolReply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		r, err := b.client.StreamTool(context.Background(), "fragile", "spawn", json.RawMessage(`{"duration":"1m","pidfile":`+strconv.Quote(pidfile)+`}`), nil)
		done <- result{r, err}
	}()
	grandchild := fisktest.WaitPIDFile(t, pidfile)
	spawn := parentOf(t, grandchild)
	serving := parentOf(t, spawn)
	t.Cleanup(func() {
		// The killed agent could not kill its command's group.
		_ = syscall.Kill(-spawn, syscall.SIGKILL)
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
	})
	var victim, survivor *fleettest.Process
	for _, a := range agents {
		if a.PID == serving {
			victim = a
		} else {
			survivor = a
		}
	}
	if victim == nil {
		t.Fatalf("the spawn's agent pid %d is none of %v", serving, pidsOf(agents))
	}
	killedAt := time.Now()
	victim.Kill(t)
	select {
	case r := <-done:
		took := time.Since(killedAt)
		t.Logf("caller failed %s after the kill: %v", took.Round(time.Millisecond), r.err)
		if !errors.Is(r.err, a2a.ErrAgentUnavailable) || !strings.Contains(r.err.Error(), "instance") {
			t.Errorf("got %+v, %v, want agent unavailable naming the instance", r.reply, r.err)
		}
	case <-time.After(3*a2a.HeartbeatInterval + 15*time.Second):
		t.Fatal("the caller did not fail within three heartbeats of the kill")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r, err := b.client.StreamTool(ctx, "fragile", "sleep", json.RawMessage(`{"duration":"10ms"}`), nil)
	if pid, ok := servedBy(r); err != nil || !ok || pid != survivor.PID {
		t.Errorf("after the kill: got %+v, %v, want a result from the survivor %d", r, err, survivor.PID)
	}
}

// TestStreamBackPressure starts 50 streams at once at an agent with two
// slots: never more than two commands run, and every caller gets its final
// reply.
func TestStreamBackPressure(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	agent := b.startAgents(t, 1, b.demoAgent(t, "narrow", 2))[0]
	stop := sampleChildren(agent.PID)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			r, err := b.client.StreamTool(ctx, "narrow", "ticker", json.RawMessage(`{"every":"20ms","count":3}`), nil)
			if err != nil || r.IsError || !strings.HasSuffix(r.Output, "tick 3 of 3\n") {
				mu.Lock()
				failures = append(failures, strconv.Itoa(i)+": "+func() string {
					if err != nil {
						return err.Error()
					}
					return r.Output
				}())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	seen := stop()
	t.Logf("commands running at once, by samples: %v", seen)
	if len(failures) > 0 {
		t.Errorf("streams without their final reply: %d: %v", len(failures), failures[:min(5, len(failures))])
	}
	for n := range seen {
		if n > 2 {
			t.Errorf("commands running at once: got %d, want at most 2 slots", n)
		}
	}
}
