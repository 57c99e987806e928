package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestMain builds the a2a-agent binary once for the tests that run it.
func TestMain(m *testing.M) { fisktest.Main(m) }

// cliHome is a configuration home for the binary: its nats contexts, and
// the environment that makes them the only ones it sees.
type cliHome struct {
	dir string
	bin string
}

func newCLIHome(tb testing.TB) *cliHome {
	tb.Helper()
	return &cliHome{dir: tb.TempDir(), bin: fisktest.Build(tb, fisktest.A2AAgentPackage, "a2a-agent")}
}

// env is the test's environment without the settings that would pick
// another context or approver, with the home's contexts.
func (h *cliHome) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "XDG_CONFIG_HOME", "NATS_CONTEXT", "NATS_URL", "A2A_AGENT_APPROVER", "FISKFLEET_LOG_FORMAT", "FISKFLEET_LOG_LEVEL":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "XDG_CONFIG_HOME="+h.dir)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// run runs the binary to its end.
func (h *cliHome) run(tb testing.TB, args ...string) cliResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = h.env(), &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		tb.Fatalf("running a2a-agent %v: %v", args, err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// proc is the binary running on while the test acts.
type proc struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *fisktest.Buffer
	done           chan struct{}
}

// start starts the binary, with a pipe for its stdin. At the end of the
// test it gets SIGTERM, by its pid, and its output is logged on failure.
func (h *cliHome) start(tb testing.TB, args ...string) *proc {
	tb.Helper()
	p := &proc{stdout: &fisktest.Buffer{}, stderr: &fisktest.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(h.bin, args...)
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = h.env(), p.stdout, p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if tb.Failed() {
			tb.Logf("a2a-agent %v\nstdout:\n%s\nstderr:\n%s", args, p.stdout, p.stderr)
		}
	})
	return p
}

// waitStdout waits until stdout holds want count times.
func (p *proc) waitStdout(tb testing.TB, want string, count int) {
	tb.Helper()
	fisktest.WaitFor(tb, 20*time.Second, "a2a-agent to print "+want, func() bool { return strings.Count(p.stdout.String(), want) >= count })
}

// exit waits for the process to end and returns its exit code.
func (p *proc) exit(tb testing.TB) int {
	tb.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		tb.Fatal("a2a-agent still runs after 20s")
		return 0
	}
}

// pendingCall is a gated call waiting in a broker of the test process.
type pendingCall struct {
	req  approval.Request
	done chan struct{}
	d    approval.Decision
	err  error
}

// ask makes a request on b and returns once it is published.
func ask(tb testing.TB, ctx context.Context, b *approval.Broker, command string) *pendingCall {
	tb.Helper()
	c := &pendingCall{done: make(chan struct{})}
	announced := make(chan approval.Request, 1)
	go func() {
		defer close(c.done)
		c.d, c.err = b.Request(ctx, approval.Pending{
			Tool:      "deploy",
			Command:   command,
			Digest:    approval.Digest([]byte(`{"command":` + strings.ReplaceAll(command, " ", "_") + `}`)),
			Caller:    approval.Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true},
			Announced: func(r approval.Request) { announced <- r },
		})
	}()
	select {
	case c.req = <-announced:
	case <-c.done:
		tb.Fatalf("request ended before it was published: %v", c.err)
	}
	return c
}

func (c *pendingCall) wait(tb testing.TB) approval.Decision {
	tb.Helper()
	select {
	case <-c.done:
		return c.d
	case <-time.After(20 * time.Second):
		tb.Fatalf("request %s: no outcome within 20s", c.req.ID)
		return approval.Decision{}
	}
}

func (c *pendingCall) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// newApprovalBroker starts a broker of identity and instance on its own
// connection, as an agent process would.
func newApprovalBroker(tb testing.TB, nc *nats.Conn, identity, instance string) *approval.Broker {
	tb.Helper()
	b, err := approval.NewBroker(nc, approval.Options{Identity: identity, Instance: instance, Logger: fisktest.Logger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// anyFailure is a wanted exit code: any but 0 (kong's own for a usage
// error).
const anyFailure = -1

// TestApprovalsCommands runs ls, approve and deny as processes against
// three brokers of one identity in the test process.
func TestApprovalsCommands(t *testing.T) {
	ns := natstest.Start(t)
	h := newCLIHome(t)
	ns.WriteContext(t, h.dir, "fleet", nil)
	calls := make([]*pendingCall, 3)
	for i, inst := range []string{"i1", "i2", "i3"} {
		b := newApprovalBroker(t, ns.Connect(t), "demo", inst)
		calls[i] = ask(t, t.Context(), b, "app deploy --env prod --host "+inst)
	}
	ids := []string{calls[0].req.ID, calls[1].req.ID, calls[2].req.ID}

	t.Run("ls shows every instance's request", func(t *testing.T) {
		r := h.run(t, "approvals", "ls", "--context", "fleet")
		if r.code != 0 {
			t.Fatalf("exit code %d, stderr:\n%s", r.code, r.stderr)
		}
		for _, want := range append([]string{"ID", "COMMAND", "ci-bot/runner-1 (claimed)", "app deploy --env prod --host i2"}, ids...) {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout: got\n%s\nwant it to contain %q", r.stdout, want)
			}
		}
	})

	t.Run("ls --json prints one schema-valid request a line", func(t *testing.T) {
		r := h.run(t, "approvals", "ls", "--context", "fleet", "--identity", "demo", "--json")
		if r.code != 0 {
			t.Fatalf("exit code %d, stderr:\n%s", r.code, r.stderr)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if err := approval.Validate(approval.KindRequest, []byte(line)); err != nil {
				t.Errorf("line %q: %v", line, err)
			}
			var req approval.Request
			if err := json.Unmarshal([]byte(line), &req); err != nil {
				t.Fatal(err)
			}
			got = append(got, req.ID)
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(ids))) {
			t.Errorf("ids: got %v, want %v", got, ids)
		}
	})

	t.Run("ls of an identity with none", func(t *testing.T) {
		r := h.run(t, "approvals", "ls", "--context", "fleet", "--identity", "other", "--wait", "300ms")
		if r.code != 0 || !strings.Contains(r.stdout, "no pending approval requests") {
			t.Errorf("got exit %d, stdout %q, want none pending", r.code, r.stdout)
		}
	})

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		check      func(t *testing.T)
		wantDecide *pendingCall
		want       approval.Outcome
		wantBy     string
		wantReason string
	}{
		{
			name: "approve reaches the instance that asked", args: []string{"approve", ids[0], "--as", "alice", "--reason", "checked"},
			wantOut: "approved " + ids[0], wantDecide: calls[0], want: approval.OutcomeApproved, wantBy: "alice", wantReason: "checked",
		},
		{
			name: "a decided request is no longer there to approve", args: []string{"approve", ids[0], "--as", "alice", "--reason", "checked", "--wait", "300ms"},
			wantCode: 1, wantOut: "no such pending approval request",
		},
		{
			name: "deny", args: []string{"deny", ids[1], "--as", "bob", "--reason", "change freeze"},
			wantOut: "denied " + ids[1], wantDecide: calls[1], want: approval.OutcomeDenied, wantBy: "bob", wantReason: "change freeze",
		},
		{name: "deny needs a reason", args: []string{"deny", ids[2]}, wantCode: anyFailure, wantOut: "--reason"},
		{
			name: "an answer for other arguments is refused", args: []string{"approve", ids[2], "--digest", approval.Digest([]byte("{}"))},
			wantCode: 1, wantOut: "forged",
			check: func(t *testing.T) {
				if !calls[2].running() {
					t.Error("the request ended, want it still waiting")
				}
			},
		},
		{name: "an unknown id", args: []string{"approve", "nosuch", "--wait", "300ms"}, wantCode: 1, wantOut: "no such pending approval request"},
		{
			name: "the default approver is the user at the host", args: []string{"approve", ids[2], "--identity", "demo"},
			wantOut: "approved " + ids[2], wantDecide: calls[2], want: approval.OutcomeApproved, wantBy: "@",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(t, append([]string{"approvals"}, append(tt.args, "--context", "fleet")...)...)
			if r.code != tt.wantCode && (tt.wantCode != anyFailure || r.code == 0) {
				t.Errorf("exit code: got %d, want %d\nstderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if out := r.stdout + r.stderr; !strings.Contains(out, tt.wantOut) {
				t.Errorf("output: got\n%s\nwant it to contain %q", out, tt.wantOut)
			}
			if tt.check != nil {
				tt.check(t)
			}
			if tt.wantDecide == nil {
				return
			}
			d := tt.wantDecide.wait(t)
			if d.Outcome != tt.want || !strings.Contains(d.Approver, tt.wantBy) || d.Reason != tt.wantReason {
				t.Errorf("decision: got %q by %q (%q), want %q by %q (%q)", d.Outcome, d.Approver, d.Reason, tt.want, tt.wantBy, tt.wantReason)
			}
		})
	}
}

// TestApprovalsWatchJSON runs watch --json: it prints the request already
// pending, then each new one, as schema-valid JSON lines, and exits 0 on
// SIGTERM.
func TestApprovalsWatchJSON(t *testing.T) {
	ns := natstest.Start(t)
	h := newCLIHome(t)
	ns.WriteContext(t, h.dir, "fleet", nil)
	b := newApprovalBroker(t, ns.Connect(t), "demo", "i1")
	before := ask(t, t.Context(), b, "app deploy --env prod")
	p := h.start(t, "approvals", "watch", "--json", "--context", "fleet", "--identity", "demo")
	p.waitStdout(t, before.req.ID, 1)
	after := ask(t, t.Context(), b, "app deploy --env staging")
	p.waitStdout(t, after.req.ID, 1)

	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	if got, want := len(lines), 2; got != want {
		t.Fatalf("lines: got %d, want %d:\n%s", got, want, p.stdout)
	}
	for i, want := range []approval.Request{before.req, after.req} {
		if err := approval.Validate(approval.KindRequest, []byte(lines[i])); err != nil {
			t.Errorf("line %d: %v", i, err)
		}
		var got approval.Request
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.Command != want.Command {
			t.Errorf("line %d: got %s %q, want %s %q", i, got.ID, got.Command, want.ID, want.Command)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(t); code != 0 {
		t.Errorf("exit code after SIGTERM: got %d, want 0", code)
	}
}

// TestApprovalsWatchInteractive answers at the prompt: y approves, n and a
// reason denies, anything else asks again, and a request that ends
// elsewhere is said to have ended.
func TestApprovalsWatchInteractive(t *testing.T) {
	ns := natstest.Start(t)
	h := newCLIHome(t)
	ns.WriteContext(t, h.dir, "fleet", nil)
	b := newApprovalBroker(t, ns.Connect(t), "demo", "i1")
	p := h.start(t, "approvals", "watch", "--context", "fleet", "--as", "bob")
	const prompt = "approve? [y/n] "

	first := ask(t, t.Context(), b, "app deploy --env prod")
	p.waitStdout(t, prompt, 1)
	for _, want := range []string{first.req.ID, "tool:      deploy", "caller:    ci-bot/runner-1 (claimed)", "time left: ", "    app deploy --env prod\n"} {
		if !strings.Contains(p.stdout.String(), want) {
			t.Errorf("stdout: got\n%s\nwant it to contain %q", p.stdout, want)
		}
	}
	if _, err := io.WriteString(p.stdin, "y\n"); err != nil {
		t.Fatal(err)
	}
	if d := first.wait(t); !d.Approved() || d.Approver != "bob" {
		t.Errorf("first: got %q by %q, want approved by bob", d.Outcome, d.Approver)
	}

	second := ask(t, t.Context(), b, "app deploy --env staging")
	p.waitStdout(t, prompt, 2)
	if _, err := io.WriteString(p.stdin, "maybe\nn not today\n"); err != nil {
		t.Fatal(err)
	}
	if d := second.wait(t); d.Outcome != approval.OutcomeDenied || d.Reason != "not today" {
		t.Errorf("second: got %q (%q), want denied (not today)", d.Outcome, d.Reason)
	}
	if !strings.Contains(p.stdout.String(), "answer y or n: ") {
		t.Errorf("stdout: got\n%s\nwant it to ask again for an answer that is neither", p.stdout)
	}

	ctx, cancel := context.WithCancel(t.Context())
	third := ask(t, ctx, b, "app restart")
	p.waitStdout(t, prompt, 3)
	cancel()
	third.wait(t)
	p.waitStdout(t, "request "+third.req.ID+" was withdrawn meanwhile", 1)

	if err := p.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t); code != 0 {
		t.Errorf("exit code once the input closed: got %d, want 0", code)
	}
}

// TestApprovalsPermissions runs approve as a NATS user that may list but
// not publish answers: it fails naming the permission, and the request
// waits on for an operator who has it.
func TestApprovalsPermissions(t *testing.T) {
	ns := natstest.StartFromConfig(t, `
authorization {
  users = [
    {user: agent, password: agent, permissions: {
      publish: ["choria.fisk-ai.approval.*.event.*"]
      subscribe: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list", "choria.fisk-ai.approval.*.answer.*"]
      allow_responses: true
    }}
    {user: alice, password: alice, permissions: {
      publish: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list", "choria.fisk-ai.approval.*.answer.>"]
      subscribe: ["_INBOX.>", "choria.fisk-ai.approval.*.event.>"]
    }}
    {user: ci, password: ci, permissions: {
      publish: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list"]
      subscribe: ["_INBOX.>"]
    }}
  ]
}
`)
	h := newCLIHome(t)
	ns.WriteContext(t, h.dir, "alice", map[string]string{"user": "alice", "password": "alice"})
	ns.WriteContext(t, h.dir, "ci", map[string]string{"user": "ci", "password": "ci"})
	b := newApprovalBroker(t, ns.Connect(t, nats.UserInfo("agent", "agent")), "demo", "i1")
	c := ask(t, t.Context(), b, "app deploy --env prod")

	r := h.run(t, "approvals", "approve", c.req.ID, "--context", "ci", "--as", "alice")
	if r.code != 1 || !strings.Contains(r.stderr, "not permitted") || !strings.Contains(r.stderr, approval.AnswerSubject("demo", "i1")) {
		t.Errorf("ci approves: got exit %d, stderr\n%s\nwant 1, naming the permission", r.code, r.stderr)
	}
	if !c.running() {
		t.Fatal("the request ended on ci's answer, want it still waiting")
	}
	r = h.run(t, "approvals", "approve", c.req.ID, "--context", "alice")
	if r.code != 0 {
		t.Fatalf("alice approves: exit %d, stderr\n%s", r.code, r.stderr)
	}
	if d := c.wait(t); !d.Approved() || d.NATSUser != "alice" {
		t.Errorf("got %q by %q (NATS user %q), want approved by NATS user alice", d.Outcome, d.Approver, d.NATSUser)
	}
}

func TestParseApprovals(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantCmd string
		check   func(*testing.T, *root)
		wantErr string
	}{
		{
			name: "ls with defaults", args: []string{"approvals", "ls"}, wantCmd: "approvals ls",
			check: func(t *testing.T, r *root) {
				if c := r.Approvals.Ls; c.Wait != time.Second || c.Identity != "" || c.JSON || c.Context != "" {
					t.Errorf("ls: got %+v, want a 1s wait over the whole fleet, as a table, in the selected context", c)
				}
			},
		},
		{
			name: "approve with its flags", args: []string{"approvals", "approve", "abc", "--as", "alice", "--reason", "ok", "--identity", "demo", "--digest", "sha256:00", "--context", "prod"},
			wantCmd: "approvals approve <id>",
			check: func(t *testing.T, r *root) {
				c := r.Approvals.Approve
				if c.ID != "abc" || c.As != "alice" || c.Reason != "ok" || c.Identity != "demo" || c.Digest != "sha256:00" || c.Context != "prod" {
					t.Errorf("approve: got %+v", c)
				}
			},
		},
		{
			name: "the approver from the environment", args: []string{"approvals", "watch", "--json"}, env: map[string]string{"A2A_AGENT_APPROVER": "ops-team"},
			wantCmd: "approvals watch",
			check: func(t *testing.T, r *root) {
				if c := r.Approvals.Watch; c.As != "ops-team" || !c.JSON {
					t.Errorf("watch: got %+v, want approver ops-team, JSON", c)
				}
			},
		},
		{name: "deny without a reason", args: []string{"approvals", "deny", "abc"}, wantErr: "--reason"},
		{name: "approve without an id", args: []string{"approvals", "approve"}, wantErr: "<id>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATS_CONTEXT", "")
			t.Setenv("A2A_AGENT_APPROVER", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r, cmd, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse %v: got error %v, want one naming %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse %v: %v", tt.args, err)
			}
			if cmd != tt.wantCmd {
				t.Errorf("command: got %q, want %q", cmd, tt.wantCmd)
			}
			tt.check(t, r)
		})
	}
}
