package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/fiskfleet/fiskfleet/shared/config"
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
	// SpoolDir (audit.spool_dir), when set, keeps on disk every record
	// that cannot be published now (the bus away, the stream not
	// answering), in order, and publishes them when it can, this run or
	// the next: the trail then has no holes. Empty keeps today's
	// behaviour: such a record is logged.
	SpoolDir string
	// SpoolMax bounds the spool's bytes (audit.spool_max); 0 means
	// [DefaultSpoolMax].
	SpoolMax int64
}

// spoolRetry is how often a publisher with a spool tries again to publish
// what it holds while no new record comes.
const spoolRetry = time.Second

// deliverTimeout bounds one record's publication, with its
// acknowledgement, before it goes to the spool.
const deliverTimeout = 2 * time.Second

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

	// spool holds what could not be published, when SpoolDir is set; js
	// publishes with the stream's acknowledgement. Both are the
	// goroutine's.
	spool *spool
	js    jetstream.JetStream
}

// NewPublisher starts a publisher on nc, which the caller owns: it must
// stay open until [Publisher.Close] returns (close it after, so the last
// records are flushed). With a nil nc, records are written to the log at
// info level ("audit record", with the record as JSON) instead: the trail
// of a service run without NATS.
func NewPublisher(nc *nats.Conn, cfg PublisherConfig) *Publisher {
	p, err := OpenPublisher(nc, cfg)
	if err != nil {
		cfg.SpoolDir = ""
		p, _ = OpenPublisher(nc, cfg)
		p.log.Error("audit records that cannot be published will be logged, not spooled", "error", err)
	}
	return p
}

// OpenPublisher is [NewPublisher], refusing a spool that cannot be used
// (SpoolDir not writable, every slot held) instead of running without.
// With a spool, a record counts as published once a JetStream stream on
// its subject acknowledged it (each carries a Nats-Msg-Id, so the
// stream's duplicate window drops one published twice, before a crash
// and again from the spool); with no stream on the subject, once it was
// published and the connection flushed, the best core NATS gives.
func OpenPublisher(nc *nats.Conn, cfg PublisherConfig) (*Publisher, error) {
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
	if cfg.SpoolDir != "" && nc != nil {
		sp, err := openSpool(cfg.SpoolDir, cfg.SpoolMax, cfg.Logger)
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			sp.close()
			return nil, fmt.Errorf("audit spool: %w", err)
		}
		p.spool, p.js = sp, js
	}
	go p.run()
	return p, nil
}

// Spooled is how many records wait in the spool now.
func (p *Publisher) Spooled() int64 {
	if p == nil || p.spool == nil {
		return 0
	}
	return p.spool.held.Load()
}

// SpoolDropped is how many records were lost because the spool was full
// (audit.spool_max).
func (p *Publisher) SpoolDropped() uint64 {
	if p == nil || p.spool == nil {
		return 0
	}
	return p.spool.dropped.Load()
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

// Close stops intake, publishes what is buffered (with a spool, what is
// spooled too: records it cannot publish within ctx stay in the spool for
// the next run) and flushes the connection, all within ctx. If ctx ends first, the records still
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
	if p.spool != nil {
		p.runSpooled()
		return
	}
	for r := range p.ch {
		if p.abandon.Load() {
			p.lost(r, "closing timed out", nil)
			continue
		}
		p.emit(r)
	}
}

// runSpooled is run with a spool: a record goes out only behind the ones
// spooled before it, so the trail keeps call order, and what is spooled
// is tried again every spoolRetry. Records still spooled at Close stay
// on disk for the next run.
func (p *Publisher) runSpooled() {
	defer p.spool.close()
	p.drain()
	retry := time.NewTicker(spoolRetry)
	defer retry.Stop()
	for {
		select {
		case r, ok := <-p.ch:
			if !ok {
				// Close waits, within its context, for the spool to
				// empty; what is left stays on disk.
				for !p.abandon.Load() && !p.spool.empty() {
					if p.drain(); !p.spool.empty() {
						time.Sleep(50 * time.Millisecond)
					}
				}
				if n := p.spool.held.Load(); n > 0 {
					p.log.Warn("audit records left in the spool for the next run", "dir", p.spool.dir, "records", n)
				}
				return
			}
			data, ok := p.encode(r)
			if !ok {
				continue
			}
			id := nuid.Next()
			if p.spool.empty() && !p.abandon.Load() && p.deliver(r, id, data) == nil {
				continue
			}
			if err := p.spool.add(id, data); err != nil {
				p.lost(r, "spool", err)
			} else if !p.abandon.Load() {
				p.drain()
			}
		case <-retry.C:
			p.drain()
		}
	}
}

// drain publishes spooled records, oldest first, until one fails.
func (p *Publisher) drain() {
	for {
		id, data, ok := p.spool.peek()
		if !ok {
			return
		}
		if p.deliver(nil, id, data) != nil {
			return
		}
		p.spool.pop()
	}
}

// deliver publishes one record with its message id, acknowledged by the
// stream on its subject, or flushed when none answers for it. r, when
// known, picks the subject; a spooled record goes to the configured one,
// or to its identity's.
func (p *Publisher) deliver(r *Record, id string, data []byte) error {
	if !p.nc.IsConnected() {
		return nats.ErrConnectionClosed
	}
	subject := p.subject
	if subject == "" {
		if r == nil {
			var head struct {
				Identity string `json:"identity"`
			}
			_ = json.Unmarshal(data, &head)
			r = &Record{Identity: head.Identity}
		}
		subject = p.subjectFor(r)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{id}}}
	ctx, cancel := context.WithTimeout(context.Background(), deliverTimeout)
	defer cancel()
	_, err := p.js.PublishMsg(ctx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		// No stream on the subject: core subscribers only.
		if err = p.nc.PublishMsg(msg); err == nil {
			err = p.nc.FlushWithContext(ctx)
		}
	}
	return err
}

// encode bounds, encodes and validates r ([Record.conforms], then the
// schema when that is not enough), logging one that cannot go.
func (p *Publisher) encode(r *Record) ([]byte, bool) {
	r.bound(time.Now())
	data, err := marshal(r)
	if err != nil {
		p.lost(r, "encoding", err)
		return nil, false
	}
	if !r.conforms() {
		// Only the schema can say what is wrong, or that nothing is.
		if err := Validate(data); err != nil {
			p.log.Error("audit record not published", "reason", "invalid", "error", err, "record", json.RawMessage(data))
			return nil, false
		}
	}
	return data, true
}

// emit encodes and validates ([Publisher.encode]) and publishes one
// record, without a spool.
func (p *Publisher) emit(r *Record) {
	data, ok := p.encode(r)
	if !ok {
		return
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

// ConfigOf is the publisher configuration of c's audit key.
func ConfigOf(c *config.Config, log *slog.Logger) PublisherConfig {
	pc := PublisherConfig{Subject: c.AuditSubject(), Logger: log}
	if a := c.Audit; a != nil {
		pc.SpoolDir, pc.SpoolMax = a.SpoolDir, a.SpoolMax
	}
	return pc
}
