package approvalweb

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// sessionCookie names the session cookie. It cannot take the __Host-
// prefix, which demands Path=/: the cookie is scoped to /approvals so the
// rest of the gateway (/mcp above all) never sees it. It is
// SameSite=Strict (no other site's page or link sends it) and has no
// Max-Age, so it ends with the browser; the server-side table decides how
// long it is good.
const sessionCookie = "fiskfleet_approvals"

// session is one signed-in browser.
type session struct {
	// name is who answers: the approver's configured name, or the ID
	// token's subject; answers and the four-eyes rule use it.
	name string
	// roles are the policy roles of an OIDC sign-in, for display.
	roles []string
	// approver says whether name may answer: always with tokens, with
	// OIDC when a role has approve: true.
	approver bool
	// csrf is the token every POST of the session must carry.
	csrf string
	// flash is a message for the next page view (an answer's outcome).
	flash     string
	flashBad  bool
	created   time.Time
	lastSeen  time.Time
	expiresAt time.Time
}

// sessions is the server-side session table, keyed by the SHA-256 of the
// cookie value so a lookup's timing says nothing about stored ids. Its
// methods are safe for concurrent use.
type sessions struct {
	idle, max time.Duration
	limit     int

	// mu guards byKey and every session in it.
	mu    sync.Mutex
	byKey map[[32]byte]*session
}

func newSessions(idle, max time.Duration, limit int) *sessions {
	return &sessions{idle: idle, max: max, limit: limit, byKey: map[[32]byte]*session{}}
}

// create stores s under a fresh id and returns the id, the cookie's
// value, making room in a full table first.
func (t *sessions) create(s *session, now time.Time) string {
	id := randomToken()
	s.csrf = randomToken()
	s.created, s.lastSeen = now, now
	s.expiresAt = t.expiry(s, now)
	t.mu.Lock()
	defer t.mu.Unlock()
	makeRoom(t.byKey, t.limit, now, func(o *session) time.Time { return o.expiresAt })
	t.byKey[sha256.Sum256([]byte(id))] = s
	return id
}

// makeRoom bounds a server-side table m to fewer than limit entries
// before one is added: when full, it drops the entries that have ended
// by now, then, if still full, the one closest to its end.
func makeRoom[K comparable, V any](m map[K]V, limit int, now time.Time, end func(V) time.Time) {
	if len(m) < limit {
		return
	}
	var soonest K
	found := false
	for k, v := range m {
		if !now.Before(end(v)) {
			delete(m, k)
		} else if !found || end(v).Before(end(m[soonest])) {
			soonest, found = k, true
		}
	}
	if len(m) >= limit && found {
		delete(m, soonest)
	}
}

// expiry is when s ends if nothing more happens: idle from now, but never
// past its maximum age.
func (t *sessions) expiry(s *session, now time.Time) time.Time {
	end := now.Add(t.idle)
	if hard := s.created.Add(t.max); hard.Before(end) {
		end = hard
	}
	return end
}

// lookup returns a copy of the live session id names and slides its
// expiry; an expired one is dropped. takeFlash also clears its flash.
func (t *sessions) lookup(id string, now time.Time, takeFlash bool) (session, bool) {
	if id == "" {
		return session{}, false
	}
	k := sha256.Sum256([]byte(id))
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byKey[k]
	if !ok {
		return session{}, false
	}
	if !now.Before(s.expiresAt) {
		delete(t.byKey, k)
		return session{}, false
	}
	s.lastSeen = now
	s.expiresAt = t.expiry(s, now)
	c := *s
	if takeFlash {
		s.flash, s.flashBad = "", false
	}
	return c, true
}

// setFlash leaves a message for the session's next page view.
func (t *sessions) setFlash(id, msg string, bad bool) {
	k := sha256.Sum256([]byte(id))
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.byKey[k]; ok {
		s.flash, s.flashBad = msg, bad
	}
}

// remove ends the session id names.
func (t *sessions) remove(id string) {
	k := sha256.Sum256([]byte(id))
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byKey, k)
}

// randomToken is 32 random bytes, base64url: a session id, a CSRF token,
// a CSP nonce, an OAuth state, nonce or PKCE verifier.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
