package tracing_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// TestOffAllocatesNothing is the cost of tracing off on the hot path: a
// span started and ended on a nil tracer, an attribute guard, and an
// injection that finds no span.
func TestOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	h := nats.Header{}
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := tracing.Start(ctx, nil, "x", trace.SpanKindServer)
		if span.IsRecording() {
			t.Fatal("a span of a nil tracer records")
		}
		tracing.Outcome(span, "ok")
		tracing.Event(span, tracing.EventStarted)
		tracing.InjectNATS(c, h)
		span.End()
	})
	if allocs != 0 {
		t.Fatalf("got %v allocations per untraced span, want 0", allocs)
	}
	if len(h) != 0 {
		t.Fatalf("got header %v, want none without a span", h)
	}
	if got := tracing.InjectNATS(ctx, nil); got != nil {
		t.Fatalf("got header %v from an untraced context, want nil", got)
	}
}

func TestPropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer sdk.Shutdown(context.Background())
	tracer := sdk.Tracer("test")

	ctx, parent := tracing.Start(t.Context(), tracer, "caller", trace.SpanKindClient)
	want := parent.SpanContext()

	h := tracing.InjectNATS(ctx, nil)
	if got := h[tracing.TraceParent]; len(got) != 1 || !strings.Contains(got[0], want.TraceID().String()) || !strings.Contains(got[0], want.SpanID().String()) {
		t.Fatalf("got traceparent %v, want one naming trace %s span %s", got, want.TraceID(), want.SpanID())
	}
	if _, ok := h["Traceparent"]; ok {
		t.Fatal("got a canonicalised Traceparent key; NATS headers keep the exact lower-case key")
	}

	meta := tracing.InjectMeta(ctx, nil)
	hh := http.Header{}
	hh.Set(tracing.TraceParent, h[tracing.TraceParent][0])

	for name, got := range map[string]context.Context{
		"nats": tracing.ExtractNATS(context.Background(), h),
		"meta": tracing.ExtractMeta(context.Background(), meta),
		"http": tracing.ExtractHTTP(context.Background(), hh),
	} {
		sc := trace.SpanContextFromContext(got)
		if !sc.IsRemote() || sc.TraceID() != want.TraceID() || sc.SpanID() != want.SpanID() || !sc.IsSampled() {
			t.Fatalf("%s: got %v, want the caller's span context, remote and sampled", name, sc)
		}
		_, child := tracing.Start(got, tracer, "callee "+name, trace.SpanKindServer)
		child.End()
	}
	parent.End()
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, "callee") && (s.Parent.SpanID() != want.SpanID() || s.SpanContext.TraceID() != want.TraceID()) {
			t.Fatalf("%s: got parent %s trace %s, want %s %s", s.Name, s.Parent.SpanID(), s.SpanContext.TraceID(), want.SpanID(), want.TraceID())
		}
	}
	if got := len(exp.GetSpans()); got != 4 {
		t.Fatalf("got %d spans, want 4", got)
	}
}

// TestExtractHostile: a malformed, oversized or mistyped trace context
// starts a new trace; it is never an error and never a panic.
func TestExtractHostile(t *testing.T) {
	bad := []string{
		"",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
		strings.Repeat("0", 1<<16),
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nX: y",
	}
	for _, v := range bad {
		ctx := tracing.ExtractNATS(context.Background(), nats.Header{tracing.TraceParent: {v}})
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			t.Fatalf("traceparent %.60q: got a valid span context %v, want none", v, sc)
		}
	}
	for _, meta := range []map[string]any{
		nil,
		{tracing.TraceParent: 42},
		{tracing.TraceParent: []any{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{tracing.TraceParent: map[string]any{}},
	} {
		ctx := tracing.ExtractMeta(context.Background(), meta)
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			t.Fatalf("_meta %v: got a valid span context, want none", meta)
		}
	}
}

// TestEvent adds a stage event to a recording span, with nothing but its
// name and time.
func TestEvent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	_, span := tracing.Start(context.Background(), sdk.Tracer("test"), "x", trace.SpanKindInternal)
	tracing.Event(span, tracing.EventStarted)
	tracing.Event(span, tracing.EventExited)
	span.End()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	ev := spans[0].Events
	if len(ev) != 2 || ev[0].Name != tracing.EventStarted || ev[1].Name != tracing.EventExited || len(ev[0].Attributes) != 0 || ev[1].Time.Before(ev[0].Time) {
		t.Errorf("got events %+v, want %q then %q, without attributes, in order", ev, tracing.EventStarted, tracing.EventExited)
	}
}
