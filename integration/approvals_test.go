package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// apprFleet is a NATS server with `a2a-agent serve` processes of the demo
// app under operator approvals, the operator's CLI, and every audit
// record published on the server, each checked against the schema.
type apprFleet struct {
	*bus
	trail *apprTrail
}

func newApprFleet(tb testing.TB) *apprFleet {
	tb.Helper()
	b := newBus(tb)
	return &apprFleet{bus: b, trail: followApprTrail(tb, b)}
}

// serve starts n agents of identity serving the demo app with
// max_concurrent_tools 2 and the approvals key set to approvals; change,
// when set, edits the agent.yaml first. The agents drain for at most 2s
// when the test ends, so a call left waiting does not hold them up.
func (f *apprFleet) serve(tb testing.TB, identity string, n int, approvals map[string]any, change func(*fleettest.Agent)) []*fleettest.Process {
	tb.Helper()
	a := f.demoAgent(tb, identity, 2)
	a.Extra = map[string]any{"approvals": approvals}
	if change != nil {
		change(&a)
	}
	cfg := fleettest.WriteAgentConfig(tb, a)
	procs := make([]*fleettest.Process, n)
	for i := range procs {
		procs[i] = fleettest.StartAgent(tb, f.home.Env(), cfg, "--drain-timeout", "2s")
	}
	return procs
}

// cli runs `a2a-agent args… --context fleet` to its end.
func (f *apprFleet) cli(tb testing.TB, args ...string) fleettest.Result {
	tb.Helper()
	return fleettest.Run(tb, f.home.Env(), fleettest.A2AAgent(tb), append(args, "--context", fleetContext)...)
}

// start starts `a2a-agent args… --context fleet` and leaves it running.
func (f *apprFleet) start(tb testing.TB, args ...string) *fleettest.Process {
	tb.Helper()
	return fleettest.Start(tb, f.home.Env(), fleettest.A2AAgent(tb), append(args, "--context", fleetContext)...)
}

// callDeploy starts `a2a-agent call [--follow] --as as identity deploy`
// writing marker once it runs.
func (f *apprFleet) callDeploy(tb testing.TB, identity, as, marker string, follow bool) *fleettest.Process {
	tb.Helper()
	args := []string{"call", "--as", as, "--timeout", "50s"}
	if follow {
		args = append(args, "--follow")
	}
	return f.start(tb, append(args, identity, "deploy", deployInput(marker))...)
}

// deployInput is the input of fiskdemo's deploy (service, and the marker
// file it writes when it runs).
func deployInput(marker string) string {
	b, _ := json.Marshal(map[string]string{"service": "web", "marker": marker})
	return string(b)
}

// ls runs `a2a-agent approvals ls --json` (of identity, or of the fleet
// when empty) and decodes its lines.
func (f *apprFleet) ls(tb testing.TB, identity string) []approval.Request {
	tb.Helper()
	args := []string{"approvals", "ls", "--json", "--wait", "300ms"}
	if identity != "" {
		args = append(args, "--identity", identity)
	}
	r := f.cli(tb, args...)
	if r.ExitCode != 0 {
		tb.Fatalf("approvals ls: exit %d\nstdout:\n%s\nstderr:\n%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	var reqs []approval.Request
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if l == "" {
			continue
		}
		var req approval.Request
		if err := json.Unmarshal([]byte(l), &req); err != nil {
			tb.Fatalf("approvals ls --json: line %q: %v", l, err)
		}
		reqs = append(reqs, req)
	}
	return reqs
}

// waitRequest waits until `approvals ls` lists the request whose command
// line writes marker, and returns it.
func (f *apprFleet) waitRequest(tb testing.TB, identity, marker string) approval.Request {
	tb.Helper()
	var got approval.Request
	fisktest.WaitFor(tb, 20*time.Second, "approvals ls to list the request writing "+marker, func() bool {
		for _, r := range f.ls(tb, identity) {
			if strings.Contains(r.Command, marker) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// listed reports whether `approvals ls` lists id.
func (f *apprFleet) listed(tb testing.TB, identity, id string) bool {
	tb.Helper()
	return slices.ContainsFunc(f.ls(tb, identity), func(r approval.Request) bool { return r.ID == id })
}

// answerAs sends an answer from the test process, as an approver with a
// client of their own would.
func (f *apprFleet) answerAs(tb testing.TB, req approval.Request, approve bool, who, reason string) (approval.Reply, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	return approval.Answer(ctx, f.ns.Connect(tb), req, approve, approval.Approver{Name: who}, reason)
}

// apprTrail holds every audit record published on a server, and the
// messages there that were not valid records.
type apprTrail struct {
	mu      sync.Mutex // guards records, invalid
	records []*audit.Record
	invalid []string
}

func followApprTrail(tb testing.TB, b *bus) *apprTrail {
	tb.Helper()
	tr := &apprTrail{}
	nc := b.ns.Connect(tb)
	if _, err := nc.Subscribe(audit.SubjectAll(), func(m *nats.Msg) {
		r, err := audit.Decode(m.Data)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if err != nil {
			tr.invalid = append(tr.invalid, fmt.Sprintf("%s: %v", m.Data, err))
			return
		}
		tr.records = append(tr.records, r)
	}); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, m := range tr.invalid {
			tb.Errorf("audit record against the schema: %s", m)
		}
	})
	return tr
}

// of returns the records of calls with the arguments digest digest.
func (tr *apprTrail) of(digest string) []*audit.Record {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []*audit.Record
	for _, r := range tr.records {
		if r.ArgumentsDigest == digest {
			out = append(out, r)
		}
	}
	return out
}

// where returns the records for which keep holds.
func (tr *apprTrail) where(keep func(*audit.Record) bool) []*audit.Record {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []*audit.Record
	for _, r := range tr.records {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// one waits for the record of the call with digest and checks it is the
// only one: the call was answered once, and ran at most once.
func (tr *apprTrail) one(tb testing.TB, digest string) *audit.Record {
	tb.Helper()
	fisktest.WaitFor(tb, 10*time.Second, "the audit record of "+digest, func() bool { return len(tr.of(digest)) > 0 })
	recs := tr.of(digest)
	if len(recs) != 1 {
		tb.Fatalf("audit records of %s: got %d, want 1: %+v", digest, len(recs), recs)
	}
	return recs[0]
}

// checkGated checks a gated call's record: the decision, the approver and
// the result, the claimed caller, the command line that was approved.
func checkGated(tb testing.TB, rec *audit.Record, req approval.Request, decision, approver, result string) {
	tb.Helper()
	if rec.Gate.Decision != decision || rec.Gate.Approver != approver {
		tb.Errorf("audit gate: got %+v, want decision %s, approver %q", rec.Gate, decision, approver)
	}
	if rec.Outcome.Result != result {
		tb.Errorf("audit outcome: got %+v, want result %s", rec.Outcome, result)
	}
	if rec.Tool != req.Tool || rec.Identity != req.Identity || rec.Instance != req.Instance {
		tb.Errorf("audit record: got tool %s on %s instance %s, want %s on the instance that asked, %s %s", rec.Tool, rec.Identity, rec.Instance, req.Tool, req.Identity, req.Instance)
	}
	if rec.Caller.Name != req.Caller.Name || !rec.Caller.Claimed {
		tb.Errorf("audit caller: got %+v, want the claimed sender %q", rec.Caller, req.Caller.Name)
	}
	if rec.Command != req.Command {
		tb.Errorf("audit command: got %q, want the approved command line %q", rec.Command, req.Command)
	}
}

// apprWatch is an operator's `a2a-agent approvals watch`, typed into.
type apprWatch struct {
	pid   int
	stdin io.WriteCloser
	out   *fisktest.Buffer
	done  chan struct{}
}

// watch starts `approvals watch --as as`, ready once it says it watches.
// Closing its input at the end of the test stops it.
func (f *apprFleet) watch(tb testing.TB, as string) *apprWatch {
	tb.Helper()
	cmd := exec.Command(fleettest.A2AAgent(tb), "approvals", "watch", "--as", as, "--context", fleetContext)
	cmd.Env = f.home.Env()
	w := &apprWatch{out: &fisktest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w.pid, w.stdin = cmd.Process.Pid, stdin
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	tb.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			tb.Errorf("approvals watch (pid %d) did not stop within 10s of its input closing", w.pid)
			_ = syscall.Kill(w.pid, syscall.SIGKILL)
			<-w.done
		}
		if tb.Failed() {
			tb.Logf("approvals watch (pid %d) output:\n%s", w.pid, w.out.String())
		}
	})
	w.wait(tb, "watching approval requests as "+as, fleettest.ReadyTimeout)
	return w
}

func (w *apprWatch) wait(tb testing.TB, substr string, timeout time.Duration) {
	tb.Helper()
	fisktest.WaitFor(tb, timeout, fmt.Sprintf("approvals watch to print %q; it printed:\n%s", substr, w.out.String()), func() bool {
		return strings.Contains(w.out.String(), substr)
	})
}

func (w *apprWatch) typeLine(tb testing.TB, line string) {
	tb.Helper()
	if _, err := io.WriteString(w.stdin, line+"\n"); err != nil {
		tb.Fatalf("typing %q into approvals watch: %v", line, err)
	}
}

var watchedRE = regexp.MustCompile(`approval request (\S+) from (\S+) \(instance (\S+)\)`)

// TestApprovalFollowWatchApprove is the operator's path end to end: `a2a-agent
// call --follow` of the gated deploy waits, the operator's `approvals
// watch` in another process shows the request with its exact command line
// and the claimed caller, `y` approves it (a second operator's watch is
// told), the command runs once, and its output and exit code reach the
// caller. The audit record says who
// approved.
func TestApprovalFollowWatchApprove(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	f.serve(t, "apprwatch", 1, map[string]any{"operator": true, "timeout": "40s"}, nil)

	// The card says an operator approves deploy.
	card, err := f.client.Discover(t.Context(), "apprwatch")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(card.Tools, func(d a2a.ToolDescriptor) bool { return d.Name == "deploy" })
	if i < 0 || !strings.Contains(card.Tools[i].Description, "Needs an operator's approval") {
		t.Fatalf("card: got %+v, want deploy served with the operator approval note", card.Tools)
	}

	w := f.watch(t, "alice")
	other := f.watch(t, "bob")
	marker := filepath.Join(t.TempDir(), "deployed")
	cli := f.callDeploy(t, "apprwatch", "ci", marker, true)

	w.wait(t, "approve? [y/n]", 20*time.Second)
	m := watchedRE.FindStringSubmatch(w.out.String())
	if m == nil || m[2] != "apprwatch" {
		t.Fatalf("watch: got\n%s\nwant an approval request from apprwatch", w.out.String())
	}
	id := m[1]
	for _, want := range []string{"tool:      deploy", "caller:    ci (claimed)", "deploy --marker=" + marker} {
		if !strings.Contains(w.out.String(), want) {
			t.Errorf("watch: got\n%s\nwant it to show %q", w.out.String(), want)
		}
	}
	req := f.waitRequest(t, "apprwatch", marker)
	if req.ID != id || req.Caller.Name != "ci" || !req.Caller.Claimed {
		t.Errorf("approvals ls: got %+v, want request %s of the claimed caller ci", req, id)
	}
	if !strings.Contains(w.out.String(), "  command:\n    "+req.Command+"\n") {
		t.Errorf("watch: got\n%s\nwant the exact command line %q on a line of its own", w.out.String(), req.Command)
	}
	if cli.Exited() || fileExists(marker) {
		t.Fatalf("before the answer: caller exited %t, marker written %t; want the caller waiting and nothing run\n%s", cli.Exited(), fileExists(marker), cli.Output())
	}
	t.Run("call --follow names the approval it awaits", func(t *testing.T) {
		if want := "awaiting operator approval (id " + id + ")"; !strings.Contains(cli.Output(), want) {
			t.Errorf("call --follow printed %q while waiting, want it to say %q", cli.Output(), want)
		}
	})

	other.wait(t, "approval request "+id, 10*time.Second)
	w.typeLine(t, "y")
	w.wait(t, "approved "+id, 10*time.Second)
	// The other operator's prompt moves on.
	other.wait(t, "request "+id+" was approved meanwhile by alice", 10*time.Second)
	if code := cli.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("caller: exit %d, want 0\n%s", code, cli.Output())
	}
	if !strings.Contains(cli.Stdout(), "deployed web\n") || !strings.Contains(cli.Stderr(), "exit code 0") {
		t.Errorf("caller: got stdout %q stderr %q, want the deploy's output and exit code 0", cli.Stdout(), cli.Stderr())
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "deployed web\n" {
		t.Errorf("marker: got %q, %v, want the deploy to have written it", b, err)
	}
	rec := f.trail.one(t, req.Digest)
	checkGated(t, rec, req, audit.DecisionOperator, "alice", audit.ResultOK)
	if rec.Surface != audit.SurfaceA2AStream || rec.Outcome.ExitCode == nil || *rec.Outcome.ExitCode != 0 {
		t.Errorf("audit record: got surface %s outcome %+v, want a stream that ran to exit code 0", rec.Surface, rec.Outcome)
	}
	// Nothing left waiting.
	if reqs := f.ls(t, "apprwatch"); len(reqs) != 0 {
		t.Errorf("approvals ls after the answer: got %+v, want none", reqs)
	}
}

// TestApprovalRefusals leaves a gated deploy not run in each way it can
// be refused: denied with a reason, timed out, withdrawn by the caller's
// Ctrl-C or by the agent stopping, answered with the wrong arguments
// digest; and an approval
// replayed after the call ran runs nothing a second time. Each leaves one
// audit record naming the decision.
func TestApprovalRefusals(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	f.serve(t, "apprref", 1, map[string]any{"operator": true, "timeout": "40s"}, nil)
	f.serve(t, "apprshort", 1, map[string]any{"operator": true, "timeout": "2s"}, nil)
	stopping := f.serve(t, "apprstop", 1, map[string]any{"operator": true, "timeout": "40s"}, nil)[0]

	t.Run("deny", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprref", "ci", marker, false)
		req := f.waitRequest(t, "apprref", marker)
		r := f.cli(t, "approvals", "deny", req.ID, "--reason", "no", "--as", "alice")
		if r.ExitCode != 0 || !strings.Contains(r.Stdout, "denied "+req.ID+": deploy on apprref") {
			t.Fatalf("approvals deny: exit %d stdout %q stderr %q, want the denial confirmed", r.ExitCode, r.Stdout, r.Stderr)
		}
		if code := cli.Wait(t, 20*time.Second); code != 1 {
			t.Errorf("caller: exit %d, want 1\n%s", code, cli.Output())
		}
		want := "error: deploy was not run: operator alice denied approval " + req.ID + ": no\n"
		if cli.Stdout() != want {
			t.Errorf("caller: got %q, want %q", cli.Stdout(), want)
		}
		if fileExists(marker) {
			t.Error("the denied deploy ran")
		}
		rec := f.trail.one(t, req.Digest)
		checkGated(t, rec, req, audit.DecisionDeclined, "alice", audit.ResultDenied)
		if !strings.Contains(rec.Outcome.Message, "denied approval "+req.ID+": no") {
			t.Errorf("audit message: got %q, want the denial and its reason", rec.Outcome.Message)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		// The request lives 2s: caught from its event rather than by
		// polling approvals ls, which a loaded machine might not do in
		// time.
		nc := f.ns.Connect(t)
		events, err := nc.SubscribeSync(approval.EventsSubject("apprshort"))
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cli := f.callDeploy(t, "apprshort", "ci", marker, true)
		var req approval.Request
		for req.ID == "" {
			m, err := events.NextMsg(20 * time.Second)
			if err != nil {
				t.Fatalf("waiting for the request: %v", err)
			}
			var ev approval.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == approval.EventRequested && strings.Contains(ev.Request.Command, marker) {
				req = *ev.Request
			}
		}
		code := cli.Wait(t, 20*time.Second)
		elapsed := time.Since(start)
		if code != 1 || !strings.Contains(cli.Stdout(), "error: deploy was not run: no operator answered approval "+req.ID+" in time") {
			t.Errorf("caller: exit %d, output\n%s\nwant exit 1 saying nobody answered %s in time", code, cli.Output(), req.ID)
		}
		if elapsed < 2*time.Second {
			t.Errorf("the caller was answered after %s, want the 2s timeout first", elapsed)
		}
		if got := req.Expires.Sub(req.Created); got != 2*time.Second {
			t.Errorf("request: expires %s after it was made, want the 2s of approvals.timeout", got)
		}
		// An approval that comes late is refused, and runs nothing.
		if _, err := f.answerAs(t, req, true, "alice", ""); !errors.Is(err, approval.ErrRefused) || !strings.Contains(err.Error(), string(approval.RefusedLate)) {
			t.Errorf("a late approval: got %v, want it refused as late", err)
		}
		if fileExists(marker) {
			t.Error("the timed-out deploy ran")
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionTimedOut, "", audit.ResultDenied)
	})

	t.Run("caller interrupted", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprref", "ci", marker, true)
		req := f.waitRequest(t, "apprref", marker)
		cli.Signal(t, syscall.SIGINT)
		code := cli.Wait(t, 20*time.Second)
		if code != 1 || !strings.Contains(cli.Stdout(), "error: deploy was not run: its approval was withdrawn") {
			t.Errorf("caller: exit %d, output\n%s\nwant exit 1 saying the approval was withdrawn", code, cli.Output())
		}
		if f.listed(t, "apprref", req.ID) {
			t.Errorf("approvals ls: still lists %s, want it withdrawn", req.ID)
		}
		r := f.cli(t, "approvals", "approve", req.ID, "--as", "alice", "--wait", "500ms")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "no such pending approval request") {
			t.Errorf("approving the withdrawn request: exit %d stdout %q stderr %q, want it not found", r.ExitCode, r.Stdout, r.Stderr)
		}
		if _, err := f.answerAs(t, req, true, "alice", ""); !errors.Is(err, approval.ErrRefused) || !strings.Contains(err.Error(), string(approval.RefusedLate)) {
			t.Errorf("an approval sent to the instance anyway: got %v, want it refused as late", err)
		}
		if fileExists(marker) {
			t.Error("the withdrawn deploy ran")
		}
		rec := f.trail.one(t, req.Digest)
		checkGated(t, rec, req, audit.DecisionDeclined, "", audit.ResultDenied)
		if !strings.Contains(rec.Outcome.Message, "withdrawn") {
			t.Errorf("audit message: got %q, want it to say withdrawn", rec.Outcome.Message)
		}
	})

	t.Run("agent stopped", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprstop", "ci", marker, true)
		req := f.waitRequest(t, "apprstop", marker)
		// The agent drains for its --drain-timeout of 2s, then withdraws
		// what still waits.
		stopping.Signal(t, syscall.SIGTERM)
		if code := stopping.Wait(t, 15*time.Second); code != 0 {
			t.Errorf("agent: exit %d, want 0", code)
		}
		if code := cli.Wait(t, 10*time.Second); code != 1 || !strings.Contains(cli.Stdout(), "error: deploy was not run: its approval was withdrawn") {
			t.Errorf("caller: exit %d, output\n%s\nwant exit 1 saying the approval was withdrawn", code, cli.Output())
		}
		if f.listed(t, "apprstop", req.ID) {
			t.Errorf("approvals ls: still lists %s, want it withdrawn with its instance", req.ID)
		}
		if _, err := f.answerAs(t, req, true, "alice", ""); !errors.Is(err, approval.ErrInstanceGone) {
			t.Errorf("approving at the stopped instance: got %v, want it gone", err)
		}
		if fileExists(marker) {
			t.Error("the withdrawn deploy ran")
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionDeclined, "", audit.ResultDenied)
	})

	t.Run("replayed approval", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprref", "ci", marker, true)
		req := f.waitRequest(t, "apprref", marker)
		if r := f.cli(t, "approvals", "approve", req.ID, "--as", "alice"); r.ExitCode != 0 {
			t.Fatalf("approvals approve: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		if code := cli.Wait(t, 20*time.Second); code != 0 || !fileExists(marker) {
			t.Fatalf("caller: exit %d, marker written %t, want the approved deploy run\n%s", code, fileExists(marker), cli.Output())
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		// Again from the CLI: no instance lists it any more.
		r := f.cli(t, "approvals", "approve", req.ID, "--as", "alice", "--wait", "500ms")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "no such pending approval request") {
			t.Errorf("approving again: exit %d stdout %q stderr %q, want it not found", r.ExitCode, r.Stdout, r.Stderr)
		}
		// The very answer sent again, straight to the instance, and
		// another operator's: refused.
		reply, err := f.answerAs(t, req, true, "alice", "")
		if !errors.Is(err, approval.ErrRefused) || reply.Refusal != approval.RefusedReplayed {
			t.Errorf("the answer replayed: got %+v, %v, want it refused as replayed", reply, err)
		}
		reply, err = f.answerAs(t, req, true, "bob", "")
		if !errors.Is(err, approval.ErrRefused) || reply.Refusal != approval.RefusedDuplicate {
			t.Errorf("a second approval: got %+v, %v, want it refused as duplicate", reply, err)
		}
		time.Sleep(500 * time.Millisecond)
		if fileExists(marker) {
			t.Error("the deploy ran again after a replayed approval")
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionOperator, "alice", audit.ResultOK)
	})

	t.Run("wrong digest", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprref", "ci", marker, false)
		req := f.waitRequest(t, "apprref", marker)
		r := f.cli(t, "approvals", "approve", req.ID, "--as", "alice", "--digest", "sha256:"+strings.Repeat("0", 64))
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, string(approval.RefusedForged)) {
			t.Errorf("approving with another digest: exit %d stdout %q stderr %q, want it refused as forged", r.ExitCode, r.Stdout, r.Stderr)
		}
		if cli.Exited() || fileExists(marker) {
			t.Fatalf("after the forged approval: caller exited %t, marker written %t; want it still waiting, not run\n%s", cli.Exited(), fileExists(marker), cli.Output())
		}
		if !f.listed(t, "apprref", req.ID) {
			t.Fatalf("approvals ls: %s is gone, want it still pending after a refused answer", req.ID)
		}
		if r := f.cli(t, "approvals", "deny", req.ID, "--as", "alice", "--reason", "forged answer seen"); r.ExitCode != 0 {
			t.Fatalf("approvals deny: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		if code := cli.Wait(t, 20*time.Second); code != 1 {
			t.Errorf("caller: exit %d, want 1\n%s", code, cli.Output())
		}
		if fileExists(marker) {
			t.Error("the deploy ran")
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionDeclined, "alice", audit.ResultDenied)
	})
}

// TestApprovalSelf checks the four-eyes rule on the claimed A2A sender:
// with self_approval false the caller's own name (`call --as alice`,
// `approvals approve --as alice`, in any case) cannot approve and another
// operator can; with self_approval true it can.
func TestApprovalSelf(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	f.serve(t, "apprfoureyes", 1, map[string]any{"operator": true, "timeout": "40s", "self_approval": false}, nil)
	f.serve(t, "apprselfok", 1, map[string]any{"operator": true, "timeout": "40s", "self_approval": true}, nil)

	t.Run("self_approval false", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprfoureyes", "alice", marker, false)
		req := f.waitRequest(t, "apprfoureyes", marker)
		for _, as := range []string{"alice", "ALICE"} {
			r := f.cli(t, "approvals", "approve", req.ID, "--as", as)
			if r.ExitCode == 0 || !strings.Contains(r.Stderr, string(approval.RefusedSelfApproval)) {
				t.Errorf("approving as %s: exit %d stdout %q stderr %q, want it refused as self-approval", as, r.ExitCode, r.Stdout, r.Stderr)
			}
		}
		if cli.Exited() || fileExists(marker) || !f.listed(t, "apprfoureyes", req.ID) {
			t.Fatalf("after the self-approval: caller exited %t, marker written %t; want it pending, not run\n%s", cli.Exited(), fileExists(marker), cli.Output())
		}
		if r := f.cli(t, "approvals", "approve", req.ID, "--as", "bob"); r.ExitCode != 0 {
			t.Fatalf("approving as bob: exit %d stdout %q stderr %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		if code := cli.Wait(t, 20*time.Second); code != 0 || !fileExists(marker) {
			t.Errorf("caller: exit %d, marker written %t, want bob's approval to run it\n%s", code, fileExists(marker), cli.Output())
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionOperator, "bob", audit.ResultOK)
	})

	t.Run("self_approval true", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "deployed")
		cli := f.callDeploy(t, "apprselfok", "alice", marker, false)
		req := f.waitRequest(t, "apprselfok", marker)
		if r := f.cli(t, "approvals", "approve", req.ID, "--as", "alice"); r.ExitCode != 0 {
			t.Fatalf("approving as alice: exit %d stdout %q stderr %q, want it accepted", r.ExitCode, r.Stdout, r.Stderr)
		}
		if code := cli.Wait(t, 20*time.Second); code != 0 || !fileExists(marker) {
			t.Errorf("caller: exit %d, marker written %t, want the self-approved deploy run\n%s", code, fileExists(marker), cli.Output())
		}
		checkGated(t, f.trail.one(t, req.Digest), req, audit.DecisionOperator, "alice", audit.ResultOK)
	})
}

// TestApprovalThreeInstances runs three agents of one identity: gated calls
// spread over them, `approvals ls --json` lists every pending one from
// every instance, each `approvals approve` reaches the instance that asked
// (whose reply the caller gets), and an answer sent to another instance
// is refused there.
func TestApprovalThreeInstances(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	procs := f.serve(t, "apprthree", 3, map[string]any{"operator": true, "timeout": "40s"}, nil)
	dir := t.TempDir()

	type call struct {
		marker string
		reply  *a2a.ToolReply
		err    error
	}
	var (
		wg    sync.WaitGroup
		calls []*call
	)
	more := func(n int) {
		for range n {
			c := &call{marker: filepath.Join(dir, fmt.Sprintf("deployed-%d", len(calls)))}
			calls = append(calls, c)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
				defer cancel()
				c.reply, c.err = f.client.CallTool(ctx, "apprthree", "deploy", json.RawMessage(deployInput(c.marker)))
			})
		}
	}
	// NATS picks a queue member at random for each call: more calls until
	// every instance waits on some (12 leave one out 2% of the time).
	var pending []approval.Request
	instances := map[string]int{}
	for more(12); ; more(6) {
		fisktest.WaitFor(t, 20*time.Second, fmt.Sprintf("approvals ls to list all %d calls", len(calls)), func() bool {
			pending = f.ls(t, "")
			return len(pending) == len(calls)
		})
		clear(instances)
		for _, r := range pending {
			instances[r.Instance]++
		}
		if len(instances) == 3 || len(calls) >= 48 {
			break
		}
	}
	if len(instances) != 3 {
		t.Fatalf("instances with pending requests: got %v, want all 3", instances)
	}
	for inst := range instances {
		if !slices.ContainsFunc(procs, func(p *fleettest.Process) bool { return strings.HasSuffix(inst, fmt.Sprintf("-%d", p.PID)) }) {
			t.Errorf("instance %s: want one of the agents %v", inst, pidsOf(procs))
		}
	}
	t.Logf("%d calls waiting, per instance %v", len(calls), instances)

	// An answer goes to the instance named in the request; another
	// instance of the identity has no such request.
	first := pending[0]
	for inst := range instances {
		if inst != first.Instance {
			wrong := first
			wrong.Instance = inst
			if reply, err := f.answerAs(t, wrong, true, "alice", ""); !errors.Is(err, approval.ErrRefused) || reply.Refusal != approval.RefusedUnknown {
				t.Errorf("approving %s at instance %s, which did not ask: got %+v, %v, want it refused as unknown", first.ID, inst, reply, err)
			}
			break
		}
	}

	bin := fleettest.A2AAgent(t)
	byMarker := map[string]approval.Request{}
	for _, r := range pending {
		// One approvals approve per request, several at once, as
		// several operators would.
		wg.Go(func() {
			cmd := exec.Command(bin, "approvals", "approve", r.ID, "--identity", "apprthree", "--as", "alice", "--context", fleetContext)
			cmd.Env = f.home.Env()
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "approved "+r.ID) {
				t.Errorf("approvals approve %s: %v\n%s", r.ID, err, out)
			}
		})
		for _, c := range calls {
			if slices.Contains(strings.Fields(r.Command), "--marker="+c.marker) {
				byMarker[c.marker] = r
			}
		}
	}
	wg.Wait()
	for _, c := range calls {
		r, ok := byMarker[c.marker]
		switch {
		case !ok:
			t.Errorf("call writing %s: no request listed", c.marker)
		case c.err != nil:
			t.Errorf("call writing %s: %v", c.marker, c.err)
		case c.reply.IsError || !strings.Contains(c.reply.Output, "deployed web"):
			t.Errorf("call writing %s: got %+v, want the deploy's output", c.marker, c.reply)
		case c.reply.Sender.Instance != r.Instance:
			t.Errorf("call writing %s: answered by instance %s, want %s, which asked", c.marker, c.reply.Sender.Instance, r.Instance)
		case !fileExists(c.marker):
			t.Errorf("call writing %s: the marker is missing", c.marker)
		default:
			checkGated(t, f.trail.one(t, r.Digest), r, audit.DecisionOperator, "alice", audit.ResultOK)
		}
	}
}

// TestApprovalWaitersHoldNoSlot keeps 50 gated calls waiting for an
// operator (half streamed, half unary) on an agent with 2 slots: other
// calls still run promptly, and the 50 are then denied, none run.
func TestApprovalWaitersHoldNoSlot(t *testing.T) {
	t.Parallel()
	const waiters = 50
	f := newApprFleet(t)
	// confirm_tags gates restart (impact:rw) as well as deploy.
	f.serve(t, "apprbusy", 1, map[string]any{"operator": true, "timeout": "2m"}, func(a *fleettest.Agent) { a.ConfirmTags = []string{"impact:rw"} })
	dir := t.TempDir()

	type result struct {
		reply *a2a.ToolReply
		err   error
	}
	results := make(chan result, waiters)
	markers := make([]string, waiters)
	for i := range markers {
		markers[i] = filepath.Join(dir, fmt.Sprintf("deployed-%d", i))
		tool, input := "deploy", deployInput(markers[i])
		if i%10 == 9 {
			tool, input = "restart", `{"marker":`+fmt.Sprintf("%q", markers[i])+`}`
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var r result
			if i%2 == 0 {
				r.reply, r.err = f.client.StreamTool(ctx, "apprbusy", tool, json.RawMessage(input), nil)
			} else {
				r.reply, r.err = f.client.CallTool(ctx, "apprbusy", tool, json.RawMessage(input))
			}
			results <- r
		}()
	}
	nc := f.ns.Connect(t)
	var pending []approval.Request
	fisktest.WaitFor(t, 30*time.Second, fmt.Sprintf("%d requests pending", waiters), func() bool {
		reqs, err := approval.List(t.Context(), nc, "apprbusy", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		pending = reqs
		return len(reqs) == waiters
	})

	// Ungated calls, more than the slots at once, each quick.
	start := time.Now()
	outs := callMany(f.client, 8, "apprbusy", "sleep", `{"duration":"300ms"}`, 20*time.Second, nil)
	outs = append(outs, callMany(f.client, 8, "apprbusy", "echo", `{"message":"still here"}`, 20*time.Second, nil)...)
	elapsed := time.Since(start)
	for i, o := range outs {
		if o.err != nil || o.reply.IsError {
			t.Errorf("ungated call %d: got %+v, %v, want it run", i, o.reply, o.err)
		}
	}
	// 8 sleeps of 300ms on 2 slots take 1.2s; the echoes a moment each.
	if elapsed > 8*time.Second {
		t.Errorf("16 ungated calls beside %d waiters took %s, want them run at once on the 2 slots", waiters, elapsed)
	}
	t.Logf("16 ungated calls beside %d waiting gated ones: %s", waiters, elapsed.Round(time.Millisecond))
	if r := f.ls(t, "apprbusy"); len(r) != waiters {
		t.Errorf("approvals ls: got %d pending, want all %d still waiting", len(r), waiters)
	}

	for _, req := range pending {
		if _, err := f.answerAs(t, req, false, "alice", "not today"); err != nil {
			t.Errorf("denying %s: %v", req.ID, err)
		}
	}
	for range waiters {
		select {
		case r := <-results:
			if r.err != nil || !r.reply.IsError || !strings.Contains(r.reply.Output, "operator alice denied approval") || !strings.HasSuffix(r.reply.Output, ": not today") {
				t.Errorf("waiting call: got %+v, %v, want the denial", r.reply, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("not every denied call was answered within 20s")
		}
	}
	for _, m := range markers {
		if fileExists(m) {
			t.Errorf("denied call ran: %s written", m)
		}
	}
	surfaces := map[string]int{}
	for _, req := range pending {
		rec := f.trail.one(t, req.Digest)
		checkGated(t, rec, req, audit.DecisionDeclined, "alice", audit.ResultDenied)
		surfaces[rec.Surface]++
	}
	if surfaces[audit.SurfaceA2A] != waiters/2 || surfaces[audit.SurfaceA2AStream] != waiters/2 {
		t.Errorf("audit surfaces of the denied calls: got %v, want %d of each", surfaces, waiters/2)
	}
	fisktest.WaitFor(t, 10*time.Second, "the 16 ungated calls' records", func() bool {
		return len(f.trail.where(func(r *audit.Record) bool { return r.Gate.Decision == audit.DecisionNotGated })) == len(outs)
	})
	for _, r := range f.trail.where(func(r *audit.Record) bool { return r.Gate.Decision == audit.DecisionNotGated }) {
		if r.Outcome.Result != audit.ResultOK || r.Gate.Approver != "" {
			t.Errorf("ungated call record: got gate %+v outcome %+v, want ok and no approver", r.Gate, r.Outcome)
		}
	}
}
