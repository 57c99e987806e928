package auth

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"
)

// verified remembers the tokens that passed every check, by their digest,
// so that a client sending the same token on every request of a session
// pays for the signature check once (an RS256 verification and the claims'
// decoding cost about 80 µs; a lookup, a microsecond).
//
// An entry is trusted only while the token is unexpired (less the
// leeway's grace: exp itself, not exp plus leeway) and for at most
// [verifiedTTL] after it was checked, so a key the issuer withdraws stops
// working within that time, as it would with a key set refreshed on its
// schedule. Only successes are kept; a refused token is checked afresh each
// time. Nothing of the token is kept but its SHA-256. It is safe for
// concurrent use.
type verified struct {
	mu sync.Mutex
	// byDigest holds the verified tokens; guarded by mu.
	byDigest map[[sha256.Size]byte]verifiedEntry
}

type verifiedEntry struct {
	caller Caller
	until  time.Time
}

// Limits of the verified-token cache: a minute bounds how long a
// withdrawn key keeps working; 4096 tokens is far more than a team's
// clients hold at once, and bounds the memory (a few hundred bytes each).
const (
	verifiedTTL = time.Minute
	verifiedMax = 4096
)

// lookup returns a copy of the caller of a token verified before and still
// trusted at now.
func (vc *verified) lookup(token string, now time.Time) (*Caller, bool) {
	d := sha256.Sum256([]byte(token))
	vc.mu.Lock()
	e, ok := vc.byDigest[d]
	if ok && !now.Before(e.until) {
		delete(vc.byDigest, d)
		ok = false
	}
	vc.mu.Unlock()
	if !ok {
		return nil, false
	}
	c := detached(e.caller)
	return &c, true
}

// detached is a copy of c that shares no slice with it, and without the
// Roles a policy adds per request.
func detached(c Caller) Caller {
	c.Groups = slices.Clone(c.Groups)
	c.Scopes = slices.Clone(c.Scopes)
	c.Roles = nil
	return c
}

// store remembers the caller of a token that passed every check and
// expires at exp.
func (vc *verified) store(token string, c *Caller, exp, now time.Time) {
	until := now.Add(verifiedTTL)
	if exp.Before(until) {
		until = exp
	}
	if !now.Before(until) {
		return
	}
	d := sha256.Sum256([]byte(token))
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.byDigest == nil || len(vc.byDigest) >= verifiedMax {
		// Full: start again rather than track an eviction order; the
		// tokens in use are verified again once each.
		vc.byDigest = make(map[[sha256.Size]byte]verifiedEntry)
	}
	vc.byDigest[d] = verifiedEntry{caller: detached(*c), until: until}
}

// clear forgets every token, when the keys they were checked with change.
func (vc *verified) clear() {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	vc.byDigest = nil
}
