package integration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestGatewayFleetListChanged runs three gateways of one identity with
// fleet on, sharing a JetStream-enabled NATS, each importing the demo
// agents' tools with remote_refresh_interval 1s, and one mcp-go client
// connected straight to each (two on the legacy standalone stream, one
// on a 2026-07-28 subscriptions/listen stream). When the agents are
// replaced by agents serving another tool set, every gateway tells its own
// client notifications/tools/list_changed, and all three list the same
// new set, within one refresh interval plus a margin of the change being
// visible on the bus. An agent that stops changes nothing: its tools stay
// listed (calls fail in-band naming it), so no gateway notifies.
//
// "Within one refresh interval" is measured from the moment the test's
// own discovery first sees the new tool set on the bus: each gateway's
// next refresh tick comes at most one interval later, and the tick's
// discovery and the notification take milliseconds on loopback. The
// margin, 2s, is for scheduling on a shared two-core machine running three
// gateways, the agents and NATS, plus the test's 20ms polling.
func TestGatewayFleetListChanged(t *testing.T) {
	t.Parallel()
	const (
		refresh = time.Second
		margin  = 2 * time.Second
	)
	ns := natstest.StartJetStream(t)
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, fleetContext, nil)
	ac, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	b := &bus{ns: ns, home: home, client: ac}

	before := b.demoAgent(t, "demo", 2)
	before.IncludeTools = []string{"echo", "sleep", "fail"}
	after := before
	after.IncludeTools = []string{"echo", "fail", "getenv"}
	agents := b.startAgents(t, 1, before)

	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		ExcludeTools:    []string{"getenv", "cluster_*"},
		MCP:             map[string]any{"fleet": map[string]any{"instance_ttl": "3s"}},
		Extra:           map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}, "remote_refresh_interval": refresh.String()},
	})
	type member struct {
		gw      *gatewayProcess
		c       *client.Client
		changed chan time.Time
	}
	var members []*member
	for n := range 3 {
		m := &member{gw: startGateway(t, home.Env(), cfg), changed: make(chan time.Time, 16)}
		m.gw.WaitOutput(t, "serving as a member of a gateway fleet", fleettest.ReadyTimeout)
		connect := connectMCP
		if n == 1 {
			connect = listenMCP
		}
		m.c = connect(t, m.gw.URL, func(n mcp.JSONRPCNotification) {
			if n.Method == mcp.MethodNotificationToolsListChanged {
				m.changed <- time.Now()
			}
		})
		members = append(members, m)
	}

	local := []string{"deploy", "echo", "fail", "flood", "restart", "sleep", "spawn", "ticker"}
	wantBefore := slices.Sorted(slices.Values(append([]string{"demo_echo", "demo_fail", "demo_sleep"}, local...)))
	wantAfter := slices.Sorted(slices.Values(append([]string{"demo_echo", "demo_fail", "getenv"}, local...)))
	for i, m := range members {
		if got := listNames(t, m.c); !slices.Equal(got, wantBefore) {
			t.Fatalf("gateway %d tools/list at start: got %v, want %v", i+1, got, wantBefore)
		}
	}

	// visible polls the bus until discovery of demo satisfies ok, and
	// returns when it first did.
	visible := func(what string, ok func(*a2a.DiscoveryReply, error) bool) time.Time {
		t.Helper()
		var at time.Time
		fisktest.WaitFor(t, 30*time.Second, what, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			r, err := ac.Discover(ctx, "demo")
			if ok(r, err) {
				at = time.Now()
				return true
			}
			time.Sleep(20 * time.Millisecond)
			return false
		})
		return at
	}
	// converge waits for every gateway's notification and checks it came
	// within refresh+margin of since, and that each lists want.
	converge := func(t *testing.T, since time.Time, want []string) {
		t.Helper()
		var wg sync.WaitGroup
		var mu sync.Mutex
		lags := make([]time.Duration, len(members))
		for i, m := range members {
			wg.Go(func() {
				select {
				case at := <-m.changed:
					mu.Lock()
					lags[i] = at.Sub(since)
					mu.Unlock()
				case <-time.After(refresh + margin + 10*time.Second):
					t.Errorf("gateway %d: got no notifications/tools/list_changed within %s of the change\n%s", i+1, refresh+margin+10*time.Second, m.gw.Output())
				}
			})
		}
		wg.Wait()
		for i, m := range members {
			if lags[i] > refresh+margin {
				t.Errorf("gateway %d: notified %s after the change was visible on the bus, want within one refresh interval (%s) plus %s", i+1, lags[i].Round(time.Millisecond), refresh, margin)
			}
			if got := listNames(t, m.c); !slices.Equal(got, want) {
				t.Errorf("gateway %d tools/list: got %v, want %v", i+1, got, want)
			}
		}
		t.Logf("notified after the change was visible on the bus: %v (bound %s)", lags, refresh+margin)
	}

	// Agents started in a subtest must outlive it.
	top := t
	t.Run("an agent stops: tools kept, no notification", func(t *testing.T) {
		for _, a := range agents {
			a.Signal(t, syscall.SIGTERM)
			a.Wait(t, fleettest.StopGrace)
		}
		gone := visible("demo to be gone from the bus", func(_ *a2a.DiscoveryReply, err error) bool { return err != nil })
		for i, m := range members {
			fisktest.WaitFor(t, refresh+margin+10*time.Second, fmt.Sprintf("gateway %d to notice demo is gone", i+1), func() bool {
				return strings.Contains(m.gw.Output(), "remote host unreachable")
			})
		}
		t.Logf("every gateway logged demo unreachable %s after it left the bus", time.Since(gone).Round(time.Millisecond))
		for i, m := range members {
			select {
			case <-m.changed:
				t.Errorf("gateway %d: got notifications/tools/list_changed when demo stopped, want its tools kept", i+1)
			case <-time.After(refresh):
			}
			if got := listNames(t, m.c); !slices.Equal(got, wantBefore) {
				t.Errorf("gateway %d tools/list while demo is down: got %v, want the last good set %v", i+1, got, wantBefore)
			}
		}
	})

	t.Run("an agent with other tools starts", func(t *testing.T) {
		agents = b.startAgents(top, 1, after)
		since := visible("demo's new tools on the bus", func(r *a2a.DiscoveryReply, err error) bool {
			return err == nil && slices.ContainsFunc(r.Tools, func(d a2a.ToolDescriptor) bool { return d.Name == "getenv" })
		})
		converge(t, since, wantAfter)
	})

	t.Run("it is replaced by the first tool set again", func(t *testing.T) {
		for _, a := range agents {
			a.Signal(t, syscall.SIGTERM)
			a.Wait(t, fleettest.StopGrace)
		}
		b.startAgents(top, 1, before)
		since := visible("demo's first tools on the bus again", func(r *a2a.DiscoveryReply, err error) bool {
			return err == nil && slices.ContainsFunc(r.Tools, func(d a2a.ToolDescriptor) bool { return d.Name == "sleep" })
		})
		converge(t, since, wantBefore)
	})
}
