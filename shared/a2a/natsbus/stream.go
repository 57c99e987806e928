package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// StreamSubject is the subject an identity answers streamed calls on.
func StreamSubject(identity string) string { return SubjectPrefix + ".stream." + identity }

// ControlSubject is the subject one instance of an identity takes cancels
// for the streams it runs on. No queue group: a cancel must reach the
// instance that runs the stream, and only it.
func ControlSubject(identity, instance string) string {
	return SubjectPrefix + ".control." + identity + "." + instance
}

// Send publishes one message of a stream to the caller's inbox.
func (r *Request) Send(data []byte) error {
	if err := r.nc.Publish(r.req.Reply(), data); err != nil {
		return fmt.Errorf("sending to %s: %w", r.req.Reply(), err)
	}
	return nil
}

// SendLast publishes the last message of a stream, its final reply, and
// lets the connection write it before the caller goes on to its
// bookkeeping, as [Request.Reply] does.
func (r *Request) SendLast(data []byte) error {
	if err := r.Send(data); err != nil {
		return err
	}
	yieldToFlusher()
	return nil
}

// ErrCallerGone is returned by [Request.Probe] when the caller's inbox has
// no subscriber: the caller was killed or gave up.
var ErrCallerGone = errors.New("caller gone: its inbox has no subscriber")

// Probe sends one message of a stream as a request, so the caller's client
// answers it: an answer proves the caller is still there, no responders
// ([ErrCallerGone]) proves it is not. A probe that times out says nothing
// either way (the caller may just be slow) and returns the timeout error.
// Streams probe at most once per heartbeat interval, so liveness costs
// nothing per output chunk.
func (r *Request) Probe(data []byte, timeout time.Duration) error {
	return r.probe(r.req.Reply(), data, timeout)
}

// probe sends data to subject as a request: [ErrCallerGone] when no one
// subscribes to it, nil when someone answers, the error otherwise.
func (r *Request) probe(subject string, data []byte, timeout time.Duration) error {
	_, err := r.nc.Request(subject, data, timeout)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return ErrCallerGone
	case err != nil:
		return fmt.Errorf("probing %s: %w", subject, err)
	}
	return nil
}

// Control subscribes handler to the control subject of one instance. The
// subscription is the caller's to unsubscribe; it runs on nc, which the
// caller owns.
func Control(nc *nats.Conn, identity, instance string, handler func(data []byte)) (*nats.Subscription, error) {
	if err := a2a.CheckIdentity(identity); err != nil {
		return nil, err
	}
	if err := a2a.CheckIdentity(instance); err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	sub, err := nc.Subscribe(ControlSubject(identity, instance), func(m *nats.Msg) { handler(m.Data) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to the control subject: %w", err)
	}
	return sub, nil
}

// Stream is the caller's end of one streamed call: the messages the agent
// sends to its inbox, in order. It is not safe for concurrent use, except
// [Stream.Cancel].
type Stream struct {
	nc       *nats.Conn
	identity string
	mux      *inboxMux
	token    string
	refusals *inflight

	mu sync.Mutex
	// queue holds the messages delivered and not yet read, and gone is
	// set once the shared subscription has ended; both guarded by mu.
	// queue is unbounded: the output of one call is bounded by the
	// agent's output cap, and a slow reader must never lose the final
	// reply.
	queue []*nats.Msg
	gone  bool
	// refused is the server's refusal of a publish of the stream (its
	// request or a cancel), and watched are those publishes' ids in the
	// transport's refusals; guarded by mu.
	refused error
	watched []uint64
	// ready has room for one wake-up: a delivery never blocks the shared
	// subscription's goroutine, and a reader that finds it signalled
	// looks at the queue again.
	ready chan struct{}
}

// OpenStream sends data, an encoded tool.request, to identity's stream
// subject, with an inbox of the transport's shared stream subscription as
// its reply subject. The caller must Close it. Should the server refuse
// the request (or a cancel) for the connection's permissions, the next
// read fails at once with [a2a.ErrPermission].
func (t *Transport) OpenStream(ctx context.Context, identity string, data []byte) (a2a.StreamConn, error) {
	if len(data) > a2a.MaxMessageSize {
		return nil, fmt.Errorf("%w: request is %d bytes, the limit is %d", a2a.ErrTooLarge, len(data), a2a.MaxMessageSize)
	}
	subject := StreamSubject(identity)
	if err := t.connected(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s not sent: %w", a2a.ErrAgentUnavailable, subject, err)
	}
	mux, err := t.streamMux()
	if err != nil {
		return nil, err
	}
	s := &Stream{nc: t.nc, identity: identity, mux: mux, refusals: &t.refusals, ready: make(chan struct{}, 1)}
	s.watch(subject)
	inbox := mux.add(s)
	// The stream request as it goes out: the one place its NATS headers,
	// if any, are set.
	msg := nats.NewMsg(subject)
	msg.Reply = inbox
	msg.Data = data
	msg.Header = tracing.InjectNATS(ctx, msg.Header)
	if err := t.nc.PublishMsg(msg); err != nil {
		s.Close()
		return nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	return s, nil
}

// watch registers a publish of the stream to subject, to be failed by its
// refusal until the stream is closed.
func (s *Stream) watch(subject string) {
	id := s.refusals.add(subject, func() { s.refuse(refusedError(subject)) })
	s.mu.Lock()
	s.watched = append(s.watched, id)
	s.mu.Unlock()
}

// refuse ends the stream with err, the server's refusal of one of its
// publishes: its reader fails at once.
func (s *Stream) refuse(err error) {
	s.mu.Lock()
	if s.refused == nil {
		s.refused = err
	}
	s.mu.Unlock()
	s.wake()
}

// streamMux returns the transport's shared stream inbox, subscribing it
// on first use and again after its subscription ended (a closed
// connection).
func (t *Transport) streamMux() (*inboxMux, error) {
	t.muxMu.Lock()
	defer t.muxMu.Unlock()
	if t.mux != nil && t.mux.sub.IsValid() {
		return t.mux, nil
	}
	mux, err := newInboxMux(t.nc)
	if err != nil {
		return nil, err
	}
	t.mux = mux
	return mux, nil
}

// inboxMux is one wildcard subscription, prefix.*, that carries the
// messages of every stream a transport opens, each stream on an inbox
// prefix.<token> of its own: as nats.go's request mux does for unary
// requests, so a streamed call costs no subscription of its own (a
// subscribe and an unsubscribe on the server, and nats.go's 64 Ki-entry
// channel of a synchronous subscription, half a megabyte per call).
type inboxMux struct {
	prefix string
	sub    *nats.Subscription
	// answers is set once the server has taken the subscription, so that
	// it answers caller probes (callerprobe.go).
	answers atomic.Bool

	mu sync.Mutex
	// streams are the open streams by token, next the token counter;
	// guarded by mu. A token is never reused while the subscription
	// lives, so a late message for a closed stream finds nothing.
	streams map[string]*Stream
	next    uint64
	// done is set once the subscription has ended: a stream added then
	// fails at its first read.
	done bool
}

func newInboxMux(nc *nats.Conn) (*inboxMux, error) {
	m := &inboxMux{prefix: nc.NewInbox() + ".", streams: map[string]*Stream{}}
	sub, err := nc.Subscribe(m.prefix+"*", m.deliver)
	if err != nil {
		return nil, fmt.Errorf("subscribing to the stream inbox: %w", err)
	}
	// deliver never blocks, so nothing piles up here; no pending limit,
	// so a burst is never dropped as a slow consumer.
	_ = sub.SetPendingLimits(-1, -1)
	m.sub = sub
	sub.SetClosedHandler(func(string) { m.closed() })
	return m, nil
}

// closed ends every open stream once the subscription is closed (with its
// connection): their readers fail at once instead of at their timeout.
func (m *inboxMux) closed() {
	m.mu.Lock()
	m.done = true
	open := make([]*Stream, 0, len(m.streams))
	for _, s := range m.streams {
		open = append(open, s)
	}
	m.mu.Unlock()
	for _, s := range open {
		s.mu.Lock()
		s.gone = true
		s.mu.Unlock()
		s.wake()
	}
}

// add registers s under a new token and returns its inbox.
func (m *inboxMux) add(s *Stream) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	s.token = strconv.FormatUint(m.next, 36)
	m.streams[s.token] = s
	s.gone = m.done
	return m.prefix + s.token
}

func (m *inboxMux) remove(token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.streams, token)
}

// goneHeader answers a probe on the inbox of a stream no longer open with
// the status the server itself gives a request nobody listens to (no
// responders): the agent tells a caller that gave up a stream from one that
// is only slow the same way whether the inbox is shared or not.
var goneHeader = nats.Header{"Status": []string{"503"}}

// deliver runs on the subscription's goroutine, one message at a time, so
// each stream's messages keep their order.
func (m *inboxMux) deliver(msg *nats.Msg) {
	token, ok := strings.CutPrefix(msg.Subject, m.prefix)
	if ok && token == callerToken {
		if msg.Reply != "" {
			_ = msg.Respond(nil)
		}
		return
	}
	var s *Stream
	if ok {
		m.mu.Lock()
		s = m.streams[token]
		m.mu.Unlock()
	}
	if s == nil {
		if msg.Reply != "" {
			_ = msg.RespondMsg(&nats.Msg{Header: goneHeader})
		}
		return
	}
	s.mu.Lock()
	s.queue = append(s.queue, msg)
	s.mu.Unlock()
	s.wake()
}

func (s *Stream) wake() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// pop returns the next queued message, or nil; gone reports the shared
// subscription ended, refused the server's refusal of a publish of the
// stream. Messages already queued come first.
func (s *Stream) pop() (msg *nats.Msg, gone bool, refused error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil, s.gone, s.refused
	}
	msg = s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return msg, false, nil
}

// Next returns the next message of the stream, answering a probe for
// liveness as it passes. It waits at most wait, returning an error wrapping
// [a2a.ErrAgentUnavailable] when nothing came: for the first message (the
// ack) a no-responders status means no agent serves streams on identity.
func (s *Stream) Next(ctx context.Context, wait time.Duration) ([]byte, error) {
	msg, err := s.wait(ctx, wait)
	switch {
	case errors.Is(err, a2a.ErrPermission):
		return nil, err
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: nothing from %s for %s", a2a.ErrAgentUnavailable, StreamSubject(s.identity), wait)
	case err != nil:
		return nil, fmt.Errorf("reading the stream of %s: %w", s.identity, err)
	case len(msg.Data) == 0 && msg.Header.Get("Status") == "503":
		return nil, fmt.Errorf("%w: %w on %s", a2a.ErrAgentUnavailable, a2a.ErrNoStreams, StreamSubject(s.identity))
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("%w: %s %s", a2a.ErrRejected, code, msg.Header.Get(micro.ErrorHeader))
	}
	if msg.Reply != "" {
		_ = msg.Respond(nil)
	}
	return msg.Data, nil
}

// wait returns the next message, waiting at most d and never past ctx.
// The timer is made only when nothing is queued: a reader that keeps up
// with a burst takes each message without one.
func (s *Stream) wait(ctx context.Context, d time.Duration) (*nats.Msg, error) {
	var timeout <-chan time.Time
	for {
		msg, gone, refused := s.pop()
		switch {
		case msg != nil:
			return msg, nil
		case refused != nil:
			return nil, refused
		case gone:
			return nil, nats.ErrConnectionClosed
		}
		if timeout == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-s.ready:
		case <-timeout:
			return nil, context.DeadlineExceeded
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Cancel sends data, an encoded cancel, to the instance running the stream.
func (s *Stream) Cancel(instance string, data []byte) error {
	if err := a2a.CheckIdentity(instance); err != nil {
		return fmt.Errorf("cancelling on instance: %w", err)
	}
	subject := ControlSubject(s.identity, instance)
	// A cancel the server refuses ends the wait for the reply that
	// would confirm it.
	s.watch(subject)
	if err := s.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("sending cancel: %w", err)
	}
	return s.nc.Flush()
}

// Close stops listening on the stream's inbox: what comes for it later is
// dropped, and a probe is answered as no one listening.
func (s *Stream) Close() {
	s.mux.remove(s.token)
	s.mu.Lock()
	s.queue = nil
	watched := s.watched
	s.watched = nil
	s.mu.Unlock()
	for _, id := range watched {
		s.refusals.remove(id)
	}
}
