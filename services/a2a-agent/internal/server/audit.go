package server

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// arrival is when a request arrived, read only when records are kept, so
// an agent without an audit trail does not pay for the clock.
func (s *Server) arrival() time.Time {
	if s.cfg.Audit == nil {
		return time.Time{}
	}
	return time.Now()
}

// traceID is the trace of span, when it records.
func traceID(span trace.Span) string {
	if !span.IsRecording() {
		return ""
	}
	return span.SpanContext().TraceID().String()
}

// refused describes a call answered without running (an unknown tool, a
// stopping agent), for its audit record. Such a record is handed over
// before the refusal is sent, unlike a call's: there is no work for the
// caller to wait less for, and a refusal during Stop happens on the
// subscription goroutine, which Stop does not wait for; recorded first,
// it is in the publisher before any caller or operator sees the answer,
// so closing the publisher after the last reply cannot miss it.
func refused(req *a2a.ToolRequest, end audit.Ending, message string) callRecord {
	return callRecord{tool: req.Name, caller: req.Sender.Name, end: end, message: message}
}

// audit publishes the record of one call. t is the served tool, nil when
// the request named none. For a call that ran it runs on the worker, after
// the reply went out: the caller never waits for it, and the publisher
// never blocks.
func (s *Server) audit(surface string, req *a2a.ToolRequest, t tool.Tool, rec callRecord, arrived time.Time, span trace.Span) {
	if s.cfg.Audit == nil {
		return
	}
	r := &audit.Record{
		Time:     arrived,
		Service:  audit.ServiceA2AAgent,
		Identity: s.cfg.Identity,
		Instance: s.cfg.Instance,
		Surface:  surface,
		// NATS does not tell a micro handler who sent the request: the
		// sender is what the request claims.
		Caller: audit.Caller{Name: req.Sender.Name, Instance: req.Sender.Instance, Claimed: true},
		Tool:   req.Name,
		Gate:   audit.Gate{Decision: audit.DecisionNotGated},
		Outcome: audit.Outcome{
			Result:     rec.end.Result(),
			ErrorClass: rec.end.Class(),
			Message:    rec.message,
			DurationMS: audit.DurationMS(time.Since(arrived)),
		},
		TraceID: traceID(span),
	}
	if rec.gate != "" {
		r.Gate = audit.Gate{Decision: rec.gate, Approver: rec.approver}
	}
	r.SetArguments(req.Input, s.cfg.AuditDigestOnly)
	if rec.ran {
		r.Outcome.ExitCode = audit.ExitCode(rec.exitCode)
	}
	line := rec.command
	if cl, ok := t.(tool.CommandLiner); ok && (line == "" || rec.end.Result() == audit.ResultError) {
		l, err := cl.CommandLine(req.Input)
		switch {
		case err == nil && line == "":
			line = l
		case errors.Is(err, fiskapp.ErrInvalidInput) && rec.end.Result() == audit.ResultError:
			// The tool failed on arguments the command refuses: the
			// record says so, the log line and metric keep the error.
			r.Outcome.Result, r.Outcome.ErrorClass = audit.EndA2AInvalid.Result(), audit.EndA2AInvalid.Class()
		}
	}
	r.SetCommand(line, s.cfg.AuditDigestOnly)
	s.cfg.Audit.Publish(r)
}
