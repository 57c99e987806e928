package integration_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestExampleApprovalsServerConfig runs the approvals example server
// configuration and checks it decides who may answer as its comments say:
// an agent takes requests, the operator and the gateway list and answer,
// and automation can neither list nor answer, whatever name it claims.
func TestExampleApprovalsServerConfig(t *testing.T) {
	users := []string{"agent", "gateway", "alice", "ci"}
	for _, u := range users {
		t.Setenv(strings.ToUpper(u)+"_PASSWORD", "pw-"+u)
	}
	conf, err := os.ReadFile(filepath.Join("examples", "nats-server-approvals.conf"))
	if err != nil {
		t.Fatal(err)
	}
	const listen = "listen: 127.0.0.1:4222"
	if !strings.Contains(string(conf), listen) {
		t.Fatalf("the example does not %s", listen)
	}
	// The example's fixed port would collide with other tests: a free one.
	ns := natstest.StartFromConfig(t, strings.Replace(string(conf), listen, "listen: 127.0.0.1:-1", 1))
	conns := map[string]*nats.Conn{}
	for _, u := range users {
		conns[u] = ns.Connect(t, nats.UserInfo(u, "pw-"+u), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	}
	b, err := approval.NewBroker(conns["agent"], approval.Options{Identity: "demo", Instance: "i1", Logger: fisktest.Logger(t)})
	if err != nil {
		t.Fatalf("an agent starts a broker: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	watched := make(chan approval.Event, 16)
	go func() {
		_ = approval.Watch(t.Context(), conns["alice"], "", func(ev approval.Event) { watched <- ev })
	}()

	ask := func(t *testing.T) (approval.Request, <-chan approval.Decision) {
		t.Helper()
		announced := make(chan approval.Request, 1)
		decided := make(chan approval.Decision, 1)
		go func() {
			d, _ := b.Request(t.Context(), approval.Pending{
				Tool: "deploy", Command: "app deploy --env prod", Digest: approval.Digest([]byte("{}")),
				Caller:    approval.Caller{Name: "ci", Claimed: true, NATSUser: "ci"},
				Announced: func(r approval.Request) { announced <- r },
			})
			decided <- d
		}()
		return <-announced, decided
	}

	// A first request waits until the watch has seen it: from then on the
	// watch sees everything.
	first, firstDecided := ask(t)
	select {
	case ev := <-watched:
		if ev.Type != approval.EventRequested || ev.ID != first.ID {
			t.Fatalf("watched: got %s %s, want the first request", ev.Type, ev.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the operator's watch saw no request within 10s")
	}
	if _, err := approval.Answer(t.Context(), conns["alice"], first, false, approval.Approver{Name: "alice"}, "warm-up"); err != nil {
		t.Fatal(err)
	}
	<-firstDecided

	tests := []struct {
		name       string
		user       string
		wantListed bool
		wantAnswer error
	}{
		{"automation", "ci", false, approval.ErrNotPermitted},
		{"the operator", "alice", true, nil},
		{"the gateway, for its page", "gateway", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, decided := ask(t)
			_, err := approval.Find(t.Context(), conns[tt.user], "demo", req.ID, 2*time.Second)
			switch {
			case tt.wantListed && err != nil:
				t.Errorf("listing: got %v, want the request", err)
			case !tt.wantListed && !errors.Is(err, approval.ErrNotPermitted):
				t.Errorf("listing: got %v, want not permitted", err)
			}
			_, err = approval.Answer(t.Context(), conns[tt.user], req, true, approval.Approver{Name: "alice"}, "")
			if !errors.Is(err, tt.wantAnswer) || (tt.wantAnswer == nil) != (err == nil) {
				t.Fatalf("answering: got %v, want %v", err, tt.wantAnswer)
			}
			if tt.wantAnswer != nil {
				// The request still waits: an operator approves it.
				if _, err := approval.Answer(t.Context(), conns["alice"], req, false, approval.Approver{Name: "alice"}, "cleaning up"); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case d := <-decided:
				if d.Approved() != (tt.wantAnswer == nil) {
					t.Errorf("outcome: got %q, want approved %t", d.Outcome, tt.wantAnswer == nil)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no outcome within 10s")
			}
		})
	}
	// The operator watched it all.
	requested := 0
	fisktest.WaitFor(t, 10*time.Second, "the operator to see every request", func() bool {
		for {
			select {
			case ev := <-watched:
				if ev.Type == approval.EventRequested {
					requested++
				}
			default:
				return requested == len(tests)
			}
		}
	})
}
