package natsbus

import (
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// A unary tool call has one request and one reply, and nothing in between
// tells the agent whether its caller is still there: a caller that dies
// (a gateway killed, its host gone) leaves the command running to the
// agent's tool_timeout, holding a slot. A stream's caller is probed on its
// inbox at every heartbeat; a unary caller's inbox cannot be, since
// anything sent there would be taken for the reply.
//
// So a caller that can be probed says where: its unary tool requests
// carry [CallerProbeHeader], naming a subject of its stream inbox
// (prefix.@caller) that answers every request for as long as its
// connection lives. An agent that runs such a call for longer than a
// heartbeat interval sends a request there once per interval; no
// responders means the caller's connection is gone, and the agent cancels
// the call. Anything else (an answer, a timeout, an error) leaves the call
// running: a probe that cannot be delivered, say for permissions, must
// never stop a call whose caller is alive. The subject is one of the
// caller's account: a caller in another account, calling through a
// service import, names one no probe from the agent's account reaches, so
// an agent trusts no responders only on a subject it has seen answer
// (the a2a-agent's watchCaller learns that at the first call naming it).
//
// The header is a NATS header, not a field of the A2A request, whose
// schemas stay v1: an agent that does not know it ignores it, and a caller
// that does not send it is never probed. A transport names its subject
// only once the server has taken its subscription (see
// [Transport.checkProbe]), so a subscription the server refused is never
// named.

// CallerProbeHeader names, on a unary tool request, the subject the
// caller answers probes on while it waits for the reply.
const CallerProbeHeader = "Fiskfleet-Caller-Probe"

// callerToken is the last token of a transport's caller-probe subject, in
// its stream inbox: '@' is no stream's (they are base 36).
const callerToken = "@caller"

// maxProbeSubject bounds the subject an agent will send probes to.
const maxProbeSubject = 256

// callerProbe returns the subject to name in [CallerProbeHeader], or ""
// while there is none: until the stream inbox has been subscribed and the
// server has taken it ([Transport.prepareProbe]).
func (t *Transport) callerProbe() string {
	t.muxMu.Lock()
	mux := t.mux
	t.muxMu.Unlock()
	if mux == nil || !mux.answers.Load() || !mux.sub.IsValid() {
		return ""
	}
	return mux.prefix + callerToken
}

// prepareProbe readies the subject later unary calls name, once a call
// has had its reply, off the call's path: it subscribes the stream inbox
// if need be, after nats.go's own reply inbox, so that a connection at its
// subscription limit loses the probe, never its replies, then checks it
// ([Transport.checkProbe]).
func (t *Transport) prepareProbe() {
	if t.callerProbe() != "" || !t.probing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer t.probing.Store(false)
		if mux, err := t.streamMux(); err == nil {
			t.checkProbe(mux)
		}
	}()
}

// checkProbe marks mux as answering caller probes once the server has
// taken its subscription: a flush after it saw no refusal of it, neither
// for permissions nor for the subscription limit. It publishes nothing
// itself, so a caller whose permissions allow it no publish to its own
// inbox logs no refusal for the check. A subscription of the same shape as
// nats.go's reply inbox (prefix.*) is what carries every reply its calls
// get, so permissions cannot take one and refuse the other. An inbox not
// marked is checked again after the next call.
func (t *Transport) checkProbe(mux *inboxMux) {
	if err := t.nc.FlushTimeout(t.timeout); err != nil {
		return
	}
	if err := t.nc.LastError(); errors.Is(err, nats.ErrMaxSubscriptionsExceeded) ||
		err != nil && strings.Contains(err.Error(), mux.prefix) {
		return
	}
	mux.answers.Store(true)
}

// CallerProbe returns the subject the request's caller named in
// [CallerProbeHeader], or "" when it named none, or named something no
// probe may be sent to: not one literal subject (a wildcard, an empty
// token, white space), longer than 256 bytes, or not ending in the
// caller-probe token. The token keeps a caller from having an agent send
// its probes to any subject it likes.
func (r *Request) CallerProbe() string {
	h := r.Header()
	if h == nil {
		return ""
	}
	subject := h.Get(CallerProbeHeader)
	if !literalSubject(subject) || !strings.HasSuffix(subject, "."+callerToken) {
		return ""
	}
	return subject
}

// literalSubject reports whether s is a subject a message can be published
// to, of at most [maxProbeSubject] bytes.
func literalSubject(s string) bool {
	if s == "" || len(s) > maxProbeSubject || strings.ContainsAny(s, " \t\r\n*>") {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
	}
	return true
}

// ProbeCaller sends one caller probe to subject, waiting at most timeout
// for the answer: [ErrCallerGone] when no one subscribes to it, nil when
// the caller answers, and the error otherwise, which says nothing either
// way.
func (r *Request) ProbeCaller(subject string, timeout time.Duration) error {
	return r.probe(subject, nil, timeout)
}
