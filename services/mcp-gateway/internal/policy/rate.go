package policy

import (
	"math"
	"sync"
	"time"

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
	buckets map[bucketKey]*bucket
	// adds counts buckets made since the last sweep.
	adds int
}

type bucketKey struct {
	subject, scope string
}

type bucket struct {
	tokens float64
	last   time.Time
	rate   config.Rate
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
		l.buckets = map[bucketKey]*bucket{}
	}
	over = -1
	bs := make([]*bucket, len(bounds))
	for i, b := range bounds {
		if b.Rate.Unlimited() {
			continue
		}
		k := bucketKey{subject, b.Scope}
		bk := l.buckets[k]
		if bk == nil || bk.rate != b.Rate {
			bk = &bucket{tokens: float64(b.Rate.Calls), last: now, rate: b.Rate}
			l.buckets[k] = bk
			l.adds++
		}
		bk.refill(now)
		bs[i] = bk
		if bk.tokens < 1 {
			if w := bk.until(); w > wait {
				wait = w
			}
			if over < 0 {
				over = i
			}
		}
	}
	if over < 0 {
		for _, bk := range bs {
			if bk != nil {
				bk.tokens--
			}
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

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = math.Min(float64(b.rate.Calls), b.tokens+d.Seconds()*b.rate.PerSecond())
		b.last = now
	}
}

// until is how long until the bucket holds one call again.
func (b *bucket) until() time.Duration {
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate.PerSecond() * float64(time.Second)))
}

// sweep drops the buckets that have filled up again; l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	for k, bk := range l.buckets {
		bk.refill(now)
		if bk.tokens >= float64(bk.rate.Calls) {
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
