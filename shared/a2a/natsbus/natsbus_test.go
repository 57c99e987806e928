package natsbus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

func TestSubjects(t *testing.T) {
	if got, want := natsbus.DiscoverySubject("demo"), "choria.fisk-ai.discovery.demo"; got != want {
		t.Errorf("discovery: got %q, want %q", got, want)
	}
	if got, want := natsbus.ToolSubject("demo"), "choria.fisk-ai.tool.demo"; got != want {
		t.Errorf("tool: got %q, want %q", got, want)
	}
	if natsbus.Subject("x", a2a.RouteDiscovery) != natsbus.DiscoverySubject("x") || natsbus.Subject("x", a2a.RouteTool) != natsbus.ToolSubject("x") {
		t.Error("Subject does not follow the route")
	}
}

// serve registers a service whose tool endpoint answers with answer and
// whose discovery endpoint echoes.
func serve(t *testing.T, nc *nats.Conn, identity string, tool natsbus.Handler) *natsbus.Service {
	t.Helper()
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:  identity,
		Discovery: func(r *natsbus.Request) { _ = r.Reply(r.Data()) },
		Tool:      tool,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	// Registered on the server before another connection asks for it.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestRoundTrip(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	serve(t, nc, "demo", func(r *natsbus.Request) {
		switch string(r.Data()) {
		case "reject":
			_ = r.Reject("400", "malformed")
		case "slow":
			go func() { <-release; _ = r.Reply([]byte("late")) }()
		case "twice":
			_ = r.Reply([]byte("first"))
			if err := r.Reply([]byte("second")); !errors.Is(err, natsbus.ErrReplied) {
				_ = r.Reject("500", "second reply was not refused")
			}
		default:
			_ = r.Reply([]byte("ok:" + string(r.Data())))
		}
	})
	tr := natsbus.NewTransport(ns.Connect(t), natsbus.WithTimeout(300*time.Millisecond))

	tests := []struct {
		name     string
		identity string
		route    a2a.Route
		data     string
		ctx      func() (context.Context, context.CancelFunc)
		want     string
		wantErr  error
		wantText string
	}{
		{name: "tool", identity: "demo", route: a2a.RouteTool, data: "x", want: "ok:x"},
		{name: "discovery", identity: "demo", route: a2a.RouteDiscovery, data: "card?", want: "card?"},
		{name: "single-shot reply", identity: "demo", route: a2a.RouteTool, data: "twice", want: "first"},
		{name: "no responders", identity: "nobody", route: a2a.RouteTool, data: "x", wantErr: a2a.ErrAgentUnavailable, wantText: "no agent serves choria.fisk-ai.tool.nobody"},
		{name: "transport timeout", identity: "demo", route: a2a.RouteTool, data: "slow", wantErr: a2a.ErrAgentUnavailable, wantText: "in time"},
		{name: "caller deadline wins", identity: "demo", route: a2a.RouteTool, data: "slow",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(t.Context(), 50*time.Millisecond)
			},
			wantErr: a2a.ErrAgentUnavailable},
		{name: "micro error header", identity: "demo", route: a2a.RouteTool, data: "reject", wantErr: a2a.ErrRejected, wantText: "400 malformed"},
		{name: "oversized request", identity: "demo", route: a2a.RouteTool, data: strings.Repeat("x", a2a.MaxMessageSize+1), wantErr: a2a.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			start := time.Now()
			got, err := tr.RoundTrip(ctx, tt.identity, tt.route, []byte(tt.data))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("got %v, want %v containing %q", err, tt.wantErr, tt.wantText)
				}
				if tt.ctx != nil && time.Since(start) > 250*time.Millisecond {
					t.Errorf("took %s, want the caller's 50ms deadline to end it before the transport's 300ms", time.Since(start))
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestServeRefusesBadIdentity(t *testing.T) {
	ns := natstest.Start(t)
	for _, id := range []string{"", "a.b", "a*", "a>", "a b"} {
		_, err := natsbus.Serve(ns.Connect(t), natsbus.ServiceConfig{
			Identity:  id,
			Discovery: func(*natsbus.Request) {},
			Tool:      func(*natsbus.Request) {},
		})
		if !errors.Is(err, a2a.ErrInvalidIdentity) {
			t.Errorf("identity %q: got %v, want ErrInvalidIdentity", id, err)
		}
	}
}

func TestServiceInfoAndStop(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	svc := serve(t, nc, "demo", func(r *natsbus.Request) { _ = r.Reply(nil) })
	info := svc.Info()
	if info.Name != "demo" || info.Version != natsbus.ServiceVersion || len(info.Endpoints) != 2 {
		t.Fatalf("got %+v, want service demo %s with two endpoints", info, natsbus.ServiceVersion)
	}
	for _, e := range info.Endpoints {
		if e.QueueGroup != "demo" {
			t.Errorf("endpoint %s queue group: got %q, want the identity", e.Name, e.QueueGroup)
		}
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(); err != nil {
		t.Errorf("second Stop: got %v, want nil", err)
	}
	nc.Close()
	if err := svc.Stop(); err != nil {
		t.Errorf("Stop on a closed connection: got %v, want nil", err)
	}
	_, err := natsbus.NewTransport(ns.Connect(t)).RoundTrip(t.Context(), "demo", a2a.RouteTool, []byte("x"))
	if !errors.Is(err, a2a.ErrAgentUnavailable) {
		t.Errorf("after Stop: got %v, want ErrAgentUnavailable", err)
	}
}

// TestRequestWithoutInboxIsIgnored publishes a request with no reply
// subject: the handler is never called, so no work is done for an answer
// nobody can receive.
func TestRequestWithoutInboxIsIgnored(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	called := make(chan string, 2)
	serve(t, nc, "demo", func(r *natsbus.Request) { called <- string(r.Data()); _ = r.Reply(nil) })
	caller := ns.Connect(t)
	if err := caller.Publish(natsbus.ToolSubject("demo"), []byte("no inbox")); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Request(natsbus.ToolSubject("demo"), []byte("with inbox"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := <-called; got != "with inbox" {
		t.Errorf("handler saw %q, want only the request with an inbox", got)
	}
}

// TestRoundTripWhileDisconnected stops the only server: a round trip fails
// as unavailable after the reconnect wait, not at its deadline, and sends
// nothing; once the server is back, round trips work again.
func TestRoundTripWhileDisconnected(t *testing.T) {
	srv := natstest.Start(t)
	agent := srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if _, err := agent.Subscribe(natsbus.DiscoverySubject("demo"), func(m *nats.Msg) { _ = m.Respond([]byte("card")) }); err != nil {
		t.Fatal(err)
	}
	nc := srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	tr := natsbus.NewTransport(nc, natsbus.WithReconnectWait(300*time.Millisecond))

	srv.Stop()
	fisktest.WaitFor(t, 10*time.Second, "the client to notice", func() bool { return !nc.IsConnected() })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := tr.RoundTrip(ctx, "demo", a2a.RouteDiscovery, []byte("{}"))
	elapsed := time.Since(start)
	if !errors.Is(err, a2a.ErrAgentUnavailable) || !strings.Contains(err.Error(), "not connected to NATS") {
		t.Errorf("while down: got %v, want agent unavailable, not connected to NATS", err)
	}
	if elapsed > 10*time.Second {
		t.Errorf("while down: failed after %s, want about the 300ms reconnect wait, well before the 20s deadline", elapsed)
	}

	srv.Resume()
	fisktest.WaitFor(t, 10*time.Second, "both connections to come back", func() bool { return nc.IsConnected() && agent.IsConnected() })
	if err := agent.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := tr.RoundTrip(ctx, "demo", a2a.RouteDiscovery, []byte("{}"))
	if err != nil || string(got) != "card" {
		t.Errorf("after reconnecting: got %q, %v, want the reply", got, err)
	}

	nc.Close()
	if _, err := tr.RoundTrip(ctx, "demo", a2a.RouteDiscovery, []byte("{}")); !errors.Is(err, a2a.ErrAgentUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("closed connection: got %v, want agent unavailable naming the closed connection", err)
	}
}
