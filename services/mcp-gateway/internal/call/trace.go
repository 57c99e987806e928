package call

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// startCall starts the span of one call. It continues the client's trace
// from the request's protocol fields (MCP's _meta: traceparent,
// tracestate) when they carry one, else from the HTTP headers: _meta is
// what the MCP client itself says about this request, where a header may
// belong to a proxy or to the connection. Untraced (no Tracer), it reads
// neither.
func (c *Core) startCall(ctx context.Context, r *Request) (context.Context, trace.Span) {
	if c.cfg.Tracer == nil {
		return ctx, tracing.Nop()
	}
	parent := ctx
	if r.TraceMeta != nil {
		parent = tracing.ExtractMeta(ctx, r.TraceMeta)
	}
	if !trace.SpanContextFromContext(parent).IsRemote() {
		parent = tracing.ExtractHTTP(ctx, r.Header)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	a, _ := ctx.Value(arrivalKey{}).(*arrival)
	if a != nil {
		opts = append(opts, trace.WithTimestamp(a.at))
	}
	ctx, span := c.cfg.Tracer.Start(parent, "tools/call "+r.Tool, opts...)
	if a != nil {
		span.AddEvent(tracing.EventParsed)
		a.mu.Lock()
		if a.span == nil {
			a.span = span
		}
		a.mu.Unlock()
	}
	span.SetAttributes(
		tracing.AttrMethod.String(methodToolsCall),
		tracing.AttrIdentity.String(c.cfg.Identity),
		tracing.AttrTool.String(r.Tool))
	return ctx, span
}

// recordOutcome records what became of a call on span (the request's, or
// the run's): the outcome in the
// metrics' words and the exit code, never the arguments, the command line
// or the output. A call answered with an approval request has no outcome
// yet.
func recordOutcome(span trace.Span, rec *record) {
	if span.IsRecording() {
		if !rec.outcome.Final() {
			span.SetAttributes(tracing.AttrApproval.String("requested"))
		} else {
			tracing.Outcome(span, rec.ending().Metric())
		}
		if rec.exitCode != nil {
			span.SetAttributes(tracing.AttrExitCode.Int(*rec.exitCode))
		}
	}
}

// endCall records the outcome on a tools/call span and ends it, unless the
// HTTP request that carried the call is still being answered: then
// [MarkArrival] ends it once the reply is written, so the span covers the
// MCP library's encoding too.
func endCall(ctx context.Context, span trace.Span, rec *record) {
	if !span.IsRecording() {
		span.End()
		return
	}
	recordOutcome(span, rec)
	span.AddEvent(tracing.EventReturned)
	if a, ok := ctx.Value(arrivalKey{}).(*arrival); ok {
		a.mu.Lock()
		later := a.span == span && !a.sent
		a.returned = a.returned || later
		a.mu.Unlock()
		if later {
			return
		}
	}
	span.End()
}

// methodToolsCall is the span's method attribute: the MCP method, which
// every surface's call is named after so that traces of all surfaces read
// alike.
const methodToolsCall = "tools/call"

// arrivalKey is the context key of a traced HTTP request's [arrival].
type arrivalKey struct{}

// arrival is when a traced HTTP request reached the gateway, and the
// tools/call span it carried. The span is started late, once the MCP
// library has parsed the request (only then is the caller's _meta
// traceparent known), but stamped with the arrival, so the reading and
// parsing are inside it; and it ends once the reply is written, or, for a
// task's call that runs on after its request was answered, when the call
// returns.
type arrival struct {
	at time.Time

	mu sync.Mutex
	// span is the request's first tools/call span; returned is set once
	// its handler returned leaving the end to markArrival; sent once the
	// HTTP handler returned. All guarded by mu.
	span           trace.Span
	returned, sent bool
}

// MarkArrival puts each request's [arrival] in its context and ends the
// tools/call span handed to it once the reply is written (returned to
// net/http, which sends what is buffered as the handler returns). It is
// installed only when tracing, outermost, so every layer of the gateway's
// own handling is inside the span.
func MarkArrival(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &arrival{at: time.Now()}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivalKey{}, a)))
		a.mu.Lock()
		a.sent = true
		span, end := a.span, a.returned
		a.mu.Unlock()
		if end {
			span.AddEvent(tracing.EventSent)
			span.End()
		}
	})
}

// runSpanName names the child span of the run by what runs: a local
// command, a remote agent's tool, or an in-process built-in.
func (e *Entry) runSpanName() (string, trace.SpanKind) {
	switch {
	case e.Remote():
		return "remote call", trace.SpanKindClient
	case e.Liner != nil:
		return "command run", trace.SpanKindInternal
	}
	return "builtin call", trace.SpanKindInternal
}
