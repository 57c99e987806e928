package policy

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// Limiter bounds how often each caller calls tools: a token bucket per
// caller (by subject) and bound, such as the caller's rate over all its
// tools ([Grant.Rate]) and its rate for one tool ([Grant.ToolRate]). Like
// [Shares] it counts a subject over all its sessions, tokens and tasks. It
// is per gateway: the buckets live in this process, so a fleet of N
// gateways behind a balancer allows a caller up to N times its rate
// (see the rate limits in docs/security.md). It is safe for concurrent
// use; the zero value is ready.
type Limiter struct {
	mu sync.Mutex
	// buckets are guarded by mu; a bucket that has filled up again is
	// no different from a new one, and is dropped by sweep.
	buckets map[bucketKey]*rate.Limiter
	// adds counts buckets made since the last sweep.
	adds int
	// now is the latest time a call was taken at. Callers read the clock
	// before they wait for mu, so calls may come slightly out of order,
	// and a rate.Limiter given a time before its last one moves its clock
	// back and refills that span a second time: Take never goes back.
	now time.Time
}

type bucketKey struct {
	subject, scope string
}

// sweepEvery is how many new buckets trigger a sweep of full ones, so
// that callers and tools seen once do not stay in memory.
const sweepEvery = 1024

// Take spends one call of each bound for subject at now, all or none:
// a call over any bound spends nothing, so a refused caller is not
// charged for it. It returns 0 when the call may go ahead, else how long
// until it could (the longest wait among the bounds it is over) and the
// index of the first bound it is over.
func (l *Limiter) Take(subject string, now time.Time, bounds ...Bound) (wait time.Duration, over int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[bucketKey]*rate.Limiter{}
	}
	if now.Before(l.now) {
		now = l.now
	}
	l.now = now
	over = -1
	// Each bound has a bucket of its own (a caller's rate, one tool's),
	// so each reservation is the last of its bucket and CancelAt gives
	// all of it back.
	rs := make([]*rate.Reservation, 0, len(bounds))
	for i, b := range bounds {
		if b.Rate.Unlimited() {
			continue
		}
		limit, burst := bucketOf(b.Rate)
		k := bucketKey{subject, b.Scope}
		bk := l.buckets[k]
		if bk == nil || bk.Limit() != limit || bk.Burst() != burst {
			bk = rate.NewLimiter(limit, burst)
			l.buckets[k] = bk
			l.adds++
		}
		r := bk.ReserveN(now, 1)
		rs = append(rs, r)
		if d := r.DelayFrom(now); d > 0 {
			wait = max(wait, d)
			if over < 0 {
				over = i
			}
		}
	}
	if over >= 0 {
		for _, r := range rs {
			r.CancelAt(now)
		}
	}
	if l.adds >= sweepEvery {
		l.sweep(now)
	}
	return wait, over
}

// Bound is one rate a call must be within, and what it bounds: "" for
// all of a caller's tools, "tool:NAME" for one.
type Bound struct {
	Scope string
	Rate  config.Rate
}

// bucketOf is the bucket of r: it holds r.Calls, all of which may be
// spent at once, and refills at [config.Rate.PerSecond], not at
// [rate.Every] of the period over N, which rounds to whole nanoseconds
// (7/s would refill a little fast).
func bucketOf(r config.Rate) (rate.Limit, int) {
	return rate.Limit(r.PerSecond()), r.Calls
}

// sweep drops the buckets that have filled up again; l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	for k, bk := range l.buckets {
		if bk.TokensAt(now) >= float64(bk.Burst()) {
			delete(l.buckets, k)
		}
	}
	l.adds = 0
}

// Len is how many buckets the limiter holds, for tests and metrics.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
