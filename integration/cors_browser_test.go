package integration_test

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// TestBrowserCORSModern: a real Chromium page on an origin the gateway
// allows (expose.agent.mcp.allowed_origins) calls a tool with the
// 2026-07-28 revision's headers; the browser's preflight is answered and
// the call goes through. From an origin not allowed, the browser refuses.
func TestBrowserCORSModern(t *testing.T) {
	t.Parallel()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	node, pw := filepath.Join(root, conformanceNode), filepath.Join(root, browserPlaywright)
	fisktest.RequireInstalled(t, "Chromium with playwright-core", browserChromium, node, pw)

	// The page's own origin: a server of its own on loopback.
	page := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!doctype html><title>console</title>"))
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
		return "http://" + ln.Addr().String()
	}
	allowed, other := page(), page()
	b := newBus(t)
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"allowed_origins": []string{allowed}},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	call := func(from, want string) fisktest.ScriptEvent {
		s := fisktest.StartScript(t, node, filepath.Join(root, "integration", "browser", "cors.mjs"), map[string]string{
			"PAGE_URL": from + "/", "GATEWAY_URL": gw.URL, "PROTOCOL": mcp.ProtocolVersion20260728,
			"PLAYWRIGHT_CORE": pw, "CHROMIUM": browserChromium, "OUT": t.TempDir(),
		}, 2*time.Minute)
		ev := s.Next(t, want)
		s.Wait(t)
		return ev
	}
	if ev := call(allowed, "called"); ev.Event != "called" || !strings.HasPrefix(ev.Message, "200 ") || !strings.Contains(ev.Message, `from the browser\n`) {
		t.Errorf("from the allowed origin %s: got %+v, want the call through with echo's output", allowed, ev)
	}
	if ev := call(other, "refused"); ev.Event != "refused" {
		t.Errorf("from the origin %s, not allowed: got %+v, want the browser to refuse", other, ev)
	}
}
