package approval

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// digestOf is the digest of canonical arguments, for tests.
func digestOf(args string) string { return Digest([]byte(args)) }

// deployCall is a gated call of a claimed A2A caller.
func deployCall() Pending {
	return Pending{
		Tool:    "deploy",
		Command: "app deploy --env prod --tag 'v1.2 (hotfix)'",
		Digest:  digestOf(`{"env":"prod","tag":"v1.2 (hotfix)"}`),
		Caller:  Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true},
	}
}

// newBroker starts a broker closed at the end of the test.
func newBroker(tb testing.TB, nc *nats.Conn, opts Options) *Broker {
	tb.Helper()
	if opts.Identity == "" {
		opts.Identity = "demo"
	}
	if opts.Instance == "" {
		opts.Instance = "i1"
	}
	if opts.Logger == nil {
		opts.Logger = fisktest.Logger(tb)
	}
	b, err := NewBroker(nc, opts)
	if err != nil {
		tb.Fatalf("starting broker: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// call is a Request under way.
type call struct {
	req  Request
	done chan struct{}
	d    Decision
	err  error
}

// start runs b.Request(ctx, p) on a goroutine and returns once the
// request is published.
func start(tb testing.TB, ctx context.Context, b *Broker, p Pending) *call {
	tb.Helper()
	c := &call{done: make(chan struct{})}
	announced := make(chan Request, 1)
	p.Announced = func(r Request) { announced <- r }
	errc := make(chan error, 1)
	go func() {
		defer close(c.done)
		c.d, c.err = b.Request(ctx, p)
		errc <- c.err
	}()
	select {
	case c.req = <-announced:
	case err := <-errc:
		tb.Fatalf("request ended before it was published: %v", err)
	case <-time.After(10 * time.Second):
		tb.Fatal("request not published within 10s")
	}
	return c
}

// wait waits for the request's outcome.
func (c *call) wait(tb testing.TB) (Decision, error) {
	tb.Helper()
	select {
	case <-c.done:
		return c.d, c.err
	case <-time.After(10 * time.Second):
		tb.Fatalf("request %s: no outcome within 10s", c.req.ID)
		return Decision{}, nil
	}
}

// running reports whether the request still waits.
func (c *call) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// tap validates every approval message on the bus against its schema,
// replies included, and fails the test at its end for any that breaks it.
type tap struct {
	mu    sync.Mutex // guards seen and bad
	seen  map[string]int
	bad   []string
	conn  *nats.Conn
	every []string
}

// newTap subscribes to everything on ns. Its check runs at the end of the
// test, before the server stops.
func newTap(tb testing.TB, ns *natstest.Server, opts ...nats.Option) *tap {
	tb.Helper()
	tp := &tap{seen: map[string]int{}, conn: ns.Connect(tb, opts...)}
	if _, err := tp.conn.Subscribe(">", tp.inspect); err != nil {
		tb.Fatal(err)
	}
	if err := tp.conn.Flush(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = tp.conn.Flush()
		tp.mu.Lock()
		defer tp.mu.Unlock()
		for _, b := range tp.bad {
			tb.Errorf("invalid message on the bus: %s", b)
		}
	})
	return tp
}

func (tp *tap) inspect(m *nats.Msg) {
	kind := ""
	switch {
	case strings.HasPrefix(m.Subject, Prefix+".") && strings.Contains(m.Subject, ".event."):
		kind = KindEvent
	case strings.HasPrefix(m.Subject, Prefix+".") && strings.Contains(m.Subject, ".answer."):
		kind = KindAnswer
	case m.Subject == ListAllSubject() || strings.HasPrefix(m.Subject, Prefix+".") && strings.HasSuffix(m.Subject, ".list"):
		tp.mu.Lock()
		tp.seen[kindList]++
		tp.mu.Unlock()
		return
	case strings.HasPrefix(m.Subject, "_INBOX.") && len(m.Data) > 0:
		var probe map[string]json.RawMessage
		if json.Unmarshal(m.Data, &probe) != nil {
			kind = "unparsable reply"
		} else if _, ok := probe["accepted"]; ok {
			kind = KindAnswerReply
		} else if _, ok := probe["pending"]; ok {
			kind = KindListReply
		}
	}
	if kind == "" {
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.seen[kind]++
	if kind == KindAnswer && strings.HasSuffix(m.Subject, ".answer."+malformedInstance) {
		return // sent malformed on purpose
	}
	if err := Validate(kind, m.Data); err != nil {
		tp.bad = append(tp.bad, m.Subject+": "+err.Error())
	}
}

// malformedInstance is the instance tests send malformed answers to on
// purpose; the tap does not hold them against the code under test.
const malformedInstance = "malformed"

// kindList counts list requests, which have no body to validate.
const kindList = "list"

// count returns how many messages of kind the tap saw.
func (tp *tap) count(kind string) int {
	_ = tp.conn.Flush()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.seen[kind]
}

// events records what Watch delivers.
type events struct {
	mu  sync.Mutex // guards evs
	evs []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

// of returns the types of the events of request id, in order.
func (e *events) of(id string) []EventType {
	e.mu.Lock()
	defer e.mu.Unlock()
	var types []EventType
	for _, ev := range e.evs {
		if ev.ID == id {
			types = append(types, ev.Type)
		}
	}
	return types
}

// watch runs Watch until the end of the test, and waits until it has
// subscribed: until tp sees the list request Watch makes once its
// subscription is confirmed.
func watch(tb testing.TB, nc *nats.Conn, identity string, tp *tap) *events {
	tb.Helper()
	lists := tp.count(kindList)
	ctx, cancel := context.WithCancel(context.Background())
	e := &events{}
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, nc, identity, e.add) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("watch: %v", err)
		}
	})
	fisktest.WaitFor(tb, 10*time.Second, "the watch to subscribe", func() bool { return tp.count(kindList) > lists })
	return e
}

// logBuffer is a logger writing JSON lines to a buffer the test reads.
func logBuffer() (*slog.Logger, *fisktest.Buffer) {
	var buf fisktest.Buffer
	return slog.New(slog.NewJSONHandler(&buf, nil)), &buf
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

type (
	natsConn      = nats.Conn
	serverOptions = server.Options
)

// natsUser connects as user, whose password is its name, keeping the
// permission errors the test provokes out of its output.
func natsUser(user string) nats.Option {
	return func(o *nats.Options) error {
		o.User, o.Password = user, user
		o.AsyncErrorCB = func(*nats.Conn, *nats.Subscription, error) {}
		return nil
	}
}
