package approvalweb

import (
	"context"
	"os"
	"path/filepath"
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
	lines := fisktest.StartScript(t, node, filepath.Join(root, browserScript), map[string]string{
		"APPROVALS_URL":    s.srv.URL + "/approvals",
		"APPROVALS_TOKEN":  aliceToken,
		"APPROVALS_REASON": "not during the freeze",
		"APPROVALS_OUT":    out,
		"PLAYWRIGHT_CORE":  pw,
		"CHROMIUM":         chromiumBin,
	}, 3*time.Minute)

	if ev := lines.Next(t, "ready"); ev.Who != "alice" {
		t.Errorf("signed in as %q, want alice", ev.Who)
	}
	first := f.ask(t, deploy())
	if ev := lines.Next(t, "seen"); ev.ID != first.req.ID || ev.Command != first.req.Command || ev.Caller != "ci-bot/runner-1 (claimed)" {
		t.Errorf("the browser saw %+v, want %s with command %q by the claimed ci-bot", ev, first.req.ID, first.req.Command)
	}
	lines.Next(t, "approved")
	d, err := first.wait(t)
	if err != nil || !d.Approved() || d.Approver != "alice" {
		t.Fatalf("first request: got %s by %q (%v), want approved by alice", d.Outcome, d.Approver, err)
	}

	second := f.ask(t, deploy())
	if ev := lines.Next(t, "seen"); ev.ID != second.req.ID {
		t.Errorf("the browser saw %s, want %s", ev.ID, second.req.ID)
	}
	lines.Next(t, "denied")
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
	if ev := lines.Next(t, "seen"); ev.ID != req.ID {
		t.Errorf("the browser saw %s, want %s", ev.ID, req.ID)
	}
	shot := lines.Next(t, "screenshot").Path
	t.Logf("screenshot: %s", shot)
	cancel()
	if err := <-third; err == nil {
		t.Errorf("the withdrawn request returned no error")
	}
	if ev := lines.Next(t, "gone"); ev.Feed != "stream" {
		t.Errorf("the page followed the list by %q, want the event stream", ev.Feed)
	}
	lines.Wait(t)
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("no screenshot at %s: %v", shot, err)
	}
}
