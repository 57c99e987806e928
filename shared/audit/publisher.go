package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultBuffer is how many records a [Publisher] holds before a new one
// is logged instead of published. Publishing one takes microseconds, so
// the buffer only fills when the connection stalls (a server that stopped
// reading); 1024 records cover a burst of calls on every slot several
// times over, at some 1 KiB each.
const DefaultBuffer = 1024

// flushTimeout bounds [Publisher.Close]'s flush when its context has no
// deadline, the limit nats.go's own Flush uses.
const flushTimeout = 10 * time.Second

// PublisherConfig configures a [Publisher]. Zero values mean the defaults.
type PublisherConfig struct {
	// Subject is where records go (config.Config.AuditSubject). Empty
	// means [Subject] of each record's identity.
	Subject string
	// Buffer is how many records may wait to be published; 0 means
	// [DefaultBuffer].
	Buffer int
	// Logger receives the records that cannot be published (at error
	// level, with the record) and, without a connection, every record (at
	// info level); nil means slog.Default().
	Logger *slog.Logger
}

// Publisher publishes audit records on NATS from one goroutine, so a call
// never waits for the trail. It is safe for concurrent use. A nil
// *Publisher publishes nothing, so a service without a trail needs no
// check before each call.
type Publisher struct {
	nc      *nats.Conn
	subject string
	log     *slog.Logger
	ch      chan *Record
	// done is closed when the goroutine has handled the last record.
	done chan struct{}
	// abandon is set when Close ran out of time: the goroutine then logs
	// the records left instead of publishing them.
	abandon atomic.Bool

	// mu guards closed and orders every send on ch before its close.
	mu     sync.RWMutex
	closed bool
}

// NewPublisher starts a publisher on nc, which the caller owns: it must
// stay open until [Publisher.Close] returns (close it after, so the last
// records are flushed). With a nil nc, records are written to the log at
// info level ("audit record", with the record as JSON) instead: the trail
// of a service run without NATS.
func NewPublisher(nc *nats.Conn, cfg PublisherConfig) *Publisher {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Publisher{
		nc:      nc,
		subject: cfg.Subject,
		log:     cfg.Logger,
		ch:      make(chan *Record, cfg.Buffer),
		done:    make(chan struct{}),
	}
	go p.run()
	return p
}

// Publish hands r to the publisher, which owns it from then on. It never
// blocks: a record that finds the buffer full, or comes after Close, is
// logged at error level with the record instead.
func (p *Publisher) Publish(r *Record) {
	if p == nil || r == nil {
		return
	}
	if reason := p.enqueue(r); reason != "" {
		p.lost(r, reason, nil)
	}
}

// enqueue buffers r, or says why it could not.
func (p *Publisher) enqueue(r *Record) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return "publisher closed"
	}
	select {
	case p.ch <- r:
		return ""
	default:
		return "buffer full"
	}
}

// Close stops intake, publishes what is buffered and flushes the
// connection, all within ctx. If ctx ends first, the records still
// buffered are logged at error level instead and Close returns an error
// wrapping [ErrUnpublished]; the goroutine then ends once the publish it
// may be blocked in returns (the connection moves again or is closed).
// A record published after Close is logged, not sent. Close is
// idempotent, and does not close the connection.
func (p *Publisher) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.abandon.Store(true)
		return fmt.Errorf("%w: %w", ErrUnpublished, ctx.Err())
	}
	if p.nc == nil || p.nc.IsClosed() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	if err := p.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flushing audit records: %w", err)
	}
	return nil
}

func (p *Publisher) run() {
	defer close(p.done)
	for r := range p.ch {
		if p.abandon.Load() {
			p.lost(r, "closing timed out", nil)
			continue
		}
		p.emit(r)
	}
}

// emit bounds, encodes, validates ([Record.conforms], then the schema
// when that is not enough) and publishes one record.
func (p *Publisher) emit(r *Record) {
	r.bound(time.Now())
	data, err := marshal(r)
	if err != nil {
		p.lost(r, "encoding", err)
		return
	}
	if !r.conforms() {
		// Only the schema can say what is wrong, or that nothing is.
		if err := Validate(data); err != nil {
			p.log.Error("audit record not published", "reason", "invalid", "error", err, "record", json.RawMessage(data))
			return
		}
	}
	if p.nc == nil {
		p.log.Info("audit record", "record", json.RawMessage(data))
		return
	}
	subject := p.subjectFor(r)
	if err := p.nc.Publish(subject, data); err != nil {
		p.log.Error("audit record not published", "reason", "publishing", "subject", subject, "error", err, "record", json.RawMessage(data))
	}
}

// lost logs r at error level, as JSON whatever it holds, with why it was
// not published.
func (p *Publisher) lost(r *Record, reason string, err error) {
	r.bound(time.Now())
	data, merr := marshal(r)
	if merr != nil {
		// Only raw arguments that are not JSON fail to encode: keep their
		// bytes as a string so the log still holds the whole record.
		c := *r
		c.Arguments, _ = marshal(string(r.Arguments))
		data, _ = marshal(&c)
		if err == nil {
			err = merr
		}
	}
	attrs := []any{"reason", reason, "subject", p.subjectFor(r)}
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	p.log.Error("audit record not published", append(attrs, "record", json.RawMessage(data))...)
}

// subjectFor is the subject r goes to.
func (p *Publisher) subjectFor(r *Record) string {
	if p.subject != "" {
		return p.subject
	}
	return Subject(r.Identity)
}
