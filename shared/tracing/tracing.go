// Package tracing carries the W3C trace context across the hops the fleet
// owns (NATS message headers, an MCP request's _meta and HTTP headers) and
// starts spans on a tracer that may be nil: nil is tracing off, and then
// nothing is started, read, written or allocated. It depends on the
// OpenTelemetry API only; package otlp sets the SDK up from the OTEL_*
// environment.
package tracing

import (
	"context"
	"net/http"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The W3C trace-context keys, lower case as the recommendation writes
// them. NATS headers are case-sensitive, so these exact keys are what a
// NATS message carries.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Span attribute keys. A span carries these and never a call's arguments
// or output: a trace backend is read by more people than the tools' users.
const (
	AttrIdentity = attribute.Key("fiskfleet.identity")
	AttrInstance = attribute.Key("fiskfleet.instance")
	AttrTool     = attribute.Key("fiskfleet.tool")
	AttrHost     = attribute.Key("fiskfleet.remote.host")
	AttrOutcome  = attribute.Key("fiskfleet.outcome")
	AttrExitCode = attribute.Key("fiskfleet.exit_code")
	AttrStream   = attribute.Key("fiskfleet.stream")
	AttrApproved = attribute.Key("fiskfleet.approved")
	AttrApproval = attribute.Key("fiskfleet.approval")
	AttrMethod   = attribute.Key("mcp.method.name")
)

// Stage events mark the moments a call passes on its way from the
// request's arrival to its reply, on the spans that exist, so a trace
// shows where a call spends the time fiskfleet adds around the command's
// own run (`make bench` reads them into its stage breakdown). They carry
// no attributes.
const (
	// EventDecoded: the agent decoded and validated the request and found
	// the tool.
	EventDecoded = "request decoded"
	// EventParsed: the gateway's tools/call handler got the request from
	// the MCP library, which has read and parsed the HTTP body.
	EventParsed = "request parsed"
	// EventValidated: the gateway checked access and the arguments.
	EventValidated = "input validated"
	// EventSlot: the gateway took its concurrency slots (the agent's are
	// its "slot wait" span).
	EventSlot = "slot acquired"
	// EventStarting: the argv is built and the process is about to be
	// forked; EventStarted: it has been exec'd; EventExited: it has
	// exited, its output not yet drained nor the process reaped.
	EventStarting = "process starting"
	EventStarted  = "process started"
	EventExited   = "process exited"
	// EventReturned: the gateway's handler hands the result back to the
	// MCP library, the call logged and audited.
	EventReturned = "call returned"
	// EventEncoded and EventSent: the reply's bytes are built, then
	// handed to NATS (the agent) or written and flushed to the HTTP
	// connection (the gateway).
	EventEncoded = "reply encoded"
	EventSent    = "reply sent"
)

// Event adds the event name to span when it records, and does nothing,
// without allocating, when it does not.
func Event(span trace.Span, name string) {
	if span.IsRecording() {
		span.AddEvent(name)
	}
}

// propagator reads and writes traceparent and tracestate only: baggage
// would let a caller put arbitrary data on every hop.
var propagator = propagation.TraceContext{}

// nop is the span of a process that does not trace. noop.Span is an empty
// struct, so handing it out allocates nothing.
var nop trace.Span = noop.Span{}

// Nop returns the span that records nothing, for a path that starts no
// span when tracing is off.
func Nop() trace.Span { return nop }

// Start starts a span named name as a child of ctx's span, or, with a nil
// tracer (tracing off), returns ctx and a span that records nothing,
// without allocating. Callers set attributes only when
// span.IsRecording(), so an untraced call builds none.
func Start(ctx context.Context, t trace.Tracer, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nop
	}
	return t.Start(ctx, name, trace.WithSpanKind(kind))
}

// Outcome records the outcome word (the metrics' words: ok, exit_nonzero,
// denied, timeout, busy, canceled, error) on span, marking the span an
// error for every outcome but ok and exit_nonzero: a command that exits
// non-zero has run as asked.
func Outcome(span trace.Span, outcome string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	switch outcome {
	case "ok", "exit_nonzero":
	default:
		span.SetStatus(codes.Error, outcome)
	}
}

// natsCarrier is a NATS header as a propagation carrier, with the exact
// keys NATS headers keep.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectNATS writes ctx's trace context into h as traceparent (and
// tracestate when there is one), creating h if it is nil, and returns it.
// A ctx with no valid span context (tracing off, or no span started)
// leaves h untouched: an untraced process sends no header.
func InjectNATS(ctx context.Context, h nats.Header) nats.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	if h == nil {
		h = nats.Header{}
	}
	propagator.Inject(ctx, natsCarrier(h))
	return h
}

// ExtractNATS returns ctx carrying the remote span context of h's
// traceparent, or ctx unchanged when h has none or a malformed one (a
// caller's bad header starts a new trace, never an error).
func ExtractNATS(ctx context.Context, h nats.Header) context.Context {
	if len(h[TraceParent]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, natsCarrier(h))
}

// ExtractHTTP is [ExtractNATS] for HTTP headers.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if h.Get(TraceParent) == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// metaCarrier reads the trace context from an MCP request's _meta, whose
// values are JSON: anything but a string is no value.
type metaCarrier map[string]any

func (c metaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (metaCarrier) Set(string, string) {}

func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// ExtractMeta is [ExtractNATS] for the extra fields of an MCP request's
// _meta, where a client may put traceparent and tracestate.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta[TraceParent].(string); !ok {
		return ctx
	}
	return propagator.Extract(ctx, metaCarrier(meta))
}

// InjectMeta writes ctx's trace context into meta, creating it if nil,
// for a client that propagates through _meta; it returns meta.
func InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	h := nats.Header{}
	propagator.Inject(ctx, natsCarrier(h))
	if meta == nil {
		meta = map[string]any{}
	}
	for k, v := range h {
		meta[k] = v[0]
	}
	return meta
}
