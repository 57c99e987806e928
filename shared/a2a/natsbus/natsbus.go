// Package natsbus binds the A2A protocol to core NATS request-reply: the
// subjects of an identity, the micro service that serves them, and the round
// trip clients make. No JetStream is involved.
//
// Discovery and tool calls ride different subjects so an account can be
// granted publish on choria.fisk-ai.discovery.* without
// choria.fisk-ai.tool.*: discovery without execution.
//
// A streamed call is a tool.request on choria.fisk-ai.stream.<identity>
// (the service's third endpoint, same queue group) with the caller's own
// inbox as reply subject; the agent sends every message of the stream to
// that inbox, and takes cancels on choria.fisk-ai.control.<identity>.<instance>,
// a subject of the serving process alone. Liveness costs nothing per
// output chunk: at most once per heartbeat interval the agent sends its
// next message as a request instead of a plain publish ([Request.Probe]),
// and the caller's [Stream] answers it as it reads; "no responders" means
// the caller's inbox is gone (the caller was killed or gave up), and three
// unanswered probes in a row mean it is stuck. A transport's streams share
// one wildcard inbox subscription, which answers a probe for a stream no
// longer open with that same no-responders status. The caller, for its part,
// treats three heartbeat intervals with no message as a dead instance.
//
// A unary call (one request on the tool subject, one reply) says nothing
// of the instance that runs it, so its cancel goes to every process of the
// identity at once: choria.fisk-ai.control.<identity>.@all, a subject each
// process subscribes without a queue group ([CallControlSubject]). The
// process running the call whose request id the cancel names stops it and
// answers the call with a reply that says so; the others ignore it. An
// agent that honours this lists [a2a.ProtocolCallCancel] in its card.
// Nothing is published for a call that is not canceled. A unary caller
// that dies is found out by the agent probing the subject the request
// named in [CallerProbeHeader], once per heartbeat interval while the call
// runs (callerprobe.go).
package natsbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// SubjectPrefix sits inside the Choria subject space.
const SubjectPrefix = "choria.fisk-ai"

// DefaultTimeout bounds a round trip when neither the caller's context nor
// the transport carries a deadline.
const DefaultTimeout = 30 * time.Second

// DiscoverySubject is the subject an identity answers discovery on.
func DiscoverySubject(identity string) string { return SubjectPrefix + ".discovery." + identity }

// ToolSubject is the subject an identity answers tool calls on.
func ToolSubject(identity string) string { return SubjectPrefix + ".tool." + identity }

// Subject is the subject of route for identity.
func Subject(identity string, route a2a.Route) string {
	if route == a2a.RouteDiscovery {
		return DiscoverySubject(identity)
	}
	return ToolSubject(identity)
}

// DefaultReconnectWait is how long a round trip made while the connection
// is reconnecting waits for it to come back before failing: long enough to
// ride out a server restart in a cluster (clients fail over within a
// second), short enough that a caller learns of an outage in seconds
// rather than at its own deadline.
const DefaultReconnectWait = 2 * time.Second

// Transport is the client side: an [a2a.Transport] over a connection the
// caller owns. It is safe for concurrent use.
type Transport struct {
	nc            *nats.Conn
	timeout       time.Duration
	reconnectWait time.Duration

	// mux is the shared inbox of the transport's streamed calls, made on
	// the first; guarded by muxMu.
	muxMu sync.Mutex
	mux   *inboxMux

	// refusals are the publishes waiting for an answer, which a
	// permissions violation on their subject fails at once.
	refusals inflight

	// probing is set while the caller-probe subject is being readied
	// (callerprobe.go).
	probing atomic.Bool
}

// Option configures a [Transport].
type Option func(*Transport)

// WithTimeout sets the round-trip timeout used when the caller's context
// has no deadline (default [DefaultTimeout]).
func WithTimeout(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.timeout = d
		}
	}
}

// WithReconnectWait sets how long a round trip waits for a reconnecting
// connection (default [DefaultReconnectWait]).
func WithReconnectWait(d time.Duration) Option {
	return func(t *Transport) {
		if d > 0 {
			t.reconnectWait = d
		}
	}
}

// NewTransport returns a transport over nc, which the caller owns and
// closes.
//
// The transport listens for the permissions violations the server reports
// on nc ([natsconn.OnPublishViolation], chained with nc's own error
// handler): a call whose publish the connection's user may not make fails
// at once with [a2a.ErrPermission] instead of waiting out its deadline.
// Should nc's error handler be replaced later, such a call waits as one
// nobody answers.
func NewTransport(nc *nats.Conn, opts ...Option) *Transport {
	t := &Transport{nc: nc, timeout: DefaultTimeout, reconnectWait: DefaultReconnectWait}
	for _, o := range opts {
		o(t)
	}
	if nc != nil {
		natsconn.OnPublishViolation(nc, t.refusals.refused)
	}
	return t
}

// RoundTrip sends data to identity's route subject and returns the reply.
// The deadline is the caller's, else the transport's timeout. No responders
// or no reply in time is [a2a.ErrAgentUnavailable]; so is a connection that
// is down and not back within the reconnect wait, in which case nothing is
// sent (nats.go would otherwise buffer the request and the caller would
// wait out its whole deadline). A micro error header is [a2a.ErrRejected]
// carrying the agent's code and description. A request the server refuses
// for the connection's permissions is [a2a.ErrPermission], as soon as the
// server says so.
func (t *Transport) RoundTrip(ctx context.Context, identity string, route a2a.Route, data []byte) ([]byte, error) {
	if len(data) > a2a.MaxMessageSize {
		return nil, fmt.Errorf("%w: request is %d bytes, the limit is %d", a2a.ErrTooLarge, len(data), a2a.MaxMessageSize)
	}
	// One context of the call's own, whose cancel a refusal calls.
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
	}
	defer cancel()
	subject := Subject(identity, route)
	if err := t.connected(ctx); err != nil {
		return nil, fmt.Errorf("%w: %s not sent: %w", a2a.ErrAgentUnavailable, subject, err)
	}
	req := nats.NewMsg(subject)
	req.Data = data
	// The trace context rides in the headers, never in the A2A body,
	// whose schemas stay v1; an untraced call sends none of it. So does
	// a unary call's caller probe (callerprobe.go).
	tracing.InjectNATS(ctx, req.Header)
	if route == a2a.RouteTool {
		if probe := t.callerProbe(); probe != "" {
			req.Header.Set(CallerProbeHeader, probe)
		}
	}
	id := t.refusals.add(subject, cancel)
	msg, err := t.nc.RequestMsgWithContext(ctx, req)
	if refused := t.refusals.remove(id); refused && err != nil {
		return nil, refusedError(subject)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: no agent serves %s: %w", a2a.ErrAgentUnavailable, subject, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return nil, fmt.Errorf("%w: no reply on %s in time: %w", a2a.ErrAgentUnavailable, subject, err)
	case err != nil:
		return nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	if route == a2a.RouteTool {
		t.prepareProbe()
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("%w: %s %s", a2a.ErrRejected, code, msg.Header.Get(micro.ErrorHeader))
	}
	if len(msg.Data) > a2a.MaxMessageSize {
		return nil, fmt.Errorf("%w: reply on %s is %d bytes, the limit is %d", a2a.ErrTooLarge, subject, len(msg.Data), a2a.MaxMessageSize)
	}
	return msg.Data, nil
}

// errNotConnected is a connection that is down when a request is to be
// sent. It is returned wrapped in [a2a.ErrAgentUnavailable].
var errNotConnected = errors.New("not connected to NATS")

// connected returns nil once the connection is up, waiting for a
// reconnecting one at most the reconnect wait and never past ctx.
func (t *Transport) connected(ctx context.Context) error {
	if t.nc.IsConnected() {
		return nil
	}
	if t.nc.IsClosed() {
		return fmt.Errorf("%w: the connection is closed", errNotConnected)
	}
	changed := t.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer t.nc.RemoveStatusListener(changed)
	wait := time.NewTimer(t.reconnectWait)
	defer wait.Stop()
	for !t.nc.IsConnected() {
		select {
		case <-changed:
			if t.nc.IsClosed() {
				return fmt.Errorf("%w: the connection is closed", errNotConnected)
			}
		case <-wait.C:
			return fmt.Errorf("%w: still %s after %s", errNotConnected, t.nc.Status(), t.reconnectWait)
		case <-ctx.Done():
			return fmt.Errorf("%w: still %s at the caller's deadline", errNotConnected, t.nc.Status())
		}
	}
	return nil
}
