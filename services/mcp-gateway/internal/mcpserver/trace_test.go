package mcpserver

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Client trace contexts: what a traced MCP client sends.
const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	headerSpan   = "00f067aa0ba902b7"
	metaSpan     = "53995c3f42cd8ad8"
	headerParent = "00-" + clientTrace + "-" + headerSpan + "-01"
	metaParent   = "00-" + clientTrace + "-" + metaSpan + "-01"
)

func attrMap(s tracetest.SpanStub) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// byName returns the spans exported so far, by name, failing on a name
// seen twice.
//
// A traced request's tools/call span ends once its reply is handed to
// net/http (markArrival), which a client reading a flushed (SSE) reply can
// beat by a moment, so byName waits up to a few seconds for the spans
// named in want to be exported.
func byName(tb testing.TB, exp *tracetest.InMemoryExporter, want ...string) map[string]tracetest.SpanStub {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if _, dup := out[s.Name]; dup {
				tb.Fatalf("got two %q spans, want one per call", s.Name)
			}
			out[s.Name] = s
		}
		missing := slices.ContainsFunc(want, func(name string) bool { _, ok := out[name]; return !ok })
		if !missing || time.Now().After(deadline) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTraceToolsCall: one span per tools/call continuing the client's
// trace from its HTTP header, or from _meta when it sends both, with the
// run (and, for a gated tool, the approval) as children; attributes name
// the tool, identity, outcome and exit code, never the arguments or the
// output.
func TestTraceToolsCall(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	const secret = "never-in-a-span"
	tests := []struct {
		name        string
		header      string
		meta        string
		tool        string
		args        map[string]any
		answer      bool
		wantParent  string
		wantOutcome string
		wantExit    string
		wantRun     string
		wantApprove string
	}{
		{name: "header", header: headerParent, tool: "echo", args: map[string]any{"message": secret}, wantParent: headerSpan, wantOutcome: "ok", wantExit: "0", wantRun: "command run"},
		{name: "meta wins over header", header: headerParent, meta: metaParent, tool: "fail", args: map[string]any{"code": 4}, wantParent: metaSpan, wantOutcome: "exit_nonzero", wantExit: "4", wantRun: "command run"},
		{name: "meta alone", meta: metaParent, tool: "echo", args: map[string]any{"message": secret}, wantParent: metaSpan, wantOutcome: "ok", wantExit: "0", wantRun: "command run"},
		{name: "none: a trace of its own", tool: "echo", args: map[string]any{"message": secret}, wantOutcome: "ok", wantExit: "0", wantRun: "command run"},
		{name: "malformed header: a trace of its own", header: "00-zz-yy-01", tool: "echo", args: map[string]any{"message": secret}, wantOutcome: "ok", wantExit: "0", wantRun: "command run"},
		{name: "approved", header: headerParent, tool: "deploy", answer: true, args: map[string]any{"service": secret}, wantParent: headerSpan, wantOutcome: "ok", wantExit: "0", wantRun: "command run", wantApprove: "true"},
		{name: "declined", header: headerParent, tool: "deploy", answer: false, args: map[string]any{"service": secret}, wantParent: headerSpan, wantOutcome: "denied", wantApprove: "false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
			_, url := startServer(t, Config{Identity: "traced", Confirm: config.ConfirmAlways, Tracer: sdk.Tracer("test")}, app.Tools())

			var topts []transport.StreamableHTTPCOption
			if tt.header != "" {
				topts = append(topts, transport.WithHTTPHeaders(map[string]string{"traceparent": tt.header}))
			}
			el := &elicitor{fn: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				return answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": tt.answer}), nil
			}}
			c := connect(t, url, legacyEra, topts, client.WithElicitationHandler(el))
			if tt.tool == "deploy" {
				tt.args["marker"] = filepath.Join(t.TempDir(), "deployed")
			}
			req := mcp.CallToolRequest{}
			req.Params.Name = tt.tool
			req.Params.Arguments = tt.args
			if tt.meta != "" {
				req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": tt.meta}}
			}
			res, err := c.CallTool(t.Context(), req)
			if err != nil {
				t.Fatalf("calling %s: %v", tt.tool, err)
			}

			spans := byName(t, exp, "tools/call "+tt.tool)
			call := spans["tools/call "+tt.tool]
			if call.Name == "" {
				t.Fatalf("got spans %v, want tools/call %s", spanNames(spans), tt.tool)
			}
			if call.SpanKind != trace.SpanKindServer {
				t.Errorf("call kind: got %s, want server", call.SpanKind)
			}
			switch {
			case tt.wantParent == "" && call.Parent.IsValid():
				t.Errorf("call parent: got %s, want a root span", call.Parent.SpanID())
			case tt.wantParent != "" && (call.Parent.SpanID().String() != tt.wantParent || call.SpanContext.TraceID().String() != clientTrace):
				t.Errorf("call parent: got %s in trace %s, want %s in %s", call.Parent.SpanID(), call.SpanContext.TraceID(), tt.wantParent, clientTrace)
			}
			a := attrMap(call)
			want := map[string]string{"fiskfleet.tool": tt.tool, "fiskfleet.identity": "traced", "fiskfleet.outcome": tt.wantOutcome, "mcp.method.name": "tools/call"}
			if tt.wantExit != "" {
				want["fiskfleet.exit_code"] = tt.wantExit
			}
			for k, v := range want {
				if a[k] != v {
					t.Errorf("call attribute %s: got %q, want %q", k, a[k], v)
				}
			}
			if run := spans[tt.wantRun]; tt.wantRun != "" && run.Parent.SpanID() != call.SpanContext.SpanID() {
				t.Errorf("got %s span %+v, want it a child of the call", tt.wantRun, run.Parent)
			}
			if tt.wantRun == "" {
				if _, ok := spans["command run"]; ok {
					t.Error("got a command run span for a call that did not run")
				}
			}
			approval, asked := spans["approval"]
			if asked != (tt.wantApprove != "") {
				t.Fatalf("got approval span %t, want %t", asked, tt.wantApprove != "")
			}
			if asked {
				if approval.Parent.SpanID() != call.SpanContext.SpanID() {
					t.Errorf("approval parent: got %s, want the call %s", approval.Parent.SpanID(), call.SpanContext.SpanID())
				}
				if got := attrMap(approval)["fiskfleet.approved"]; got != tt.wantApprove {
					t.Errorf("approved: got %q, want %q", got, tt.wantApprove)
				}
			}
			output := strings.TrimSpace(resultText(res))
			for _, s := range spans {
				for k, v := range attrMap(s) {
					if strings.Contains(v, secret) || strings.Contains(v, output) {
						t.Errorf("span %s attribute %s = %q carries the arguments or the output", s.Name, k, v)
					}
				}
				if strings.Contains(s.Status.Description, secret) {
					t.Errorf("span %s status %q carries the arguments", s.Name, s.Status.Description)
				}
			}
		})
	}
}

func spanNames(m map[string]tracetest.SpanStub) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTraceStageEvents: a traced tools/call's span starts when the HTTP
// request arrives, before the MCP library has parsed it, carries the
// stage events in the order the call passes them, and ends once the reply
// is written; its run span has the process's events.
func TestTraceStageEvents(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	_, url := startServer(t, Config{Identity: "traced", Tracer: sdk.Tracer("test")}, app.Tools())
	c := connect(t, url, legacyEra, nil)
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hi"}
	if res, err := c.CallTool(t.Context(), req); err != nil || res.IsError {
		t.Fatalf("calling echo: got %+v, %v", res, err)
	}
	spans := byName(t, exp, "tools/call echo", "command run")
	call, run := spans["tools/call echo"], spans["command run"]
	if call.Name == "" || run.Name == "" {
		t.Fatalf("got spans %v, want tools/call echo and command run", spanNames(spans))
	}
	checkEvents(t, call, []string{tracing.EventParsed, tracing.EventValidated, tracing.EventSlot, tracing.EventReturned, tracing.EventSent})
	checkEvents(t, run, []string{tracing.EventStarting, tracing.EventStarted, tracing.EventExited})
	parsed := call.Events[0].Time
	if !call.StartTime.Before(parsed) {
		t.Errorf("call span start %s: want it at the request's arrival, before it was parsed (%s)", call.StartTime, parsed)
	}
	if run.StartTime.Before(call.Events[2].Time) || run.EndTime.After(call.Events[3].Time) {
		t.Errorf("run span %s–%s: want it between the slot and the call's return", run.StartTime, run.EndTime)
	}
	if last := call.Events[len(call.Events)-1].Time; call.EndTime.Before(last) {
		t.Errorf("call span end %s: want it after the reply was sent (%s)", call.EndTime, last)
	}
}

// checkEvents fails t unless s has exactly the events named want, in
// that order, at times that do not go back.
func checkEvents(t *testing.T, s tracetest.SpanStub, want []string) {
	t.Helper()
	var got []string
	for i, e := range s.Events {
		got = append(got, e.Name)
		if i > 0 && e.Time.Before(s.Events[i-1].Time) {
			t.Errorf("%s: event %q at %s is before %q", s.Name, e.Name, e.Time, s.Events[i-1].Name)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s events: got %q, want %q", s.Name, got, want)
	}
}
