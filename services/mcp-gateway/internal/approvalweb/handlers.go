package approvalweb

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fiskfleet/fiskfleet/shared/approval"
)

// csrfHeader carries the CSRF token of a POST made by script; a form
// carries it in the csrf field.
const csrfHeader = "X-CSRF-Token"

// answerTimeout bounds finding a request and answering it: the instance
// that asked replies at once, or is gone.
const answerTimeout = 10 * time.Second

// maxReason is the longest reason an answer carries, as its schema
// (schemas/approval/common.json, reason) allows.
const maxReason = 1024

// sameOrigin refuses, with 403, a POST that does not say it comes from
// the page's own origin: Origin must be present and equal it, or, when a
// browser sent no Origin, Referer must be a URL of it. The gateway's own
// Origin check lets requests without Origin through for non-browser MCP
// clients; every legitimate POST here comes from the page in a browser,
// which sends one or the other (the page's Referrer-Policy is
// same-origin), so a POST with neither is refused.
func (p *Page) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		own := p.ownOrigin(r)
		if origin, ok := r.Header["Origin"]; ok {
			if len(origin) != 1 || !p.isOwnOrigin(origin[0], own) {
				p.log.Warn("refusing a POST from another origin", "path", r.URL.Path, "origin", strings.Join(origin, ", "))
				p.forbidden(w, r, "This form was sent from another site ("+strings.Join(origin, ", ")+"): refused.")
				return
			}
		} else if ref, err := url.Parse(r.Referer()); r.Referer() == "" || err != nil || !p.isOwnOrigin(ref.Scheme+"://"+ref.Host, own) {
			p.log.Warn("refusing a POST without Origin or a same-origin Referer", "path", r.URL.Path)
			p.forbidden(w, r, "This form was sent without saying where from (no Origin, no Referer of this page): refused.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			p.render(w, r, http.StatusBadRequest, messageView{Title: "Bad request", Message: "The form could not be read: " + err.Error(), Bad: true})
			return
		}
		next(w, r)
	}
}

// isOwnOrigin reports whether origin is the page's: the origin the
// request arrived at, or, with OIDC, the redirect URL's.
func (p *Page) isOwnOrigin(origin, own string) bool {
	if strings.EqualFold(origin, own) {
		return true
	}
	if p.oidc != nil {
		if u, err := url.Parse(p.oidc.cfg.RedirectURL); err == nil && strings.EqualFold(origin, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// checkCSRF reports whether r carries s's CSRF token, in the csrf field
// or the X-CSRF-Token header, compared in constant time.
func checkCSRF(r *http.Request, s session) bool {
	got := r.PostForm.Get("csrf")
	if got == "" {
		got = r.Header.Get(csrfHeader)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) == 1
}

func (p *Page) forbidden(w http.ResponseWriter, r *http.Request, msg string) {
	p.render(w, r, http.StatusForbidden, messageView{Title: "Forbidden", Message: msg, Bad: true})
}

// serveIndex shows the pending requests to a signed-in approver, and the
// sign-in page to anyone else.
func (p *Page) serveIndex(w http.ResponseWriter, r *http.Request) {
	s, _, ok := p.session(r, true)
	if !ok {
		p.renderSignIn(w, r, http.StatusUnauthorized, "", false)
		return
	}
	if !s.approver {
		p.renderNotApprover(w, r, s)
		return
	}
	reqs, _ := p.board.snapshot(time.Now())
	p.render(w, r, http.StatusOK, indexView{
		Who:      s.name,
		Roles:    s.roles,
		CSRF:     s.csrf,
		Flash:    s.flash,
		FlashBad: s.flashBad,
		Scope:    p.scope(),
		Pending:  views(reqs, time.Now()),
	})
}

// scope says whose requests the page shows.
func (p *Page) scope() string {
	if p.cfg.Identity == "" {
		return "every identity of the fleet"
	}
	return "identity " + p.cfg.Identity
}

func (p *Page) renderNotApprover(w http.ResponseWriter, r *http.Request, s session) {
	roles := "no role"
	if len(s.roles) > 0 {
		roles = "roles " + strings.Join(s.roles, ", ")
	}
	p.render(w, r, http.StatusForbidden, notApproverView{Who: s.name, Roles: roles, CSRF: s.csrf})
}

// tokenEntry is an approver's token, kept as its SHA-256 digest:
// comparing digests in constant time leaks neither content nor length.
type tokenEntry struct {
	name   string
	digest [32]byte
}

// matchToken returns the approver whose token is given, comparing with
// every approver's so the time taken does not say which matched.
func (p *Page) matchToken(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	name, found := "", 0
	for _, e := range p.tokens {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			name, found = e.name, 1
		}
	}
	return name, found == 1
}

// serveTokenSignIn signs an approver in with their token.
func (p *Page) serveTokenSignIn(w http.ResponseWriter, r *http.Request) {
	if p.oidc != nil {
		p.render(w, r, http.StatusNotFound, messageView{Title: "Not found", Message: "Approvers sign in at the authorization server here.", Bad: true})
		return
	}
	name, ok := p.matchToken(r.PostForm.Get("token"))
	if !ok {
		p.log.Warn("refusing an approver sign-in: unknown token", "remote", r.RemoteAddr)
		p.renderSignIn(w, r, http.StatusUnauthorized, "That token is not an approver's.", true)
		return
	}
	id := p.sessions.create(&session{name: name, approver: true}, time.Now())
	p.setCookie(w, r, sessionCookie, id, 0, http.SameSiteStrictMode)
	p.log.Info("approver signed in", "approver", name)
	http.Redirect(w, r, basePath, http.StatusSeeOther)
}

// serveSignOut ends the session.
func (p *Page) serveSignOut(w http.ResponseWriter, r *http.Request) {
	s, id, ok := p.session(r, false)
	if ok {
		if !checkCSRF(r, s) {
			p.forbidden(w, r, "The form's CSRF token is missing or wrong: reload the page and try again.")
			return
		}
		p.sessions.remove(id)
		p.log.Info("approver signed out", "approver", s.name)
	}
	p.setCookie(w, r, sessionCookie, "", -1, http.SameSiteStrictMode)
	http.Redirect(w, r, basePath, http.StatusSeeOther)
}

// serveAnswer approves or denies one request for the signed-in approver,
// then sends the browser back to the list with the outcome: accepted, or
// the instance's reason for refusing (self-approval, replayed, late…).
func (p *Page) serveAnswer(w http.ResponseWriter, r *http.Request) {
	s, sid, ok := p.session(r, false)
	if !ok {
		p.renderSignIn(w, r, http.StatusUnauthorized, "Your session ended: sign in again, then answer.", true)
		return
	}
	if !checkCSRF(r, s) {
		p.log.Warn("refusing an answer: CSRF token missing or wrong", "approver", s.name)
		p.forbidden(w, r, "The form's CSRF token is missing or wrong: reload the page and try again.")
		return
	}
	if !s.approver {
		p.log.Warn("refusing an answer: not an approver", "subject", s.name, "roles", s.roles)
		p.renderNotApprover(w, r, s)
		return
	}
	id, digest, decision := r.PostForm.Get("id"), r.PostForm.Get("digest"), r.PostForm.Get("decision")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if id == "" || digest == "" || (decision != approval.DecisionApprove && decision != approval.DecisionDeny) {
		p.render(w, r, http.StatusBadRequest, messageView{Title: "Bad request", Message: "An answer needs id, digest and decision (approve or deny).", Bad: true})
		return
	}
	var msg string
	bad := true
	switch {
	case utf8.RuneCountInString(reason) > maxReason:
		msg = fmt.Sprintf("The reason is longer than %d characters: say it shorter.", maxReason)
	case decision == approval.DecisionDeny && reason == "":
		msg = "Deny " + id + ": say why (the caller is told the reason)."
	default:
		msg, bad = p.answer(r.Context(), s.name, id, digest, decision, reason)
	}
	p.sessions.setFlash(sid, msg, bad)
	http.Redirect(w, r, basePath, http.StatusSeeOther)
}

// answer finds request id, checks it is for the arguments the approver
// saw, answers it and logs the outcome; it returns the message for the
// approver and whether it reports a failure.
func (p *Page) answer(ctx context.Context, approver, id, digest, decision, reason string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	log := p.log.With("approver", approver, "id", id, "decision", decision)
	req, err := approval.Find(ctx, p.cfg.NATS, p.cfg.Identity, id, approval.DefaultListWait)
	if err != nil {
		log.Warn("answer not sent: request not found", "error", err)
		if errors.Is(err, approval.ErrNotFound) {
			return fmt.Sprintf("%s is no longer pending: it was decided, expired or withdrawn.", id), true
		}
		return fmt.Sprintf("Could not reach the fleet to answer %s: %v", id, err), true
	}
	if subtle.ConstantTimeCompare([]byte(req.Digest), []byte(digest)) != 1 {
		log.Warn("answer not sent: the request's digest is not the one shown", "shown", digest, "pending", req.Digest)
		return fmt.Sprintf("%s is not the request you saw (its arguments digest differs): nothing was answered.", id), true
	}
	// The page's user is who answers: the gateway's NATS user only carries
	// the answer, and naming it would make the four-eyes rule compare the
	// gateway with the caller instead of the person.
	reply, err := approval.Answer(ctx, p.cfg.NATS, req, decision == approval.DecisionApprove, approval.Approver{Name: approver, Signer: p.cfg.Signer}, reason)
	if err != nil {
		if errors.Is(err, approval.ErrRefused) {
			log.Warn("answer refused", "tool", req.Tool, "identity", req.Identity, "instance", req.Instance, "refusal", reply.Refusal, "reason", reply.Reason)
			return fmt.Sprintf("Refused (%s): %s", refusalText(reply.Refusal), reply.Reason), true
		}
		log.Warn("answer failed", "tool", req.Tool, "identity", req.Identity, "instance", req.Instance, "error", err)
		return fmt.Sprintf("Could not answer %s: %v", id, err), true
	}
	p.board.drop(id)
	log.Info("answer accepted", "tool", req.Tool, "identity", req.Identity, "instance", req.Instance, "reason", reason)
	verb := "Approved"
	if decision == approval.DecisionDeny {
		verb = "Denied"
	}
	return fmt.Sprintf("%s %s: %s on %s/%s.", verb, id, req.Tool, req.Identity, req.Instance), false
}

// refusalText puts a refusal code in words.
func refusalText(r approval.Refusal) string {
	switch r {
	case approval.RefusedSelfApproval:
		return "self-approval: somebody other than the caller must approve"
	case approval.RefusedReplayed:
		return "replayed"
	case approval.RefusedDuplicate:
		return "already decided"
	case approval.RefusedLate:
		return "too late: expired or withdrawn"
	case approval.RefusedForged:
		return "wrong arguments digest"
	case approval.RefusedClosed:
		return "the instance is stopping"
	case "":
		return "refused"
	}
	return string(r)
}

// requestView is a pending request as the page and its JSON show it.
type requestView struct {
	ID       string    `json:"id"`
	Identity string    `json:"identity"`
	Instance string    `json:"instance"`
	Tool     string    `json:"tool"`
	Command  string    `json:"command"`
	Caller   string    `json:"caller"`
	Claimed  bool      `json:"claimed"`
	Digest   string    `json:"digest"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	// TimeLeft is for the server-rendered page; the script counts down
	// from Expires.
	TimeLeft string `json:"-"`
}

func views(reqs []approval.Request, now time.Time) []requestView {
	out := make([]requestView, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, requestView{
			ID: r.ID, Identity: r.Identity, Instance: r.Instance, Tool: r.Tool,
			Command: r.Command, Caller: r.Caller.String(), Claimed: r.Caller.Claimed,
			Digest: r.Digest, Created: r.Created, Expires: r.Expires,
			TimeLeft: timeLeft(r.Expires.Sub(now)),
		})
	}
	return out
}

// timeLeft writes d as the page's script does: "1m 05s left".
func timeLeft(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s <= 0 {
		return "expired"
	}
	if s >= 60 {
		return fmt.Sprintf("%dm %02ds left", s/60, s%60)
	}
	return fmt.Sprintf("%ds left", s)
}

// pendingJSON is the body of /approvals/pending.json and of each event
// of /approvals/events.
type pendingJSON struct {
	Pending []requestView `json:"pending"`
}

// servePendingJSON answers a signed-in approver with the pending
// requests, for scripts that poll instead of streaming.
func (p *Page) servePendingJSON(w http.ResponseWriter, r *http.Request) {
	if !p.apiSession(w, r) {
		return
	}
	reqs, _ := p.board.snapshot(time.Now())
	writeJSON(w, http.StatusOK, pendingJSON{Pending: views(reqs, time.Now())})
}

// apiSession answers 401 or 403 in JSON to a request of the JSON or event
// endpoint without a session of an approver.
func (p *Page) apiSession(w http.ResponseWriter, r *http.Request) bool {
	s, _, ok := p.session(r, false)
	switch {
	case !ok:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "sign in at " + basePath})
		return false
	case !s.approver:
		writeJSON(w, http.StatusForbidden, map[string]string{"error": s.name + " is not an approver"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Event stream timing: a comment every heartbeat keeps proxies from
// closing an idle stream, and the stream ends after streamMax so a
// session that ended stops receiving; the browser reconnects, with its
// cookie checked again.
const (
	heartbeat = 15 * time.Second
	streamMax = 5 * time.Minute
)

// serveEvents streams the pending requests to a signed-in approver as
// server-sent events: the whole list at once, then again on every change
// and whenever a request expires.
func (p *Page) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !p.apiSession(w, r) {
		return
	}
	rc := http.NewResponseController(w)
	send := func(msg string) bool {
		_, err := io.WriteString(w, msg)
		return err == nil && rc.Flush() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	end := time.NewTimer(streamMax)
	defer end.Stop()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	expiry := time.NewTimer(time.Hour)
	defer expiry.Stop()
	for {
		now := time.Now()
		reqs, changed := p.board.snapshot(now)
		data, _ := json.Marshal(pendingJSON{Pending: views(reqs, now)})
		if !send("event: pending\ndata: " + string(data) + "\n\n") {
			return
		}
		// Past the next expiry the list is sent again without it; with
		// nothing pending the timer waits past the stream's end.
		next := streamMax
		if at := p.board.nextExpiry(now); !at.IsZero() {
			next = time.Until(at) + 10*time.Millisecond
		}
		expiry.Reset(next)
	wait:
		for {
			select {
			case <-changed:
				break wait
			case <-expiry.C:
				break wait
			case <-tick.C:
				if !send(": heartbeat\n\n") {
					return
				}
			case <-end.C:
				return
			case <-r.Context().Done():
				return
			case <-p.ctx.Done():
				return
			}
		}
	}
}
