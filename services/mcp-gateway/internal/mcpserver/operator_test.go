package mcpserver

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// operatorAnswers answers every approval request of identity as it is
// announced, approving or denying it as decide says, on its own NATS
// connection, as `a2a-agent approvals watch` would; it returns the
// requests it saw.
func operatorAnswers(tb testing.TB, nc *nats.Conn, identity string, decide func(approval.Request) (bool, string)) func() []approval.Request {
	tb.Helper()
	var (
		mu   sync.Mutex
		seen []approval.Request
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = approval.Watch(ctx, nc, identity, func(ev approval.Event) {
			if ev.Type != approval.EventRequested || ev.Request == nil {
				return
			}
			mu.Lock()
			seen = append(seen, *ev.Request)
			mu.Unlock()
			ok, reason := decide(*ev.Request)
			go func() {
				_, _ = approval.Answer(ctx, nc, *ev.Request, ok, approval.Approver{Name: "olivia"}, reason)
			}()
		})
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return func() []approval.Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]approval.Request(nil), seen...)
	}
}

// TestOperatorApproval shows a client that cannot elicit getting an
// operator's approval over NATS, in both eras: approved runs once, denied
// does not run and says why, and a client that can elicit is still asked
// itself, its decline final; the audit record names the operator.
func TestOperatorApproval(t *testing.T) {
	ns := natstest.Start(t)
	gwConn, opConn, trailConn := ns.Connect(t), ns.Connect(t), ns.Connect(t)
	broker, err := approval.NewBroker(gwConn, approval.Options{Identity: "demo", Instance: "gw1", Config: approval.Config{Operator: true, Timeout: 10 * time.Second}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Close() })
	records := make(chan *audit.Record, 16)
	sub, err := trailConn.Subscribe("choria.fisk-ai.audit.demo", func(m *nats.Msg) {
		if err := audit.Validate(m.Data); err != nil {
			t.Errorf("audit record does not validate: %v: %s", err, m.Data)
		}
		r := &audit.Record{}
		if err := json.Unmarshal(m.Data, r); err == nil {
			records <- r
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := trailConn.Flush(); err != nil {
		t.Fatal(err)
	}
	trail := audit.NewPublisher(gwConn, audit.PublisherConfig{Subject: "choria.fisk-ai.audit.demo", Logger: testLogger(t)})
	t.Cleanup(func() { _ = trail.Close(context.Background()) })

	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Approvals: broker, Audit: trail, Instance: "gw1"}, app.Tools())
	seen := operatorAnswers(t, opConn, "demo", func(r approval.Request) (bool, string) {
		return !strings.Contains(r.Command, "deny-me"), "not during the freeze"
	})

	nextRecord := func(t *testing.T) *audit.Record {
		t.Helper()
		select {
		case r := <-records:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("got no audit record within 5s")
		}
		return nil
	}

	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			marker := filepath.Join(t.TempDir(), "deployed")
			res := callTool(t, c, "deploy", map[string]any{"service": "web", "marker": marker})
			if cr := commandResult(t, res); cr.ExitCode != 0 || !exists(marker) {
				t.Errorf("approved: got %+v, marker written %t; want a clean run", cr, exists(marker))
			}
			if r := nextRecord(t); r.Gate.Decision != audit.DecisionOperator || r.Gate.Approver != "olivia" || r.Outcome.Result != audit.ResultOK {
				t.Errorf("approved: got record gate %+v outcome %+v, want approved_by_operator by olivia, ok", r.Gate, r.Outcome)
			}

			denied := filepath.Join(t.TempDir(), "deny-me")
			res = callTool(t, c, "deploy", map[string]any{"service": "web", "marker": denied})
			if !res.IsError || !strings.Contains(resultText(res), "operator olivia denied") || !strings.Contains(resultText(res), "not during the freeze") {
				t.Errorf("denied: got %q (error %t), want an in-band denial naming the operator and the reason", resultText(res), res.IsError)
			}
			if exists(denied) {
				t.Error("denied: the command ran")
			}
			if r := nextRecord(t); r.Gate.Decision != audit.DecisionDeclined || r.Outcome.Result != audit.ResultDenied {
				t.Errorf("denied: got record gate %+v outcome %+v, want declined, denied", r.Gate, r.Outcome)
			}

			// A client that can elicit is asked itself, and its
			// decline is final: no operator hears of it.
			before := len(seen())
			el := &elicitor{fn: func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				return answer(mcp.ElicitationResponseActionDecline, nil), nil
			}}
			ec := connect(t, url, e, nil, client.WithElicitationHandler(el))
			asked := filepath.Join(t.TempDir(), "asked")
			res = callTool(t, ec, "deploy", map[string]any{"service": "web", "marker": asked})
			if calls, _ := el.seen(); calls == 0 || !res.IsError || exists(asked) {
				t.Errorf("eliciting client: got %d elicitations, %q (error %t), marker %t; want asked, declined, not run", calls, resultText(res), res.IsError, exists(asked))
			}
			if got := len(seen()); got != before {
				t.Errorf("eliciting client: an operator was asked too (%d requests, want %d)", got, before)
			}
			nextRecord(t)
		})
	}
	for _, r := range seen() {
		if r.Tool != "deploy" || r.Digest == "" || !strings.Contains(r.Command, "deploy") || r.Caller.Subject != "static-token" {
			t.Errorf("approval request %+v: want tool deploy, a digest, the command line and the static caller", r)
		}
	}
}

// TestOperatorApprovalProgress shows a client with a progress token
// hearing that its call waits for an operator, naming the request.
func TestOperatorApprovalProgress(t *testing.T) {
	ns := natstest.Start(t)
	broker, err := approval.NewBroker(ns.Connect(t), approval.Options{Identity: "demo", Instance: "gw1", Config: approval.Config{Operator: true, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Close() })
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Approvals: broker}, app.Tools())
	operatorAnswers(t, ns.Connect(t), "demo", func(approval.Request) (bool, string) { return true, "" })

	c := connect(t, url, legacyEra, nil)
	var (
		mu   sync.Mutex
		msgs []string
	)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			if m, ok := n.Params.AdditionalFields["message"].(string); ok {
				mu.Lock()
				msgs = append(msgs, m)
				mu.Unlock()
			}
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "deploy"
	req.Params.Arguments = map[string]any{"service": "web", "marker": filepath.Join(t.TempDir(), "m")}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p1"}
	res, err := c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("got %v, %+v; want the approved call's result", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(msgs) == 0 || !strings.HasPrefix(msgs[0], "awaiting operator approval (id ") {
		t.Errorf("progress messages: got %q, want the first to say it awaits an operator's approval with the id", msgs)
	}
}
