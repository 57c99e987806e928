package natsbus

import (
	"context"
	"errors"
	"fmt"
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
	_, err := r.nc.Request(r.req.Reply(), data, timeout)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return ErrCallerGone
	case err != nil:
		return fmt.Errorf("probing %s: %w", r.req.Reply(), err)
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
// sends to a private inbox, in order. It is not safe for concurrent use,
// except [Stream.Cancel].
type Stream struct {
	nc       *nats.Conn
	identity string
	sub      *nats.Subscription
}

// OpenStream sends data, an encoded tool.request, to identity's stream
// subject with a private inbox for the answers. The caller must Close it.
func (t *Transport) OpenStream(ctx context.Context, identity string, data []byte) (a2a.StreamConn, error) {
	if len(data) > a2a.MaxMessageSize {
		return nil, fmt.Errorf("%w: request is %d bytes, the limit is %d", a2a.ErrTooLarge, len(data), a2a.MaxMessageSize)
	}
	subject := StreamSubject(identity)
	if err := t.connected(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s not sent: %w", a2a.ErrAgentUnavailable, subject, err)
	}
	inbox := t.nc.NewRespInbox()
	sub, err := t.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("subscribing to a stream inbox: %w", err)
	}
	// The output of one call is bounded by the agent's output cap, but a
	// slow reader must never lose the final reply: no pending limit.
	_ = sub.SetPendingLimits(-1, -1)
	msg := &nats.Msg{Subject: subject, Reply: inbox, Data: data, Header: tracing.InjectNATS(ctx, nil)}
	if err := t.nc.PublishMsg(msg); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	return &Stream{nc: t.nc, identity: identity, sub: sub}, nil
}

// Next returns the next message of the stream, answering a probe for
// liveness as it passes. It waits at most wait, returning an error wrapping
// [a2a.ErrAgentUnavailable] when nothing came: for the first message (the
// ack) a no-responders status means no agent serves streams on identity.
func (s *Stream) Next(ctx context.Context, wait time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, err := s.sub.NextMsgWithContext(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w: nothing from %s for %s", a2a.ErrAgentUnavailable, StreamSubject(s.identity), wait)
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: %w on %s", a2a.ErrAgentUnavailable, a2a.ErrNoStreams, StreamSubject(s.identity))
	case err != nil:
		return nil, fmt.Errorf("reading the stream of %s: %w", s.identity, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("%w: %s %s", a2a.ErrRejected, code, msg.Header.Get(micro.ErrorHeader))
	}
	if msg.Reply != "" {
		_ = msg.Respond(nil)
	}
	return msg.Data, nil
}

// Cancel sends data, an encoded cancel, to the instance running the stream.
func (s *Stream) Cancel(instance string, data []byte) error {
	if err := a2a.CheckIdentity(instance); err != nil {
		return fmt.Errorf("cancelling on instance: %w", err)
	}
	if err := s.nc.Publish(ControlSubject(s.identity, instance), data); err != nil {
		return fmt.Errorf("sending cancel: %w", err)
	}
	return s.nc.Flush()
}

// Close stops listening on the stream's inbox.
func (s *Stream) Close() { _ = s.sub.Unsubscribe() }
