package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// inMemoryTracing returns a tracer whose spans end up in the returned
// exporter as soon as they end.
func inMemoryTracing(tb testing.TB) (trace.Tracer, *tracetest.InMemoryExporter) {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tb.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	return sdk.Tracer("test"), exp
}

// spansOf returns the spans of trace id, by name.
func spansOf(exp *tracetest.InMemoryExporter, id trace.TraceID) map[string]tracetest.SpanStub {
	out := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == id {
			out[s.Name] = s
		}
	}
	return out
}

func attrsOf(s tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// TestTraceContinuesCaller: a call made within the caller's span, on the
// tool endpoint and on the stream endpoint, gives the agent's request
// span that parent, with the slot wait and the command run under it, the
// outcome and exit code recorded, and neither the arguments nor the
// output anywhere in the attributes.
func TestTraceContinuesCaller(t *testing.T) {
	tracer, exp := inMemoryTracing(t)
	_, c, srv := serveDemo(t, server.Config{Identity: "traced", Tracer: tracer}, fiskapp.Options{})
	const secret = "argument-value-never-traced"
	calls := []struct {
		tool, input, outcome, exit string
	}{
		{"fail", `{"code":7}`, "exit_nonzero", "7"},
		{"echo", `{"message":"` + secret + `","upper":true}`, "ok", "0"},
	}
	for _, tc := range calls {
		for _, stream := range []bool{false, true} {
			checkTracedCall(t, tracer, exp, c, srv, tc.tool, tc.input, stream, map[string]string{
				"fiskfleet.identity":  "traced",
				"fiskfleet.instance":  srv.Self().Instance,
				"fiskfleet.tool":      tc.tool,
				"fiskfleet.outcome":   tc.outcome,
				"fiskfleet.exit_code": tc.exit,
			}, secret)
		}
	}
}

func checkTracedCall(t *testing.T, tracer trace.Tracer, exp *tracetest.InMemoryExporter, c *a2a.Client, srv *server.Server, toolName, in string, stream bool, want map[string]string, secret string) {
	t.Helper()
	ctx, caller := tracer.Start(t.Context(), "caller", trace.WithSpanKind(trace.SpanKindClient))
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	input := json.RawMessage(in)
	var reply *a2a.ToolReply
	var err error
	if stream {
		reply, err = c.StreamTool(callCtx, "traced", toolName, input, nil)
	} else {
		reply, err = c.CallTool(callCtx, "traced", toolName, input)
	}
	caller.End()
	if err != nil {
		t.Fatalf("%s stream %v: %v", toolName, stream, err)
	}
	output := strings.TrimSpace(reply.Output)
	if output == "" {
		t.Fatal("got no output, want the command's")
	}

	id := caller.SpanContext().TraceID()
	name := "a2a tool"
	if stream {
		name = "a2a stream"
	}
	var spans map[string]tracetest.SpanStub
	// The request span ends on the worker after the reply is sent.
	deadline := time.Now().Add(10 * time.Second)
	for spans = spansOf(exp, id); spans[name].Name == "" && time.Now().Before(deadline); spans = spansOf(exp, id) {
		time.Sleep(10 * time.Millisecond)
	}
	req, slot, run := spans[name], spans["slot wait"], spans["command run"]
	if req.Name == "" || slot.Name == "" || run.Name == "" {
		t.Fatalf("%s stream %v: got spans %v, want %q, slot wait and command run", toolName, stream, keys(spans), name)
	}
	if req.Parent.SpanID() != caller.SpanContext().SpanID() || !req.Parent.IsRemote() {
		t.Errorf("%s stream %v: request parent: got %s, want the caller's %s, remote", toolName, stream, req.Parent.SpanID(), caller.SpanContext().SpanID())
	}
	if req.SpanKind != trace.SpanKindServer {
		t.Errorf("%s stream %v: request kind: got %s, want server", toolName, stream, req.SpanKind)
	}
	for _, child := range []tracetest.SpanStub{slot, run} {
		if child.Parent.SpanID() != req.SpanContext.SpanID() {
			t.Errorf("%s stream %v: %s parent: got %s, want the request span %s", toolName, stream, child.Name, child.Parent.SpanID(), req.SpanContext.SpanID())
		}
	}
	a := attrsOf(req)
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s stream %v: request attribute %s: got %q, want %q", toolName, stream, k, a[k], v)
		}
	}
	if got := attrsOf(run)["fiskfleet.exit_code"]; got != want["fiskfleet.exit_code"] {
		t.Errorf("%s stream %v: command run exit code: got %q, want %q", toolName, stream, got, want["fiskfleet.exit_code"])
	}
	// The stage events, in the order a call passes them: the request
	// decoded, the slot taken, the process's run on the command run span,
	// then the reply encoded and sent.
	events := func(s tracetest.SpanStub) (names []string, times []time.Time) {
		for _, e := range s.Events {
			names, times = append(names, e.Name), append(times, e.Time)
		}
		return names, times
	}
	reqEvents, reqTimes := events(req)
	runEvents, runTimes := events(run)
	if got, want := strings.Join(reqEvents, ","), strings.Join([]string{tracing.EventDecoded, tracing.EventEncoded, tracing.EventSent}, ","); got != want {
		t.Errorf("%s stream %v: request events: got %s, want %s", toolName, stream, got, want)
	}
	if got, want := strings.Join(runEvents, ","), strings.Join([]string{tracing.EventStarting, tracing.EventStarted, tracing.EventExited}, ","); got != want {
		t.Errorf("%s stream %v: command run events: got %s, want %s", toolName, stream, got, want)
	}
	if len(reqTimes) == 3 && len(runTimes) == 3 {
		order := []time.Time{req.StartTime, reqTimes[0], slot.EndTime, run.StartTime, runTimes[0], runTimes[1], runTimes[2], run.EndTime, reqTimes[1], reqTimes[2], req.EndTime}
		for i := 1; i < len(order); i++ {
			if order[i].Before(order[i-1]) {
				t.Errorf("%s stream %v: stage point %d at %s is before point %d at %s", toolName, stream, i, order[i], i-1, order[i-1])
			}
		}
	}
	for _, s := range spans {
		for k, v := range attrsOf(s) {
			if strings.Contains(v, secret) || strings.Contains(strings.ToLower(v), strings.ToLower(secret)) || strings.Contains(v, output) {
				t.Errorf("span %s attribute %s = %q carries the arguments or the output", s.Name, k, v)
			}
		}
	}
}

// TestTraceWithoutCaller: a request with no trace context starts a trace
// of its own; a request naming no served tool records no tool name, since
// the name is the caller's.
func TestTraceWithoutCaller(t *testing.T) {
	tracer, exp := inMemoryTracing(t)
	_, c, _ := serveDemo(t, server.Config{Identity: "root", Tracer: tracer}, fiskapp.Options{})
	callTool(t, c, "root", "nosuch-tool-name", "")
	var req tracetest.SpanStub
	deadline := time.Now().Add(10 * time.Second)
	for req.Name == "" && time.Now().Before(deadline) {
		for _, s := range exp.GetSpans() {
			if s.Name == "a2a tool" {
				req = s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if req.Name == "" {
		t.Fatal("got no request span")
	}
	if req.Parent.IsValid() {
		t.Errorf("got parent %v, want a root span", req.Parent)
	}
	a := attrsOf(req)
	if _, ok := a["fiskfleet.tool"]; ok {
		t.Errorf("got tool attribute %q for an unknown tool, want none", a["fiskfleet.tool"])
	}
	if a["fiskfleet.outcome"] != "error" {
		t.Errorf("got outcome %q, want error", a["fiskfleet.outcome"])
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTraceHostileHeaders: a caller on the bus sending a malformed,
// oversized or forged-looking trace context still gets its call answered,
// and the agent starts a trace of its own instead of continuing garbage.
func TestTraceHostileHeaders(t *testing.T) {
	tracer, exp := inMemoryTracing(t)
	ns, _, _ := serveDemo(t, server.Config{Identity: "hostile", Tracer: tracer}, fiskapp.Options{})
	nc := ns.Connect(t)
	for _, tp := range []string{
		"not-a-traceparent",
		"00-00000000000000000000000000000000-0000000000000000-01",
		"00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01-extra",
		strings.Repeat("x", 60000),
	} {
		exp.Reset()
		msg := nats.NewMsg(natsbus.ToolSubject("hostile"))
		msg.Header.Set("traceparent", tp)
		msg.Header.Set("tracestate", strings.Repeat("k=v,", 5000))
		msg.Data = mustJSON(t, validRequest(t, "hostile", "echo", `{"message":"hi"}`))
		reply, err := nc.RequestMsg(msg, 20*time.Second)
		if err != nil {
			t.Fatalf("traceparent %.40q: %v", tp, err)
		}
		tr := &a2a.ToolReply{}
		if err := a2a.Decode(reply.Data, tr); err != nil || tr.IsError {
			t.Fatalf("traceparent %.40q: got %v / %+v, want the call answered", tp, err, tr)
		}
		var req tracetest.SpanStub
		deadline := time.Now().Add(10 * time.Second)
		for req.Name == "" && time.Now().Before(deadline) {
			for _, s := range exp.GetSpans() {
				if s.Name == "a2a tool" {
					req = s
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		if req.Name == "" || req.Parent.IsValid() {
			t.Fatalf("traceparent %.40q: got request span %q with parent %v, want a root span", tp, req.Name, req.Parent)
		}
	}
}
