package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/procs"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Micro error codes for transport errors, HTTP-style as micro's own are.
const (
	codeBadRequest = "400"
	codeTooLarge   = "413"
)

// reject answers a message that cannot be decoded with a transport error.
func (s *Server) reject(r *natsbus.Request, endpoint string, err error) {
	code := codeBadRequest
	if errors.Is(err, a2a.ErrTooLarge) {
		code = codeTooLarge
	}
	s.log.Warn("rejected malformed request", "agent", s.cfg.Identity, "endpoint", endpoint, "error", err)
	s.cfg.Metrics.Rejected(rejectReason(err))
	if rerr := r.Reject(code, err.Error()); rerr != nil {
		s.log.Error("rejecting request", "agent", s.cfg.Identity, "endpoint", endpoint, "error", rerr)
	}
}

func (s *Server) handleDiscovery(r *natsbus.Request) {
	req := &a2a.DiscoveryRequest{}
	if err := a2a.Decode(r.Data(), req); err != nil {
		s.reject(r, "discovery", err)
		return
	}
	data, err := s.card.Reply(req, s.self)
	if err != nil {
		s.log.Error("encoding discovery reply", "agent", s.cfg.Identity, "error", err)
		return
	}
	if err := r.Reply(data); err != nil {
		s.log.Error("sending discovery reply", "agent", s.cfg.Identity, "error", err)
	}
}

// handleTool runs on the endpoint's subscription goroutine. It takes the
// concurrency slot here, before a worker starts, so a busy agent stops
// reading and the pressure reaches NATS instead of piling up in memory.
func (s *Server) handleTool(r *natsbus.Request) {
	arrived := s.arrival()
	ctx, span := s.startRequest(r, "tool")
	req := &a2a.ToolRequest{}
	if err := a2a.Decode(r.Data(), req); err != nil {
		s.reject(r, "tool", err)
		endRequest(span, "", nil, ops.OutcomeError)
		return
	}
	t, ok := s.byName[req.Name]
	tracing.Event(span, tracing.EventDecoded)
	if !ok {
		s.log.Info("tool call", "agent", s.cfg.Identity, "tool", req.Name, "caller", req.Sender.Name, "outcome", audit.EndA2AUnknownTool.String())
		s.cfg.Metrics.Rejected(ops.RejectUnknownTool)
		reply := &a2a.ToolReply{IsError: true, Output: s.unknownTool(req.Name)}
		// A refusal is recorded before it is answered (see refused).
		s.audit(audit.SurfaceA2A, req, nil, refused(req, audit.EndA2AUnknownTool, reply.Output), arrived, span)
		s.answer(r, req, reply, span)
		endRequest(span, "", nil, audit.EndA2AUnknownTool.Metric())
		return
	}
	if s.gated(t) {
		// Waits for an operator off this goroutine, holding no slot.
		if !s.admit() {
			s.refuseStopping(r, req, t, arrived, span)
			return
		}
		go s.serveGated(ctx, r, req, t, arrived, span)
		return
	}
	if !s.takeSlot(ctx) {
		s.refuseStopping(r, req, t, arrived, span)
		return
	}
	// Both cases of takeSlot may be ready at once, and micro keeps
	// delivering the requests already buffered after Stop: admit refuses
	// them once Stop has begun, so no call starts that Stop would not wait
	// for.
	if !s.admit() {
		<-s.sem
		s.refuseStopping(r, req, t, arrived, span)
		return
	}
	probe := r.CallerProbe()
	go func() {
		procs.GrowStack()
		defer s.inflight.Done()
		defer func() { <-s.sem }()
		ctx, cancel, untrack := s.track(ctx, req)
		defer untrack()
		if probe != "" {
			defer s.watchCaller(r, req, probe, cancel)()
		}
		reply, rec := s.call(ctx, t, req, nil)
		reply, rec = canceledUnary(ctx, t, reply, rec)
		s.answer(r, req, reply, span)
		// Recorded and logged once the reply is sent, so the caller never
		// waits on the trail or the log sink (a slow stderr reader, a
		// busy journal).
		s.audit(audit.SurfaceA2A, req, t, rec, arrived, span)
		endRequest(span, t.Name(), &rec, "")
		s.logCall(rec)
	}()
}

// canceledUnary turns the answer to a unary call its caller canceled
// (through the shared control subject), or left (see [Server.watchCaller]),
// and that was interrupted by it, into the reply and record that say so. A
// call that finished before the cancel took hold keeps its result.
func canceledUnary(ctx context.Context, t tool.Tool, reply *a2a.ToolReply, rec callRecord) (*a2a.ToolReply, callRecord) {
	cause := context.Cause(ctx)
	// call says a run its context interrupted ended interrupted.
	if rec.end != audit.EndA2AInterrupted || !errors.Is(cause, errCanceledByCaller) && !errors.Is(cause, errCallerGone) {
		return reply, rec
	}
	msg := canceledOutput("", t.Name(), cause)
	rec.end, rec.ran, rec.message = audit.EndA2ACanceled, false, msg
	if errors.Is(cause, errCallerGone) {
		rec.end = audit.EndCallerGone
	}
	return &a2a.ToolReply{IsError: true, Output: msg}, rec
}

// refuseStopping answers a call that arrives once Stop has begun.
func (s *Server) refuseStopping(r *natsbus.Request, req *a2a.ToolRequest, t tool.Tool, arrived time.Time, span trace.Span) {
	reply := s.stoppingReply()
	s.audit(audit.SurfaceA2A, req, t, refused(req, audit.EndA2ARefusedStopping, reply.Output), arrived, span)
	s.answer(r, req, reply, span)
	endRequest(span, t.Name(), nil, audit.EndA2ARefusedStopping.Metric())
}

// unknownTool is what a call naming no served tool is told.
func (s *Server) unknownTool(name string) string {
	return fmt.Sprintf("unknown tool %q: %s serves %d tools; discover them first", name, s.cfg.Identity, len(s.served))
}

// stoppingReply answers a call that arrives once Stop has begun.
func (s *Server) stoppingReply() *a2a.ToolReply {
	return &a2a.ToolReply{IsError: true, Output: fmt.Sprintf("agent %s is stopping; call again", s.cfg.Identity)}
}

// callRecord is what the one log line and the audit record of a tool
// call say.
type callRecord struct {
	tool, caller string
	// end is how the call ended: the log line's outcome, the metric's
	// label and the audit record's result and class.
	end      audit.Ending
	duration time.Duration
	// stream is set for a streamed call.
	stream bool
	// ran is set for a command that ran to its end, which has an exit
	// code.
	ran      bool
	exitCode int
	// command is the command line that ran, when one did.
	command string
	// message is the error text the caller got, for the audit record.
	message string
	// gate and approver are the approval gate's decision (an
	// audit.Decision constant; empty means not gated) and who approved.
	gate, approver string
}

// call runs one tool call under the per-call timeout, within parent, and
// returns the reply and what to log about it. live, when set, receives the
// command's output as it runs.
func (s *Server) call(parent context.Context, t tool.Tool, req *a2a.ToolRequest, live io.Writer) (_ *a2a.ToolReply, rec callRecord) {
	ctx, cancel := context.WithTimeout(parent, s.cfg.Timeout)
	defer cancel()
	ctx, span := tracing.Start(ctx, s.cfg.Tracer, "command run", trace.SpanKindInternal)
	start := time.Now()
	out, err := t.Call(ctx, tool.Request{Input: req.Input, Output: live})
	duration := time.Since(start)
	defer func() { endRequest(span, t.Name(), &rec, "") }()
	reply := &a2a.ToolReply{}
	if out.Result != nil {
		reply.Exec = &a2a.Exec{Command: out.Result.Command, ExitCode: out.Result.ExitCode, Truncated: out.Result.Truncated}
		reply.Output = out.Result.Output
	}
	end := audit.EndOK
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		end = audit.EndTimeout
		reply.IsError = true
		reply.Output = fmt.Sprintf("tool %s timed out after %s", t.Name(), s.cfg.Timeout)
	case err != nil && errors.Is(err, context.Canceled):
		// The server's lifetime ended (Stop ran out of time); a stream's
		// caller canceling is told apart by runStream.
		end = audit.EndA2AInterrupted
		reply.IsError = true
		reply.Output = fmt.Sprintf("tool %s failed: %v", t.Name(), err)
	case err != nil:
		end = audit.EndA2ARunError
		if errors.Is(err, fiskapp.ErrStart) {
			end = audit.EndA2AStartError
		}
		reply.IsError = true
		reply.Output = fmt.Sprintf("tool %s failed: %v", t.Name(), err)
	case out.IsError:
		end = audit.EndToolError
		reply.IsError = true
		reply.Output = out.Message
	case out.Result == nil:
		reply.Output = string(out.JSON)
	case out.Result.ExitCode != 0:
		end = audit.EndA2AExit
	}
	rec = callRecord{tool: t.Name(), caller: req.Sender.Name, end: end, duration: duration}
	if reply.IsError {
		rec.message = reply.Output
	}
	if reply.Exec != nil {
		rec.ran, rec.exitCode, rec.command = true, reply.Exec.ExitCode, reply.Exec.Command
	}
	return reply, rec
}

// logCall writes the one log line of a tool call.
func (s *Server) logCall(rec callRecord) {
	s.cfg.Metrics.Call(rec.tool, ops.SurfaceA2A, rec.end.Metric(), rec.duration)
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("agent", s.cfg.Identity),
		slog.String("tool", rec.tool),
		slog.String("caller", rec.caller),
		slog.Duration("duration", rec.duration.Round(time.Microsecond)),
		slog.String("outcome", rec.end.String()))
	if rec.stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if rec.ran {
		attrs = append(attrs, slog.Int("exit_code", rec.exitCode), slog.String("command", rec.command))
	}
	s.log.LogAttrs(s.lifetime, slog.LevelInfo, "tool call", attrs...)
}

// answer stamps, encodes and sends reply exactly once. Output that makes the
// reply exceed the message cap is cut and marked truncated rather than lost
// with the whole reply.
func (s *Server) answer(r *natsbus.Request, req *a2a.ToolRequest, reply *a2a.ToolReply, span trace.Span) {
	a2a.StampReply(reply, req, s.self)
	data, err := s.encodeReply(reply, req)
	if err != nil {
		return
	}
	tracing.Event(span, tracing.EventEncoded)
	if err := r.Reply(data); err != nil {
		s.log.Error("sending tool reply", "agent", s.cfg.Identity, "tool", req.Name, "error", err)
	}
	tracing.Event(span, tracing.EventSent)
}

// encodeReply encodes a stamped reply. Output that makes it exceed the
// message cap is cut and marked truncated rather than lost with the whole
// reply; a reply that cannot be encoded at all becomes an in-band error.
func (s *Server) encodeReply(reply *a2a.ToolReply, req *a2a.ToolRequest) ([]byte, error) {
	data, err := a2a.Encode(reply)
	for errors.Is(err, a2a.ErrTooLarge) && len(reply.Output) > 0 {
		reply.Output = cutUTF8(reply.Output, len(reply.Output)/2)
		if reply.Exec != nil {
			reply.Exec.Truncated = true
		}
		data, err = a2a.Encode(reply)
	}
	if err != nil {
		s.log.Error("encoding tool reply", "agent", s.cfg.Identity, "tool", req.Name, "error", err)
		data, err = a2a.Encode(&a2a.ToolReply{Header: reply.Header, IsError: true, Output: "reply could not be encoded: " + err.Error()})
	}
	return data, err
}

// cutUTF8 returns at most n bytes of s without splitting a rune.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
