package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/remotetools"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Call outcomes, as logged.
const (
	outcomeOK        = "ok"
	outcomeError     = "error"
	outcomeInvalid   = "invalid"
	outcomeUnknown   = "unknown_tool"
	outcomeDenied    = "denied"
	outcomeRefused   = "refused"
	outcomeRequested = "approval_requested"
	outcomeBusy      = "canceled_waiting"
	outcomeTimeout   = "timeout"
	outcomeCanceled  = "canceled"
	outcomeFailed    = "failed"
)

// record is what the one log line of a call says. For gated calls it
// carries the command line, never the raw arguments.
type record struct {
	tool string
	// caller is the caller's subject: the token's sub, or
	// auth.StaticSubject.
	caller string
	// who is the caller; input the call's arguments as sent; gate the
	// approval gate's decision (an audit.Decision*) and approver the
	// operator who approved; all for the audit record.
	who      *auth.Caller
	input    json.RawMessage
	gate     string
	approver string
	// line is the command line a call ran or would have run, for the
	// audit record only: the log line names it for gated calls alone
	// (command).
	line     string
	protocol string
	// surface is where the call came in, for the audit record: empty for
	// a tools/call, else the [Invocation]'s.
	surface  string
	outcome  string
	command  string
	approval string
	exitCode *int
	message  string
	// warn raises the line to warn level: a gated tool ran unasked
	// because the client cannot elicit.
	warn bool
}

// handle runs one tools/call for name: input checks, the approval gate,
// a slot of the semaphore, then the call under the timeout. Every outcome
// is a result; nothing here is a protocol error.
func (s *Server) handle(ctx context.Context, name string, req mcp.CallToolRequest) (res *mcp.CallToolResult) {
	start := time.Now()
	rec := &record{tool: name, protocol: server.RequestProtocolVersion(ctx)}
	if inv := invocationFrom(ctx); inv != nil {
		rec.protocol, rec.surface = inv.Protocol, inv.Surface
	}
	ctx, span := s.startCall(ctx, name, req)
	defer func() {
		// A tool that panics is a failed call, answered in-band like any
		// other, not a protocol error.
		if p := recover(); p != nil {
			res = rec.fail(outcomeFailed, fmt.Sprintf("%s failed: internal error: %v", name, p))
			s.log.Error("tool panicked", "agent", s.cfg.Identity, "tool", name, "panic", p, "stack", string(debug.Stack()))
		}
		d := time.Since(start)
		if inv := invocationFrom(ctx); inv != nil {
			inv.outcome = rec.outcome
		}
		s.observe(rec, d)
		endCall(ctx, span, rec)
		s.trail.after(func() {
			s.logCall(rec, d)
			s.auditCall(ctx, rec, start, d)
		})
	}()
	return s.call(ctx, name, req, rec, span)
}

// call runs handle's call; span is the request's, for its stage events.
func (s *Server) call(ctx context.Context, name string, req mcp.CallToolRequest, rec *record, span trace.Span) *mcp.CallToolResult {
	e := (*s.entries.Load())[name]
	if e == nil {
		// Only reachable in the moment a replacement removes a tool:
		// mcp-go answers names it never registered itself.
		return rec.fail(outcomeUnknown, fmt.Sprintf("unknown tool %q", name))
	}
	rec.input = req.Params.RawArguments
	ctx, refused := s.admit(ctx, e, rec)
	if refused != nil {
		return refused
	}
	if refused := rateRefused(ctx, rec); refused != nil {
		return refused
	}
	input, err := callInput(req)
	if err != nil {
		return rec.fail(outcomeInvalid, fmt.Sprintf("invalid arguments for %s: %v", name, err))
	}
	rec.input = input
	if msg := e.validate(input); msg != "" {
		return rec.fail(outcomeInvalid, fmt.Sprintf("invalid arguments for %s: %s", name, msg))
	}
	tracing.Event(span, tracing.EventValidated)

	if e.gated {
		line, err := e.commandLine(input)
		if err != nil {
			return rec.fail(outcomeInvalid, err.Error())
		}
		rec.command = line
		actx, aspan := tracing.Start(ctx, s.cfg.Tracer, "approval", trace.SpanKindInternal)
		res, run := s.gate(actx, e, req, input, line, rec)
		if aspan.IsRecording() {
			aspan.SetAttributes(tracing.AttrApproved.Bool(run))
		}
		aspan.End()
		if !run {
			return res
		}
	}

	// A task's client is answered here, once any approval is given; its
	// call runs on without the request (task.go).
	taskStarted(ctx)
	inv := invocationFrom(ctx)
	if inv != nil && inv.Cleared != nil {
		inv.Cleared()
	}

	// The slots are taken only now, after any approval: a human deciding
	// holds no execution slot. The caller's own share comes first, so a
	// caller over it waits without holding one of the gateway's.
	release, refused := s.takeShare(ctx, name, rec)
	if refused != nil {
		return refused
	}
	defer release()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return rec.fail(outcomeBusy, fmt.Sprintf("%s was not run: the request ended while waiting for a free slot (expose.agent.mcp.max_concurrent_tools is %d)", name, s.cfg.MaxConcurrent))
	}
	tracing.Event(span, tracing.EventSlot)

	runCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if s.cfg.Tracer != nil {
		spanName, kind := e.runSpanName()
		var run trace.Span
		runCtx, run = tracing.Start(runCtx, s.cfg.Tracer, spanName, kind)
		defer endSpan(run, rec)
	}
	if _, task := ctx.Value(taskRunKey{}).(*taskRun); task || inv != nil {
		// A task's remote call stays streamed, so the agent stops its
		// command should this gateway go away (see
		// remotetools.WithStreamed), as does every call of another
		// surface, whose tasks outlive their requests; other remote calls
		// that ask for no progress go unary to agents that can cancel
		// them.
		runCtx = remotetools.WithStreamed(runCtx)
	}
	treq := tool.Request{Input: input, Prompter: tool.DenyAll{}}
	if token := progressToken(req); token != nil {
		// Output is relayed as it comes; without a token nothing changes.
		p := newProgress(s.notifier(ctx, token))
		treq.Output = p
		defer func() { p.stop(ctx.Err() == nil) }()
	} else if inv != nil && inv.Output != nil {
		treq.Output = inv.Output
	}
	if s.cfg.Audit != nil && e.liner != nil && rec.command == "" {
		// Known before the run, so a call that times out or is
		// canceled is recorded with what it was running.
		rec.line, _ = e.liner.CommandLine(input)
	}
	out, err := e.tool.Call(runCtx, treq)
	if out.Result != nil {
		rec.line = out.Result.Command
	}
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded):
		msg := fmt.Sprintf("%s did not finish within the tool timeout of %s (expose.agent.mcp.tool_timeout)", name, s.cfg.Timeout)
		if e.liner != nil {
			msg += "; its process group was killed"
		}
		return rec.fail(outcomeTimeout, msg)
	case err != nil && ctx.Err() != nil:
		return rec.fail(outcomeCanceled, fmt.Sprintf("%s was interrupted: the client went away or the gateway is stopping", name))
	case err != nil:
		return rec.fail(outcomeFailed, fmt.Sprintf("%s could not run: %v", name, err))
	case out.IsError:
		return rec.fail(outcomeError, out.Message)
	case out.Result != nil:
		rec.outcome = outcomeOK
		code := out.Result.ExitCode
		rec.exitCode = &code
		return ranResult(out)
	default:
		// An in-process tool's output is already the JSON the client asked
		// for: it travels verbatim.
		rec.outcome = outcomeOK
		return &mcp.CallToolResult{Content: append([]mcp.Content{mcp.NewTextContent(string(out.JSON))}, s.resourceLinks(e.tool, out.JSON)...)}
	}
}

// ranResult is the MCP result of a command's run: the result's JSON
// as the text, and the result as the structured content. The text's bytes
// are what the structured content marshals to, so they are written for it
// rather than marshaled a second time; StructuredContent stays for
// mcp-go's own use of it (a task's result, an output schema's check).
func ranResult(out tool.Outcome) *mcp.CallToolResult {
	text := out.Text()
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent:    out.Result,
		RawStructuredContent: json.RawMessage(text),
	}
}

// fail records an outcome and returns the in-band error result for it.
func (r *record) fail(outcome, message string) *mcp.CallToolResult {
	r.outcome = outcome
	r.message = message
	return mcp.NewToolResultError(message)
}

// logCall writes a finished call's one log line; the caller has its
// answer by then (see trail).
func (s *Server) logCall(rec *record, d time.Duration) {
	attrs := []any{
		"agent", s.cfg.Identity,
		"tool", rec.tool,
		"duration", d.Round(time.Microsecond),
		"outcome", rec.outcome,
	}
	if rec.caller != "" {
		attrs = append(attrs, "sub", rec.caller)
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
	s.log.Log(context.Background(), level, "tool call", attrs...)
}

// callInput returns the call's arguments as raw JSON: nil for none (absent
// or null), the object otherwise. Anything but an object is an error, for
// every tool kind alike.
func callInput(req mcp.CallToolRequest) (json.RawMessage, error) {
	raw := bytes.TrimSpace(req.Params.RawArguments)
	if len(raw) == 0 && req.Params.Arguments != nil {
		b, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, fmt.Errorf("encoding arguments: %w", err)
		}
		raw = b
	}
	return tool.ObjectInput(raw)
}

// commandLine is what an approval form names: the exact command line for
// a command tool, else the tool name and its canonical input.
func (e *entry) commandLine(input json.RawMessage) (string, error) {
	if e.liner != nil {
		return e.liner.CommandLine(input)
	}
	return e.def.Name + " " + string(canonical(input)), nil
}
