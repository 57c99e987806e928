package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// approvalTimeout is the shortened approval wait of these tests.
const approvalTimeout = 300 * time.Millisecond

// TestApproval is the elicitation matrix for the gated deploy command,
// which writes its --marker file only when it runs.
func TestApproval(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	deploy := command(t, app, "deploy")
	clock := newFakeClock()
	servers := map[config.ConfirmPolicy]string{}
	for _, policy := range []config.ConfirmPolicy{config.ConfirmAuto, config.ConfirmAlways, config.ConfirmNever} {
		s, url := startServer(t, Config{Confirm: policy, ApprovalTimeout: approvalTimeout}, app.Tools())
		s.approvals.(*approvals).now = clock.Now
		servers[policy] = url
	}
	// stuck is released when the test ends, so handlers that never answer
	// do not outlive it.
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })

	reply := func(a *mcp.ElicitationResult) func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) { return a, nil }
	}
	tests := []struct {
		name   string
		policy config.ConfirmPolicy
		// handler answers the form; nil means a client without the
		// elicitation capability.
		handler func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
		// legacyHandler replaces handler for the legacy era, when the
		// eras need different means to the same end.
		legacyHandler func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)
		// legacyText replaces wantText for the legacy era.
		legacyText string
		wantRun    bool
		wantAsked  bool
		wantText   string
		// clientError allows the client's CallTool to fail instead of an
		// in-band denial: a 2026-07-28 client whose handler fails never
		// retries, so the server never hears back.
		clientError bool
	}{
		{name: "accept true runs", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})), wantRun: true, wantAsked: true},
		{name: "accept false denies", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": false})), wantAsked: true, wantText: "did not approve it (answered no)"},
		{name: "decline denies", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionDecline, nil)), wantAsked: true, wantText: "(declined)"},
		{name: "cancel denies", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionCancel, nil)), wantAsked: true, wantText: "(dismissed the request)"},
		{name: "string true denies", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": "true"})), wantAsked: true, wantText: "was not a boolean"},
		{name: "missing answer denies", policy: config.ConfirmAuto, handler: reply(answer(mcp.ElicitationResponseActionAccept, map[string]any{})), wantAsked: true, wantText: `did not say "approve"`},
		{name: "handler error denies", policy: config.ConfirmAuto, handler: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return nil, errors.New("the form could not be shown")
		}, wantAsked: true, wantText: "asking failed", clientError: true},
		{
			name: "no answer in time denies", policy: config.ConfirmAuto, wantAsked: true,
			wantText: "(the approval expired: it was valid for 300ms)", legacyText: "(no answer within 300ms)",
			// 2026-07-28: the answer comes back after the approval expired.
			handler: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				clock.Advance(approvalTimeout + time.Second)
				return answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true}), nil
			},
			// Legacy: the answer never comes; the server stops waiting.
			legacyHandler: func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				select {
				case <-stuck:
				case <-ctx.Done():
				}
				return nil, errors.New("gave up")
			},
		},
		{name: "auto runs for a client that cannot elicit", policy: config.ConfirmAuto, wantRun: true},
		{name: "always refuses a client that cannot elicit", policy: config.ConfirmAlways, wantText: "expose.agent.mcp.confirm_over_mcp"},
		{name: "always asks a client that can", policy: config.ConfirmAlways, handler: reply(answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true})), wantRun: true, wantAsked: true},
		{name: "never does not ask", policy: config.ConfirmNever, handler: reply(answer(mcp.ElicitationResponseActionDecline, nil)), wantRun: true},
	}
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					handler := tt.handler
					wantText := tt.wantText
					if !e.modern && tt.legacyHandler != nil {
						handler = tt.legacyHandler
					}
					if !e.modern && tt.legacyText != "" {
						wantText = tt.legacyText
					}
					var el *elicitor
					var opts []client.ClientOption
					if handler != nil {
						el = &elicitor{fn: handler}
						opts = append(opts, client.WithElicitationHandler(el))
					}
					c := connect(t, servers[tt.policy], e, nil, opts...)
					marker := filepath.Join(t.TempDir(), "deployed")
					args := map[string]any{"service": "web", "marker": marker}

					res, err := tryCall(t.Context(), c, "deploy", args)
					switch {
					case err != nil && !(tt.clientError && e.modern):
						t.Fatalf("calling deploy: %v", err)
					case err == nil && tt.wantRun:
						if cr := commandResult(t, res); cr.ExitCode != 0 {
							t.Errorf("got %+v, want a clean run", cr)
						}
					case err == nil:
						if !res.IsError || !strings.Contains(resultText(res), wantText) {
							t.Errorf("got %q (error %t), want an in-band error containing %q", resultText(res), res.IsError, wantText)
						}
					}
					if got := exists(marker); got != tt.wantRun {
						t.Errorf("got marker written %t, want %t", got, tt.wantRun)
					}

					calls, last := 0, mcp.ElicitationRequest{}
					if el != nil {
						calls, last = el.seen()
					}
					if asked := calls > 0; asked != tt.wantAsked {
						t.Fatalf("got asked %t (%d requests), want %t", asked, calls, tt.wantAsked)
					}
					if !tt.wantAsked {
						return
					}
					line, err := deploy.CommandLine(mustJSON(t, args))
					if err != nil {
						t.Fatalf("rendering the command line: %v", err)
					}
					if !strings.Contains(last.Params.Message, line) {
						t.Errorf("got form message %q, want it to name the command line %q", last.Params.Message, line)
					}
					schema := mustJSON(t, last.Params.RequestedSchema)
					if !bytes.Contains(schema, []byte(`"approve":{`)) || !bytes.Contains(schema, []byte(`"required":["approve"]`)) || !bytes.Contains(schema, []byte(`"type":"boolean"`)) {
						t.Errorf("got form schema %s, want one required boolean approve", schema)
					}
				})
			}
		})
	}
}

func mustJSON(tb testing.TB, v any) json.RawMessage {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("encoding %v: %v", v, err)
	}
	return b
}

// TestApprovalHoldsNoSlot shows a pending approval does not take the only
// execution slot: an ungated call completes while the human deliberates.
func TestApprovalHoldsNoSlot(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{MaxConcurrent: 1}, app.Tools())
	asked := make(chan struct{})
	release := make(chan struct{})
	el := &elicitor{fn: func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		close(asked)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return answer(mcp.ElicitationResponseActionAccept, map[string]any{"approve": true}), nil
	}}
	gated := connect(t, url, legacyEra, nil, client.WithElicitationHandler(el))
	other := connect(t, url, legacyEra, nil)

	marker := filepath.Join(t.TempDir(), "deployed")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := tryCall(t.Context(), gated, "deploy", map[string]any{"marker": marker})
		if err != nil {
			t.Errorf("calling deploy: %v", err)
		}
		done <- res
	}()
	<-asked
	if cr := commandResult(t, callTool(t, other, "echo", map[string]any{"message": "meanwhile"})); cr.Output != "meanwhile\n" {
		t.Errorf("got %q, want the echo to run while the approval is pending", cr.Output)
	}
	if exists(marker) {
		t.Fatal("got the marker before the approval, want none")
	}
	close(release)
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("got %v, want deploy to run once approved", res)
	}
	if !exists(marker) {
		t.Error("got no marker after the approval, want deploy to have run")
	}
}

// modernCall is one raw 2026-07-28 tools/call over HTTP, for driving the
// multi round-trip exchange by hand. state and responses are the retry's
// requestState and inputResponses.
func modernCall(tb testing.TB, url, name string, args any, state string, responses map[string]any) map[string]any {
	tb.Helper()
	params := map[string]any{
		"name":      name,
		"arguments": args,
		"_meta": map[string]any{
			mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
			mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
		},
	}
	if state != "" {
		params["requestState"] = state
	}
	if responses != nil {
		params["inputResponses"] = responses
	}
	body := mustJSON(tb, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("building the request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "tools/call")
	req.Header.Set(mcp.HeaderName, name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("posting tools/call: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || msg.Result == nil {
		tb.Fatalf("got HTTP %d %s, want a JSON-RPC result", resp.StatusCode, raw)
	}
	return msg.Result
}

// TestApprovalBinding shows an approval obtained over the 2026-07-28
// multi round-trip exchange is single use and bound to the tool and the
// exact arguments it was asked for.
func TestApprovalBinding(t *testing.T) {
	// confirm_tags gates restart too, so one tool's approval can be tried
	// on another.
	app := loadDemo(t, fiskapp.Options{ConfirmTags: []string{"impact:rw"}})
	_, url := startServer(t, Config{}, app.Tools())
	dir := t.TempDir()
	markerA, markerB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	argsA := map[string]any{"service": "web", "marker": markerA}
	argsB := map[string]any{"service": "web", "marker": markerB}
	yes := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}

	ask := func(tb testing.TB, name string, args any) string {
		tb.Helper()
		res := modernCall(tb, url, name, args, "", nil)
		state, _ := res["requestState"].(string)
		if res["resultType"] != "input_required" || state == "" {
			tb.Fatalf("got %v, want an input_required result with a requestState", res)
		}
		form, _ := json.Marshal(res["inputRequests"])
		if !bytes.Contains(form, []byte(`"method":"elicitation/create"`)) {
			tb.Fatalf("got input requests %s, want an elicitation form", form)
		}
		return state
	}
	denied := func(tb testing.TB, res map[string]any, want string) {
		tb.Helper()
		text, _ := json.Marshal(res["content"])
		if res["isError"] != true || !strings.Contains(string(text), want) {
			tb.Errorf("got %s (isError %v), want an in-band denial containing %q", text, res["isError"], want)
		}
	}

	stateA := ask(t, "deploy", argsA)
	t.Run("other arguments", func(t *testing.T) {
		denied(t, modernCall(t, url, "deploy", argsB, stateA, yes), "another tool or other arguments")
	})
	t.Run("spent by the failed attempt", func(t *testing.T) {
		denied(t, modernCall(t, url, "deploy", argsA, stateA, yes), "unknown or was already used")
	})
	t.Run("another tool", func(t *testing.T) {
		state := ask(t, "deploy", argsA)
		denied(t, modernCall(t, url, "restart", map[string]any{"marker": markerA}, state, yes), "another tool or other arguments")
	})
	t.Run("forged state", func(t *testing.T) {
		denied(t, modernCall(t, url, "deploy", argsA, "forged", yes), "unknown or was already used")
	})
	if exists(markerA) || exists(markerB) {
		t.Fatal("got a marker after only rejected approvals, want none")
	}
	t.Run("the matching retry runs once", func(t *testing.T) {
		state := ask(t, "deploy", argsA)
		res := modernCall(t, url, "deploy", argsA, state, yes)
		if res["isError"] == true || !exists(markerA) {
			t.Fatalf("got %v, want deploy to run with marker A", res)
		}
		denied(t, modernCall(t, url, "deploy", argsA, state, yes), "unknown or was already used")
	})
	t.Run("key order does not matter", func(t *testing.T) {
		state := ask(t, "deploy", json.RawMessage(`{"marker":"`+markerB+`","service":"web"}`))
		res := modernCall(t, url, "deploy", json.RawMessage(`{"service": "web", "marker": "`+markerB+`"}`), state, yes)
		if res["isError"] == true || !exists(markerB) {
			t.Fatalf("got %v, want deploy to run for the same arguments in another order", res)
		}
	})
}
