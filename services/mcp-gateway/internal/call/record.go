package call

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// record is what a call leaves behind: the one log line, the metric, the
// span's outcome and the audit record are all written from it once the
// call has its [Verdict]. For gated calls the log line carries the command
// line, never the raw arguments.
type record struct {
	tool string
	// who is the caller, for the audit record and (its subject) the log
	// line.
	who *auth.Caller
	// input is the call's arguments as sent, then as checked.
	input json.RawMessage
	// gate is the approval gate's decision (an audit.Decision*) and
	// approver the operator who approved, for the audit record.
	gate     string
	approver string
	// line is the command line a call ran or would have run, for the
	// audit record only: the log line names it for gated calls alone
	// (command).
	line     string
	command  string
	protocol string
	// surface is where the call came in, for the audit record and the
	// metric.
	surface  string
	remote   bool
	outcome  audit.Ending
	approval string
	exitCode *int
	message  string
	// warn raises the line to warn level: a gated tool ran unasked
	// because the client cannot elicit.
	warn bool
}

func (c *Core) newRecord(r *Request) *record {
	rec := &record{tool: r.Tool, who: r.Caller, input: r.Args, protocol: r.Protocol, surface: r.Surface}
	if e := c.Entry(r.Tool); e != nil {
		rec.remote = e.Remote()
	}
	return rec
}

// fail records an outcome and returns the verdict for it.
func (r *record) fail(outcome audit.Ending, message string) Verdict {
	r.outcome = outcome
	r.message = message
	return Verdict{Outcome: outcome, Message: message}
}

// finish writes what a call that began at start leaves behind: the
// metric and the span at once, the log line and the audit record once the
// caller's answer is on its way (see trail).
func (c *Core) finish(ctx context.Context, span trace.Span, rec *record, start time.Time) {
	d := time.Since(start)
	c.observe(rec, d)
	endCall(ctx, span, rec)
	c.trail.after(func() {
		c.logCall(rec, d)
		c.auditCall(ctx, rec, start, d)
	})
}

// logCall writes a finished call's one log line.
func (c *Core) logCall(rec *record, d time.Duration) {
	attrs := []any{
		"agent", c.cfg.Identity,
		"tool", rec.tool,
		"duration", d.Round(time.Microsecond),
		"outcome", rec.outcome.String(),
	}
	if rec.who != nil {
		attrs = append(attrs, "sub", rec.who.Subject)
	}
	if rec.exitCode != nil {
		attrs = append(attrs, "exit_code", *rec.exitCode)
	}
	if rec.command != "" {
		attrs = append(attrs, "command", rec.command)
	}
	if rec.approval != "" {
		attrs = append(attrs, "approval", rec.approval)
	}
	if rec.protocol != "" {
		attrs = append(attrs, "protocol", rec.protocol)
	}
	if rec.message != "" {
		attrs = append(attrs, "error", rec.message)
	}
	level := slog.LevelInfo
	if rec.warn {
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, "tool call", attrs...)
}

// observe counts a finished call. The tool label is the name the call was
// registered under, which [ops.Metrics] also checks against the served
// set; the surface is remote for a tool of any source but the local one.
// A call answered with an approval request (2026-07-28 clients) has not
// finished: the retried call is counted.
func (c *Core) observe(rec *record, d time.Duration) {
	if c.cfg.Metrics == nil || !rec.outcome.Final() {
		return
	}
	surface := ops.SurfaceMCP
	if rec.remote {
		surface = ops.SurfaceRemote
	}
	if rec.surface == audit.SurfaceAgent2Agent {
		surface = ops.SurfaceAgent2Agent
	}
	c.cfg.Metrics.Call(rec.tool, surface, rec.ending().Metric(), d)
}

// ending is how the call ended in the one vocabulary every trace of it
// uses: its outcome, told apart for a command that ran and exited
// non-zero (an "ok" call whose metric and audit record say so).
func (r *record) ending() audit.Ending {
	if r.outcome == audit.EndOK && r.exitCode != nil && *r.exitCode != 0 {
		return audit.EndMCPExitNonzero
	}
	return r.outcome
}

// auditCall hands the record of one answered call to the audit trail. An
// approval asked of a 2026-07-28 client is not a call yet: its retry,
// carrying the answer, is recorded instead.
func (c *Core) auditCall(ctx context.Context, rec *record, start time.Time, d time.Duration) {
	if c.cfg.Audit == nil || !rec.outcome.Final() {
		return
	}
	r := &audit.Record{
		Time:     start,
		Service:  audit.ServiceMCPGateway,
		Identity: c.cfg.Identity,
		Instance: c.cfg.Instance,
		Surface:  cmp.Or(rec.surface, audit.SurfaceMCP),
		Tool:     rec.tool,
		Gate:     audit.Gate{Decision: rec.gate, Approver: rec.approver},
		Outcome: audit.Outcome{
			Result:     rec.ending().Result(),
			ErrorClass: rec.ending().Class(),
			ExitCode:   rec.exitCode,
			Message:    rec.message,
			DurationMS: audit.DurationMS(d),
		},
	}
	if r.Gate.Decision == "" {
		r.Gate.Decision = audit.DecisionNotGated
	}
	if who := rec.who; who != nil {
		r.Caller = audit.Caller{Subject: who.Subject, Roles: who.Roles, ClientID: who.ClientID}
	}
	r.SetArguments(rec.input, c.cfg.AuditDigestOnly)
	if line := cmp.Or(rec.command, rec.line); line != "" {
		r.SetCommand(line, c.cfg.AuditDigestOnly)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	c.cfg.Audit.Publish(r)
}

// joinRoles lists a grant's roles for a refusal.
func joinRoles(g *policy.Grant) string { return strings.Join(g.Roles, ", ") }
