package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// DefaultMaxPending bounds the requests one broker waits on at once when
// [Options.MaxPending] is zero. A person works through tens of requests,
// not hundreds; beyond that a caller is flooding the gate, and the bound
// keeps the table (at most some 20 KiB a request) and every list reply
// small.
const DefaultMaxPending = 256

// MaxCommand bounds [Pending.Command], as the schema does. A command line
// is never cut: an operator approves exactly what runs, so a longer one is
// refused instead.
const MaxCommand = 16 << 10

// flushTimeout bounds the round trip that confirms the broker's
// subscriptions with the server at start.
const flushTimeout = 5 * time.Second

// Options configure a [Broker].
type Options struct {
	// Identity is the serving identity, and Instance this process among
	// the identity's instances: the agent's instance label, which its A2A
	// replies carry as sender.instance. Both key subjects, so both must
	// match the identity pattern; two live brokers of one identity must
	// not share an instance, or each would take the other's answers.
	Identity string
	Instance string
	// Config is the identity's approvals config; the broker reads its
	// Timeout and SelfApproval.
	Config Config
	// MaxPending bounds the requests waiting at once; zero means
	// [DefaultMaxPending]. Request refuses one more with
	// [ErrTooManyPending].
	MaxPending int
	// Logger receives refused answers and every outcome; nil means
	// slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called with every event the broker publishes
	// and the request it concerns: the place to write the audit records of
	// each request and decision (the event names the approver). It is
	// called on the goroutine of the [Broker.Request] concerned, before
	// Request returns, so calls for different requests run concurrently;
	// it must not block for long, and must not call [Broker.Close].
	OnEvent func(Event, Request)
}

// Pending is a gated call to put to an operator.
type Pending struct {
	// Tool is the gated tool's name, as its caller named it.
	Tool string
	// Command is the exact command line that runs once approved; at most
	// [MaxCommand] bytes.
	Command string
	// Digest is the arguments digest, "sha256:" and 64 hex digits (see
	// [Digest]); an answer must repeat it.
	Digest string
	// Caller is who waits.
	Caller Caller
	// Announced, when set, is called once with the request as published,
	// before Request starts waiting: the moment to tell the caller
	// "awaiting operator approval (id …)". It must not block for long.
	Announced func(Request)
}

// Outcome is how a request ended, in [Decision.Outcome].
type Outcome string

// Outcomes.
const (
	// OutcomeApproved is an operator's approval: the call may run, once.
	OutcomeApproved Outcome = "approved"
	// OutcomeDenied is an operator's denial.
	OutcomeDenied Outcome = "denied"
	// OutcomeExpired is a request nobody answered in time: denied.
	OutcomeExpired Outcome = "expired"
	// OutcomeWithdrawn is a request whose caller went away, or whose
	// broker closed, first.
	OutcomeWithdrawn Outcome = "withdrawn"
)

// Decision is how a request ended. Only [OutcomeApproved] lets the call
// run.
type Decision struct {
	// Request is the request as published.
	Request Request
	// Outcome is how it ended.
	Outcome Outcome
	// Approver and NATSUser are who answered, as their answer claims;
	// empty unless an operator answered.
	Approver string
	NATSUser string
	// Reason is the answer's reason, or why the request expired or was
	// withdrawn.
	Reason string
}

// Approved reports whether the call may run.
func (d Decision) Approved() bool { return d.Outcome == OutcomeApproved }

// Broker puts one process's gated calls to operators over NATS: it
// publishes each request, answers list requests with the ones it waits on,
// and takes answers on its own instance's answer subject. Make one per
// serving process with [NewBroker]; it is safe for concurrent use.
type Broker struct {
	nc           *nats.Conn
	identity     string
	instance     string
	timeout      time.Duration
	selfApproval bool
	signers      map[string]Signer
	maxPending   int
	log          *slog.Logger
	onEvent      func(Event, Request)

	// subs are the answer and list subscriptions, made by NewBroker and
	// unsubscribed by Close.
	subs []*nats.Subscription
	// wg counts the Request calls under way, which Close waits for.
	wg sync.WaitGroup

	mu sync.Mutex // guards pending, finished and closed
	// pending holds the requests waiting for an answer, by id.
	pending map[string]*waiter
	// finished remembers how recent requests ended, to say why a later
	// answer to one is refused.
	finished *history
	closed   bool
}

// waiter is one waiting request. Whoever takes it out of the pending table
// (under mu) decides how it ended: an accepted answer or Close send the
// result; an expiry or a withdrawal is the Request goroutine's own.
type waiter struct {
	req Request
	// deadline is req.Expires on the monotonic clock.
	deadline time.Time
	// result is buffered: written at most once, never blocking.
	result chan result
}

type result struct {
	d   Decision
	err error
}

// NewBroker starts answering list requests and answers for opts.Identity
// and opts.Instance on nc. The connection stays the caller's: it must
// outlive the broker, and the caller closes it after [Broker.Close].
func NewBroker(nc *nats.Conn, opts Options) (*Broker, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrInvalidConfig)
	}
	if err := a2a.CheckIdentity(opts.Identity); err != nil {
		return nil, fmt.Errorf("%w: identity: %w", ErrInvalidConfig, err)
	}
	if err := a2a.CheckIdentity(opts.Instance); err != nil {
		return nil, fmt.Errorf("%w: instance: %w", ErrInvalidConfig, err)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxPending < 0 {
		return nil, fmt.Errorf("%w: max pending is %d, want 0 (the default, %d) or more", ErrInvalidConfig, opts.MaxPending, DefaultMaxPending)
	}
	cfg := opts.Config.withDefaults()
	b := &Broker{
		nc:           nc,
		identity:     opts.Identity,
		instance:     opts.Instance,
		timeout:      cfg.Timeout,
		selfApproval: cfg.SelfApproval,
		signers:      cfg.Signers,
		maxPending:   opts.MaxPending,
		log:          opts.Logger,
		onEvent:      opts.OnEvent,
		pending:      make(map[string]*waiter),
	}
	if b.maxPending == 0 {
		b.maxPending = DefaultMaxPending
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.log = b.log.With("identity", b.identity, "instance", b.instance)
	// Remember well past the table's size, so an answer to a request that
	// ended a while ago is still refused with its reason.
	b.finished = newHistory(4 * b.maxPending)
	for subject, handler := range map[string]nats.MsgHandler{
		AnswerSubject(b.identity, b.instance): b.handleAnswer,
		ListSubject(b.identity):               b.handleList,
		ListAllSubject():                      b.handleList,
	} {
		sub, err := nc.Subscribe(subject, handler)
		if err != nil {
			b.unsubscribe()
			return nil, fmt.Errorf("subscribing to %s: %w", subject, err)
		}
		b.subs = append(b.subs, sub)
	}
	if err := b.confirm(); err != nil {
		b.unsubscribe()
		return nil, err
	}
	return b, nil
}

// confirm waits until the server has the subscriptions, and reports one it
// refused for want of permission, naming the permission to grant.
func (b *Broker) confirm() error {
	if !b.nc.IsConnected() {
		// Subscriptions are sent when the connection comes back.
		return nil
	}
	if err := b.nc.FlushTimeout(flushTimeout); err != nil {
		return fmt.Errorf("confirming approval subscriptions: %w", err)
	}
	if err := b.nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), Prefix+".") {
		return fmt.Errorf("%w: %w: grant this NATS user subscribe permission on %s, %s and %s", ErrNotPermitted, err,
			AnswerSubject(b.identity, b.instance), ListSubject(b.identity), ListAllSubject())
	}
	return nil
}

// Request puts p to the operators and waits for the outcome: an answer,
// the timeout, or ctx ending. It publishes a requested event, lists the
// request until it ends, and publishes how it ended (decided, expired or
// withdrawn). The timeout denies ([OutcomeExpired], a nil error). When ctx
// ends first the request is withdrawn everywhere and the error wraps
// [ErrWithdrawn] and ctx's cause; when the broker closes, [ErrClosed]. An
// answer that arrived first still wins: check ctx before running the call.
// The request expires at the timeout, or at ctx's deadline when that is
// sooner. Request holds nothing but its goroutine while it waits.
func (b *Broker) Request(ctx context.Context, p Pending) (Decision, error) {
	if err := ctx.Err(); err != nil {
		// Gone before asking: nothing was published.
		return Decision{}, fmt.Errorf("%w: %w", ErrWithdrawn, context.Cause(ctx))
	}
	if len(p.Command) > MaxCommand {
		return Decision{}, fmt.Errorf("%w: the command line is %d bytes, the limit is %d: an operator must see all of it", ErrInvalidRequest, len(p.Command), MaxCommand)
	}
	now := time.Now()
	deadline := now.Add(b.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req := Request{
		ID:       nuid.Next(),
		Identity: b.identity,
		Instance: b.instance,
		Tool:     p.Tool,
		Command:  p.Command,
		Digest:   p.Digest,
		Caller:   p.Caller,
		Created:  now.UTC(),
		Expires:  deadline.UTC(),
	}
	ev := Event{Type: EventRequested, ID: req.ID, Identity: b.identity, Instance: b.instance, Time: req.Created, Request: &req}
	data, err := encode(KindEvent, ev)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	w := &waiter{req: req, deadline: deadline, result: make(chan result, 1)}
	if err := b.add(w); err != nil {
		return Decision{}, err
	}
	defer b.wg.Done()
	if err := b.nc.Publish(EventSubject(b.identity, b.instance), data); err != nil {
		if b.remove(w, OutcomeWithdrawn) {
			return Decision{}, fmt.Errorf("publishing approval request: %w", err)
		}
		// Answered or closed in between: that outcome stands.
		return b.finish(<-w.result)
	}
	b.hook(ev, req)
	b.log.Info("approval requested", "approval", req.ID, "tool", req.Tool, "caller", req.Caller.String(), "expires", req.Expires)
	if p.Announced != nil {
		p.Announced(req)
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var res result
	select {
	case res = <-w.result:
	case <-timer.C:
		res = result{d: Decision{Request: req, Outcome: OutcomeExpired, Reason: fmt.Sprintf("timeout: no operator answered within %s", deadline.Sub(now).Round(time.Millisecond))}}
		if !b.remove(w, OutcomeExpired) {
			res = <-w.result
		}
	case <-ctx.Done():
		res = result{
			d:   Decision{Request: req, Outcome: OutcomeWithdrawn, Reason: "the caller went away"},
			err: fmt.Errorf("%w: %w", ErrWithdrawn, context.Cause(ctx)),
		}
		if !b.remove(w, OutcomeWithdrawn) {
			res = <-w.result
		}
	}
	return b.finish(res)
}

// finish publishes how a request ended, logs it and returns it.
func (b *Broker) finish(res result) (Decision, error) {
	d := res.d
	ev := Event{ID: d.Request.ID, Identity: b.identity, Instance: b.instance, Time: time.Now().UTC(), Reason: cut(d.Reason, maxReason)}
	switch d.Outcome {
	case OutcomeApproved, OutcomeDenied:
		ev.Type, ev.Approver = EventDecided, d.Approver
		ev.Decision = DecisionDeny
		if d.Outcome == OutcomeApproved {
			ev.Decision = DecisionApprove
		}
	case OutcomeExpired:
		ev.Type = EventExpired
	default:
		ev.Type = EventWithdrawn
	}
	if data, err := encode(KindEvent, ev); err != nil {
		b.log.Error("encoding approval event", "approval", ev.ID, "event", ev.Type, "error", err)
	} else if err := b.nc.Publish(EventSubject(b.identity, b.instance), data); err != nil {
		b.log.Warn("publishing approval event", "approval", ev.ID, "event", ev.Type, "error", err)
	}
	b.hook(ev, d.Request)
	b.log.Info("approval ended", "approval", d.Request.ID, "outcome", string(d.Outcome), "tool", d.Request.Tool,
		"approver", d.Approver, "nats_user", d.NATSUser, "reason", d.Reason)
	return d, res.err
}

func (b *Broker) hook(ev Event, req Request) {
	if b.onEvent != nil {
		b.onEvent(ev, req)
	}
}

// add enters w in the pending table, refusing it when the broker is closed
// or full. On success the caller owes b.wg a Done.
func (b *Broker) add(w *waiter) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return ErrClosed
	case len(b.pending) >= b.maxPending:
		return fmt.Errorf("%w: %d requests already wait for an operator on %s instance %s, the limit: answer some, or let them expire",
			ErrTooManyPending, len(b.pending), b.identity, b.instance)
	}
	b.pending[w.req.ID] = w
	b.wg.Add(1)
	return nil
}

// remove takes w out of the pending table as ended by outcome, and reports
// whether it was still there: false means an answer or Close ended it
// first and sent the result.
func (b *Broker) remove(w *waiter, outcome Outcome) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[w.req.ID] != w {
		return false
	}
	delete(b.pending, w.req.ID)
	b.finished.add(w.req.ID, ended{outcome: outcome})
	return true
}

// Pending returns the requests the broker waits on, oldest first.
func (b *Broker) Pending() []Request {
	b.mu.Lock()
	reqs := make([]Request, 0, len(b.pending))
	for _, w := range b.pending {
		reqs = append(reqs, w.req)
	}
	b.mu.Unlock()
	slices.SortFunc(reqs, func(x, y Request) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return reqs
}

// Close withdraws every pending request (each Request returns
// [ErrClosed] after publishing its withdrawn event), stops taking answers
// and list requests, and waits for the Request calls to return. It is
// idempotent and accepts a closed connection, which stays the caller's.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for id, w := range b.pending {
		delete(b.pending, id)
		b.finished.add(id, ended{outcome: OutcomeWithdrawn})
		w.result <- result{d: Decision{Request: w.req, Outcome: OutcomeWithdrawn, Reason: "the instance is stopping"}, err: ErrClosed}
	}
	b.mu.Unlock()
	err := b.unsubscribe()
	b.wg.Wait()
	if b.nc.IsConnected() {
		// Send the withdrawn events before the caller closes the connection.
		_ = b.nc.FlushTimeout(flushTimeout)
	}
	return err
}

// unsubscribe drops the broker's subscriptions, accepting a closed
// connection.
func (b *Broker) unsubscribe() error {
	var errs []error
	for _, sub := range b.subs {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, fmt.Errorf("unsubscribing from %s: %w", sub.Subject, err))
		}
	}
	b.subs = nil
	return errors.Join(errs...)
}
