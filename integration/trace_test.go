package integration_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
	"github.com/fiskfleet/fiskfleet/shared/tracing/tracingtest"
)

// traceTimeout bounds the wait for exported spans: the processes export
// in batches every 100ms here, the machine is shared.
const traceTimeout = 30 * time.Second

// withoutOTEL is env less every OTEL_* variable, so what the test sets is
// all the processes see, whatever the test process itself inherited.
func withoutOTEL(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "OTEL_") })
}

// busRequests subscribes to identity's tool and stream subjects beside
// the agent's queue group, so the test sees every request as NATS
// delivers it: headers and body.
func busRequests(tb testing.TB, b *bus, identity string) <-chan *nats.Msg {
	tb.Helper()
	nc := b.ns.Connect(tb)
	msgs := make(chan *nats.Msg, 64)
	for _, subject := range []string{natsbus.ToolSubject(identity), natsbus.StreamSubject(identity)} {
		if _, err := nc.ChanSubscribe(subject, msgs); err != nil {
			tb.Fatalf("subscribing to %s: %v", subject, err)
		}
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// nextRequest returns the next request seen on the bus for tool name,
// skipping others.
func nextRequest(tb testing.TB, msgs <-chan *nats.Msg, name string) (*nats.Msg, *a2a.ToolRequest) {
	tb.Helper()
	timeout := time.After(traceTimeout)
	for {
		select {
		case m := <-msgs:
			req := &a2a.ToolRequest{}
			// Decode validates the body against the v1 schema.
			if err := a2a.Decode(m.Data, req); err != nil {
				tb.Fatalf("request on %s: got a body the v1 schema refuses (%v): %s", m.Subject, err, m.Data)
			}
			if req.Name == name {
				return m, req
			}
		case <-timeout:
			tb.Fatalf("saw no request for %s on the bus within %s", name, traceTimeout)
			return nil, nil
		}
	}
}

// startTracedFleet starts NATS, one agent serving demo, and a gateway
// importing it, each with env added, and an MCP client of the gateway
// sending headers; it waits until the gateway serves demo_echo.
func startTracedFleet(tb testing.TB, agentEnv, gatewayEnv []string, headers map[string]string) (*bus, *fleettest.Process, *gatewayProcess, *client.Client, <-chan *nats.Msg) {
	tb.Helper()
	b := newBus(tb)
	msgs := busRequests(tb, b, "demo")
	agent := fleettest.StartAgent(tb, append(withoutOTEL(b.home.Env()), agentEnv...), fleettest.WriteAgentConfig(tb, b.demoAgent(tb, "demo", 2)))
	gw := startGateway(tb, append(withoutOTEL(b.home.Env()), gatewayEnv...), b.gatewayConfig(tb, "", "demo"))
	var topts []transport.StreamableHTTPCOption
	if headers != nil {
		topts = append(topts, transport.WithHTTPHeaders(headers))
	}
	c := newMCPClient(tb, gw.URL, topts, nil, nil)
	fisktest.WaitFor(tb, fleettest.ReadyTimeout, "the gateway to serve demo_echo", func() bool {
		return slices.Contains(listNames(tb, c), "demo_echo")
	})
	return b, agent, gw, c, msgs
}

// TestTraceAcrossFleet: one MCP call to a remote tool, from a client that
// sends a traceparent, makes one trace in one OTLP receiver: the gateway
// (exporting over http/protobuf) continues the client's span, its remote
// call span is the parent the agent (exporting over grpc) continues from
// the NATS headers, and the agent's slot wait and command run hang under
// its request span. The request on the bus carries the traceparent in its
// headers, its body is schema-valid v1 with no trace field, and no span
// attribute holds the call's argument or output. The client here is the
// test, with a span of its own: first in the HTTP header, on a call
// without a progressToken (a unary A2A call, "a2a tool"), then in the
// request's _meta, on a call with one (a streamed call, "a2a stream").
func TestTraceAcrossFleet(t *testing.T) {
	t.Parallel()
	rcv := tracingtest.Start(t)
	clientExp := tracetest.NewInMemoryExporter()
	clientSDK := sdktrace.NewTracerProvider(sdktrace.WithSyncer(clientExp))
	t.Cleanup(func() { _ = clientSDK.Shutdown(context.Background()) })
	tracer := clientSDK.Tracer("integration-client")

	// One traceparent per client: the HTTP header is fixed per transport,
	// so the header case has its own span opened before the client.
	hctx, headerSpan := tracer.Start(t.Context(), "client tools/call", trace.WithSpanKind(trace.SpanKindClient))
	headers := map[string]string{tracing.TraceParent: tracing.InjectNATS(hctx, nil).Get(tracing.TraceParent)}

	common := []string{"OTEL_BSP_SCHEDULE_DELAY=100"}
	agentEnv := append([]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.GRPCEndpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_SERVICE_NAME=fleet-agent",
	}, common...)
	gatewayEnv := append([]string{
		// The traces-specific variables win over the general ones.
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + rcv.HTTPEndpoint + "/v1/traces",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=fleet-gateway",
	}, common...)
	_, agent, gw, c, msgs := startTracedFleet(t, agentEnv, gatewayEnv, headers)

	const secret = "trace-me-not"
	cases := []struct {
		name string
		span trace.Span
		meta bool
	}{
		{"http header", headerSpan, false},
		{"_meta", nil, true},
	}
	for _, tc := range cases {
		span := tc.span
		if tc.meta {
			_, span = tracer.Start(t.Context(), "client tools/call via _meta", trace.WithSpanKind(trace.SpanKindClient))
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "demo_echo"
		req.Params.Arguments = map[string]any{"message": secret}
		if tc.meta {
			ctx := trace.ContextWithSpan(t.Context(), span)
			// With a progressToken, so the remote call streams.
			req.Params.Meta = &mcp.Meta{ProgressToken: "trace-progress", AdditionalFields: tracing.InjectMeta(ctx, nil)}
		}
		res, err := c.CallTool(t.Context(), req)
		span.End()
		if err != nil || res.IsError {
			t.Fatalf("%s: tools/call demo_echo: got %v, %+v", tc.name, err, res)
		}
		output := strings.TrimSpace(mcpText(res))
		if !strings.Contains(output, secret) {
			t.Fatalf("%s: got output %q, want the echo of %q", tc.name, output, secret)
		}
		traceID := span.SpanContext().TraceID().String()

		// The request as the bus carried it.
		msg, sent := nextRequest(t, msgs, "echo")
		subject, servedName := natsbus.ToolSubject("demo"), "a2a tool"
		if tc.meta {
			subject, servedName = natsbus.StreamSubject("demo"), "a2a stream"
		}
		if msg.Subject != subject {
			t.Errorf("%s: got the call on %s, want %s", tc.name, msg.Subject, subject)
		}
		tp := msg.Header.Get(tracing.TraceParent)
		if !strings.HasPrefix(tp, "00-"+traceID+"-") {
			t.Errorf("%s: got traceparent header %q, want one in trace %s", tc.name, tp, traceID)
		}
		var body map[string]any
		if err := json.Unmarshal(msg.Data, &body); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(msg.Data), "traceparent") || strings.Contains(string(msg.Data), traceID) {
			t.Errorf("%s: got the trace context in the A2A body %s, want it in the headers only", tc.name, msg.Data)
		}
		if got := string(sent.Input); got != `{"message":"`+secret+`"}` {
			t.Errorf("%s: got input %s, want the client's arguments unchanged", tc.name, got)
		}

		spans := rcv.WaitFor(t, traceTimeout, func(s []tracingtest.Span) bool {
			names := map[string]bool{}
			for _, sp := range s {
				if sp.TraceID == traceID {
					names[sp.Name] = true
				}
			}
			return names["tools/call demo_echo"] && names["remote call"] && names[servedName] && names["slot wait"] && names["command run"]
		})
		got := map[string]tracingtest.Span{}
		for _, sp := range spans {
			if sp.TraceID != traceID {
				continue
			}
			if _, dup := got[sp.Name]; dup {
				t.Errorf("%s: got two %q spans in the trace, want one", tc.name, sp.Name)
			}
			got[sp.Name] = sp
			for k, v := range sp.Attrs {
				if strings.Contains(strings.ToLower(v), secret) || strings.Contains(v, output) {
					t.Errorf("%s: span %s attribute %s = %q carries the argument or the output", tc.name, sp.Name, k, v)
				}
			}
		}
		call, remote, served := got["tools/call demo_echo"], got["remote call"], got[servedName]
		links := []struct {
			child, parent string
			childSpan     tracingtest.Span
			parentID      string
			service       string
			protocol      string
		}{
			{"tools/call demo_echo", "the client", call, span.SpanContext().SpanID().String(), "fleet-gateway", "http/protobuf"},
			{"remote call", "tools/call", remote, call.SpanID, "fleet-gateway", "http/protobuf"},
			{servedName, "remote call", served, remote.SpanID, "fleet-agent", "grpc"},
			{"slot wait", servedName, got["slot wait"], served.SpanID, "fleet-agent", "grpc"},
			{"command run", servedName, got["command run"], served.SpanID, "fleet-agent", "grpc"},
		}
		for _, l := range links {
			if l.childSpan.ParentID != l.parentID {
				t.Errorf("%s: %s parent: got %q, want %s's %q", tc.name, l.child, l.childSpan.ParentID, l.parent, l.parentID)
			}
			if l.childSpan.Service != l.service || l.childSpan.Protocol != l.protocol {
				t.Errorf("%s: %s: got service %q over %s, want %q over %s", tc.name, l.child, l.childSpan.Service, l.childSpan.Protocol, l.service, l.protocol)
			}
		}
		if want := "00-" + traceID + "-" + remote.SpanID + "-01"; tp != want {
			t.Errorf("%s: got traceparent %q on the bus, want the remote call span's %q", tc.name, tp, want)
		}
		wantAttrs := map[string]map[string]string{
			"tools/call demo_echo": {"fiskfleet.identity": "gw", "fiskfleet.tool": "demo_echo", "fiskfleet.outcome": "ok", "fiskfleet.exit_code": "0", "mcp.method.name": "tools/call"},
			"remote call":          {"fiskfleet.remote.host": "demo", "fiskfleet.outcome": "ok"},
			servedName:             {"fiskfleet.identity": "demo", "fiskfleet.tool": "echo", "fiskfleet.outcome": "ok", "fiskfleet.exit_code": "0"},
		}
		if tc.meta {
			wantAttrs[servedName]["fiskfleet.stream"] = "true"
		} else if v, ok := served.Attrs["fiskfleet.stream"]; ok {
			t.Errorf("%s: %s attribute fiskfleet.stream: got %q, want none on a unary call", tc.name, servedName, v)
		}
		for name, want := range wantAttrs {
			for k, v := range want {
				if g := got[name].Attrs[k]; g != v {
					t.Errorf("%s: %s attribute %s: got %q, want %q", tc.name, name, k, g, v)
				}
			}
		}
		if inst := served.Attrs["fiskfleet.instance"]; inst == "" || remote.Attrs["fiskfleet.instance"] != inst {
			t.Errorf("%s: got agent instance %q and the gateway's record of it %q, want the same, set", tc.name, inst, remote.Attrs["fiskfleet.instance"])
		}
	}
	if rcv.Exports("grpc") == 0 || rcv.Exports("http/protobuf") == 0 {
		t.Errorf("got %d grpc and %d http/protobuf exports, want both protocols used", rcv.Exports("grpc"), rcv.Exports("http/protobuf"))
	}
	if !strings.Contains(agent.Stderr(), `protocol=grpc`) || !strings.Contains(gw.Stderr(), `protocol=http/protobuf`) {
		t.Errorf("want each process to log the protocol it exports with")
	}
}

// TestTraceOffByDefault: with no OTEL_* variable at all, and with only
// variables that name no endpoint (the service name and the protocol,
// which alone do not turn tracing on), the same call from a client that
// sends a traceparent sends no header on the bus, and neither process
// sets up an exporter.
func TestTraceOffByDefault(t *testing.T) {
	t.Parallel()
	headers := map[string]string{tracing.TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for name, env := range map[string][]string{
		"no OTEL variable":     nil,
		"no endpoint variable": {"OTEL_SERVICE_NAME=nothing-to-see", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=10"},
	} {
		t.Run(name, func(t *testing.T) {
			_, agent, gw, c, msgs := startTracedFleet(t, env, env, headers)
			res := callMCP(t, c, "demo_echo", map[string]any{"message": "plain"})
			if res.IsError {
				t.Fatalf("tools/call demo_echo: got %s", mcpText(res))
			}
			msg, _ := nextRequest(t, msgs, "echo")
			if len(msg.Header) != 0 {
				t.Errorf("got headers %v on the bus, want none with tracing off", msg.Header)
			}
			for _, p := range []*fleettest.Process{agent, gw.Process} {
				if strings.Contains(p.Stderr(), "exporting traces") {
					t.Errorf("%s logged an exporter with tracing off:\n%s", p.Name, p.Stderr())
				}
			}
		})
	}
}

// TestTraceRefusesUnknownProtocol: a protocol the exporters do not speak
// stops `a2a-agent serve` at start with the variable named.
func TestTraceRefusesUnknownProtocol(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	cfg := fleettest.WriteAgentConfig(t, b.demoAgent(t, "demo", 1))
	env := append(withoutOTEL(b.home.Env()), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=thrift")
	r := fleettest.Run(t, env, fleettest.A2AAgent(t), "serve", "--config", cfg)
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") || !strings.Contains(r.Stderr, `"thrift"`) {
		t.Fatalf("got exit %d, stderr %q; want a refusal naming OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", r.ExitCode, r.Stderr)
	}
}
