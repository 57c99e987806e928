package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// churnDoc is version v of churned document n: sections long enough for
// excerpts, each naming the version.
func churnDoc(n, v int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Lease %d\n\n", n)
	for s := range 3 {
		fmt.Fprintf(&b, "## Renewal %d\n\n", s)
		for range 30 {
			fmt.Fprintf(&b, "lease renewal rotation mark%05d ", v)
		}
		b.WriteString("\n\n")
	}
	return b.String()
}

// TestKnowledgeTwoGatewaysOneStore runs two gateway processes on one
// knowledge.store, both watching the same directory, so both write every
// change into the store at once while clients search both: no search
// fails (no "database is locked", no "malformed" store), both keep
// answering, neither logs a store error, and both end up serving the
// final files.
func TestKnowledgeTwoGatewaysOneStore(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	docs := t.TempDir()
	const files = 30
	for n := range files {
		fleettest.WriteFile(t, docs, fmt.Sprintf("lease%02d.md", n), churnDoc(n, 0))
	}
	store := filepath.Join(t.TempDir(), "store")
	var urls []string
	var gws []*gatewayProcess
	for _, id := range []string{"kba", "kbb"} {
		cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
			Identity:        id,
			ApplicationPath: fleettest.FiskDemo(t),
			NATSContext:     fleetContext,
			MCP:             map[string]any{"builtins": []string{"knowledge_search"}, "resources": []string{"knowledge"}},
			Extra:           map[string]any{"knowledge": map[string]any{"directory": docs, "store": store}},
		})
		gw := startGateway(t, b.home.Env(), cfg)
		gws = append(gws, gw)
		urls = append(urls, gw.URL)
	}
	for _, u := range urls {
		c := connectMCP(t, u, nil)
		fisktest.WaitFor(t, 30*time.Second, "the first index to answer on "+u, func() bool {
			a := searchKnowledge(t, c, "lease renewal")
			return !a.Building && len(a.Results) > 0
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		answers  = map[string]int{}
		last     int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	wg.Go(func() {
		for v := 1; ctx.Err() == nil; v++ {
			for n := range files {
				p := filepath.Join(docs, fmt.Sprintf("lease%02d.md", n))
				if err := os.WriteFile(p, []byte(churnDoc(n, v)), 0o644); err != nil {
					fail("writing %s: %v", p, err)
					return
				}
			}
			mu.Lock()
			last = v
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	})
	for _, u := range urls {
		for range 2 {
			c := connectMCP(t, u, nil)
			wg.Go(func() {
				for ctx.Err() == nil {
					req := mcp.CallToolRequest{}
					req.Params.Name = "knowledge_search"
					req.Params.Arguments = map[string]any{"query": "lease renewal rotation", "top_k": 10}
					res, err := c.CallTool(ctx, req)
					switch {
					case ctx.Err() != nil:
					case err != nil:
						fail("%s: knowledge_search: %v", u, err)
					case res.IsError:
						fail("%s: knowledge_search: isError %s", u, mcpText(res))
					default:
						mu.Lock()
						answers[u]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("answers while both gateways wrote the store: %v (files rewritten %d times)", answers, last)
	for _, u := range urls {
		if answers[u] == 0 {
			t.Errorf("%s: got no answer while the files changed, want it to keep answering", u)
		}
	}

	// Every section names its version: once both have caught up, the
	// last version is found and the one before it is gone.
	final, previous := fmt.Sprintf("mark%05d", last), fmt.Sprintf("mark%05d", last-1)
	for _, u := range urls {
		c := connectMCP(t, u, nil)
		fisktest.WaitFor(t, 20*time.Second, u+" to serve the final files", func() bool {
			var now, before knowledgeAnswer
			decode := func(q string, into *knowledgeAnswer) bool {
				res := callMCP(t, c, "knowledge_search", map[string]any{"query": q, "top_k": 20})
				return !res.IsError && json.Unmarshal([]byte(mcpText(res)), into) == nil
			}
			if !decode(final, &now) || !decode(previous, &before) || len(now.Results) == 0 || len(before.Results) > 0 {
				return false
			}
			for _, r := range now.Results {
				if !strings.Contains(r.Text, final) {
					return false
				}
			}
			return true
		})
	}
	for _, gw := range gws {
		out := gw.Output()
		// The index's own failures (the cancelled calls at the end of
		// the run log broken pipes, which are not the store's).
		for _, bad := range []string{"locked", "malformed", "corrupt", "updating the knowledge index", "building the knowledge index", "knowledge index not kept current"} {
			if strings.Contains(out, bad) {
				t.Errorf("gateway pid %d logged %q:\n%s", gw.PID, bad, out)
				break
			}
		}
	}
}
