package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// approvalNote ends the card description of a gated tool, so a calling
// agent (or its model) knows the call waits for a human, and a gateway
// keeps its calls streamed.
const approvalNote = a2a.ApprovalNote

// gated reports whether a call of t waits for an operator's approval:
// only tools that say they are gated, and only when operator approvals are
// on (otherwise [Select] does not serve them at all).
func (s *Server) gated(t tool.Tool) bool {
	return s.cfg.Approvals != nil && t.Confirmation() == tool.ConfirmRequired
}

// approve puts a gated call to the operators and waits, holding no slot,
// outside the run timeout. It returns true to run the call, with the
// approver in rec; otherwise the in-band reply's text and rec describe the
// refusal. announced, when set, hears of the request once it is published.
// ctx ending (a stream's cancel, the caller gone, the agent stopping)
// withdraws the request everywhere.
func (s *Server) approve(ctx context.Context, t tool.Tool, req *a2a.ToolRequest, announced func(approval.Request)) (run bool, refusal string, rec callRecord) {
	rec = callRecord{tool: t.Name(), caller: req.Sender.Name}
	line := t.Name()
	if cl, ok := t.(tool.CommandLiner); ok {
		l, err := cl.CommandLine(req.Input)
		if err != nil {
			// Nothing to approve: the arguments could not run.
			msg := fmt.Sprintf("tool %s failed: %v", t.Name(), err)
			rec.end, rec.message = audit.EndA2AInvalid, msg
			if !errors.Is(err, fiskapp.ErrInvalidInput) {
				rec.end = audit.EndA2ARunError
			}
			return false, msg, rec
		}
		line = l
	}
	// Stopping withdraws the request at once, rather than leaving it to
	// be approved during the drain with no slot to run in.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	dec, err := s.cfg.Approvals.Request(ctx, approval.Pending{
		Tool:      t.Name(),
		Command:   line,
		Digest:    audit.Digest(req.Input),
		Caller:    approval.Caller{Name: req.Sender.Name, Instance: req.Sender.Instance, Claimed: true},
		Announced: announced,
	})
	v := dec.Verdict(err)
	rec.gate, rec.approver = v.Gate, dec.Approver
	if v.Approved {
		s.log.Info("operator approved a gated call", "agent", s.cfg.Identity, "tool", t.Name(), "id", dec.Request.ID, "approver", dec.Approver, "caller", req.Sender.Name)
		return true, "", rec
	}
	refusal = t.Name() + " was not run: " + v.Refusal
	rec.end, rec.message = audit.EndA2ADenied, refusal
	s.log.Info("gated call not approved", "agent", s.cfg.Identity, "tool", t.Name(), "id", dec.Request.ID, "outcome", string(dec.Outcome), "approver", dec.Approver, "caller", req.Sender.Name)
	return false, refusal, rec
}

// waitSlot takes a slot for a call that was approved off the
// subscription goroutine: it waits for one, or gives up when ctx ends or
// the agent stops.
func (s *Server) waitSlot(ctx context.Context) bool {
	select {
	case <-s.stopping:
		// Checked first: a stopping agent starts nothing new, even when
		// a slot happens to be free.
		return false
	default:
	}
	select {
	case s.sem <- struct{}{}:
		return true
	case <-s.stopping:
	case <-ctx.Done():
	}
	return false
}

// serveGated serves a unary call of a gated tool on a worker of its own:
// the approval wait holds no slot (a human deciding must not stall the
// agent), then the call takes a slot like any other. The worker was
// admitted (counted in flight) by its caller, so Stop waits for it, and
// stopping withdraws its request.
func (s *Server) serveGated(ctx context.Context, r *natsbus.Request, req *a2a.ToolRequest, t tool.Tool, arrived time.Time, span trace.Span) {
	defer s.inflight.Done()
	// A cancel, or the caller's going (see watchCaller), withdraws the
	// request while it waits, and stops the run once approved.
	ctx, cancel, untrack := s.track(ctx, req)
	defer untrack()
	if probe := r.CallerProbe(); probe != "" {
		defer s.watchCaller(r, req, probe, cancel)()
	}
	run, refusal, rec := s.approve(ctx, t, req, nil)
	if run && !s.waitSlot(ctx) {
		run, refusal = false, s.stoppingReply().Output
		rec.end, rec.message = audit.EndA2AStopping, refusal
	}
	if !run {
		s.answer(r, req, &a2a.ToolReply{IsError: true, Output: refusal}, span)
		s.audit(audit.SurfaceA2A, req, t, rec, arrived, span)
		endRequest(span, t.Name(), &rec, "")
		s.logCall(rec)
		return
	}
	defer func() { <-s.sem }()
	reply, ran := s.call(ctx, t, req, nil)
	reply, ran = canceledUnary(ctx, t, reply, ran)
	ran.gate, ran.approver = rec.gate, rec.approver
	s.answer(r, req, reply, span)
	s.audit(audit.SurfaceA2A, req, t, ran, arrived, span)
	endRequest(span, t.Name(), &ran, "")
	s.logCall(ran)
}
