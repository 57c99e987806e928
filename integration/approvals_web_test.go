package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// What TestApprovalsWebBrowser runs besides the services: Debian's
// chromium, and playwright-core and Node from `make tools`, relative to
// the workspace root.
const (
	browserChromium   = "/usr/bin/chromium"
	browserPlaywright = "bin/npm/node_modules/playwright-core"
	browserScript     = "integration/browser/approvals.mjs"
)

// TestApprovalsWebBrowser is the gateway's /approvals page end to end, in
// a real headless Chromium: an `a2a-agent serve` of the demo app gates
// deploy behind operator approvals, `mcp-gateway serve` serves the page
// with a token for approver alice, and integration/browser/approvals.mjs
// signs in. While the page is open an A2A caller (`a2a-agent call
// --follow`) asks to deploy; its request appears on the page, alice clicks
// Approve, and the caller's command runs once, its output reaching the
// caller. A second caller's request is denied from the page with a reason,
// which the caller is told, and nothing runs. A third caller gives up with
// Ctrl-C and its request leaves the open page by itself. The audit records
// name alice.
func TestApprovalsWebBrowser(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	f.serve(t, "apprweb", 1, map[string]any{"operator": true, "timeout": "60s"}, nil)
	_, b := startWebApprover(t, f)
	if ev := b.Next(t, "ready"); ev.Who != "alice" {
		t.Errorf("signed in as %q, want alice", ev.Who)
	}

	// Approved from the page: the command runs, once.
	marker := filepath.Join(t.TempDir(), "deployed")
	cli := f.callDeploy(t, "apprweb", "ci", marker, true)
	seen := b.Next(t, "seen")
	if seen.Tool != "deploy" || !strings.Contains(seen.Command, "--marker="+marker) || seen.Caller != "ci (claimed)" {
		t.Errorf("the page showed %+v, want deploy writing %s for the claimed caller ci", seen, marker)
	}
	b.Next(t, "approved")
	if code := cli.Wait(t, 20*time.Second); code != 0 {
		t.Fatalf("caller: exit %d, want 0\n%s", code, cli.Output())
	}
	if !strings.Contains(cli.Stdout(), "deployed web\n") {
		t.Errorf("caller: got stdout %q, want the deploy's output", cli.Stdout())
	}
	if got, err := os.ReadFile(marker); err != nil || string(got) != "deployed web\n" {
		t.Errorf("marker: got %q, %v, want the deploy to have written it", got, err)
	}
	rec := webRecord(t, f, marker)
	if rec.Gate.Decision != audit.DecisionOperator || rec.Gate.Approver != "alice" || rec.Outcome.Result != audit.ResultOK {
		t.Errorf("audit record: got gate %+v outcome %+v, want approved by operator alice and run", rec.Gate, rec.Outcome)
	}
	if rec.Command != seen.Command {
		t.Errorf("audit record: ran %q, want the command line the page showed, %q", rec.Command, seen.Command)
	}

	// Denied from the page with a reason: the caller is told, nothing runs.
	marker2 := filepath.Join(t.TempDir(), "deployed")
	cli = f.callDeploy(t, "apprweb", "ci", marker2, true)
	seen = b.Next(t, "seen")
	if !strings.Contains(seen.Command, "--marker="+marker2) {
		t.Errorf("the page showed %q, want the deploy writing %s", seen.Command, marker2)
	}
	b.Next(t, "denied")
	if code := cli.Wait(t, 20*time.Second); code != 1 {
		t.Errorf("caller: exit %d, want 1\n%s", code, cli.Output())
	}
	if want := "error: deploy was not run: operator alice denied approval " + seen.ID + ": not during the freeze\n"; cli.Stdout() != want {
		t.Errorf("caller: got %q, want %q", cli.Stdout(), want)
	}
	if fileExists(marker2) {
		t.Error("the denied deploy ran")
	}
	rec = webRecord(t, f, marker2)
	if rec.Gate.Decision != audit.DecisionDeclined || rec.Gate.Approver != "alice" || rec.Outcome.Result != audit.ResultDenied {
		t.Errorf("audit record: got gate %+v outcome %+v, want declined by alice", rec.Gate, rec.Outcome)
	}

	// A caller that gives up leaves the open page by itself.
	marker3 := filepath.Join(t.TempDir(), "deployed")
	cli = f.callDeploy(t, "apprweb", "ci", marker3, true)
	b.Next(t, "seen")
	t.Logf("screenshot: %s", b.Next(t, "screenshot").Path)
	cli.Signal(t, syscall.SIGINT)
	if ev := b.Next(t, "gone"); ev.Feed != "stream" {
		t.Errorf("the page followed the list by %q, want the event stream", ev.Feed)
	}
	b.Wait(t)
	if code := cli.Wait(t, 20*time.Second); code != 1 || fileExists(marker3) {
		t.Errorf("caller: exit %d, marker written %t, want 1 and nothing run\n%s", code, fileExists(marker3), cli.Output())
	}
}

// TestApprovalsWebBrowserMCP is the same through the gateway itself: an
// MCP client that cannot elicit calls the gated deploy, the gateway puts
// it to the operators, and alice answers on the page in Chromium: the
// approved call runs once and its result reaches the client, the denied
// one returns the reason and runs nothing, and one the client cancels
// leaves the open page by itself.
func TestApprovalsWebBrowserMCP(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	gw, b := startWebApprover(t, f)
	if ev := b.Next(t, "ready"); ev.Who != "alice" {
		t.Errorf("signed in as %q, want alice", ev.Who)
	}
	c := connectMCP(t, gw.URL, nil)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	deploy := func(ctx context.Context, marker string) <-chan outcome {
		done := make(chan outcome, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "deploy"
			req.Params.Arguments = map[string]any{"service": "web", "marker": marker}
			res, err := c.CallTool(ctx, req)
			done <- outcome{res, err}
		}()
		return done
	}
	result := func(done <-chan outcome) outcome {
		t.Helper()
		select {
		case o := <-done:
			return o
		case <-time.After(30 * time.Second):
			t.Fatal("the MCP call did not return within 30s of the answer")
			return outcome{}
		}
	}

	// Approved from the page: the command runs, once.
	marker := filepath.Join(t.TempDir(), "deployed")
	done := deploy(t.Context(), marker)
	seen := b.Next(t, "seen")
	if seen.Tool != "deploy" || !strings.Contains(seen.Command, "--marker="+marker) {
		t.Errorf("the page showed %+v, want deploy writing %s", seen, marker)
	}
	b.Next(t, "approved")
	o := result(done)
	if o.err != nil || o.res.IsError {
		t.Fatalf("approved call: got %v, %+v, want a result", o.err, o.res)
	}
	var cr tool.CommandResult
	if err := json.Unmarshal([]byte(mcpText(o.res)), &cr); err != nil || cr.Output != "deployed web\n" || cr.ExitCode != 0 {
		t.Errorf("approved call: got %q (%v), want the deploy's output and exit code 0", mcpText(o.res), err)
	}
	if got, err := os.ReadFile(marker); err != nil || string(got) != "deployed web\n" {
		t.Errorf("marker: got %q, %v, want the deploy to have written it", got, err)
	}
	rec := webRecord(t, f, marker)
	if rec.Gate.Decision != audit.DecisionOperator || rec.Gate.Approver != "alice" || rec.Outcome.Result != audit.ResultOK {
		t.Errorf("audit record: got gate %+v outcome %+v, want approved by operator alice and run", rec.Gate, rec.Outcome)
	}

	// Denied from the page: the client is told why, nothing runs.
	marker2 := filepath.Join(t.TempDir(), "deployed")
	done = deploy(t.Context(), marker2)
	seen = b.Next(t, "seen")
	b.Next(t, "denied")
	o = result(done)
	if want := "operator alice denied approval " + seen.ID + ": not during the freeze"; o.err != nil || !o.res.IsError || !strings.Contains(mcpText(o.res), want) {
		t.Errorf("denied call: got %v, %q, want an in-band error saying %q", o.err, mcpText(o.res), want)
	}
	if fileExists(marker2) {
		t.Error("the denied deploy ran")
	}

	// A client that gives up leaves the open page by itself.
	marker3 := filepath.Join(t.TempDir(), "deployed")
	ctx, cancel := context.WithCancel(t.Context())
	done = deploy(ctx, marker3)
	b.Next(t, "seen")
	t.Logf("screenshot: %s", b.Next(t, "screenshot").Path)
	cancel()
	if ev := b.Next(t, "gone"); ev.Feed != "stream" {
		t.Errorf("the page followed the list by %q, want the event stream", ev.Feed)
	}
	b.Wait(t)
	result(done)
	if fileExists(marker3) {
		t.Error("the cancelled deploy ran")
	}
}

// webApproverToken is approver alice's token for the gateway's page.
const webApproverToken = "alice-approves-0123456789abcdef"

// startWebApprover starts `mcp-gateway serve` of the demo app with
// operator approvals on and a token for approver alice, and the browser
// script, signed in to its /approvals page as alice.
func startWebApprover(tb testing.TB, f *apprFleet) (*gatewayProcess, *fisktest.Script) {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	node, pw := filepath.Join(root, conformanceNode), filepath.Join(root, browserPlaywright)
	fisktest.RequireInstalled(tb, "Chromium with playwright-core", browserChromium, node, pw)
	gwCfg := fleettest.WriteAgentConfig(tb, fleettest.Agent{
		Identity:        "apprwebgw",
		ApplicationPath: fleettest.FiskDemo(tb),
		NATSContext:     fleetContext,
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             map[string]any{},
		Extra: map[string]any{"approvals": map[string]any{
			"operator":  true,
			"timeout":   "60s",
			"approvers": []map[string]any{{"name": "alice", "token_env": "APPROVALS_ALICE_TOKEN"}},
		}},
	})
	gw := startGateway(tb, append(f.home.Env(), "APPROVALS_ALICE_TOKEN="+webApproverToken), gwCfg)
	page := strings.TrimSuffix(gw.URL, "/mcp") + "/approvals"
	requireApprovalsPage(tb, page)
	b := fisktest.StartScript(tb, node, filepath.Join(root, browserScript), map[string]string{
		"APPROVALS_URL":    page,
		"APPROVALS_TOKEN":  webApproverToken,
		"APPROVALS_REASON": "not during the freeze",
		"APPROVALS_OUT":    tb.TempDir(),
		"PLAYWRIGHT_CORE":  pw,
		"CHROMIUM":         browserChromium,
	}, 4*time.Minute)
	return gw, b
}

// requireApprovalsPage fails tb unless the gateway serves its approvals
// page at url, asking to sign in.
func requireApprovalsPage(tb testing.TB, url string) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		tb.Fatalf("GET %s: got %s, want 401 and the sign-in form: mcp-gateway serve mounts the approvals page when approvals.operator is on and approvals.approvers are set", url, resp.Status)
	}
}

// webRecord waits for the one audit record of the deploy writing marker.
func webRecord(tb testing.TB, f *apprFleet, marker string) *audit.Record {
	tb.Helper()
	mine := func(r *audit.Record) bool {
		return r.Tool == "deploy" && strings.Contains(r.Command, "--marker="+marker)
	}
	fisktest.WaitFor(tb, 10*time.Second, "the audit record of the deploy writing "+marker, func() bool { return len(f.trail.where(mine)) > 0 })
	recs := f.trail.where(mine)
	if len(recs) != 1 {
		tb.Fatalf("audit records of the deploy writing %s: got %d, want 1: %+v", marker, len(recs), recs)
	}
	return recs[0]
}
