package server

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// startRequest starts the span of one request on endpoint, continuing
// the caller's trace from the request's NATS headers, within the server's
// lifetime. Untraced (no Tracer), it returns the lifetime context and a
// span that records nothing, without reading the headers.
func (s *Server) startRequest(r *natsbus.Request, endpoint string) (context.Context, trace.Span) {
	if s.cfg.Tracer == nil {
		return s.lifetime, tracing.Nop()
	}
	ctx := tracing.ExtractNATS(s.lifetime, r.Header())
	ctx, span := s.cfg.Tracer.Start(ctx, "a2a "+endpoint, trace.WithSpanKind(trace.SpanKindServer))
	span.SetAttributes(tracing.AttrIdentity.String(s.cfg.Identity), tracing.AttrInstance.String(s.cfg.Instance))
	return ctx, span
}

// endRequest records what became of a request on its span and ends it.
// tool is empty for a request naming no served tool: the name a caller
// sent is not recorded unless this agent serves it. The span's outcome is
// the metric label of rec's ending, or outcome for a request without a
// record (one that could not be decoded, or was refused on arrival).
func endRequest(span trace.Span, tool string, rec *callRecord, outcome string) {
	if span.IsRecording() {
		if tool != "" {
			span.SetAttributes(tracing.AttrTool.String(tool))
		}
		if rec != nil {
			outcome = rec.end.Metric()
			if rec.stream {
				span.SetAttributes(tracing.AttrStream.Bool(true))
			}
			if rec.ran {
				span.SetAttributes(tracing.AttrExitCode.Int(rec.exitCode))
			}
		}
		tracing.Outcome(span, outcome)
	}
	span.End()
}

// takeSlot waits for a concurrency slot, in a span of its own so a trace
// shows the time a busy agent made a call queue. It returns false when
// the server began stopping first.
func (s *Server) takeSlot(ctx context.Context) bool {
	_, span := tracing.Start(ctx, s.cfg.Tracer, "slot wait", trace.SpanKindInternal)
	defer span.End()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-s.stopping:
		tracing.Outcome(span, ops.OutcomeCanceled)
		return false
	}
}
