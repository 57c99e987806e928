package natstest

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// SubjectCounter counts the messages published on a set of subjects, by
// subject: what a test observes of who sent what over the bus.
type SubjectCounter struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

// CountSubjects subscribes nc to subjects (wildcards allowed) and counts
// every message by the subject it was published on. It returns once the
// subscriptions are on the server, so nothing published afterwards is
// missed.
func CountSubjects(tb testing.TB, nc *nats.Conn, subjects ...string) *SubjectCounter {
	tb.Helper()
	c := &SubjectCounter{n: map[string]int{}}
	for _, s := range subjects {
		if _, err := nc.Subscribe(s, func(m *nats.Msg) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.n[m.Subject]++
		}); err != nil {
			tb.Fatalf("natstest: subscribing to %s: %v", s, err)
		}
	}
	if err := nc.Flush(); err != nil {
		tb.Fatalf("natstest: registering the subscriptions: %v", err)
	}
	return c
}

// Seen returns how many messages were counted on subject since the last
// Take.
func (c *SubjectCounter) Seen(subject string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[subject]
}

// Take returns the counts since the last Take and starts afresh.
func (c *SubjectCounter) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}
