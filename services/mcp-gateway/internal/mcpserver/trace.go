package mcpserver

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// startCall starts the span of one tools/call request. It continues the
// client's trace from the request's _meta (traceparent, tracestate) when
// it carries one, else from the HTTP headers: _meta is what the MCP client
// itself says about this request, where a header may belong to a proxy or
// to the connection. Untraced (no Tracer), it reads neither.
func (s *Server) startCall(ctx context.Context, name string, req mcp.CallToolRequest) (context.Context, trace.Span) {
	if s.cfg.Tracer == nil {
		return ctx, tracing.Nop()
	}
	parent := ctx
	if m := req.Params.Meta; m != nil {
		parent = tracing.ExtractMeta(ctx, m.AdditionalFields)
	}
	if !trace.SpanContextFromContext(parent).IsRemote() {
		parent = tracing.ExtractHTTP(ctx, req.Header)
	}
	ctx, span := s.cfg.Tracer.Start(parent, "tools/call "+name, trace.WithSpanKind(trace.SpanKindServer))
	span.SetAttributes(
		tracing.AttrMethod.String(string(mcp.MethodToolsCall)),
		tracing.AttrIdentity.String(s.cfg.Identity),
		tracing.AttrTool.String(name))
	return ctx, span
}

// endSpan records what became of a call on span (the request's, or the
// run's) and ends it: the outcome in the metrics' words and the exit
// code, never the arguments, the command line or the output. A call
// answered with an approval request has no outcome yet.
func endSpan(span trace.Span, rec *record) {
	if span.IsRecording() {
		if rec.outcome == outcomeRequested {
			span.SetAttributes(tracing.AttrApproval.String("requested"))
		} else {
			tracing.Outcome(span, metricOutcome(rec))
		}
		if rec.exitCode != nil {
			span.SetAttributes(tracing.AttrExitCode.Int(*rec.exitCode))
		}
	}
	span.End()
}

// runSpanName names the child span of the run by what runs: a local
// command, a remote agent's tool, or an in-process built-in.
func (e *entry) runSpanName() (string, trace.SpanKind) {
	switch {
	case e.source != SourceLocal:
		return "remote call", trace.SpanKindClient
	case e.liner != nil:
		return "command run", trace.SpanKindInternal
	}
	return "builtin call", trace.SpanKindInternal
}
