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
// map insert and one delete.
type inflight struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]pendingPublish
}

type pendingPublish struct {
	subject string
	fail    func(error)
}

// add registers a publish to subject, before it is sent so its refusal
// cannot come first; fail is called at most once, with the refusal.
// remove unregisters it.
func (f *inflight) add(subject string, fail func(error)) (remove func()) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[uint64]pendingPublish{}
	}
	f.next++
	id := f.next
	f.calls[id] = pendingPublish{subject: subject, fail: fail}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.calls, id)
		f.mu.Unlock()
	}
}

// refused fails, and unregisters, every publish waiting on subject. It runs
// on the connection's async callback goroutine and never blocks.
func (f *inflight) refused(subject string, _ error) {
	var fails []func(error)
	f.mu.Lock()
	for id, c := range f.calls {
		if c.subject == subject {
			fails = append(fails, c.fail)
			delete(f.calls, id)
		}
	}
	f.mu.Unlock()
	if len(fails) == 0 {
		return
	}
	err := refusedError(subject)
	for _, fail := range fails {
		fail(err)
	}
}
