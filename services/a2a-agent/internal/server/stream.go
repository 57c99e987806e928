package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/procs"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Output coalescing: a streamed call's output goes out in events of at
// most flushBytes, at least every flushEvery while output flows, so a
// chatty command costs a few messages a second, not one per write.
const (
	flushBytes = 16 << 10
	flushEvery = 100 * time.Millisecond
)

// errCanceledByCaller and errCallerGone say why a call, streamed or
// unary, was stopped before its command ended.
var (
	errCanceledByCaller = errors.New("canceled by the caller")
	errCallerGone       = errors.New("the caller is gone")
)

// running is a call in progress (streamed or unary), as a cancel finds it.
type running struct {
	caller string
	cancel context.CancelCauseFunc
}

// calls are the calls in progress that a cancel can stop, by request id;
// guarded by mu.
type calls struct {
	mu   sync.Mutex
	byID map[string]*running
}

// add registers r under id. A second call with an id already running is
// not registered: a cancel then stops the first, the one whose caller
// chose the id.
func (st *calls) add(id string, r *running) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = map[string]*running{}
	}
	if _, taken := st.byID[id]; !taken {
		st.byID[id] = r
	}
}

// remove forgets r, if it is what id names.
func (st *calls) remove(id string, r *running) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID[id] == r {
		delete(st.byID, id)
	}
}

func (st *calls) get(id string) *running {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

// track registers a call of req as cancelable and returns its context,
// within parent, the context's cancel, and the function that ends the
// registration (and the context) once the call is answered.
func (s *Server) track(parent context.Context, req *a2a.ToolRequest) (context.Context, context.CancelCauseFunc, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	r := &running{caller: req.Sender.Name, cancel: cancel}
	s.calls.add(req.ID, r)
	return ctx, cancel, func() {
		s.calls.remove(req.ID, r)
		cancel(nil)
	}
}

// handleStream runs on the stream endpoint's subscription goroutine, like
// handleTool: the same decoding, the same tool set and the same slot,
// taken here before any work. A call that cannot start gets
// ack{accepted: false} as its whole answer.
func (s *Server) handleStream(r *natsbus.Request) {
	arrived := s.arrival()
	ctx, span := s.startRequest(r, "stream")
	req := &a2a.ToolRequest{}
	if err := a2a.Decode(r.Data(), req); err != nil {
		s.reject(r, "stream", err)
		endRequest(span, "", nil, ops.OutcomeError)
		return
	}
	// The caller has just sent the request: it is alive, so the first
	// probe is due a heartbeat from now, not on the ack.
	out := &streamOut{s: s, r: r, req: req, span: span, lastProbe: time.Now()}
	t, ok := s.byName[req.Name]
	tracing.Event(span, tracing.EventDecoded)
	if !ok {
		s.log.Info("tool call", "agent", s.cfg.Identity, "tool", req.Name, "caller", req.Sender.Name, "stream", true, "outcome", audit.EndA2AUnknownTool.String())
		s.cfg.Metrics.Rejected(ops.RejectUnknownTool)
		reason := s.unknownTool(req.Name)
		s.audit(audit.SurfaceA2AStream, req, nil, refused(req, audit.EndA2AUnknownTool, reason), arrived, span)
		out.ack(false, reason)
		endRequest(span, "", nil, audit.EndA2AUnknownTool.Metric())
		return
	}
	gated := s.gated(t)
	if gated {
		// Waits for an operator on the worker, holding no slot; the
		// worker takes one once approved (runStream).
		if !s.admit() {
			s.refuseStream(out, req, t, arrived, span)
			return
		}
	} else {
		if !s.takeSlot(ctx) {
			s.refuseStream(out, req, t, arrived, span)
			return
		}
		if !s.admit() {
			<-s.sem
			s.refuseStream(out, req, t, arrived, span)
			return
		}
	}
	go func() {
		procs.GrowStack()
		defer s.inflight.Done()
		if !gated {
			defer func() { <-s.sem }()
		}
		rec := s.runStream(ctx, out, t, req, gated)
		s.audit(audit.SurfaceA2AStream, req, t, rec, arrived, span)
		endRequest(span, t.Name(), &rec, "")
		s.logCall(rec)
	}()
}

// refuseStream answers a stream that arrives once Stop has begun.
func (s *Server) refuseStream(out *streamOut, req *a2a.ToolRequest, t tool.Tool, arrived time.Time, span trace.Span) {
	reason := s.stoppingReply().Output
	s.audit(audit.SurfaceA2AStream, req, t, refused(req, audit.EndA2ARefusedStopping, reason), arrived, span)
	out.ack(false, reason)
	endRequest(span, t.Name(), nil, audit.EndA2ARefusedStopping.Metric())
}

// runStream runs one streamed call within parent (the server's lifetime,
// carrying the request's span): ack, output events and heartbeats while
// the command runs, then the final reply, the same as the tool endpoint's
// for the same run.
//
// A gated call (gated set) holds no slot yet: it is acked at once, says
// "awaiting operator approval (id …)" in a status event, keeps the caller
// informed with heartbeats while it waits, and takes a slot only once an
// operator approved it. A cancel or the caller going away withdraws the
// request.
func (s *Server) runStream(parent context.Context, out *streamOut, t tool.Tool, req *a2a.ToolRequest, gated bool) callRecord {
	ctx, cancel, untrack := s.track(parent, req)
	defer untrack()
	out.ack(true, "")
	live := &liveOutput{out: out, cancel: cancel}
	var gate, approver string
	if gated {
		live.setPhase(phaseAwaiting)
		stopWait := live.start()
		run, refusal, arec := s.approve(ctx, t, req, func(r approval.Request) {
			phase := phaseAwaiting + " (id " + r.ID + ")"
			live.setPhase(phase)
			if err := out.send(&a2a.Event{Block: a2a.Block{Content: &a2a.StatusBlock{Phase: phase}}}); err != nil {
				cancel(err)
			}
		})
		if run && !s.waitSlot(ctx) {
			run, refusal = false, s.stoppingReply().Output
			arec.end, arec.message = audit.EndA2AStopping, refusal
		}
		stopWait()
		if !run {
			arec.stream = true
			out.final(&a2a.ToolReply{IsError: true, Output: refusal})
			return arec
		}
		defer func() { <-s.sem }()
		gate, approver = arec.gate, arec.approver
		live.setPhase(phaseRunning)
	}
	stop := live.start()
	reply, rec := s.call(ctx, t, req, live)
	stop()
	rec.gate, rec.approver = gate, approver
	if cause := context.Cause(ctx); errors.Is(cause, errCanceledByCaller) || errors.Is(cause, errCallerGone) {
		reply = &a2a.ToolReply{IsError: true, Output: canceledOutput(live.sent(), t.Name(), cause)}
		rec.end, rec.ran = audit.EndA2ACanceled, false
		if errors.Is(cause, errCallerGone) {
			rec.end = audit.EndCallerGone
		}
		// The record says why, not the output so far.
		rec.message = canceledOutput("", t.Name(), cause)
	}
	rec.stream = true
	out.final(reply)
	return rec
}

// canceledOutput is what a canceled stream's final reply says: the output
// so far, then that it was canceled and why.
func canceledOutput(so string, name string, cause error) string {
	if so != "" && so[len(so)-1] != '\n' {
		so += "\n"
	}
	return fmt.Sprintf("%stool %s was canceled: %v; its process group was killed", so, name, cause)
}

// handleControl takes a cancel on this instance's control subject: the
// cancel of a stream this instance acked. A cancel for no call in
// progress, or from another caller than the call's, is ignored with a
// logged reason.
func (s *Server) handleControl(data []byte) { s.takeCancel(data, false) }

// handleCallControl takes a cancel on the identity's shared control
// subject, which every instance hears: the cancel of a unary call, run by
// this instance or another. A cancel for a call this instance does not run
// is the common case and logged at debug only.
func (s *Server) handleCallControl(data []byte) { s.takeCancel(data, true) }

// takeCancel stops the call a cancel names. What protects a call from a
// stranger's cancel is its request id, which its caller drew at random
// ([a2a.Client.CallToolCancelable]) and nobody else sees but the agent's
// identity: a cancel must name it, and the sender's name must be the
// call's (a label, checked to catch mistakes rather than as proof). A
// cancel is a schema-valid v1 cancel or nothing.
func (s *Server) takeCancel(data []byte, shared bool) {
	c := &a2a.Cancel{}
	if err := a2a.Decode(data, c); err != nil {
		s.log.Warn("ignored a malformed control message", "agent", s.cfg.Identity, "shared", shared, "error", err)
		return
	}
	r := s.calls.get(c.Request)
	switch {
	case r == nil && shared:
		s.log.Debug("ignored a cancel for no call this instance runs", "agent", s.cfg.Identity, "request", c.Request, "caller", c.Sender.Name)
	case r == nil:
		s.log.Info("ignored a cancel for no call in progress", "agent", s.cfg.Identity, "request", c.Request, "caller", c.Sender.Name)
	case r.caller != c.Sender.Name:
		s.log.Warn("ignored a cancel from another caller than the call's", "agent", s.cfg.Identity, "request", c.Request, "caller", c.Sender.Name, "call_caller", r.caller)
	default:
		s.log.Info("call canceled by its caller", "agent", s.cfg.Identity, "request", c.Request, "caller", c.Sender.Name, "reason", c.Reason)
		r.cancel(errCanceledByCaller)
	}
}

// streamOut sends the messages of one stream, numbered from 1, and probes
// the caller's liveness at most once per heartbeat interval.
type streamOut struct {
	s   *Server
	r   *natsbus.Request
	req *a2a.ToolRequest
	// span is the request's, for the final reply's stage events.
	span trace.Span

	mu sync.Mutex
	// seq, lastSent, lastProbe and misses are guarded by mu.
	seq       uint64
	lastSent  time.Time
	lastProbe time.Time
	misses    int
}

func (o *streamOut) ack(accepted bool, reason string) {
	_ = o.send(&a2a.Ack{Accepted: accepted, Reason: reason})
}

// final sends the final reply, cutting output that would not fit, as the
// tool endpoint does.
func (o *streamOut) final(reply *a2a.ToolReply) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	a2a.StampReply(reply, o.req, o.s.self)
	reply.Sequence = o.seq
	data, err := o.s.encodeReply(reply, o.req)
	if err != nil {
		return
	}
	tracing.Event(o.span, tracing.EventEncoded)
	if err := o.r.SendLast(data); err != nil {
		o.s.log.Error("sending stream reply", "agent", o.s.cfg.Identity, "tool", o.req.Name, "error", err)
	}
	tracing.Event(o.span, tracing.EventSent)
}

// send stamps, numbers and sends m; it reports the caller gone when a
// probe finds no one on its inbox.
func (o *streamOut) send(m a2a.Message) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	a2a.StampReply(m, o.req, o.s.self)
	setSequence(m, o.seq)
	data, err := a2a.Encode(m)
	if err != nil {
		o.s.log.Error("encoding stream message", "agent", o.s.cfg.Identity, "tool", o.req.Name, "error", err)
		return nil
	}
	now := time.Now()
	o.lastSent = now
	if now.Sub(o.lastProbe) < a2a.HeartbeatInterval {
		return o.r.Send(data)
	}
	o.lastProbe = now
	err = o.r.Probe(data, a2a.HeartbeatInterval)
	switch {
	case errors.Is(err, natsbus.ErrCallerGone):
		return errCallerGone
	case err != nil:
		// No answer in time: a slow or stuck caller. Three in a row is
		// three heartbeats of silence.
		o.misses++
		if o.misses >= 3 {
			return errCallerGone
		}
		return nil
	}
	o.misses = 0
	return nil
}

func (o *streamOut) idleFor(now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return now.Sub(o.lastSent)
}

// setSequence numbers a stamped message.
func setSequence(m a2a.Message, seq uint64) {
	switch m := m.(type) {
	case *a2a.Ack:
		m.Sequence = seq
	case *a2a.Event:
		m.Sequence = seq
	}
}

// liveOutput receives a running command's output and sends it as text
// events, coalesced, never splitting a UTF-8 character, with a heartbeat
// when nothing else was sent for an interval. It holds at most flushBytes
// unsent, and a stream's output never exceeds the output cap, so a slow
// caller cannot make the agent hold more.
type liveOutput struct {
	out    *streamOut
	cancel context.CancelCauseFunc
	// phase is what heartbeats say: phaseRunning, or that the call waits
	// for an operator; empty means phaseRunning.
	phase atomic.Pointer[string]

	mu sync.Mutex
	// pending, all and lastFlush are guarded by mu; all is what was handed
	// on, for a canceled call's reply.
	pending   []byte
	all       []byte
	lastFlush time.Time
}

// Write is called by the command runner with each piece of output. A
// piece that ends a quiet spell (the first one included) goes out at once,
// so a watcher sees the first line as soon as the command prints it; the
// pieces of a burst wait for the ticker or a full event.
func (l *liveOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.pending = append(l.pending, p...)
	l.all = append(l.all, p...)
	now := len(l.pending) >= flushBytes || time.Since(l.lastFlush) >= flushEvery
	l.mu.Unlock()
	if now {
		l.flush(false)
	}
	return len(p), nil
}

// flush sends what is pending, up to its last whole character (all of it
// at the end).
func (l *liveOutput) flush(end bool) {
	l.mu.Lock()
	n := len(l.pending)
	if !end {
		n = wholeRunes(l.pending)
	}
	chunk := string(l.pending[:n])
	l.pending = append(l.pending[:0], l.pending[n:]...)
	l.lastFlush = time.Now()
	l.mu.Unlock()
	if chunk == "" {
		return
	}
	if err := l.out.send(&a2a.Event{Block: a2a.Block{Content: &a2a.TextBlock{Text: chunk}}}); err != nil {
		l.cancel(err)
	}
}

// sent returns the output handed on so far.
func (l *liveOutput) sent() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.all)
}

// start runs the flusher and heartbeat until the returned stop is called,
// which flushes what is left.
func (l *liveOutput) start() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				l.flush(false)
				if l.out.idleFor(now) >= a2a.HeartbeatInterval {
					if err := l.out.send(&a2a.Event{Block: a2a.Block{Content: &a2a.StatusBlock{Phase: l.currentPhase()}}}); err != nil {
						l.cancel(err)
					}
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		l.flush(true)
	}
}

// Heartbeat phases of a stream.
const (
	phaseRunning  = "running"
	phaseAwaiting = "awaiting operator approval"
)

func (l *liveOutput) setPhase(p string) { l.phase.Store(&p) }

func (l *liveOutput) currentPhase() string {
	if p := l.phase.Load(); p != nil {
		return *p
	}
	return phaseRunning
}

// wholeRunes returns the length of b up to its last complete UTF-8
// character: a character cut by a read waits for its other bytes.
func wholeRunes(b []byte) int {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return len(b) - i
			}
			break
		}
	}
	return len(b)
}
