package integration_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// toolsListPageSize is the small expose.agent.mcp.tools_page_size the
// paging test lists with: about twenty pages of the fleet's list.
const toolsListPageSize = 37

// pageAll follows nextCursor from the first page of tools/list to the
// last and returns the names in order and the cursor of the second page.
func pageAll(tb testing.TB, c *client.Client) (names []string, second mcp.Cursor) {
	tb.Helper()
	var cursor mcp.Cursor
	for pages := 0; pages < 1000; pages++ {
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = cursor
		res, err := c.ListToolsByPage(tb.Context(), req)
		if err != nil {
			tb.Fatalf("tools/list page %d: %v", pages+1, err)
		}
		if len(res.Tools) > toolsListPageSize {
			tb.Fatalf("tools/list page %d: got %d tools, want at most %d", pages+1, len(res.Tools), toolsListPageSize)
		}
		for _, t := range res.Tools {
			names = append(names, t.Name)
		}
		if pages == 0 {
			second = res.NextCursor
		}
		if res.NextCursor == "" {
			return names, second
		}
		cursor = res.NextCursor
	}
	tb.Fatal("tools/list: the cursor does not advance")
	return nil, ""
}

// checkOnce fails tb unless names holds n distinct names.
func checkOnce(tb testing.TB, what string, names []string, n int) {
	tb.Helper()
	if len(names) != n || len(slices.Compact(slices.Sorted(slices.Values(names)))) != n {
		tb.Fatalf("%s: got %d names (%d distinct), want each of %d tools exactly once", what, len(names), len(slices.Compact(slices.Sorted(slices.Values(names)))), n)
	}
}

// TestToolsListPagedFleet pages through the list of a gateway in front of
// three agents of the real nats CLI with a small tools_page_size, with
// mcp-go's client in both protocol eras: every tool exactly once. One
// agent restarts serving more commands; once the gateway's refresh has
// seen it, the list has them, a cursor of the list before is refused as
// stale, and paging again sees the new list whole.
func TestToolsListPagedFleet(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	gw, agents := startNATSCLIFleet(t, b, []string{"stream_*"}, map[string]any{"tools_page_size": toolsListPageSize}, "500ms")
	legacy := newMCPClient(t, gw.URL, nil, []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}, nil)
	modern := connectMCP(t, gw.URL, nil)

	names, stale := pageAll(t, modern)
	before := len(names)
	streams := 0
	for _, n := range names {
		if strings.HasPrefix(n, "nats3_") {
			if !strings.HasPrefix(n, "nats3_stream_") {
				t.Fatalf("got %s, want only stream commands of nats3", n)
			}
			streams++
		}
	}
	if streams == 0 || before < 400 {
		t.Fatalf("got %d tools with %d of nats3, want two full nats CLIs and nats3's stream commands", before, streams)
	}
	checkOnce(t, "2026-07-28", names, before)
	lnames, _ := pageAll(t, legacy)
	checkOnce(t, "2025-11-25", lnames, before)
	if !slices.Equal(names, lnames) {
		t.Fatal("got different lists in the two eras")
	}

	// nats3 comes back serving every command.
	agents[2].Signal(t, syscall.SIGTERM)
	agents[2].Wait(t, fleettest.ReadyTimeout)
	fleettest.StartAgent(t, b.home.Env(), natsCLIAgent(t, "nats3", nil))
	var after int
	fisktest.WaitFor(t, 30*time.Second, "the gateway to list nats3's every command", func() bool {
		res, err := modern.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			return false
		}
		after = len(res.Tools)
		return after > before
	})
	if after != 3*(before-streams)/2 {
		t.Errorf("got %d tools after nats3 came back whole, want three nats CLIs' %d", after, 3*(before-streams)/2)
	}

	req := mcp.ListToolsRequest{}
	req.Params.Cursor = stale
	if _, err := modern.ListToolsByPage(t.Context(), req); err == nil || !strings.Contains(err.Error(), "stale cursor") {
		t.Errorf("cursor of the list before the change: got %v, want a stale cursor error", err)
	}
	names, _ = pageAll(t, modern)
	checkOnce(t, "2026-07-28 after the change", names, after)
	lnames, _ = pageAll(t, legacy)
	checkOnce(t, "2025-11-25 after the change", lnames, after)
}
