package approvalweb

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// What the browser test runs, installed by `make tools`, relative to the
// workspace root except for Debian's chromium.
const (
	chromiumBin    = "/usr/bin/chromium"
	npmNode        = "bin/npm/node_modules/.bin/node"
	playwrightCore = "bin/npm/node_modules/playwright-core"
	browserScript  = "integration/browser/approvals.mjs"
)

// TestPageInChromium serves the page from this process with a broker as
// the waiting caller, and has a real headless Chromium (Debian's, driven
// by playwright-core) sign in, see requests appear while the page is open,
// approve one, deny one with a reason, and watch one leave by itself when
// its caller gives up; the broker's outcomes say what the clicks did.
// integration/approvals_web_test.go runs the same script against a real
// gateway and agent.
func TestPageInChromium(t *testing.T) {
	root, err := fisktest.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, pw := filepath.Join(root, npmNode), filepath.Join(root, playwrightCore)
	fisktest.RequireInstalled(t, "Chromium with playwright-core", chromiumBin, node, pw)

	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{Identity: "demo"})
	out := t.TempDir()
	lines := runBrowser(t, node, filepath.Join(root, browserScript), map[string]string{
		"APPROVALS_URL":    s.srv.URL + "/approvals",
		"APPROVALS_TOKEN":  aliceToken,
		"APPROVALS_REASON": "not during the freeze",
		"APPROVALS_OUT":    out,
		"PLAYWRIGHT_CORE":  pw,
		"CHROMIUM":         chromiumBin,
	})

	if ev := lines.next(t, "ready"); ev.Who != "alice" {
		t.Errorf("signed in as %q, want alice", ev.Who)
	}
	first := f.ask(t, deploy())
	if ev := lines.next(t, "seen"); ev.ID != first.req.ID || ev.Command != first.req.Command || ev.Caller != "ci-bot/runner-1 (claimed)" {
		t.Errorf("the browser saw %+v, want %s with command %q by the claimed ci-bot", ev, first.req.ID, first.req.Command)
	}
	lines.next(t, "approved")
	d, err := first.wait(t)
	if err != nil || !d.Approved() || d.Approver != "alice" {
		t.Fatalf("first request: got %s by %q (%v), want approved by alice", d.Outcome, d.Approver, err)
	}

	second := f.ask(t, deploy())
	if ev := lines.next(t, "seen"); ev.ID != second.req.ID {
		t.Errorf("the browser saw %s, want %s", ev.ID, second.req.ID)
	}
	lines.next(t, "denied")
	d, err = second.wait(t)
	if err != nil || d.Outcome != approval.OutcomeDenied || d.Approver != "alice" || d.Reason != "not during the freeze" {
		t.Fatalf("second request: got %s by %q because %q (%v), want denied by alice because %q", d.Outcome, d.Approver, d.Reason, err, "not during the freeze")
	}

	// The third caller gives up while the page shows its request.
	ctx, cancel := context.WithCancel(t.Context())
	third := make(chan error, 1)
	announced := make(chan approval.Request, 1)
	p := deploy()
	p.Announced = func(r approval.Request) { announced <- r }
	go func() { _, err := f.broker.Request(ctx, p); third <- err }()
	req := <-announced
	if ev := lines.next(t, "seen"); ev.ID != req.ID {
		t.Errorf("the browser saw %s, want %s", ev.ID, req.ID)
	}
	shot := lines.next(t, "screenshot").Path
	t.Logf("screenshot: %s", shot)
	cancel()
	if err := <-third; err == nil {
		t.Errorf("the withdrawn request returned no error")
	}
	if ev := lines.next(t, "gone"); ev.Feed != "stream" {
		t.Errorf("the page followed the list by %q, want the event stream", ev.Feed)
	}
	lines.wait(t)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("no screenshot at %s: %v", shot, err)
	}
}

// scriptEvent is one line the browser script prints.
type scriptEvent struct {
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

// scriptLines are the events of a running browser script.
type scriptLines struct {
	events chan scriptEvent
	done   chan error
	stderr *fisktest.Buffer
}

// runBrowser starts the script under node in a process group of its own,
// which is killed whole (node and the browser it started) when the test
// ends.
func runBrowser(tb testing.TB, node, script string, env map[string]string) *scriptLines {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	l := &scriptLines{events: make(chan scriptEvent, 16), done: make(chan error, 1), stderr: &fisktest.Buffer{}}
	cmd.Stderr = l.stderr
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
		<-l.done
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev scriptEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event != "" {
				l.events <- ev
			}
		}
		close(l.events)
		l.done <- cmd.Wait()
		// The group may hold a browser node left behind.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}()
	return l
}

// next waits for the script's next event and fails tb unless it is want.
func (l *scriptLines) next(tb testing.TB, want string) scriptEvent {
	tb.Helper()
	select {
	case ev, ok := <-l.events:
		if !ok {
			tb.Fatalf("the browser script ended before %q: %s", want, l.stderr)
		}
		if ev.Event != want {
			tb.Fatalf("the browser script said %+v, want %q", ev, want)
		}
		return ev
	case <-time.After(time.Minute):
		tb.Fatalf("the browser script said nothing within a minute, waiting for %q: %s", want, l.stderr)
	}
	return scriptEvent{}
}

// wait waits for the script to exit and fails tb unless it succeeded.
func (l *scriptLines) wait(tb testing.TB) {
	tb.Helper()
	for range l.events {
	}
	select {
	case err := <-l.done:
		l.done <- err
		if err != nil {
			tb.Fatalf("the browser script failed: %v: %s", err, l.stderr)
		}
	case <-time.After(time.Minute):
		tb.Fatal("the browser script did not exit within a minute")
	}
}
