package otlp_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tracing"
	"github.com/fiskfleet/fiskfleet/shared/tracing/otlp"
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
		{"protocol alone", map[string]string{otlp.EnvProtocol: "grpc"}},
		{"batch settings alone", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "100"}},
		{"exporter none", map[string]string{otlp.EnvEndpoint: "http://127.0.0.1:1", otlp.EnvTracesExporter: "none"}},
		{"sdk disabled", map[string]string{otlp.EnvEndpoint: "http://127.0.0.1:1", otlp.EnvSDKDisabled: "true"}},
		{"endpoint blank", map[string]string{otlp.EnvEndpoint: "  "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := otlp.Setup(t.Context(), otlp.Options{Service: "x", Getenv: envOf(tt.env)})
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
	on := otlp.EnvEndpoint
	tests := []struct {
		name    string
		env     map[string]string
		naming  string
		allowed string
	}{
		{"general protocol", map[string]string{on: "http://127.0.0.1:1", otlp.EnvProtocol: "http/json"}, otlp.EnvProtocol, "grpc"},
		{"traces protocol", map[string]string{on: "http://127.0.0.1:1", otlp.EnvTracesProtocol: "GRPC"}, otlp.EnvTracesProtocol, "http/protobuf"},
		{"traces protocol beats a valid general one", map[string]string{on: "x", otlp.EnvProtocol: "grpc", otlp.EnvTracesProtocol: "thrift"}, otlp.EnvTracesProtocol, "grpc"},
		{"exporter", map[string]string{otlp.EnvTracesExporter: "zipkin"}, otlp.EnvTracesExporter, "otlp"},
		{"sdk disabled", map[string]string{otlp.EnvSDKDisabled: "maybe"}, otlp.EnvSDKDisabled, "true"},
		{"sampler", map[string]string{on: "x", otlp.EnvSampler: "sometimes"}, otlp.EnvSampler, "traceidratio"},
		{"sampler ratio", map[string]string{on: "x", otlp.EnvSampler: "traceidratio", otlp.EnvSamplerArg: "2"}, otlp.EnvSamplerArg, "0 to 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := otlp.Setup(t.Context(), otlp.Options{Getenv: envOf(tt.env)})
			if !errors.Is(err, otlp.ErrInvalidEnv) {
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
		{"default", map[string]string{otlp.EnvEndpoint: "http://127.0.0.1:4318"}, otlp.ProtocolHTTP},
		{"general grpc", map[string]string{otlp.EnvEndpoint: "http://127.0.0.1:4317", otlp.EnvProtocol: "grpc"}, otlp.ProtocolGRPC},
		{"traces overrides general", map[string]string{otlp.EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces", otlp.EnvProtocol: "grpc", otlp.EnvTracesProtocol: "http/protobuf"}, otlp.ProtocolHTTP},
		{"exporter otlp without endpoint", map[string]string{otlp.EnvTracesExporter: "otlp"}, otlp.ProtocolHTTP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := otlp.Setup(t.Context(), otlp.Options{Getenv: envOf(tt.env)})
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
	for _, protocol := range []string{otlp.ProtocolGRPC, otlp.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			endpoint := rcv.HTTPEndpoint
			if protocol == otlp.ProtocolGRPC {
				endpoint = rcv.GRPCEndpoint
			}
			t.Setenv(otlp.EnvEndpoint, endpoint)
			t.Setenv(otlp.EnvProtocol, protocol)
			t.Setenv("OTEL_SERVICE_NAME", "svc-"+protocol)
			p, err := otlp.Setup(t.Context(), otlp.Options{Service: "default-name"})
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

// TestStuckCollector: a collector that accepts connections and never
// answers neither blocks the spans being ended (the batch processor
// exports in the background) nor holds Shutdown past its context.
func TestStuckCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(held)
		for c := range held {
			_ = c.Close()
		}
	})
	for _, protocol := range []string{otlp.ProtocolHTTP, otlp.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			t.Setenv(otlp.EnvEndpoint, "http://"+ln.Addr().String())
			t.Setenv(otlp.EnvProtocol, protocol)
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
			p, err := otlp.Setup(t.Context(), otlp.Options{Service: "stuck"})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			for range 5000 {
				_, span := tracing.Start(t.Context(), p.Tracer(), "call", trace.SpanKindServer)
				span.End()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			if err := p.Shutdown(ctx); err == nil {
				t.Fatal("Shutdown: got nil, want the deadline's error with the spans unexported")
			}
		})
	}
}
