package natsbus_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// seen is what a handler saw of one request.
type seen struct {
	header nats.Header
	data   []byte
}

// TestTraceContextInHeaders: a call made within a span carries the span's
// traceparent in the NATS headers of both the unary request and the
// stream request, the body exactly as sent; a call made outside any span
// carries no header at all.
func TestTraceContextInHeaders(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	got := make(chan seen, 4)
	record := func(r *natsbus.Request) {
		got <- seen{header: r.Header(), data: bytes.Clone(r.Data())}
	}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:  "traced",
		Discovery: func(r *natsbus.Request) { _ = r.Reply(r.Data()) },
		Tool:      func(r *natsbus.Request) { record(r); _ = r.Reply([]byte("{}")) },
		Stream:    func(r *natsbus.Request) { record(r); _ = r.Send([]byte("{}")) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	traced, span := sdk.Tracer("test").Start(t.Context(), "caller", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"

	tr := natsbus.NewTransport(ns.Connect(t), natsbus.WithTimeout(5*time.Second))
	body := []byte(`{"protocol":"unchanged"}`)
	call := func(ctx context.Context, stream bool) seen {
		t.Helper()
		if stream {
			s, err := tr.OpenStream(ctx, "traced", body)
			if err != nil {
				t.Fatalf("OpenStream: %v", err)
			}
			defer s.Close()
			if _, err := s.Next(ctx, 5*time.Second); err != nil {
				t.Fatalf("Next: %v", err)
			}
		} else if _, err := tr.RoundTrip(ctx, "traced", a2a.RouteTool, body); err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		select {
		case s := <-got:
			return s
		case <-time.After(5 * time.Second):
			t.Fatal("the handler saw no request")
			return seen{}
		}
	}
	for _, stream := range []bool{false, true} {
		s := call(traced, stream)
		if g := s.header.Get(tracing.TraceParent); g != want {
			t.Errorf("stream %v: got traceparent %q, want %q", stream, g, want)
		}
		if !bytes.Equal(s.data, body) {
			t.Errorf("stream %v: got body %q, want it unchanged %q", stream, s.data, body)
		}
		s = call(context.Background(), stream)
		// A unary call names its caller probe whether traced or not.
		delete(s.header, natsbus.CallerProbeHeader)
		if len(s.header) != 0 {
			t.Errorf("stream %v untraced: got headers %v, want none but the caller probe", stream, s.header)
		}
	}
}
