package approvalweb

import (
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

func TestTokenSignIn(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	tests := []struct {
		name       string
		token      string
		wantStatus int
		wantBody   string
		wantCookie bool
	}{
		{name: "approver's token", token: aliceToken, wantStatus: http.StatusOK, wantBody: `Signed in as <strong id="who">alice</strong>`, wantCookie: true},
		{name: "other approver's token", token: bobToken, wantStatus: http.StatusOK, wantBody: `Signed in as <strong id="who">bob</strong>`, wantCookie: true},
		{name: "unknown token", token: "not-a-token-0123456789", wantStatus: http.StatusUnauthorized, wantBody: "That token is not an approver&#39;s."},
		{name: "prefix of a token", token: aliceToken[:len(aliceToken)-1], wantStatus: http.StatusUnauthorized, wantBody: "not an approver"},
		{name: "no token", token: "", wantStatus: http.StatusUnauthorized, wantBody: "not an approver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrowser(t, s.srv.URL)
			resp := b.post("/approvals/signin", url.Values{"token": {tt.token}}, nil)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got status %d, want %d (body %q)", resp.StatusCode, tt.wantStatus, resp.body)
			}
			if !strings.Contains(resp.body, tt.wantBody) {
				t.Errorf("got body %q, want it to contain %q", resp.body, tt.wantBody)
			}
			u, _ := url.Parse(s.srv.URL + "/approvals")
			if got := len(b.c.Jar.Cookies(u)) > 0; got != tt.wantCookie {
				t.Errorf("got a session cookie %v, want %v", got, tt.wantCookie)
			}
			if !tt.wantCookie {
				if got := b.get("/approvals/pending.json").StatusCode; got != http.StatusUnauthorized {
					t.Errorf("pending.json without a session: got %d, want 401", got)
				}
			}
		})
	}
}

func TestSessionCookieAttributes(t *testing.T) {
	f := startFleet(t, approval.Config{})
	tests := []struct {
		name       string
		trust      bool
		proto      string
		wantSecure bool
	}{
		{name: "plain http", wantSecure: false},
		{name: "forwarded https, trusted", trust: true, proto: "https", wantSecure: true},
		{name: "forwarded https, not trusted", trust: false, proto: "https", wantSecure: false},
		{name: "forwarded http, trusted", trust: true, proto: "http", wantSecure: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := servePage(t, f, Config{TrustForwardedProto: tt.trust})
			b := newBrowser(t, s.srv.URL)
			b.c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			header := map[string]string{}
			if tt.proto != "" {
				header["X-Forwarded-Proto"] = tt.proto
				if tt.wantSecure {
					// The page's own origin is then https://Host.
					header["Origin"] = strings.Replace(s.srv.URL, "http://", "https://", 1)
				}
			}
			resp := b.post("/approvals/signin", url.Values{"token": {aliceToken}}, header)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("got status %d, want 303 (body %q)", resp.StatusCode, resp.body)
			}
			cookies := resp.Cookies()
			if len(cookies) != 1 {
				t.Fatalf("got %d cookies, want 1: %v", len(cookies), resp.Header["Set-Cookie"])
			}
			c := cookies[0]
			if !c.HttpOnly {
				t.Errorf("got HttpOnly false, want true")
			}
			if c.SameSite != http.SameSiteStrictMode {
				t.Errorf("got SameSite %v, want Strict", c.SameSite)
			}
			if c.Path != "/approvals" {
				t.Errorf("got Path %q, want /approvals", c.Path)
			}
			if c.Secure != tt.wantSecure {
				t.Errorf("got Secure %v, want %v", c.Secure, tt.wantSecure)
			}
			if c.MaxAge != 0 || !c.Expires.IsZero() {
				t.Errorf("got Max-Age %d Expires %v, want a browser-session cookie", c.MaxAge, c.Expires)
			}
			if len(c.Value) < 40 {
				t.Errorf("got a session id of %d characters, want 32 random bytes' worth", len(c.Value))
			}
		})
	}
}

func TestSecurityHeadersAndEscaping(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	c := f.ask(t, deploy())
	b := newBrowser(t, s.srv.URL)
	b.signIn(aliceToken)
	b.listed(c, true)
	resp := b.get("/approvals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200", resp.StatusCode)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("got CSP %q, want it to contain %q", csp, want)
		}
	}
	nonce := regexp.MustCompile(`script-src 'nonce-([^']+)'`).FindStringSubmatch(csp)
	if nonce == nil {
		t.Fatalf("got CSP %q, want a script nonce", csp)
	}
	if !strings.Contains(resp.body, `<script nonce="`+nonce[1]+`">`) {
		t.Errorf("the page's script does not carry the CSP nonce %q", nonce[1])
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("got CSP %q, want no unsafe-inline or unsafe-eval", csp)
	}
	for h, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"Referrer-Policy":        "same-origin",
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
		"Content-Type":           "text/html; charset=utf-8",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("got %s %q, want %q", h, got, want)
		}
	}
	if again := b.get("/approvals"); again.Header.Get("Content-Security-Policy") == csp {
		t.Errorf("two responses share the CSP nonce %q", nonce[1])
	}

	// The command line is shown exactly, escaped, in a <pre>.
	pre := regexp.MustCompile(`(?s)<pre class="command">(.*?)</pre>`).FindAllStringSubmatch(resp.body, -1)
	if len(pre) < 1 {
		t.Fatalf("no command line in the page %q", resp.body)
	}
	if got := html.UnescapeString(pre[0][1]); got != c.req.Command {
		t.Errorf("got command line %q, want %q", got, c.req.Command)
	}
	if strings.Contains(resp.body, `<script>alert`) {
		t.Errorf("the command line's markup reached the page unescaped")
	}
	for _, want := range []string{c.req.ID, c.req.Digest, "deploy", "demo / i1", "ci-bot/runner-1 (claimed)", `class="caller claimed"`} {
		if !strings.Contains(resp.body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if !regexp.MustCompile(`class="left">\d+s left|class="left">\dm \d\ds left`).MatchString(resp.body) {
		t.Errorf("the page does not show the time left")
	}
}

func TestApproveReachesTheCaller(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	b := newBrowser(t, s.srv.URL)
	page := b.signIn(aliceToken)
	c := f.ask(t, deploy())
	b.listed(c, true)

	resp := b.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200 after the redirect (body %q)", resp.StatusCode, resp.body)
	}
	if got, want := flash(resp.body), "Approved "+c.req.ID; !strings.HasPrefix(got, want) {
		t.Errorf("got message %q, want it to start with %q", got, want)
	}
	d, err := c.wait(t)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if !d.Approved() || d.Outcome != approval.OutcomeApproved {
		t.Errorf("got outcome %s, want approved", d.Outcome)
	}
	if d.Approver != "alice" {
		t.Errorf("got approver %q, want alice", d.Approver)
	}
	if d.NATSUser != "" {
		t.Errorf("got NATS user %q, want none: the person approves, not the gateway's connection", d.NATSUser)
	}
	b.listed(c, false)
	if strings.Contains(resp.body, `data-id="`+c.req.ID+`"`) {
		t.Errorf("the page after approving still lists %s", c.req.ID)
	}
	logs := s.logs.String()
	for _, want := range []string{"answer accepted", "approver=alice", "id=" + c.req.ID, "decision=approve"} {
		if !strings.Contains(logs, want) {
			t.Errorf("got logs %q, want them to contain %q", logs, want)
		}
	}

	// The same answer again finds nothing to answer.
	resp = b.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
	if got := flash(resp.body); !strings.Contains(got, "no longer pending") {
		t.Errorf("answering again: got message %q, want it to say the request is no longer pending", got)
	}
}

func TestDenyWithReason(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	b := newBrowser(t, s.srv.URL)
	token := csrf(t, b.signIn(bobToken).body)
	c := f.ask(t, deploy())
	b.listed(c, true)

	resp := b.post("/approvals/answer", answerForm(token, c, "deny", "  "), nil)
	if got := flash(resp.body); !strings.Contains(got, "say why") {
		t.Errorf("deny without a reason: got message %q, want it to ask why", got)
	}
	if !f.pendingAt(c) {
		t.Fatalf("a deny without a reason reached the broker")
	}
	resp = b.post("/approvals/answer", answerForm(token, c, "deny", "not during the freeze"), nil)
	if got, want := flash(resp.body), "Denied "+c.req.ID; !strings.HasPrefix(got, want) {
		t.Errorf("got message %q, want it to start with %q", got, want)
	}
	d, err := c.wait(t)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if d.Outcome != approval.OutcomeDenied || d.Approver != "bob" || d.Reason != "not during the freeze" {
		t.Errorf("got outcome %s by %q because %q, want denied by bob because %q", d.Outcome, d.Approver, d.Reason, "not during the freeze")
	}
	if logs := s.logs.String(); !strings.Contains(logs, "decision=deny") || !strings.Contains(logs, "approver=bob") {
		t.Errorf("got logs %q, want the deny logged with its approver", logs)
	}
}

func TestSelfApprovalRefusedAndShown(t *testing.T) {
	f := startFleet(t, approval.Config{SelfApproval: false})
	s := servePage(t, f, Config{})
	p := deploy()
	p.Caller = approval.Caller{Subject: "alice", Roles: []string{"ops"}}
	c := f.ask(t, p)

	alice := newBrowser(t, s.srv.URL)
	token := csrf(t, alice.signIn(aliceToken).body)
	alice.listed(c, true)
	resp := alice.post("/approvals/answer", answerForm(token, c, "approve", ""), nil)
	got := flash(resp.body)
	if !strings.Contains(got, "Refused (self-approval") {
		t.Errorf("got message %q, want the broker's self-approval refusal", got)
	}
	if !f.pendingAt(c) {
		t.Fatalf("the caller's own approval ended the request")
	}
	if logs := s.logs.String(); !strings.Contains(logs, "refusal=self_approval") {
		t.Errorf("got logs %q, want the refusal logged", logs)
	}

	bob := newBrowser(t, s.srv.URL)
	resp = bob.post("/approvals/answer", answerForm(csrf(t, bob.signIn(bobToken).body), c, "approve", ""), nil)
	if got := flash(resp.body); !strings.HasPrefix(got, "Approved") {
		t.Errorf("another approver: got message %q, want approved", got)
	}
	if d, err := c.wait(t); err != nil || d.Approver != "bob" || !d.Approved() {
		t.Errorf("got %s by %q (%v), want approved by bob", d.Outcome, d.Approver, err)
	}
}

func TestForgedPostsRefused(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	b := newBrowser(t, s.srv.URL)
	token := csrf(t, b.signIn(aliceToken).body)
	c := f.ask(t, deploy())
	b.listed(c, true)

	tests := []struct {
		name   string
		csrf   string
		header map[string]string
	}{
		{name: "no CSRF token", csrf: ""},
		{name: "wrong CSRF token", csrf: token[:len(token)-2] + "xx"},
		{name: "another session's CSRF token", csrf: csrf(t, newBrowser(t, s.srv.URL).signIn(bobToken).body)},
		{name: "foreign Origin", csrf: token, header: map[string]string{"Origin": "http://evil.example"}},
		{name: "Origin null", csrf: token, header: map[string]string{"Origin": "null"}},
		{name: "Origin of another port", csrf: token, header: map[string]string{"Origin": "http://127.0.0.1:1"}},
		{name: "no Origin, no Referer", csrf: token, header: map[string]string{"Origin": ""}},
		{name: "no Origin, foreign Referer", csrf: token, header: map[string]string{"Origin": "", "Referer": "http://evil.example/approvals"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.post("/approvals/answer", answerForm(tt.csrf, c, "approve", ""), tt.header)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("got status %d, want 403 (body %q)", resp.StatusCode, resp.body)
			}
			if !f.pendingAt(c) {
				t.Fatalf("a refused POST answered the request")
			}
		})
	}
	// Nothing was sent: the request still waits, and a proper answer,
	// here with a same-origin Referer instead of Origin, decides it.
	resp := b.post("/approvals/answer", answerForm(token, c, "approve", ""), map[string]string{"Origin": "", "Referer": s.srv.URL + "/approvals"})
	if got := flash(resp.body); !strings.HasPrefix(got, "Approved") {
		t.Errorf("same-origin Referer: got message %q, want approved", got)
	}
	if d, err := c.wait(t); err != nil || !d.Approved() {
		t.Errorf("got %s (%v), want approved", d.Outcome, err)
	}
	// Signing out needs the CSRF token too.
	if got := b.post("/approvals/signout", url.Values{}, nil).StatusCode; got != http.StatusForbidden {
		t.Errorf("sign-out without CSRF: got %d, want 403", got)
	}
}

func TestDigestMustMatch(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	b := newBrowser(t, s.srv.URL)
	token := csrf(t, b.signIn(aliceToken).body)
	c := f.ask(t, deploy())
	form := answerForm(token, c, "approve", "")
	form.Set("digest", approval.Digest([]byte(`{"env":"dev"}`)))
	resp := b.post("/approvals/answer", form, nil)
	if got := flash(resp.body); !strings.Contains(got, "not the request you saw") {
		t.Errorf("got message %q, want the digest mismatch named", got)
	}
	if !f.pendingAt(c) {
		t.Fatal("an answer for other arguments ended the request")
	}
}

func TestSessionEnds(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{SessionMax: 300 * time.Millisecond})
	b := newBrowser(t, s.srv.URL)
	token := csrf(t, b.signIn(aliceToken).body)
	c := f.ask(t, deploy())
	fisktest.WaitFor(t, 5*time.Second, "the session to end", func() bool {
		return b.get("/approvals").StatusCode == http.StatusUnauthorized
	})
	resp := b.post("/approvals/answer", answerForm(token, c, "approve", ""), nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.body, "sign in again") {
		t.Errorf("answering after the session ended: got %d %q, want 401 asking to sign in again", resp.StatusCode, flash(resp.body))
	}
	if !f.pendingAt(c) {
		t.Fatal("an answer of an ended session reached the broker")
	}
	// Signing in again works, with a new CSRF token.
	again := b.signIn(aliceToken)
	if csrf(t, again.body) == token {
		t.Error("the new session has the old session's CSRF token")
	}

	// Signing out ends the session at once.
	resp = b.post("/approvals/signout", url.Values{"csrf": {csrf(t, again.body)}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.body, "Approver token") {
		t.Errorf("after signing out: got %d, want 401 and the sign-in form", resp.StatusCode)
	}
}

func TestSessionTable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	t.Run("idle sliding, capped by max", func(t *testing.T) {
		tab := newSessions(10*time.Minute, 25*time.Minute, 10)
		id := tab.create(&session{name: "alice", approver: true}, now)
		for _, at := range []time.Duration{9 * time.Minute, 18 * time.Minute, 24 * time.Minute} {
			if _, ok := tab.lookup(id, now.Add(at), false); !ok {
				t.Fatalf("at %s: got no session, want it alive (idle slides)", at)
			}
		}
		if _, ok := tab.lookup(id, now.Add(25*time.Minute), false); ok {
			t.Errorf("at the max age: got a session, want none")
		}
		id = tab.create(&session{name: "alice"}, now)
		if _, ok := tab.lookup(id, now.Add(10*time.Minute), false); ok {
			t.Errorf("after the idle time: got a session, want none")
		}
		if _, ok := tab.lookup("", now, false); ok {
			t.Errorf("empty id: got a session, want none")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		tab := newSessions(time.Hour, time.Hour, 3)
		var ids []string
		for i := range 5 {
			ids = append(ids, tab.create(&session{name: "s"}, now.Add(time.Duration(i)*time.Second)))
		}
		if got := tab.len(); got != 3 {
			t.Errorf("got %d sessions, want 3", got)
		}
		for i, id := range ids {
			_, ok := tab.lookup(id, now.Add(time.Minute), false)
			if want := i >= 2; ok != want {
				t.Errorf("session %d: got alive %v, want %v (the oldest make room)", i, ok, want)
			}
		}
	})
}

func TestEventStream(t *testing.T) {
	f := startFleet(t, approval.Config{})
	s := servePage(t, f, Config{})
	b := newBrowser(t, s.srv.URL)
	token := csrf(t, b.signIn(aliceToken).body)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.srv.URL+"/approvals/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("got Content-Type %q, want text/event-stream", ct)
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		buf := make([]byte, 64<<10)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				if ev := acc[:i]; strings.HasPrefix(ev, "event: pending") {
					events <- ev
				}
				acc = acc[i+2:]
			}
			if err != nil {
				return
			}
		}
	}()
	next := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended waiting for %s", what)
				}
				if cond(ev) {
					return
				}
			case <-deadline:
				t.Fatalf("no event with %s within 10s", what)
			}
		}
	}
	next("an empty list", func(ev string) bool { return strings.Contains(ev, `"pending":[]`) })
	c := f.ask(t, deploy())
	next("the new request", func(ev string) bool { return strings.Contains(ev, `"id":"`+c.req.ID+`"`) })
	b.post("/approvals/answer", answerForm(token, c, "approve", ""), nil)
	next("the request gone", func(ev string) bool { return strings.Contains(ev, `"pending":[]`) })
	if d, err := c.wait(t); err != nil || !d.Approved() {
		t.Errorf("got %s (%v), want approved", d.Outcome, err)
	}
}

func TestConfigRefused(t *testing.T) {
	f := startFleet(t, approval.Config{})
	nc := f.ns.Connect(t)
	good := []Token{{Name: "alice", Token: aliceToken}}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "no connection", cfg: Config{Tokens: good}, want: "no NATS connection"},
		{name: "no sign-in", cfg: Config{NATS: nc}, want: "nobody can sign in"},
		{name: "both sign-ins", cfg: Config{NATS: nc, Tokens: good, OIDC: &OIDC{}}, want: "both"},
		{name: "short token", cfg: Config{NATS: nc, Tokens: []Token{{Name: "alice", Token: "short"}}}, want: "fewer than 16"},
		{name: "shared token", cfg: Config{NATS: nc, Tokens: []Token{{Name: "alice", Token: aliceToken}, {Name: "bob", Token: aliceToken}}}, want: "share a token"},
		{name: "unnamed approver", cfg: Config{NATS: nc, Tokens: []Token{{Token: aliceToken}}}, want: "no name"},
		{name: "bad identity", cfg: Config{NATS: nc, Tokens: good, Identity: "a.b"}, want: "identity"},
		{name: "OIDC without policy", cfg: Config{NATS: nc, OIDC: &OIDC{Issuer: "http://127.0.0.1:1", ClientID: "x", RedirectURL: "http://127.0.0.1/approvals/callback"}}, want: "approve: true"},
		{name: "OIDC without redirect", cfg: Config{NATS: nc, OIDC: &OIDC{Issuer: "http://127.0.0.1:1", ClientID: "x"}}, want: "redirect URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.cfg)
			if err == nil {
				_ = p.Close()
				t.Fatalf("got no error, want one containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrInvalidConfig containing %q", err, tt.want)
			}
		})
	}
}

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "expired"},
		{0, "expired"},
		{400 * time.Millisecond, "expired"},
		{600 * time.Millisecond, "1s left"},
		{59 * time.Second, "59s left"},
		{60 * time.Second, "1m 00s left"},
		{2*time.Minute + 5*time.Second, "2m 05s left"},
	}
	for _, tt := range tests {
		if got := timeLeft(tt.d); got != tt.want {
			t.Errorf("timeLeft(%s): got %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestPageSignsAnswers: with the gateway's nkey (approvals.signing_key)
// the page signs its answers, so an agent that takes only signed answers
// takes them and records the signed-in approver via the key; without
// the key such an agent refuses the page.
func TestPageSignsAnswers(t *testing.T) {
	gw, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := gw.PublicKey()
	f := startFleet(t, approval.Config{Signers: map[string]approval.Signer{pub: {Name: "web", Delegate: true}}})

	unsigned := newBrowser(t, servePage(t, f, Config{}).srv.URL)
	page := unsigned.signIn(aliceToken)
	c := f.ask(t, deploy())
	unsigned.listed(c, true)
	resp := unsigned.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
	if got := flash(resp.body); !strings.Contains(got, "unsigned") {
		t.Errorf("an unsigned page's answer: got message %q, want the agent's refusal, unsigned", got)
	}

	signed := newBrowser(t, servePage(t, f, Config{Signer: gw}).srv.URL)
	page = signed.signIn(aliceToken)
	resp = signed.post("/approvals/answer", answerForm(csrf(t, page.body), c, "approve", ""), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the signed page's answer: got %d %q", resp.StatusCode, resp.body)
	}
	d, err := c.wait(t)
	if err != nil || !d.Approved() || d.Approver != "alice via web" {
		t.Errorf("got %s by %q (%v), want approved by alice via web", d.Outcome, d.Approver, err)
	}
}
