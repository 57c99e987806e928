package approvalweb

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/approval"
)

// board is the page's view of the pending requests, kept by one
// [approval.Watch] for every browser at once: pages, the JSON endpoint
// and the event stream read it instead of each asking the fleet, so a
// dozen open tabs cost NATS one subscription. Its methods are safe for
// concurrent use.
type board struct {
	// mu guards pending and changed.
	mu      sync.Mutex
	pending map[string]approval.Request
	// changed is closed, and replaced, on every change.
	changed chan struct{}
}

func newBoard() *board {
	return &board{pending: map[string]approval.Request{}, changed: make(chan struct{})}
}

// apply takes one event of the watch.
func (b *board) apply(ev approval.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev.Type {
	case approval.EventRequested:
		if ev.Request == nil {
			return
		}
		b.pending[ev.ID] = *ev.Request
	default:
		if _, ok := b.pending[ev.ID]; !ok {
			return
		}
		delete(b.pending, ev.ID)
	}
	b.bumpLocked()
}

// drop removes id at once, as after an accepted answer: the decided event
// follows, but the approver's next view should not show it meanwhile.
func (b *board) drop(id string) { b.apply(approval.Event{Type: approval.EventDecided, ID: id}) }

// reset forgets everything, before a new watch lists what is pending.
func (b *board) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.pending)
	b.bumpLocked()
}

func (b *board) bumpLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// snapshot returns the requests pending and not yet expired at now,
// oldest first, and a channel closed at the next change.
func (b *board) snapshot(now time.Time) ([]approval.Request, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]approval.Request, 0, len(b.pending))
	for _, r := range b.pending {
		if now.Before(r.Expires) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y approval.Request) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out, b.changed
}

// nextExpiry is the earliest expiry after now, zero when none: the
// stream sends a fresh list then, so an expired request leaves the page
// even if its expired event was missed.
func (b *board) nextExpiry(now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var next time.Time
	for _, r := range b.pending {
		if r.Expires.After(now) && (next.IsZero() || r.Expires.Before(next)) {
			next = r.Expires
		}
	}
	return next
}

// Watch retry bounds: a watch ends only when its connection closes or it
// may not subscribe, which a retry every few seconds notices the end of
// without spinning.
const (
	watchRetryMin = time.Second
	watchRetryMax = 30 * time.Second
)

// watch keeps the board until ctx ends, restarting the watch after an
// error with backoff.
func (p *Page) watch(ctx context.Context) {
	defer close(p.watchDone)
	backoff := watchRetryMin
	for {
		started := time.Now()
		err := approval.Watch(ctx, p.cfg.NATS, p.cfg.Identity, p.board.apply)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("watching approval requests stopped; the page shows none until it resumes", "error", err, "retry_in", backoff)
		p.board.reset()
		if time.Since(started) > watchRetryMax {
			backoff = watchRetryMin
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}
