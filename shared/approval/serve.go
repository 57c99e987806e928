package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// maxReason bounds the reason an event or reply carries, as the schema
// does.
const maxReason = 1024

// ended is how a request that left the pending table ended, and the answer
// that ended it, if one did.
type ended struct {
	outcome Outcome
	answer  AnswerMessage
}

// history remembers how the latest requests ended, up to a fixed number:
// enough to tell a replayed or late answer from one for a request never
// seen. Not safe for concurrent use: the broker's mu guards it.
type history struct {
	byID map[string]ended
	// ring holds the ids in the order they ended; next is where the next
	// one goes, evicting the oldest once the ring is full.
	ring []string
	next int
}

func newHistory(size int) *history {
	return &history{byID: make(map[string]ended, size), ring: make([]string, size)}
}

func (h *history) add(id string, e ended) {
	if old := h.ring[h.next]; old != "" {
		delete(h.byID, old)
	}
	h.ring[h.next] = id
	h.next = (h.next + 1) % len(h.ring)
	h.byID[id] = e
}

func (h *history) get(id string) (ended, bool) {
	e, ok := h.byID[id]
	return e, ok
}

// handleAnswer takes one answer and replies whether it was accepted.
func (b *Broker) handleAnswer(m *nats.Msg) {
	reply, a := b.answer(m.Data)
	if m.Reply == "" {
		return
	}
	data, err := encode(KindAnswerReply, reply)
	if err != nil {
		b.log.Error("encoding approval answer reply", "approval", a.ID, "error", err)
		return
	}
	if err := m.Respond(data); err != nil {
		b.log.Warn("replying to approval answer", "approval", a.ID, "subject", m.Reply, "error", err)
	}
}

// answer decodes one answer and takes it, returning the reply and what
// could be read of the answer. A refused answer is logged with its refusal
// code and leaves the request as it was.
func (b *Broker) answer(data []byte) (Reply, AnswerMessage) {
	var (
		a     AnswerMessage
		reply Reply
	)
	if err := decode(KindAnswer, data, &a); err != nil {
		// Pick out what can be read, for the log and the reply only.
		_ = json.Unmarshal(data, &a)
		a = AnswerMessage{ID: cut(a.ID, 64), Approver: cut(a.Approver, 256)}
		reply = refuse(RefusedInvalid, "malformed answer: %s", oneLine(err))
	} else {
		reply = b.take(a)
	}
	if a2a.ValidIdentity(a.ID) {
		// The id pattern is the identity pattern; a malformed answer's id
		// is echoed only when it meets it.
		reply.ID = a.ID
	}
	if !reply.Accepted {
		b.log.Warn("approval answer refused", "approval", a.ID, "approver", a.Approver, "nats_user", a.NATSUser,
			"decision", a.Decision, "refusal", string(reply.Refusal), "reason", reply.Reason)
	}
	return reply, a
}

func refuse(code Refusal, format string, args ...any) Reply {
	return Reply{Refusal: code, Reason: cut(fmt.Sprintf(format, args...), maxReason)}
}

// take decides a pending request by a, when a is for it: bound to its
// digest, before its expiry, and not from its caller unless self-approval
// is on. Otherwise it says why not, leaving the request waiting.
func (b *Broker) take(a AnswerMessage) Reply {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return refuse(RefusedClosed, "%s instance %s is stopping: its requests were withdrawn", b.identity, b.instance)
	}
	w, ok := b.pending[a.ID]
	if !ok {
		return b.refuseEnded(a)
	}
	who := a
	if len(b.signers) > 0 {
		name, vouched, err := verify(b.signers, b.identity, b.instance, a)
		switch {
		case errors.Is(err, errUnsigned):
			return refuse(RefusedUnsigned, "the answer to request %s is not signed, and this instance takes only answers signed with a key of approvals.approvers[].nkey: answer with a2a-agent approvals --nkey SEED_FILE", a.ID)
		case errors.Is(err, errUnknownSigner):
			return refuse(RefusedUnknownSigner, "the answer to request %s is signed with %s, which approvals.approvers does not list", a.ID, a.Key)
		case err != nil:
			return refuse(RefusedBadSignature, "the signature of the answer to request %s does not verify (forged, altered, or made for another request): %v", a.ID, err)
		}
		// Who answered is who signed; the claimed name goes, but for a
		// delegate's, which vouches for it.
		a.Approver, who.Approver = name, vouched
	}
	switch {
	case !now.Before(w.deadline):
		return refuse(RefusedLate, "request %s expired at %s", a.ID, w.req.Expires.Format(time.RFC3339))
	case a.Digest != w.req.Digest:
		return refuse(RefusedForged, "the arguments digest %s is not that of request %s: the answer is for other arguments", a.Digest, a.ID)
	case !b.selfApproval && isSelf(w.req.Caller, who):
		return refuse(RefusedSelfApproval, "%s is the caller of request %s and self_approval is off: another operator must answer", approverName(a), a.ID)
	}
	delete(b.pending, a.ID)
	d := Decision{Request: w.req, Outcome: OutcomeDenied, Approver: a.Approver, NATSUser: a.NATSUser, Reason: a.Reason}
	if a.Decision == DecisionApprove {
		d.Outcome = OutcomeApproved
	}
	b.finished.add(a.ID, ended{outcome: d.Outcome, answer: a})
	w.result <- result{d: d}
	return Reply{Accepted: true}
}

// refuseEnded says why an answer for a request no longer pending is
// refused. Called with mu held.
func (b *Broker) refuseEnded(a AnswerMessage) Reply {
	e, ok := b.finished.get(a.ID)
	switch {
	case !ok:
		return refuse(RefusedUnknown, "no request %s waits on %s instance %s", a.ID, b.identity, b.instance)
	case e.outcome == OutcomeExpired:
		return refuse(RefusedLate, "request %s expired: nobody answered it in time", a.ID)
	case e.outcome == OutcomeWithdrawn:
		return refuse(RefusedLate, "request %s was withdrawn: its caller went away", a.ID)
	case e.answer == a:
		return refuse(RefusedReplayed, "request %s was already %s by %s: an answer is used once", a.ID, e.outcome, e.answer.Approver)
	default:
		return refuse(RefusedDuplicate, "request %s was already %s by %s", a.ID, e.outcome, e.answer.Approver)
	}
}

// isSelf reports whether any name the approver goes by (the approver, its
// NATS user) is one the caller goes by (verified subject, claimed name,
// NATS user). Names compare without regard to case: for the four-eyes rule
// a false match only asks for another operator, a missed one lets the
// caller approve itself.
func isSelf(c Caller, a AnswerMessage) bool {
	for _, n := range c.names() {
		for _, m := range []string{a.Approver, a.NATSUser} {
			if m != "" && strings.EqualFold(n, m) {
				return true
			}
		}
	}
	return false
}

func approverName(a AnswerMessage) string {
	if a.NATSUser != "" {
		return fmt.Sprintf("%s (NATS user %s)", a.Approver, a.NATSUser)
	}
	return a.Approver
}

// handleList replies with the pending requests, in as many replies as it
// takes to keep each under the connection's payload limit; an instance
// with none replies with an empty list, so a lister can count instances.
func (b *Broker) handleList(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	for _, data := range b.listReplies() {
		if err := m.Respond(data); err != nil {
			b.log.Warn("replying to approval list", "subject", m.Reply, "error", err)
			return
		}
	}
}

// listReplies encodes the pending requests as list replies, each within
// the payload limit.
func (b *Broker) listReplies() [][]byte {
	limit := MaxMessageSize
	if p := int(b.nc.MaxPayload()); p > 0 && p < limit {
		limit = p
	}
	// Room for the reply's own fields around the list.
	limit -= 512
	var (
		out   [][]byte
		chunk []Request
		size  int
	)
	flush := func() {
		data, err := encode(KindListReply, ListReply{Identity: b.identity, Instance: b.instance, Pending: chunk})
		if err != nil {
			b.log.Error("encoding approval list reply", "error", err)
		} else {
			out = append(out, data)
		}
		chunk, size = nil, 0
	}
	for _, req := range b.Pending() {
		data, err := json.Marshal(req)
		if err != nil {
			b.log.Error("encoding pending approval", "approval", req.ID, "error", err)
			continue
		}
		if len(chunk) > 0 && size+len(data)+1 > limit {
			flush()
		}
		chunk = append(chunk, req)
		size += len(data) + 1
	}
	if len(chunk) > 0 || len(out) == 0 {
		if chunk == nil {
			chunk = []Request{}
		}
		flush()
	}
	return out
}

// cut returns s cut to at most n bytes, never inside a UTF-8 character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
