package approvalweb

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// Tokens of the approvers the tests sign in as.
const (
	aliceToken = "alice-token-0123456789abcdef"
	bobToken   = "bob-token-0123456789abcdef"
)

// fleet is a NATS server with one agent instance's broker on it: the
// stand-in for an agent whose gated calls wait for an operator.
type fleet struct {
	ns     *natstest.Server
	broker *approval.Broker
}

// startFleet starts NATS and a broker of identity demo, instance i1.
func startFleet(tb testing.TB, cfg approval.Config) *fleet {
	tb.Helper()
	ns := natstest.Start(tb)
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	b, err := approval.NewBroker(ns.Connect(tb), approval.Options{Identity: "demo", Instance: "i1", Config: cfg, Logger: fisktest.Logger(tb)})
	if err != nil {
		tb.Fatalf("starting the broker: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return &fleet{ns: ns, broker: b}
}

// call is a gated call waiting for an operator.
type call struct {
	req  approval.Request
	done chan struct{}
	d    approval.Decision
	err  error
}

// deploy is a gated call of a claimed A2A caller whose command line needs
// escaping everywhere it is shown.
func deploy() approval.Pending {
	return approval.Pending{
		Tool:    "deploy",
		Command: `app deploy --env prod --note '<script>alert("x")</script> & rm -rf /'`,
		Digest:  approval.Digest([]byte(`{"env":"prod"}`)),
		Caller:  approval.Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true},
	}
}

// ask runs the broker's Request for p on a goroutine, as a caller would,
// and returns once the request is published.
func (f *fleet) ask(tb testing.TB, p approval.Pending) *call {
	tb.Helper()
	c := &call{done: make(chan struct{})}
	announced := make(chan approval.Request, 1)
	p.Announced = func(r approval.Request) { announced <- r }
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); <-c.done })
	go func() {
		defer close(c.done)
		c.d, c.err = f.broker.Request(ctx, p)
	}()
	select {
	case c.req = <-announced:
	case <-c.done:
		tb.Fatalf("request ended before it was published: %v", c.err)
	case <-time.After(10 * time.Second):
		tb.Fatal("request not published within 10s")
	}
	return c
}

// wait returns the call's decision.
func (c *call) wait(tb testing.TB) (approval.Decision, error) {
	tb.Helper()
	select {
	case <-c.done:
		return c.d, c.err
	case <-time.After(10 * time.Second):
		tb.Fatalf("request %s: no outcome within 10s", c.req.ID)
		return approval.Decision{}, nil
	}
}

// pendingAt reports whether the broker still waits on c.
func (f *fleet) pendingAt(c *call) bool {
	for _, r := range f.broker.Pending() {
		if r.ID == c.req.ID {
			return true
		}
	}
	return false
}

// site is a Page served on 127.0.0.1 by httptest, mounted as the gateway
// mounts it.
type site struct {
	page *Page
	srv  *httptest.Server
	logs *fisktest.Buffer
}

// servePage makes a Page of cfg on its own connection to f's server
// (cfg.NATS when unset) and serves it; cfg.Logger, when unset, writes to
// site.logs.
func servePage(tb testing.TB, f *fleet, cfg Config) *site {
	tb.Helper()
	s := &site{logs: &fisktest.Buffer{}}
	if cfg.NATS == nil {
		cfg.NATS = f.ns.Connect(tb)
	}
	if cfg.Logger == nil {
		cfg.Logger = newTestLogger(tb, s.logs)
	}
	if cfg.Tokens == nil && cfg.OIDC == nil {
		cfg.Tokens = []Token{{Name: "alice", Token: aliceToken}, {Name: "bob", Token: bobToken}}
	}
	var err error
	s.page, err = New(cfg)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { _ = s.page.Close() })
	s.srv = httptest.NewServer(mount(s.page.Handler()))
	tb.Cleanup(s.srv.Close)
	return s
}

// mount serves h at /approvals and /approvals/, as the gateway does.
func mount(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/approvals", h)
	mux.Handle("/approvals/", h)
	return mux
}

// newTestLogger logs into buf, and into the test's log under -v.
func newTestLogger(tb testing.TB, buf *fisktest.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(buf, logWriter{tb}), nil))
}

// logWriter writes the page's log into the test's log under -v.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	if testing.Verbose() {
		w.tb.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// browser is an HTTP client with a cookie jar that sends Origin on its
// POSTs, as a browser on the page does.
type browser struct {
	tb   testing.TB
	base string
	c    *http.Client
}

func newBrowser(tb testing.TB, base string) *browser {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &browser{tb: tb, base: base, c: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

// response is a finished response with its body read.
type response struct {
	*http.Response
	body string
}

func (b *browser) do(req *http.Request) response {
	b.tb.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.tb.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return response{resp, string(body)}
}

// get fetches path (relative to the page's server, or absolute).
func (b *browser) get(path string) response {
	b.tb.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.base + path
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		b.tb.Fatal(err)
	}
	return b.do(req)
}

// post sends form to path with Origin set to the page's own origin;
// header entries are set after, an empty value deleting one.
func (b *browser) post(path string, form url.Values, header map[string]string) response {
	b.tb.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return b.do(req)
}

// signIn signs in with token and returns the list page it lands on.
func (b *browser) signIn(token string) response {
	b.tb.Helper()
	resp := b.post("/approvals/signin", url.Values{"token": {token}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.body, "Pending approvals") {
		b.tb.Fatalf("signing in: got %d %q, want 200 and the list", resp.StatusCode, resp.body)
	}
	return resp
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a page.
func csrf(tb testing.TB, page string) string {
	tb.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		tb.Fatalf("no CSRF token in the page %q", page)
	}
	return m[1]
}

// listed waits until the page's list shows c (or, with want false, no
// longer shows it).
func (b *browser) listed(c *call, want bool) {
	b.tb.Helper()
	fisktest.WaitFor(b.tb, 10*time.Second, "the page listing "+c.req.ID, func() bool {
		resp := b.get("/approvals/pending.json")
		return strings.Contains(resp.body, `"id":"`+c.req.ID+`"`) == want
	})
}

// answerForm is the form the page's Approve or Deny button sends.
func answerForm(token string, c *call, decision, reason string) url.Values {
	f := url.Values{"id": {c.req.ID}, "digest": {c.req.Digest}, "decision": {decision}}
	if token != "" {
		f.Set("csrf", token)
	}
	if reason != "" {
		f.Set("reason", reason)
	}
	return f
}

// flash is the message a page shows after an answer.
var flashRE = regexp.MustCompile(`(?s)id="flash"[^>]*>(.*?)</p>`)

func flash(page string) string {
	m := flashRE.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// len is the number of sessions stored, expired ones included until
// looked up or pushed out.
func (t *sessions) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}
