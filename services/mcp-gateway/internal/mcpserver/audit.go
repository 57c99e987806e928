package mcpserver

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// results maps a call's logged outcome onto the audit trail's results.
var results = map[string]string{
	outcomeOK:       audit.ResultOK,
	outcomeError:    audit.ResultError,
	outcomeInvalid:  audit.ResultInvalid,
	outcomeUnknown:  audit.ResultUnknownTool,
	outcomeDenied:   audit.ResultDenied,
	outcomeRefused:  audit.ResultRefused,
	outcomePolicy:   audit.ResultRefused,
	outcomeRate:     audit.ResultRefused,
	outcomeBusy:     audit.ResultCanceled,
	outcomeTimeout:  audit.ResultTimeout,
	outcomeCanceled: audit.ResultCanceled,
	outcomeFailed:   audit.ResultError,
}

// classes maps a call's logged outcome onto the short reasons the audit
// trail shares with the agent's records.
var classes = map[string]string{
	outcomeError:    "tool_error",
	outcomeInvalid:  "invalid_input",
	outcomeUnknown:  "unknown_tool",
	outcomeDenied:   "approval_denied",
	outcomeRefused:  "refused_gated",
	outcomePolicy:   "refused_by_policy",
	outcomeRate:     outcomeRate,
	outcomeBusy:     "canceled_waiting",
	outcomeTimeout:  "timeout",
	outcomeCanceled: "caller_gone",
	outcomeFailed:   "start",
}

// auditCall hands the record of one answered call to the audit trail. An
// approval asked of a 2026-07-28 client is not a call yet: its retry,
// carrying the answer, is recorded instead.
func (s *Server) auditCall(ctx context.Context, rec *record, start time.Time, d time.Duration) {
	if s.cfg.Audit == nil || rec.outcome == outcomeRequested {
		return
	}
	r := &audit.Record{
		Time:     start,
		Service:  audit.ServiceMCPGateway,
		Identity: s.cfg.Identity,
		Instance: s.cfg.Instance,
		Surface:  cmp.Or(rec.surface, audit.SurfaceMCP),
		Tool:     rec.tool,
		Gate:     audit.Gate{Decision: rec.gate, Approver: rec.approver},
		Outcome: audit.Outcome{
			Result:     results[rec.outcome],
			ExitCode:   rec.exitCode,
			Message:    rec.message,
			DurationMS: float64(d.Microseconds()) / 1000,
		},
	}
	if r.Gate.Decision == "" {
		r.Gate.Decision = audit.DecisionNotGated
	}
	if r.Outcome.Result == "" {
		r.Outcome.Result = audit.ResultError
	}
	switch {
	case r.Outcome.Result == audit.ResultOK && rec.exitCode != nil && *rec.exitCode != 0:
		r.Outcome.Result, r.Outcome.ErrorClass = audit.ResultFailed, "exit_nonzero"
	case r.Outcome.Result != audit.ResultOK:
		r.Outcome.ErrorClass = classes[rec.outcome]
	}
	if c := rec.who; c != nil {
		r.Caller = audit.Caller{Subject: c.Subject, Roles: c.Roles, ClientID: c.ClientID}
	}
	r.SetArguments(rec.input, s.cfg.AuditDigestOnly)
	if line := cmp.Or(rec.command, rec.line); line != "" {
		r.SetCommand(line, s.cfg.AuditDigestOnly)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	s.cfg.Audit.Publish(r)
}
