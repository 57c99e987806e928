package natsbus

import (
	"fmt"
	"sync"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// A publish the connection's user may not make is dropped by the server,
// which reports it only to the connection's async error handler. The
// transport keeps its in-flight publishes by subject and fails every one
// waiting on a refused subject at once, instead of at its deadline:
// permissions are the user's, so every publish of that subject on the
// connection is refused alike, and calls on other subjects go on.

// refusedError is the error of a call whose publish to subject the server
// refused.
func refusedError(subject string) error {
	return fmt.Errorf("%w: NATS refused to publish to %s for this connection's user: permissions violation; "+
		"the NATS server's permissions for that user (the credentials of its nats_context) decide which subjects it may publish to",
		a2a.ErrPermission, subject)
}

// inflight is a transport's publishes that wait for an answer, by id.
// Violations are rare, so a refusal scans them all, and a call costs one
// map insert and one delete, and no allocation of its own.
type inflight struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]pendingPublish
}

type pendingPublish struct {
	subject string
	fail    func()
	// refused is set once the server refused the subject; fail has
	// then been called.
	refused bool
}

// add registers a publish to subject, before it is sent so its refusal
// cannot come first, and returns its id for [inflight.remove]. fail is
// called at most once, when the server refuses the subject; the caller
// makes the error with [refusedError].
func (f *inflight) add(subject string, fail func()) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[uint64]pendingPublish{}
	}
	f.next++
	f.calls[f.next] = pendingPublish{subject: subject, fail: fail}
	return f.next
}

// remove unregisters the publish id and reports whether the server
// refused it.
func (f *inflight) remove(id uint64) (refused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls[id]
	delete(f.calls, id)
	return c.refused
}

// refused fails every publish waiting on subject. It runs on the
// connection's async callback goroutine and never blocks.
func (f *inflight) refused(subject string, _ error) {
	var fails []func()
	f.mu.Lock()
	for id, c := range f.calls {
		if c.subject == subject && !c.refused {
			c.refused = true
			f.calls[id] = c
			fails = append(fails, c.fail)
		}
	}
	f.mu.Unlock()
	for _, fail := range fails {
		fail()
	}
}
