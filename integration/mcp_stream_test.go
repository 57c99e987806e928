package integration_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// streamFleet is a gateway (identity gw, the demo app served locally)
// importing the tools of one `a2a-agent serve` on identity demo.
type streamFleet struct {
	*bus
	agent *fleettest.Process
	gw    *gatewayProcess
}

func startStreamFleet(tb testing.TB) *streamFleet {
	tb.Helper()
	b := newBus(tb)
	agent := b.startAgents(tb, 1, b.demoAgent(tb, "demo", 2))[0]
	gw := startGateway(tb, b.home.Env(), b.gatewayConfig(tb, "", "demo"))
	return &streamFleet{bus: b, agent: agent, gw: gw}
}

// progressNotes collects the notifications/progress an MCP client hears,
// by progress token.
type progressNotes struct {
	mu      sync.Mutex // guards byToken
	byToken map[string][]mcp.JSONRPCNotification
}

func (p *progressNotes) notify(n mcp.JSONRPCNotification) {
	if n.Method != string(mcp.MethodNotificationProgress) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byToken == nil {
		p.byToken = map[string][]mcp.JSONRPCNotification{}
	}
	token := fmt.Sprint(n.Params.AdditionalFields["progressToken"])
	p.byToken[token] = append(p.byToken[token], n)
}

func (p *progressNotes) of(token string) []mcp.JSONRPCNotification {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]mcp.JSONRPCNotification(nil), p.byToken[token]...)
}

// TestMCPProgressLocalAndRemote calls the gateway's local ticker and the
// remote demo_ticker (relayed from the agent's stream events) with a
// progress token: each gets several progress notifications, with growing
// byte counts and output lines as messages, before its result.
func TestMCPProgressLocalAndRemote(t *testing.T) {
	t.Parallel()
	f := startStreamFleet(t)
	var notes progressNotes
	c := connectMCP(t, f.gw.URL, notes.notify)

	for _, name := range []string{"ticker", "demo_ticker"} {
		t.Run(name, func(t *testing.T) {
			req := mcp.CallToolRequest{}
			req.Params.Name = name
			req.Params.Arguments = map[string]any{"every": "100ms", "count": 15}
			req.Params.Meta = &mcp.Meta{ProgressToken: "p-" + name}
			res, err := c.CallTool(t.Context(), req)
			if err != nil {
				t.Fatalf("tools/call %s: %v", name, err)
			}
			got := notes.of("p-" + name)
			cr := mcpCommandResult(t, name, res)
			if !strings.HasSuffix(cr.Output, "tick 15 of 15\n") {
				t.Fatalf("output: got %q, want 15 ticks", cr.Output)
			}
			if len(got) < 3 {
				t.Fatalf("progress notifications before the result: got %d, want several", len(got))
			}
			prev := 0.0
			for i, n := range got {
				p, _ := n.Params.AdditionalFields["progress"].(float64)
				msg, _ := n.Params.AdditionalFields["message"].(string)
				if p <= prev || p > float64(len(cr.Output)) {
					t.Errorf("notification %d: got progress %v after %v, want it to grow up to %d", i, p, prev, len(cr.Output))
				}
				prev = p
				if !strings.HasPrefix(msg, "tick ") || !strings.Contains(cr.Output, msg) {
					t.Errorf("notification %d: got message %q, want ticker lines", i, msg)
				}
			}
		})
	}
}

// TestMCPCancelRemoteSpawn cancels an MCP call of the remote demo_spawn
// (the mcp-go client sends notifications/cancelled when the call's context
// ends): the gateway sends the A2A cancel and the agent kills the process
// group, the grandchild that ignores SIGTERM included, long before the
// command's minute is up; the agent logs the call as canceled and serves
// the next call.
func TestMCPCancelRemoteSpawn(t *testing.T) {
	t.Parallel()
	f := startStreamFleet(t)
	c := connectMCP(t, f.gw.URL, nil)
	pidfile := filepath.Join(t.TempDir(), "child.pid")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "demo_spawn"
		req.Params.Arguments = map[string]any{"duration": "1m", "pidfile": pidfile}
		_, err := c.CallTool(ctx, req)
		done <- err
	}()
	grandchild := fisktest.WaitPIDFile(t, pidfile)
	cancelledAt := time.Now()
	cancel()
	waitCanceled(t, done)
	// The command would run a minute; liveness cannot be what stops it,
	// since the gateway stays connected.
	fisktest.WaitFor(t, 3*a2a.HeartbeatInterval+15*time.Second, "the agent to kill the cancelled command's group", func() bool { return fisktest.ProcessGone(grandchild) })
	t.Logf("MCP call cancelled; the remote grandchild was gone %s later", time.Since(cancelledAt).Round(time.Millisecond))
	f.agent.WaitOutput(t, "outcome=canceled", 10*time.Second)
	if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"message": "after"})); cr.Output != "after\n" {
		t.Errorf("a call after the cancel: got %q, want the echo", cr.Output)
	}
}
