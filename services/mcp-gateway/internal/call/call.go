package call

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Config configures a [Core]. Every field but Identity has a usable zero
// value; the gateway's defaults are applied by its caller.
type Config struct {
	// Identity names the gateway in every log line, audit record and span.
	Identity string
	// Instance names this gateway process in its audit records.
	Instance string
	// MaxConcurrent bounds the calls running at once, commands and
	// built-ins together; 0 means [tool.DefaultMaxConcurrent].
	MaxConcurrent int
	// Timeout bounds one call's run time (not its approval wait); 0 means
	// [tool.DefaultTimeout].
	Timeout time.Duration
	// Confirm is the confirm_over_mcp policy; empty means
	// [config.ConfirmAuto].
	Confirm config.ConfirmPolicy
	// Policy decides per caller which tools it sees and runs
	// (expose.agent.mcp.policy); nil lets every caller see and run
	// everything served.
	Policy *policy.Policy
	// Audit, when set, receives one record per answered call (the audit
	// key).
	Audit *audit.Publisher
	// AuditDigestOnly leaves arguments and command lines out of the audit
	// records, keeping their digest (audit.arguments: digest).
	AuditDigestOnly bool
	// Approvals, when set, has an operator approve the gated calls whose
	// caller cannot be asked itself (approvals.operator), instead of
	// confirm_over_mcp's auto or always; a caller that can be asked is
	// still asked, and its decline is final.
	Approvals *approval.Broker
	// RemoteVia, when set, is asked before a remote tool is called for a
	// caller whose policy role names a nats context: it returns that
	// role's NATS connection, which the call is made over
	// ([tool.Remote.Via]). An error refuses the call in-band.
	RemoteVia func(natsContext string) (any, error)
	// Refuse, when set, is a surface's own rule of selection: the reason
	// a tool that passed every other check cannot be served, or "".
	Refuse func(tool.Tool) string
	// Strict makes two tools claiming one name an error of
	// [Core.SetTools] rather than a dropped tool.
	Strict bool
	// Logger receives one line per call and the selection; nil means
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts calls and approvals and reports the
	// slots; nil means no metrics, at the cost of a nil check per call.
	Metrics *ops.Metrics
	// Tracer, when set, gets a span per call (continuing the client's
	// trace) with children for the approval and the run; a remote call
	// carries the trace on to the agent in its NATS headers.
	Tracer trace.Tracer
}

// Core is the call path every surface of the gateway shares: the registry
// of served tools, and each call's steps as the package doc lists them. A
// surface builds a [Request], calls [Core.Call] and maps the [Verdict]
// onto its protocol. It is safe for concurrent use.
type Core struct {
	cfg Config
	log *slog.Logger

	registry

	// sem holds one token per running call, commands and built-ins alike.
	sem chan struct{}
	// shares and limits hold each caller's own slots and rate buckets,
	// when its policy role sets them.
	shares policy.Shares
	limits policy.Limiter
	// unreachable is what [Core.SetUnreachable] last set.
	unreachable atomic.Pointer[Unreachable]
	// inFlight counts the calls being handled, approval and slot waits
	// included.
	inFlight atomic.Int64
	// trail writes finished calls' log lines and audit records once
	// their answers are gone.
	trail     *trail
	closeOnce sync.Once
}

// New builds the core. It starts the goroutine that writes finished calls'
// trails, which [Core.Close] ends.
func New(cfg Config) *Core {
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = tool.DefaultMaxConcurrent
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = tool.DefaultTimeout
	}
	cfg.Confirm = cmp.Or(cfg.Confirm, config.ConfirmAuto)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	c := &Core{
		cfg:   cfg,
		log:   cfg.Logger,
		sem:   make(chan struct{}, cfg.MaxConcurrent),
		trail: newTrail(),
	}
	c.registry.init()
	c.unreachable.Store(new(Unreachable))
	cfg.Metrics.Slots(ops.SurfaceMCP,
		func() int { return int(c.inFlight.Load()) },
		func() int { return cap(c.sem) - len(c.sem) })
	return c
}

// Close writes the trails still queued and returns once they are written.
// It is idempotent; calls made after it write their own.
func (c *Core) Close() { c.closeOnce.Do(c.trail.close) }

// InFlight is the number of calls being handled, approval and slot waits
// included.
func (c *Core) InFlight() int64 { return c.inFlight.Load() }

// Running is the number of calls holding one of the gateway's execution
// slots.
func (c *Core) Running() int { return len(c.sem) }

// SharesInUse is the number of its own slots (its policy role's share)
// the caller subject holds.
func (c *Core) SharesInUse(subject string) int { return c.shares.InUse(subject) }

// Request is one call as a surface hands it to the core: everything the
// call's steps decide on travels here, none of it in the context.
type Request struct {
	// Tool is the served name called.
	Tool string
	// Args are the call's arguments as sent: a JSON object, or empty or
	// null for none.
	Args json.RawMessage
	// Caller is who calls, as the authentication layer found it; nil is a
	// caller the policy gives what it gives nobody.
	Caller *auth.Caller
	// Surface names where the call came in, on its audit record
	// (audit.Surface*); empty means [audit.SurfaceMCP].
	Surface string
	// Protocol is the calling protocol's version, on the call's log line.
	Protocol string
	// Header is the HTTP header the call came with, where a trace may be
	// continued from; TraceMeta, the protocol's own trace fields (MCP's
	// _meta), take precedence over it.
	Header    http.Header
	TraceMeta map[string]any
	// Asker asks the human at the caller's end about a gated call; nil
	// means nobody there can ever be asked (another agent), so a gated
	// call waits for an operator or is refused.
	Asker Asker
	// Awaiting, when set, is told the id of the operator approval a gated
	// call waits for, once it is announced; the function it returns, if
	// any, is called when the wait ends.
	Awaiting func(approvalID string) (stop func())
	// Cleared, when set, is called once the call has passed its checks
	// and any approval, before it waits for a slot: it is about to run.
	Cleared func()
	// Output, when set, receives a command's output while it runs, as
	// [tool.Request.Output] describes.
	Output io.Writer
	// Streamed makes a remote tool's call take the streamed path, so that
	// its agent stops the command should this gateway go away: for calls
	// that outlive their requests (tasks).
	Streamed bool
}

// Verdict is what became of a call: its outcome, the in-band message of a
// call that did not succeed, and what a successful one returned.
type Verdict struct {
	Outcome audit.Ending
	// Message is the refusal or failure, in words that name the key to
	// fix; empty for [audit.EndOK] and [audit.EndMCPApprovalRequested].
	Message string
	// Out is what the tool returned, for [audit.EndOK].
	Out tool.Outcome
	// RetryAfter is how long a call over its rate
	// ([audit.EndMCPRefusedRate]) must wait before it could run.
	RetryAfter time.Duration
}

// Refused reports whether the call was refused before it ran: denied by
// the human or operator, or refused by the gate, the policy or the rate.
func (v Verdict) Refused() bool {
	switch v.Outcome {
	case audit.EndMCPDenied, audit.EndMCPRefused, audit.EndMCPRefusedByPolicy, audit.EndMCPRefusedRate:
		return true
	}
	return false
}

// Call runs one call through every step the package doc lists, the gate's
// rules included, and returns its verdict. Every outcome is a verdict;
// nothing here is a protocol error, and a tool that panics is a failed
// call. The call ends when ctx does, killing a command's process group or
// cancelling a remote tool's stream.
func (c *Core) Call(ctx context.Context, r *Request) (v Verdict) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	start := time.Now()
	rec := c.newRecord(r)
	ctx, span := c.startCall(ctx, r)
	defer func() {
		// A tool that panics is a failed call, answered in-band like any
		// other, not a protocol error.
		if p := recover(); p != nil {
			v = rec.fail(audit.EndMCPFailed, fmt.Sprintf("%s failed: internal error: %v", r.Tool, p))
			c.log.Error("tool panicked", "agent", c.cfg.Identity, "tool", r.Tool, "panic", p, "stack", string(debug.Stack()))
		}
		c.finish(ctx, span, rec, start)
	}()
	return c.run(ctx, r, rec, span)
}

// run is the pipeline of [Core.Call]; span is the call's, for its stage
// events.
func (c *Core) run(ctx context.Context, r *Request, rec *record, span trace.Span) Verdict {
	e := c.Entry(r.Tool)
	if e == nil {
		// Only reachable in the moment a replacement removes a tool: the
		// surfaces answer names they never served themselves.
		return rec.fail(audit.EndMCPUnknownTool, fmt.Sprintf("unknown tool %q", r.Tool))
	}
	via, refused := c.admit(r, e, rec)
	if refused != nil {
		return *refused
	}
	input, err := tool.ObjectInput(r.Args)
	if err != nil {
		return rec.fail(audit.EndMCPInvalid, fmt.Sprintf("invalid arguments for %s: %v", r.Tool, err))
	}
	rec.input = input
	if msg := e.validate(input); msg != "" {
		return rec.fail(audit.EndMCPInvalid, fmt.Sprintf("invalid arguments for %s: %s", r.Tool, msg))
	}
	tracing.Event(span, tracing.EventValidated)

	if e.Gated {
		line, err := e.CommandLine(input)
		if err != nil {
			return rec.fail(audit.EndMCPInvalid, err.Error())
		}
		rec.command = line
		actx, aspan := tracing.Start(ctx, c.cfg.Tracer, "approval", trace.SpanKindInternal)
		refused, run := c.gate(actx, r, e, input, line, rec)
		if aspan.IsRecording() {
			aspan.SetAttributes(tracing.AttrApproved.Bool(run))
		}
		aspan.End()
		if !run {
			return refused
		}
	}
	if r.Cleared != nil {
		r.Cleared()
	}

	// The slots are taken only now, after any approval: a human deciding
	// holds no execution slot. The caller's own share comes first, so a
	// caller over it waits without holding one of the gateway's.
	release, busy := c.takeShare(ctx, r, rec)
	if busy != nil {
		return *busy
	}
	defer release()
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return rec.fail(audit.EndMCPCanceledWaiting, fmt.Sprintf("%s was not run: the request ended while waiting for a free slot (expose.agent.mcp.max_concurrent_tools is %d)", r.Tool, c.cfg.MaxConcurrent))
	}
	tracing.Event(span, tracing.EventSlot)

	runCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if c.cfg.Tracer != nil {
		spanName, kind := e.runSpanName()
		var run trace.Span
		runCtx, run = tracing.Start(runCtx, c.cfg.Tracer, spanName, kind)
		defer func() {
			recordOutcome(run, rec)
			run.End()
		}()
	}
	if c.cfg.Audit != nil && e.Liner != nil && rec.command == "" {
		// Known before the run, so a call that times out or is canceled
		// is recorded with what it was running.
		rec.line, _ = e.Liner.CommandLine(input)
	}
	out, err := e.Tool.Call(runCtx, tool.Request{
		Input:    input,
		Prompter: tool.DenyAll{},
		Output:   r.Output,
		Remote:   tool.Remote{Streamed: r.Streamed, Via: via},
	})
	if out.Result != nil {
		rec.line = out.Result.Command
	}
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded):
		msg := fmt.Sprintf("%s did not finish within the tool timeout of %s (expose.agent.mcp.tool_timeout)", r.Tool, c.cfg.Timeout)
		if e.Liner != nil {
			msg += "; its process group was killed"
		}
		return rec.fail(audit.EndTimeout, msg)
	case err != nil && ctx.Err() != nil:
		return rec.fail(audit.EndCallerGone, fmt.Sprintf("%s was interrupted: the client went away or the gateway is stopping", r.Tool))
	case err != nil:
		return rec.fail(audit.EndMCPFailed, fmt.Sprintf("%s could not run: %v", r.Tool, err))
	case out.IsError:
		return rec.fail(audit.EndToolError, out.Message)
	}
	rec.outcome = audit.EndOK
	if out.Result != nil {
		rec.exitCode = audit.ExitCode(out.Result.ExitCode)
	}
	return Verdict{Outcome: audit.EndOK, Out: out}
}

// takeShare waits for one of the caller's own slots when its grant
// limits it (expose.agent.mcp.policy.roles.*.max_concurrent_tools). It
// comes after any approval and before the gateway's slot, so a caller over
// its share queues without holding a slot another caller could use.
func (c *Core) takeShare(ctx context.Context, r *Request, rec *record) (func(), *Verdict) {
	g := c.cfg.Policy.For(r.Caller)
	if r.Caller == nil || g.Share == 0 {
		return func() {}, nil
	}
	release, err := c.shares.Acquire(ctx, r.Caller.Subject, g.Share)
	if err != nil {
		v := rec.fail(audit.EndMCPCanceledWaiting, fmt.Sprintf("%s was not run: the request ended while waiting for a free slot of your share (%d at once for roles %s, expose.agent.mcp.policy.roles.*.max_concurrent_tools)", r.Tool, g.Share, joinRoles(g)))
		return nil, &v
	}
	return release, nil
}
