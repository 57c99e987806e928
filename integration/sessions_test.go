package integration_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// expiredRE matches the gateway's log line for a sweep of idle sessions.
var expiredRE = regexp.MustCompile(`MCP sessions expired.*? count=(\d+)`)

// TestGatewayAbandonedSessions opens 10,000 sessions on a real gateway and
// never deletes them, as crashed or restarted clients do: with the idle
// timeout shortened they all expire, every id is then 404, and the
// gateway's memory comes back near where it started.
func TestGatewayAbandonedSessions(t *testing.T) {
	t.Parallel()
	const (
		sessions = 10000
		idle     = 3 * time.Second
	)
	b := newBus(t)
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"session_idle_timeout": idle.String(), "max_sessions": 2 * sessions},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	start := settledRSS(t, gw.PID, 5*time.Second)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	initialize := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"abandoner","version":"0"}}}`, mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	post := func(body []byte, session string) (int, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL, bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), nil
	}

	var (
		mu     sync.Mutex // guards ids
		ids    []string
		failed atomic.Int32
		wg     sync.WaitGroup
		next   atomic.Int32
	)
	opened := time.Now()
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= sessions {
				status, id, err := post(initialize, "")
				if err != nil || status != http.StatusOK || id == "" {
					failed.Add(1)
					continue
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	openTime := time.Since(opened)
	if n := failed.Load(); n > 0 {
		t.Fatalf("initialize: %d of %d failed, want none", n, sessions)
	}
	peak := procStatusKiB(t, gw.PID, "VmRSS")

	// Every session expires (the gateway logs how many each sweep ended;
	// asking about a session would keep it alive), and the first and the
	// last opened are then both gone.
	fisktest.WaitFor(t, 60*time.Second, "every session to expire", func() bool {
		total := 0
		for _, m := range expiredRE.FindAllStringSubmatch(gw.Stderr(), -1) {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
		return total >= sessions
	})
	expiredAt := time.Now()
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		if status, _, err := post(ping, id); err != nil || status != http.StatusNotFound {
			t.Errorf("session %s after expiry: got %d %v, want 404", id, status, err)
		}
	}
	after := settledRSS(t, gw.PID, 20*time.Second)
	t.Logf("%d sessions opened in %s; gateway RSS %d KiB at start, %d KiB with them open (+%d KiB), %d KiB once expired (+%d KiB over start, settled %s after expiry)",
		sessions, openTime.Round(time.Millisecond), start, peak, peak-start, after, after-start, time.Since(expiredAt).Round(time.Second))
	if grew := after - start; grew > (peak-start)/4+4096 {
		t.Errorf("RSS after expiry: got %d KiB over the start, want back near it (at most a quarter of the %d KiB the sessions took, plus 4 MiB)", grew, peak-start)
	}
	// A new client is served as ever.
	if status, id, err := post(initialize, ""); err != nil || status != http.StatusOK || id == "" {
		t.Errorf("initialize after expiry: got %d %q %v, want a new session", status, id, err)
	}
}
