package call

import "sync"

// trailQueue is how many finished calls' log lines and audit records may
// wait for the trail worker before a call writes its own.
const trailQueue = 256

// trail writes what a finished call leaves behind (its log line and its
// audit record) after the answer has gone, on a goroutine of its own:
// mcp-go writes a tool call's response only once the handler returns, so
// work done in the handler is time every caller waits for. The a2a agent
// answers first for the same reason. A call finding the queue full, or the
// trail closed, writes its own: nothing is dropped, and a burst slows
// calls down rather than growing memory.
type trail struct {
	mu     sync.Mutex // guards closed and sends on queue
	closed bool
	queue  chan func()
	done   chan struct{}
}

func newTrail() *trail {
	t := &trail{queue: make(chan func(), trailQueue), done: make(chan struct{})}
	go t.run()
	return t
}

func (t *trail) run() {
	defer close(t.done)
	for f := range t.queue {
		f()
	}
}

// after runs f once the caller's answer is on its way: on the worker, or
// here when the queue is full or closed.
func (t *trail) after(f func()) {
	t.mu.Lock()
	if !t.closed {
		select {
		case t.queue <- f:
			t.mu.Unlock()
			return
		default:
		}
	}
	t.mu.Unlock()
	f()
}

// close writes what is queued and returns once it is written; later calls
// of after run f themselves. It is idempotent.
func (t *trail) close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.queue)
	}
	t.mu.Unlock()
	<-t.done
}
