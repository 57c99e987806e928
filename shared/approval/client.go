package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// DefaultListWait is how long [Watch] gathers list replies, and a good
// window for [List] and [Find]: instances reply within milliseconds on one
// network, and a second leaves room for a distant cluster without making an
// operator wait.
const DefaultListWait = time.Second

// DefaultAnswerTimeout bounds [Answer]'s round trip when ctx has no
// deadline: the instance replies at once, or is not there.
const DefaultAnswerTimeout = 10 * time.Second

// Approver is who answers, as the answering client claims it: a name (an
// operator's user name, a verified token's subject) and the NATS user it
// connected as, when it knows. Neither is proof: NATS subject permissions
// decide who may answer at all, and Signer, the approver's nkey, proves
// who answered to an instance that lists approvers' keys (which then
// names the approver by the key). The names are compared with the
// caller's for the four-eyes rule.
type Approver struct {
	Name     string
	NATSUser string
	// Signer, when set, signs the answer with the approver's nkey: the
	// proof an instance listing its approvers' keys requires
	// ([Config.Signers]).
	Signer nkeys.KeyPair
}

// ConnUser returns the user nc connected as, when it connected with a user
// name and password (or a nats context holding them); empty otherwise.
func ConnUser(nc *nats.Conn) string { return nc.Opts.User }

// List asks every instance of identity (every instance of the fleet when
// identity is empty) for its pending requests, gathers the replies that
// arrive within wait, and returns the requests, oldest first. A reply that
// breaks its schema is ignored, as from a stranger. nc stays the caller's.
func List(ctx context.Context, nc *nats.Conn, identity string, wait time.Duration) ([]Request, error) {
	return gather(ctx, nc, identity, wait, func(Request) bool { return false })
}

// Find returns the pending request id of identity (of any identity when
// identity is empty), asking as [List] does but returning as soon as its
// instance replies. It returns [ErrNotFound] when no instance lists it
// within wait.
func Find(ctx context.Context, nc *nats.Conn, identity, id string, wait time.Duration) (Request, error) {
	reqs, err := gather(ctx, nc, identity, wait, func(r Request) bool { return r.ID == id })
	if err != nil {
		return Request{}, err
	}
	for _, r := range reqs {
		if r.ID == id {
			return r, nil
		}
	}
	where := "the fleet"
	if identity != "" {
		where = "identity " + identity
	}
	return Request{}, fmt.Errorf("%w: no instance of %s lists %s within %s: it was decided, expired or withdrawn, or never existed", ErrNotFound, where, id, wait)
}

// gather makes a list request and collects replies until wait passes or
// stop holds for a request.
func gather(ctx context.Context, nc *nats.Conn, identity string, wait time.Duration, stop func(Request) bool) ([]Request, error) {
	if identity != "" {
		if err := a2a.CheckIdentity(identity); err != nil {
			return nil, fmt.Errorf("listing approvals: identity: %w", err)
		}
	}
	subject := ListSubject(identity)
	sub, err := ask(nc, subject, nil)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	seen := map[string]bool{}
	var reqs []Request
	for {
		m, err := sub.NextMsgWithContext(wctx)
		if errors.Is(err, nats.ErrNoResponders) {
			break // no instance listens
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("listing approvals: %w", context.Cause(ctx))
			}
			if wctx.Err() != nil {
				break
			}
			return nil, fmt.Errorf("listing approvals: %w", err)
		}
		var lr ListReply
		if decode(KindListReply, m.Data, &lr) != nil {
			continue
		}
		found := false
		for _, r := range lr.Pending {
			if !seen[r.ID] {
				seen[r.ID] = true
				reqs = append(reqs, r)
			}
			found = found || stop(r)
		}
		if found {
			break
		}
	}
	slices.SortFunc(reqs, func(x, y Request) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return reqs, nil
}

// ask publishes data to subject with a fresh inbox as reply subject and
// returns the inbox's subscription, the caller's to unsubscribe. It waits
// for the server to take the message, so a publish the NATS user is not
// permitted is reported here as [ErrNotPermitted] rather than as a
// silence.
func ask(nc *nats.Conn, subject string, data []byte) (*nats.Subscription, error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("subscribing to an inbox: %w", err)
	}
	before := nc.LastError()
	if err := nc.PublishRequest(subject, inbox, data); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	if err := nc.LastError(); err != nil && err != before && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("%w: %w: this NATS user needs publish permission on %s", ErrNotPermitted, err, subject)
	}
	return sub, nil
}

// Answer sends an answer to req (approve, or deny) to the instance that
// asked, bound to req's id and digest, and returns its reply. A refused
// answer returns the reply and an error wrapping [ErrRefused] with the
// reason; an instance that no longer listens, [ErrInstanceGone]; a NATS
// user without publish permission on the answer subject,
// [ErrNotPermitted]. nc stays the caller's.
func Answer(ctx context.Context, nc *nats.Conn, req Request, approve bool, approver Approver, reason string) (Reply, error) {
	if err := a2a.CheckIdentity(req.Identity); err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: identity: %w", req.ID, err)
	}
	if err := a2a.CheckIdentity(req.Instance); err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: instance: %w", req.ID, err)
	}
	a := AnswerMessage{ID: req.ID, Digest: req.Digest, Decision: DecisionDeny, Approver: approver.Name, NATSUser: approver.NATSUser, Reason: reason}
	if approve {
		a.Decision = DecisionApprove
	}
	if approver.Signer != nil {
		if err := sign(approver.Signer, req.Identity, req.Instance, &a); err != nil {
			return Reply{}, fmt.Errorf("answering approval %s: signing: %w", req.ID, err)
		}
	}
	data, err := encode(KindAnswer, a)
	if err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: %w", req.ID, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultAnswerTimeout)
		defer cancel()
	}
	subject := AnswerSubject(req.Identity, req.Instance)
	sub, err := ask(nc, subject, data)
	if err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: %w", req.ID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	m, err := sub.NextMsgWithContext(ctx)
	if errors.Is(err, nats.ErrNoResponders) {
		return Reply{}, fmt.Errorf("%w: %s instance %s takes no answers any more; its requests were withdrawn when it stopped", ErrInstanceGone, req.Identity, req.Instance)
	}
	if err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: waiting for %s instance %s: %w", req.ID, req.Identity, req.Instance, err)
	}
	var reply Reply
	if err := decode(KindAnswerReply, m.Data, &reply); err != nil {
		return Reply{}, fmt.Errorf("answering approval %s: the reply: %w", req.ID, err)
	}
	if !reply.Accepted {
		return reply, fmt.Errorf("%w: %s: %s", ErrRefused, reply.Refusal, reply.Reason)
	}
	return reply, nil
}

// Watch calls fn with every approval event of identity (of the fleet when
// identity is empty) until ctx ends, starting with a requested event for
// each request already pending: an operator who starts watching sees what
// waits. Each request is announced once, even when the list and its own
// event both carry it. fn is called on Watch's goroutine, one event at a
// time; events that break their schema are skipped. Watch returns nil when
// ctx ends, and an error when it cannot subscribe or the connection closes.
// nc stays the caller's.
func Watch(ctx context.Context, nc *nats.Conn, identity string, fn func(Event)) error {
	if identity != "" {
		if err := a2a.CheckIdentity(identity); err != nil {
			return fmt.Errorf("watching approvals: identity: %w", err)
		}
	}
	subject := EventsSubject(identity)
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("watching approvals: subscribing to %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	before := nc.LastError()
	if err := nc.FlushTimeout(flushTimeout); err != nil {
		return fmt.Errorf("watching approvals: subscribing to %s: %w", subject, err)
	}
	if err := nc.LastError(); err != nil && err != before && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
		return fmt.Errorf("%w: %w: this NATS user needs subscribe permission on %s", ErrNotPermitted, err, subject)
	}
	// Subscribed first, listed second: a request made in between is in
	// the list or in the subscription, and announced once either way.
	pending, err := List(ctx, nc, identity, DefaultListWait)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching approvals: %w", err)
	}
	var w watcher
	for _, r := range pending {
		w.deliver(Event{Type: EventRequested, ID: r.ID, Identity: r.Identity, Instance: r.Instance, Time: r.Created, Request: &r}, fn)
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching approvals: %w", err)
		}
		var ev Event
		if decode(KindEvent, m.Data, &ev) != nil {
			continue
		}
		w.deliver(ev, fn)
	}
}

// watcher announces each request once: it remembers the requests it
// announced until they end, or, should their end go unseen, until well
// after they expired.
type watcher struct {
	announced map[string]time.Time // id -> expires
}

// forgetAfter is how long past its expiry a request is remembered when its
// end was not seen.
const forgetAfter = time.Minute

func (w *watcher) deliver(ev Event, fn func(Event)) {
	if w.announced == nil {
		w.announced = map[string]time.Time{}
	}
	if ev.Type != EventRequested {
		delete(w.announced, ev.ID)
		fn(ev)
		return
	}
	if _, dup := w.announced[ev.ID]; dup || ev.Request == nil {
		return
	}
	if len(w.announced) >= 1024 {
		now := time.Now()
		for id, exp := range w.announced {
			if now.Sub(exp) > forgetAfter {
				delete(w.announced, id)
			}
		}
	}
	w.announced[ev.ID] = ev.Request.Expires
	fn(ev)
}
