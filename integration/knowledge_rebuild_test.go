package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// sqliteTexts are SQLite's own error words: a searcher never sees them.
var sqliteTexts = []string{"malformed", "not a database", "SQLITE", "(11)", "(26)", "disk image", "no such table", "integrity check"}

// overwrite writes data over file at off.
func overwrite(tb testing.TB, file string, off int64, data []byte) {
	tb.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		tb.Fatal(err)
	}
}

// TestKnowledgeStoreRebuild damages a gateway's knowledge store twice,
// with real processes: before start (its header overwritten, as a bad
// copy or disk would), where the operator's CLI search says plainly it is
// damaged and the gateway logs a rebuild and then answers; and while it
// runs, where its periodic check (knowledge.check_interval 1s) finds the
// damage, searches during the rebuild answer or say the index is being
// rebuilt, never with SQLite's words, another tool is served throughout,
// and afterwards the answers are a sound index's.
func TestKnowledgeStoreRebuild(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	docs := t.TempDir()
	const files = 40
	for n := range files {
		fleettest.WriteFile(t, docs, fmt.Sprintf("lease%02d.md", n), churnDoc(n, 0))
	}
	store := filepath.Join(t.TempDir(), "store")
	file := filepath.Join(store, "index.db")
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "kbr",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		IncludeTools:    []string{"echo"},
		MCP:             map[string]any{"builtins": []string{"knowledge_search"}},
		Extra:           map[string]any{"knowledge": map[string]any{"directory": docs, "store": store, "check_interval": "1s"}},
	})
	cli := func(args ...string) *fleettest.Process {
		t.Helper()
		p := fleettest.Start(t, b.home.Env(), fleettest.MCPGateway(t), append([]string{"knowledge"}, append(args, "--config", cfg)...)...)
		p.Wait(t, 60*time.Second)
		return p
	}
	if p := cli("index"); p.ExitCode() != 0 {
		t.Fatalf("knowledge index: exit %d\n%s", p.ExitCode(), p.Output())
	}
	const query = "lease renewal rotation"
	sound := cli("search", "--top-k", "10", query)
	if sound.ExitCode() != 0 || !strings.Contains(sound.Stdout(), "lease") {
		t.Fatalf("knowledge search of the sound store: exit %d\n%s", sound.ExitCode(), sound.Output())
	}

	overwrite(t, file, 0, []byte(strings.Repeat("\x00garbage", 16)))
	t.Run("the CLI meets the damaged store", func(t *testing.T) {
		p := cli("search", query)
		out := p.Output()
		if p.ExitCode() == 0 || !strings.Contains(out, "knowledge index unavailable") || !strings.Contains(out, "knowledge.store") || !strings.Contains(out, "--reindex") {
			t.Errorf("knowledge search: got exit %d\n%s\nwant a failure saying the store is damaged, naming knowledge.store and the rebuild command", p.ExitCode(), out)
		}
		for _, w := range sqliteTexts {
			if strings.Contains(out, w) {
				t.Errorf("knowledge search: got %q, want no SQLite error text (%q)", out, w)
			}
		}
	})

	gw := startGateway(t, b.home.Env(), cfg)
	gw.WaitOutput(t, "knowledge store rebuilt", 60*time.Second)
	if out := gw.Output(); !strings.Contains(out, "rebuilding the damaged knowledge store") || !strings.Contains(out, file) {
		t.Errorf("gateway log: want the rebuild's start naming %s:\n%s", file, out)
	}
	c := connectMCP(t, gw.URL, nil)
	var want []string
	fisktest.WaitFor(t, 30*time.Second, "searches of the rebuilt store", func() bool {
		a := searchKnowledge(t, c, query)
		want = want[:0]
		for _, r := range a.Results {
			want = append(want, r.Citation)
		}
		return !a.Building && len(want) > 0
	})
	if got := cli("search", query); got.ExitCode() != 0 || !strings.Contains(got.Stdout(), want[0]) {
		t.Errorf("CLI search after the rebuild: got exit %d\n%s\nwant the gateway's best hit %s", got.ExitCode(), got.Output(), want[0])
	}

	// Damage while running, under searches and another tool's calls.
	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg                           sync.WaitGroup
		mu                           sync.Mutex
		answered, rebuilding, echoes int
		failures                     []string
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, s)
		}
	}
	for range 2 {
		sc := connectMCP(t, gw.URL, nil)
		wg.Go(func() {
			for ctx.Err() == nil {
				req := mcp.CallToolRequest{}
				req.Params.Name = "knowledge_search"
				req.Params.Arguments = map[string]any{"query": query, "top_k": 10}
				res, err := sc.CallTool(ctx, req)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					fail("knowledge_search: " + err.Error())
				case res.IsError:
					msg := mcpText(res)
					if !strings.Contains(msg, "being rebuilt") || !strings.Contains(msg, "knowledge.store") || slices.ContainsFunc(sqliteTexts, func(w string) bool { return strings.Contains(msg, w) }) {
						fail("knowledge_search: isError " + msg)
					}
					mu.Lock()
					rebuilding++
					mu.Unlock()
				default:
					mu.Lock()
					answered++
					mu.Unlock()
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Go(func() {
		ec := connectMCP(t, gw.URL, nil)
		for ctx.Err() == nil {
			req := mcp.CallToolRequest{}
			req.Params.Name = "echo"
			req.Params.Arguments = map[string]any{"message": "still here"}
			res, err := ec.CallTool(ctx, req)
			switch {
			case ctx.Err() != nil:
			case err != nil || res.IsError:
				fail(fmt.Sprintf("echo during the rebuild: %v %v", err, res))
			default:
				mu.Lock()
				echoes++
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	time.Sleep(300 * time.Millisecond)
	overwrite(t, file, 0, []byte(strings.Repeat("\xffdamage!", 12)))
	fisktest.WaitFor(t, 60*time.Second, "the periodic check to find the damage and the rebuild to end", func() bool {
		return strings.Count(gw.Output(), "knowledge store rebuilt") >= 2
	})
	time.Sleep(300 * time.Millisecond) // searches go on against the rebuilt store
	cancel()
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("during the damage and rebuild: %d searches answered, %d told the index is being rebuilt, %d echo calls served", answered, rebuilding, echoes)
	if echoes == 0 {
		t.Errorf("echo: no call served while the store was rebuilt, want other tools served throughout")
	}
	if out := gw.Output(); !strings.Contains(out, "found damaged") {
		t.Errorf("gateway log: want the damage found while running logged:\n%s", out)
	}
	res := callMCP(t, c, "knowledge_search", map[string]any{"query": query})
	if res.IsError {
		t.Fatalf("knowledge_search after the rebuild: isError %s", mcpText(res))
	}
	var a knowledgeAnswer
	if err := json.Unmarshal([]byte(mcpText(res)), &a); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range a.Results {
		got = append(got, r.Citation)
	}
	if !slices.Equal(got, want) {
		t.Errorf("knowledge_search after the rebuild: got %v, want %v (the answer before the damage)", got, want)
	}
}
