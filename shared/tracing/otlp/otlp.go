// Package otlp sets a service's OpenTelemetry tracing up from the
// standard OTEL_* environment variables: the SDK, a batch span processor
// and the OTLP exporter over grpc or http/protobuf. Only the services'
// main packages import it; the shared libraries depend on the
// OpenTelemetry API alone (see package tracing), so a program that never
// exports does not link the SDK through them.
//
// Tracing is off unless an OTLP endpoint is named
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER is otlp. Off means no SDK at all: [Setup] returns a
// [Provider] whose [Provider.Tracer] is nil, and the helpers of package
// tracing do nothing for a nil tracer, without allocating, so a process
// that does not trace pays a nil check per span it would have started.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The environment variables read here. The exporters and the SDK read the
// others themselves: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _INSECURE,
// _CERTIFICATE and _COMPRESSION (and their _TRACES_ forms), OTEL_BSP_*,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
)

// The OTLP protocols the exporters speak.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultProtocol is the protocol when neither protocol variable is set:
// the OpenTelemetry specification's default for OTLP exporters.
const DefaultProtocol = ProtocolHTTP

// ErrInvalidEnv is an OTEL_* variable with a value this process cannot
// honour. The error names the variable and the values it takes.
var ErrInvalidEnv = errors.New("invalid OpenTelemetry environment variable")

// Options configures [Setup].
type Options struct {
	// Service is the service.name when OTEL_SERVICE_NAME (or
	// service.name in OTEL_RESOURCE_ATTRIBUTES) does not set one.
	Service string
	// Logger receives the SDK's export errors (a collector that is down,
	// a span batch dropped); nil means slog.Default().
	Logger *slog.Logger
	// Getenv reads the variables [Setup] decides on; nil means os.Getenv.
	// The exporters and the SDK read theirs from the process environment
	// whatever this is.
	Getenv func(string) string
}

// Provider is a process's tracing: the tracer to start spans with, nil
// when tracing is off, and the SDK provider to flush on the way out.
type Provider struct {
	sdk      *sdktrace.TracerProvider
	tracer   trace.Tracer
	protocol string
	once     sync.Once
	err      error
}

// Tracer returns the tracer spans are started with, or nil when tracing is
// off. The helpers of package tracing take the nil as "do nothing".
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Protocol is the OTLP protocol spans are exported with; empty when off.
func (p *Provider) Protocol() string {
	if p == nil {
		return ""
	}
	return p.protocol
}

// TracerProvider returns the SDK provider, for a test that wants spans
// of its own; nil when tracing is off.
func (p *Provider) TracerProvider() *sdktrace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.sdk
}

// Shutdown exports the spans still batched and stops the exporter, within
// ctx. It is idempotent, safe on a nil or disabled provider, and must be
// called once the process has stopped serving, or the last spans are lost.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	p.once.Do(func() {
		if err := p.sdk.Shutdown(ctx); err != nil {
			p.err = fmt.Errorf("flushing traces: %w", err)
		}
	})
	return p.err
}

// FlushTimeout bounds [Provider.Close]: a collector that is gone must not
// hold a stopping process up.
const FlushTimeout = 5 * time.Second

// Close is [Provider.Shutdown] for a process on its way out: within
// FlushTimeout, logging a failure to log rather than returning it, since
// nothing can be done about it then.
func (p *Provider) Close(log *slog.Logger) {
	if !p.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("exporting the last traces", "error", err)
	}
}

// NewProvider wraps an SDK provider that the caller built, for tests that
// export to an in-memory exporter: the tracer comes from sdk under this
// package's instrumentation name. A nil sdk gives a disabled provider.
func NewProvider(sdk *sdktrace.TracerProvider) *Provider {
	if sdk == nil {
		return &Provider{}
	}
	return &Provider{sdk: sdk, tracer: sdk.Tracer(instrumentation)}
}

// instrumentation names the fleet's spans' instrumentation scope.
const instrumentation = "github.com/fiskfleet/fiskfleet"

// Setup reads the OTEL_* environment and returns the process's tracing:
// disabled (no SDK, no exporter, no goroutine) unless an OTLP endpoint is
// named or OTEL_TRACES_EXPORTER is otlp. A value it cannot honour (an
// unknown protocol, exporter or sampler) is an error wrapping
// [ErrInvalidEnv] that names the variable, so a typo stops the process at
// start instead of silently losing every trace. Enabled, it exports with
// a batch span processor over the configured protocol; nothing is sent
// until the first span ends, so a collector that is not up yet is not an
// error here.
func Setup(ctx context.Context, opts Options) (*Provider, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	on, err := enabled(getenv)
	if err != nil || !on {
		return &Provider{}, err
	}
	protocol, err := protocolOf(getenv)
	if err != nil {
		return nil, err
	}
	if err := checkSampler(getenv); err != nil {
		return nil, err
	}

	var exp sdktrace.SpanExporter
	switch protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP %s trace exporter: %w", protocol, err)
	}
	service := opts.Service
	if service == "" {
		service = "fiskfleet"
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the default name.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %w", ErrInvalidEnv, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	// The SDK reports export failures through the global handler, which
	// would otherwise print them with the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("exporting traces", "error", err)
	}))
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
	)
	p := NewProvider(sdk)
	p.protocol = protocol
	name, _ := res.Set().Value("service.name")
	log.Info("exporting traces over OTLP", "service", name.Emit(), "protocol", protocol)
	return p, nil
}

// enabled decides whether to trace at all.
func enabled(getenv func(string) string) (bool, error) {
	if v := strings.TrimSpace(getenv(EnvSDKDisabled)); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%w: %s is %q: use true or false", ErrInvalidEnv, EnvSDKDisabled, v)
		}
		if off {
			return false, nil
		}
	}
	switch v := strings.TrimSpace(getenv(EnvTracesExporter)); v {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("%w: %s is %q: this process exports traces with otlp only (or none)", ErrInvalidEnv, EnvTracesExporter, v)
	}
	return strings.TrimSpace(getenv(EnvEndpoint)) != "" || strings.TrimSpace(getenv(EnvTracesEndpoint)) != "", nil
}

// protocolOf picks the OTLP protocol: the traces variable, else the
// general one, else [DefaultProtocol].
func protocolOf(getenv func(string) string) (string, error) {
	for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
		switch v := strings.TrimSpace(getenv(name)); v {
		case "":
			continue
		case ProtocolGRPC, ProtocolHTTP:
			return v, nil
		default:
			return "", fmt.Errorf("%w: %s is %q: use %s or %s", ErrInvalidEnv, name, v, ProtocolGRPC, ProtocolHTTP)
		}
	}
	return DefaultProtocol, nil
}

// checkSampler refuses a sampler the SDK would only log about before
// falling back to sampling everything.
func checkSampler(getenv func(string) string) error {
	v := strings.TrimSpace(getenv(EnvSampler))
	switch v {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(getenv(EnvSamplerArg))
		if arg == "" {
			return nil
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("%w: %s is %q: use a ratio from 0 to 1", ErrInvalidEnv, EnvSamplerArg, arg)
		}
		return nil
	}
	return fmt.Errorf("%w: %s is %q: use always_on, always_off, traceidratio or their parentbased_ forms", ErrInvalidEnv, EnvSampler, v)
}
