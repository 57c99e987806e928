package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tracing"
	"github.com/fiskfleet/fiskfleet/shared/tracing/tracingtest"
)

// envOf is a Getenv over a fixed map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSetupOff(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"nothing set", nil},
		{"service name alone", map[string]string{"OTEL_SERVICE_NAME": "gw"}},
		{"protocol alone", map[string]string{tracing.EnvProtocol: "grpc"}},
		{"batch settings alone", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "100"}},
		{"exporter none", map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvTracesExporter: "none"}},
		{"sdk disabled", map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:1", tracing.EnvSDKDisabled: "true"}},
		{"endpoint blank", map[string]string{tracing.EnvEndpoint: "  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tracing.Setup(t.Context(), tracing.Options{Service: "x", Getenv: envOf(tt.env)})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			if p.Enabled() || p.Tracer() != nil || p.TracerProvider() != nil || p.Protocol() != "" {
				t.Fatalf("got an enabled provider (protocol %q), want tracing off", p.Protocol())
			}
			if err := p.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown of a disabled provider: %v", err)
			}
		})
	}
}

func TestSetupRefusesUnknownValues(t *testing.T) {
	on := tracing.EnvEndpoint
	tests := []struct {
		name    string
		env     map[string]string
		naming  string
		allowed string
	}{
		{"general protocol", map[string]string{on: "http://127.0.0.1:1", tracing.EnvProtocol: "http/json"}, tracing.EnvProtocol, "grpc"},
		{"traces protocol", map[string]string{on: "http://127.0.0.1:1", tracing.EnvTracesProtocol: "GRPC"}, tracing.EnvTracesProtocol, "http/protobuf"},
		{"traces protocol beats a valid general one", map[string]string{on: "x", tracing.EnvProtocol: "grpc", tracing.EnvTracesProtocol: "thrift"}, tracing.EnvTracesProtocol, "grpc"},
		{"exporter", map[string]string{tracing.EnvTracesExporter: "zipkin"}, tracing.EnvTracesExporter, "otlp"},
		{"sdk disabled", map[string]string{tracing.EnvSDKDisabled: "maybe"}, tracing.EnvSDKDisabled, "true"},
		{"sampler", map[string]string{on: "x", tracing.EnvSampler: "sometimes"}, tracing.EnvSampler, "traceidratio"},
		{"sampler ratio", map[string]string{on: "x", tracing.EnvSampler: "traceidratio", tracing.EnvSamplerArg: "2"}, tracing.EnvSamplerArg, "0 to 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tracing.Setup(t.Context(), tracing.Options{Getenv: envOf(tt.env)})
			if !errors.Is(err, tracing.ErrInvalidEnv) {
				t.Fatalf("got %v, %v; want an error wrapping ErrInvalidEnv", p, err)
			}
			if !strings.Contains(err.Error(), tt.naming) || !strings.Contains(err.Error(), tt.allowed) {
				t.Fatalf("got %q, want it to name %s and say %q", err, tt.naming, tt.allowed)
			}
		})
	}
}

func TestSetupProtocol(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"default", map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4318"}, tracing.ProtocolHTTP},
		{"general grpc", map[string]string{tracing.EnvEndpoint: "http://127.0.0.1:4317", tracing.EnvProtocol: "grpc"}, tracing.ProtocolGRPC},
		{"traces overrides general", map[string]string{tracing.EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces", tracing.EnvProtocol: "grpc", tracing.EnvTracesProtocol: "http/protobuf"}, tracing.ProtocolHTTP},
		{"exporter otlp without endpoint", map[string]string{tracing.EnvTracesExporter: "otlp"}, tracing.ProtocolHTTP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tracing.Setup(t.Context(), tracing.Options{Getenv: envOf(tt.env)})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			defer p.Shutdown(context.Background())
			if !p.Enabled() || p.Tracer() == nil {
				t.Fatal("got tracing off, want on")
			}
			if got := p.Protocol(); got != tt.want {
				t.Fatalf("got protocol %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSetupExports sends a span over each protocol to a real OTLP
// receiver, the exporters reading the endpoint from the environment as in
// production; Shutdown flushes it.
func TestSetupExports(t *testing.T) {
	rcv := tracingtest.Start(t)
	for _, protocol := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			endpoint := rcv.HTTPEndpoint
			if protocol == tracing.ProtocolGRPC {
				endpoint = rcv.GRPCEndpoint
			}
			t.Setenv(tracing.EnvEndpoint, endpoint)
			t.Setenv(tracing.EnvProtocol, protocol)
			t.Setenv("OTEL_SERVICE_NAME", "svc-"+protocol)
			p, err := tracing.Setup(t.Context(), tracing.Options{Service: "default-name"})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			_, span := tracing.Start(t.Context(), p.Tracer(), "unit "+protocol, trace.SpanKindServer)
			tracing.Outcome(span, "timeout")
			span.End()
			if err := p.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			spans := rcv.WaitFor(t, 10*time.Second, func(s []tracingtest.Span) bool {
				for _, sp := range s {
					if sp.Name == "unit "+protocol {
						return true
					}
				}
				return false
			})
			for _, sp := range spans {
				if sp.Name != "unit "+protocol {
					continue
				}
				if sp.Protocol != protocol || sp.Service != "svc-"+protocol || sp.Attrs["fiskfleet.outcome"] != "timeout" || sp.StatusCode != 2 || sp.Kind != 2 {
					t.Fatalf("got %+v, want protocol %s, service svc-%s, outcome timeout, error status, server kind", sp, protocol, protocol)
				}
			}
			if err := p.Shutdown(t.Context()); err != nil {
				t.Fatalf("second Shutdown: %v", err)
			}
		})
	}
}

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
	p := tracing.NewProvider(sdk)

	ctx, parent := tracing.Start(t.Context(), p.Tracer(), "caller", trace.SpanKindClient)
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
		_, child := tracing.Start(got, p.Tracer(), "callee "+name, trace.SpanKindServer)
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
