package approvalweb

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// sessionCookie names the session cookie. It cannot take the __Host-
// prefix, which demands Path=/: the cookie is scoped to /approvals so the
// rest of the gateway (/mcp above all) never sees it.
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
// value. A full table first drops expired sessions, then the one closest
// to its end.
func (t *sessions) create(s *session, now time.Time) string {
	id := randomToken()
	s.csrf = randomToken()
	s.created, s.lastSeen = now, now
	s.expiresAt = t.expiry(s, now)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byKey) >= t.limit {
		var soonest [32]byte
		var first *session
		for k, o := range t.byKey {
			if !now.Before(o.expiresAt) {
				delete(t.byKey, k)
				continue
			}
			if first == nil || o.expiresAt.Before(first.expiresAt) {
				soonest, first = k, o
			}
		}
		if len(t.byKey) >= t.limit && first != nil {
			delete(t.byKey, soonest)
		}
	}
	t.byKey[sha256.Sum256([]byte(id))] = s
	return id
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
// an OAuth state, nonce or PKCE verifier.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// secureRequest reports whether the browser reached the page over TLS:
// a TLS connection, or, when trusted, a proxy's X-Forwarded-Proto: https.
func secureRequest(r *http.Request, trustForwarded bool) bool {
	return r.TLS != nil || trustForwarded && r.Header.Get("X-Forwarded-Proto") == "https"
}

// sessionCookieFor is the cookie carrying a session id: HttpOnly (no
// script reads it), SameSite=Strict (no other site's page or link sends
// it), Path=/approvals, Secure over TLS, and without Max-Age, so it ends
// with the browser; the server-side table decides how long it is good.
func sessionCookieFor(id string, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    id,
		Path:     basePath,
		HttpOnly: true,
		Secure:   secure,
		SameSite: http.SameSiteStrictMode,
	}
}

// clearedCookie deletes the cookie name in the browser.
func clearedCookie(name string, secure bool, sameSite http.SameSite) *http.Cookie {
	return &http.Cookie{Name: name, Value: "", Path: basePath, MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: sameSite}
}
