package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
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

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// auditTrail is a real NATS server, an audit publisher on a connection of
// its own, and a subscription on every identity's trail.
type auditTrail struct {
	pub *audit.Publisher
	sub *nats.Subscription
}

// startAuditTrail starts the trail before any server that publishes on it,
// so its cleanup (closing the publisher) runs after theirs.
func startAuditTrail(tb testing.TB) *auditTrail {
	tb.Helper()
	ns := natstest.Start(tb)
	nc := ns.Connect(tb)
	sub, err := nc.SubscribeSync(audit.SubjectAll())
	if err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	pub := audit.NewPublisher(ns.Connect(tb), audit.PublisherConfig{Logger: testLogger(tb)})
	tb.Cleanup(func() {
		if err := pub.Close(context.Background()); err != nil {
			tb.Errorf("closing the audit publisher: %v", err)
		}
	})
	return &auditTrail{pub: pub, sub: sub}
}

// next returns the next record and its subject, failing tb unless one
// arrives within 10 s and validates against the schema.
func (tr *auditTrail) next(tb testing.TB) (*audit.Record, string) {
	tb.Helper()
	m, err := tr.sub.NextMsg(10 * time.Second)
	if err != nil {
		tb.Fatalf("audit record: got none (%v), want one", err)
	}
	if err := audit.Validate(m.Data); err != nil {
		tb.Fatalf("audit record %s: %v", m.Data, err)
	}
	r := &audit.Record{}
	if err := json.Unmarshal(m.Data, r); err != nil {
		tb.Fatalf("decoding audit record %s: %v", m.Data, err)
	}
	return r, m.Subject
}

// none fails tb when a record arrives within a short while.
func (tr *auditTrail) none(tb testing.TB) {
	tb.Helper()
	if m, err := tr.sub.NextMsg(300 * time.Millisecond); err == nil {
		tb.Errorf("audit record: got %s, want none", m.Data)
	}
}

// auditClientID is the OAuth client id auditAuthenticate gives caller.
func auditClientID(subject string) string { return "ide-" + subject }

// auditAuthenticate is testAuthenticate whose callers also carry an OAuth
// client id, as a verified token does.
func auditAuthenticate(next http.Handler, authorize func(*auth.Caller) error) http.Handler {
	return testAuthenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := auth.CallerFrom(r.Context()); c != nil {
			c.ClientID = auditClientID(c.Subject)
		}
		next.ServeHTTP(w, r)
	}), authorize)
}

// auditPolicy: admins (dave) run everything as role ops; readers (alice)
// run only echo as role reader; guests (mallory) match no role.
func auditPolicy() *policy.Policy {
	return policy.New(&config.Policy{Roles: map[string]*config.Role{
		"ops":    {Match: []string{"admins"}},
		"reader": {Match: []string{"readers"}, Include: config.Filter{Tools: []string{"echo"}}},
	}})
}

// sha256Digest is the digest a record must carry for canonical JSON c,
// computed here rather than by the package under test.
func sha256Digest(c string) string {
	sum := sha256.Sum256([]byte(c))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestAuditRecords drives the gateway over HTTP with the mcp-go client and
// checks the one record each answered tools/call leaves on NATS: who
// called (the token's subject, roles and client id), the arguments as
// canonical JSON and their digest, the command line, what the approval
// gate decided and how the call ended.
func TestAuditRecords(t *testing.T) {
	tr := startAuditTrail(t)
	app := loadDemo(t, fiskapp.Options{})
	demo := fisktest.FiskDemo(t)
	urls := map[config.ConfirmPolicy]string{}
	for _, confirm := range []config.ConfirmPolicy{config.ConfirmAuto, config.ConfirmAlways, config.ConfirmNever} {
		_, url := startServer(t, Config{
			Identity: "audited", Instance: "gw-" + string(confirm), Confirm: confirm, ApprovalTimeout: approvalTimeout,
			Authenticate: auditAuthenticate, Policy: auditPolicy(), Audit: tr.pub,
		}, app.Tools())
		urls[confirm] = url
	}
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	reply := func(action mcp.ElicitationResponseAction, content any) func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return answer(action, content), nil
		}
	}
	never := func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		select {
		case <-stuck:
		case <-ctx.Done():
		}
		return nil, errors.New("gave up")
	}

	type want struct {
		decision, result, class string
		exit                    *int
		// command is the command line after the demo's path; "" means
		// none recorded.
		command string
		// ranUngated marks an ungated command: the gateway knows its
		// command line only from the result, and may leave it out.
		ranUngated bool
		// message is a substring of the recorded error text.
		message string
		roles   []string
	}
	tests := []struct {
		name    string
		era     era
		confirm config.ConfirmPolicy
		caller  string
		handler func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
		tool    string
		// args are sent as written; canonical is what the record must
		// hold. MARKER is replaced by a fresh marker path.
		args      string
		canonical string
		want      want
		// hidden marks a tool the caller's policy hides: the call is
		// answered exactly as a call of an unknown tool, and audited.
		hidden bool
	}{
		{
			name: "allowed local call", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "echo",
			args: `{"upper": true, "message": "hi", "count": 2}`, canonical: `{"count":2,"message":"hi","upper":true}`,
			want: want{decision: audit.DecisionNotGated, result: audit.ResultOK, exit: audit.ExitCode(0), command: " echo --count=2 --upper -- hi", ranUngated: true, roles: []string{"ops"}},
		},
		{
			name: "allowed local call, modern", era: modernEra, confirm: config.ConfirmAuto, caller: "alice", tool: "echo",
			args: `{"message":"hi"}`, canonical: `{"message":"hi"}`,
			want: want{decision: audit.DecisionNotGated, result: audit.ResultOK, exit: audit.ExitCode(0), command: " echo -- hi", ranUngated: true, roles: []string{"reader"}},
		},
		{
			name: "non-zero exit", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "fail",
			args: `{"code":3}`, canonical: `{"code":3}`,
			want: want{decision: audit.DecisionNotGated, result: audit.ResultFailed, class: "exit_nonzero", exit: audit.ExitCode(3), command: " fail --code=3", ranUngated: true, roles: []string{"ops"}},
		},
		{
			name: "approved by elicitation", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy",
			handler: reply(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true}),
			args:    `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionElicitation, result: audit.ResultOK, exit: audit.ExitCode(0), command: " deploy --marker=MARKER -- web", roles: []string{"ops"}},
		},
		{
			// The client answers an input_required result and retries:
			// one call, one record, for the retry.
			name: "approved by elicitation, input_required round trip", era: modernEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy",
			handler: reply(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true}),
			args:    `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionElicitation, result: audit.ResultOK, exit: audit.ExitCode(0), command: " deploy --marker=MARKER -- web", roles: []string{"ops"}},
		},
		{
			name: "declined", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy",
			handler: reply(mcp.ElicitationResponseActionDecline, nil),
			args:    `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionDeclined, result: audit.ResultDenied, class: "approval_denied", command: " deploy --marker=MARKER -- web", message: "(declined)", roles: []string{"ops"}},
		},
		{
			name: "declined, modern", era: modernEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy",
			handler: reply(mcp.ElicitationResponseActionDecline, nil),
			args:    `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionDeclined, result: audit.ResultDenied, class: "approval_denied", command: " deploy --marker=MARKER -- web", message: "(declined)", roles: []string{"ops"}},
		},
		{
			name: "timed out", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy", handler: never,
			args: `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionTimedOut, result: audit.ResultDenied, class: "approval_denied", command: " deploy --marker=MARKER -- web", message: "no answer within 300ms", roles: []string{"ops"}},
		},
		{
			name: "refused by policy", era: legacyEra, confirm: config.ConfirmAuto, caller: "alice", tool: "fail",
			args: `{"code":3}`, canonical: `{"code":3}`, hidden: true,
			want: want{decision: audit.DecisionPolicy, result: audit.ResultRefused, class: "refused_by_policy", message: "fail", roles: []string{"reader"}},
		},
		{
			name: "refused by policy, modern", era: modernEra, confirm: config.ConfirmAuto, caller: "alice", tool: "fail",
			args: `{"code":3}`, canonical: `{"code":3}`, hidden: true,
			want: want{decision: audit.DecisionPolicy, result: audit.ResultRefused, class: "refused_by_policy", message: "fail", roles: []string{"reader"}},
		},
		{
			name: "confirm_over_mcp never", era: legacyEra, confirm: config.ConfirmNever, caller: "dave", tool: "deploy",
			handler: reply(mcp.ElicitationResponseActionDecline, nil),
			args:    `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionNever, result: audit.ResultOK, exit: audit.ExitCode(0), command: " deploy --marker=MARKER -- web", roles: []string{"ops"}},
		},
		{
			name: "auto, client cannot elicit", era: legacyEra, confirm: config.ConfirmAuto, caller: "dave", tool: "deploy",
			args: `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionUnasked, result: audit.ResultOK, exit: audit.ExitCode(0), command: " deploy --marker=MARKER -- web", roles: []string{"ops"}},
		},
		{
			name: "always, client cannot elicit", era: legacyEra, confirm: config.ConfirmAlways, caller: "dave", tool: "deploy",
			args: `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionRefusedGated, result: audit.ResultRefused, class: "refused_gated", command: " deploy --marker=MARKER -- web", message: "confirm_over_mcp is always", roles: []string{"ops"}},
		},
		{
			name: "always, client cannot elicit, modern", era: modernEra, confirm: config.ConfirmAlways, caller: "dave", tool: "deploy",
			args: `{"service":"web","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"web"}`,
			want: want{decision: audit.DecisionRefusedGated, result: audit.ResultRefused, class: "refused_gated", command: " deploy --marker=MARKER -- web", message: "confirm_over_mcp is always", roles: []string{"ops"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "deployed")
			fill := func(s string) string { return strings.ReplaceAll(s, "MARKER", marker) }
			var opts []client.ClientOption
			var el *elicitor
			if tt.handler != nil {
				el = &elicitor{fn: tt.handler}
				opts = append(opts, client.WithElicitationHandler(el))
			}
			c := connect(t, urls[tt.confirm], tt.era, bearer(tt.caller), opts...)
			tr.none(t) // connecting is no call

			before := time.Now()
			res, err := tryCall(t.Context(), c, tt.tool, json.RawMessage(fill(tt.args)))
			after := time.Now()
			if tt.hidden {
				_, unknown := tryCall(t.Context(), c, "no_such_tool", json.RawMessage(fill(tt.args)))
				if err == nil || unknown == nil || strings.ReplaceAll(err.Error(), tt.tool, "NAME") != strings.ReplaceAll(unknown.Error(), "no_such_tool", "NAME") {
					t.Fatalf("calling the hidden %s: got %v, want the error of an unknown tool, %v", tt.tool, err, unknown)
				}
				res = &mcp.CallToolResult{IsError: true}
			} else if err != nil {
				t.Fatalf("calling %s: %v", tt.tool, err)
			}
			if wantErr := tt.want.result != audit.ResultOK && tt.want.result != audit.ResultFailed; res.IsError != wantErr {
				t.Errorf("got result %q (error %t), want error %t", resultText(res), res.IsError, wantErr)
			}
			r, subject := tr.next(t)
			tr.none(t)

			if subject != audit.Subject("audited") {
				t.Errorf("subject: got %q, want %q", subject, audit.Subject("audited"))
			}
			if r.Service != audit.ServiceMCPGateway || r.Identity != "audited" || r.Instance != "gw-"+string(tt.confirm) || r.Surface != audit.SurfaceMCP || r.Tool != tt.tool {
				t.Errorf("got service %q identity %q instance %q surface %q tool %q, want %q %q %q %q %q",
					r.Service, r.Identity, r.Instance, r.Surface, r.Tool, audit.ServiceMCPGateway, "audited", "gw-"+string(tt.confirm), audit.SurfaceMCP, tt.tool)
			}
			wantCaller := audit.Caller{Subject: tt.caller, Roles: tt.want.roles, ClientID: auditClientID(tt.caller)}
			if r.Caller.Subject != wantCaller.Subject || !slices.Equal(r.Caller.Roles, wantCaller.Roles) || r.Caller.ClientID != wantCaller.ClientID ||
				r.Caller.Claimed || r.Caller.Name != "" {
				t.Errorf("caller: got %+v, want %+v", r.Caller, wantCaller)
			}
			canonical := fill(tt.canonical)
			if string(r.Arguments) != canonical {
				t.Errorf("arguments: got %s, want %s", r.Arguments, canonical)
			}
			if want := sha256Digest(canonical); r.ArgumentsDigest != want {
				t.Errorf("arguments_digest: got %s, want %s", r.ArgumentsDigest, want)
			}
			if r.ArgumentsNote != "" {
				t.Errorf("arguments_note: got %q, want none", r.ArgumentsNote)
			}
			wantCommand := ""
			if tt.want.command != "" {
				wantCommand = demo + fill(tt.want.command)
			}
			if r.Command != wantCommand && !(tt.want.ranUngated && r.Command == "") {
				t.Errorf("command: got %q, want %q", r.Command, wantCommand)
			}
			if r.Gate.Decision != tt.want.decision || r.Gate.Approver != "" {
				t.Errorf("gate: got %+v, want decision %s and no approver", r.Gate, tt.want.decision)
			}
			o := r.Outcome
			if o.Result != tt.want.result || o.ErrorClass != tt.want.class {
				t.Errorf("outcome: got result %q class %q, want %q %q", o.Result, o.ErrorClass, tt.want.result, tt.want.class)
			}
			switch {
			case tt.want.exit == nil && o.ExitCode != nil:
				t.Errorf("exit_code: got %d, want none", *o.ExitCode)
			case tt.want.exit != nil && (o.ExitCode == nil || *o.ExitCode != *tt.want.exit):
				t.Errorf("exit_code: got %v, want %d", o.ExitCode, *tt.want.exit)
			}
			switch {
			case tt.want.message == "" && o.Message != "":
				t.Errorf("message: got %q, want none (a call's output is never recorded)", o.Message)
			// A hidden tool's caller got "not found"; the record keeps why.
			case tt.want.message != "" && (!strings.Contains(o.Message, tt.want.message) || !tt.hidden && o.Message != resultText(res)):
				t.Errorf("message: got %q, want the text the caller got (%q), containing %q", o.Message, resultText(res), tt.want.message)
			}
			if r.Time.Before(before.Add(-time.Millisecond)) || r.Time.After(after) {
				t.Errorf("time: got %s, want between %s and %s", r.Time, before, after)
			}
			if max := after.Sub(before); o.DurationMS <= 0 || o.DurationMS > float64(max.Microseconds())/1000 {
				t.Errorf("duration_ms: got %v, want above 0 and at most %v", o.DurationMS, float64(max.Microseconds())/1000)
			}
			if r.TraceID != "" {
				t.Errorf("trace_id: got %q without a tracer, want none", r.TraceID)
			}
			if el != nil {
				calls, _ := el.seen()
				asked := tt.want.decision == audit.DecisionElicitation || tt.want.decision == audit.DecisionDeclined || tt.want.decision == audit.DecisionTimedOut
				if asked != (calls == 1) {
					t.Errorf("elicitation requests: got %d, want asked %t", calls, asked)
				}
			}
		})
	}
}

// TestAuditInputRequiredRoundTrip drives the 2026-07-28 exchange by hand:
// the input_required answer is not a call yet and leaves no record; the
// retry carrying the approval leaves exactly one.
func TestAuditInputRequiredRoundTrip(t *testing.T) {
	tr := startAuditTrail(t)
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Identity: "audited", Audit: tr.pub}, app.Tools())
	marker := filepath.Join(t.TempDir(), "deployed")
	args := map[string]any{"service": "web", "marker": marker}

	res := modernCall(t, url, "deploy", args, "", nil)
	state, _ := res["requestState"].(string)
	if res["resultType"] != "input_required" || state == "" {
		t.Fatalf("got %v, want an input_required result with a requestState", res)
	}
	tr.none(t)

	yes := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	if res := modernCall(t, url, "deploy", args, state, yes); res["isError"] == true {
		t.Fatalf("got %v, want deploy to run", res)
	}
	r, _ := tr.next(t)
	tr.none(t)
	if r.Tool != "deploy" || r.Gate.Decision != audit.DecisionElicitation || r.Outcome.Result != audit.ResultOK {
		t.Errorf("got tool %q decision %q result %q, want deploy %s %s", r.Tool, r.Gate.Decision, r.Outcome.Result, audit.DecisionElicitation, audit.ResultOK)
	}
	// Without Authenticate the gateway's one caller is the static one.
	if r.Caller.Subject != auth.StaticSubject {
		t.Errorf("caller subject: got %q, want %q", r.Caller.Subject, auth.StaticSubject)
	}
	canonical := mustJSON(t, args) // map keys marshal sorted
	if string(r.Arguments) != string(canonical) || r.ArgumentsDigest != sha256Digest(string(canonical)) {
		t.Errorf("arguments: got %s (%s), want %s (%s)", r.Arguments, r.ArgumentsDigest, canonical, sha256Digest(string(canonical)))
	}
}

// TestAuditDigestOnly: with audit.arguments: digest a record keeps the
// digest of the arguments but neither them nor the command line that
// spells them out.
func TestAuditDigestOnly(t *testing.T) {
	tr := startAuditTrail(t)
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Identity: "audited", Audit: tr.pub, AuditDigestOnly: true}, app.Tools())
	const secret = "hunter2"
	tests := []struct {
		name, tool, args, canonical, result string
	}{
		{name: "ok", tool: "echo", args: `{ "message" : "` + secret + `" }`, canonical: `{"message":"` + secret + `"}`, result: audit.ResultOK},
		{name: "non-zero exit", tool: "fail", args: `{"code":3}`, canonical: `{"code":3}`, result: audit.ResultFailed},
		{name: "gated, ran unasked", tool: "deploy", args: `{"service":"` + secret + `","marker":"MARKER"}`, canonical: `{"marker":"MARKER","service":"` + secret + `"}`, result: audit.ResultOK},
	}
	c := connect(t, url, legacyEra, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "deployed")
			fill := func(s string) string { return strings.ReplaceAll(s, "MARKER", marker) }
			if res := callTool(t, c, tt.tool, json.RawMessage(fill(tt.args))); res.IsError {
				t.Fatalf("calling %s: got %q, want a result", tt.tool, resultText(res))
			}
			r, _ := tr.next(t)
			tr.none(t)
			if r.Arguments != nil || r.Command != "" {
				t.Errorf("got arguments %s and command %q, want neither", r.Arguments, r.Command)
			}
			if want := sha256Digest(fill(tt.canonical)); r.ArgumentsDigest != want {
				t.Errorf("arguments_digest: got %s, want %s", r.ArgumentsDigest, want)
			}
			if r.Outcome.Result != tt.result {
				t.Errorf("result: got %q, want %q", r.Outcome.Result, tt.result)
			}
		})
	}
}

// TestAuditTraceID: with a tracer, a record names the trace of its call,
// the client's trace when it sent one.
func TestAuditTraceID(t *testing.T) {
	tr := startAuditTrail(t)
	app := loadDemo(t, fiskapp.Options{})
	exp := tracetest.NewInMemoryExporter()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	_, url := startServer(t, Config{Identity: "audited", Audit: tr.pub, Tracer: sdk.Tracer("test")}, app.Tools())

	t.Run("client trace", func(t *testing.T) {
		topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"traceparent": headerParent})}
		c := connect(t, url, legacyEra, topts)
		callTool(t, c, "echo", map[string]any{"message": "traced"})
		r, _ := tr.next(t)
		if r.TraceID != clientTrace {
			t.Errorf("trace_id: got %q, want the client's %s", r.TraceID, clientTrace)
		}
	})
	t.Run("own trace", func(t *testing.T) {
		exp.Reset()
		c := connect(t, url, legacyEra, nil)
		callTool(t, c, "echo", map[string]any{"message": "traced"})
		r, _ := tr.next(t)
		spans := byName(t, exp, "tools/call echo")
		call := spans["tools/call echo"]
		if want := call.SpanContext.TraceID().String(); r.TraceID != want || want == clientTrace {
			t.Errorf("trace_id: got %q, want the call span's own trace %s", r.TraceID, want)
		}
	})
}

// TestAuditRefusedAtConnect: a request refused at the door (401 without a
// known token, 403 for a caller no policy role matches) never reaches a
// tools/call and leaves no record.
func TestAuditRefusedAtConnect(t *testing.T) {
	tr := startAuditTrail(t)
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Identity: "audited", Audit: tr.pub, Authenticate: auditAuthenticate, Policy: auditPolicy()}, app.Tools())
	tests := []struct {
		name   string
		token  string
		status int
	}{
		{name: "unknown token", token: "nobody", status: http.StatusUnauthorized},
		{name: "no role", token: "mallory", status: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A raw tools/call, as a client that skips initialize would
			// send it: the door refuses it all the same.
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tt.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status: got %d, want %d", resp.StatusCode, tt.status)
			}

			tp, err := transport.NewStreamableHTTP(url, bearer(tt.token)...)
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tp)
			t.Cleanup(func() { _ = c.Close() })
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			init := mcp.InitializeRequest{}
			init.Params.ClientInfo = mcp.Implementation{Name: "mcpserver-test", Version: "0"}
			if _, err := c.Initialize(t.Context(), init); err == nil {
				t.Error("initialize: got no error, want the door to refuse it")
			}
			tr.none(t)
		})
	}
}
