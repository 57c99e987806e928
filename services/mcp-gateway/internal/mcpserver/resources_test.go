package mcpserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// knowledgeIndex indexes docs documents in a fresh directory and returns
// the open index.
func knowledgeIndex(tb testing.TB, docs int) *knowledge.Index {
	tb.Helper()
	dir := tb.TempDir()
	for n := range docs {
		p := filepath.Join(dir, fmt.Sprintf("d%d", n%7), fmt.Sprintf("doc%04d.md", n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "# Document %d\n\nText of document %d.\n", n, n), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	idx, err := knowledge.Open(knowledge.Options{Directory: dir, Store: filepath.Join(tb.TempDir(), "store"), Logger: testLogger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { idx.Close() })
	if _, err := idx.Update(tb.Context(), nil); err != nil {
		tb.Fatal(err)
	}
	return idx
}

// manyTools returns n read-only tools that answer their own name, named
// so that they sort in an order unlike their creation order.
func manyTools(tb testing.TB, n int) []tool.Tool {
	tb.Helper()
	var out []tool.Tool
	for i := range n {
		name := fmt.Sprintf("t%03d_%c", (i*37)%n, 'a'+rune(i%26))
		t, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Description: "Answers its name.", Exposure: tool.ExposeMCP, Confirmation: tool.ConfirmNone,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) {
				return tool.Outcome{JSON: []byte(`"` + name + `"`)}, nil
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, t)
	}
	return out
}

// listAllTools pages tools/list to its end and returns the names and the
// size of each page. It asks page by page: mcp-go's ListTools follows the
// cursors itself and would hide the paging.
func listAllTools(tb testing.TB, c *client.Client) (names []string, pages []int) {
	tb.Helper()
	var cursor mcp.Cursor
	for len(pages) < 100 {
		req := mcp.ListToolsRequest{}
		req.Params.Cursor = cursor
		res, err := c.ListToolsByPage(tb.Context(), req)
		if err != nil {
			tb.Fatalf("tools/list page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, len(res.Tools))
		for _, t := range res.Tools {
			names = append(names, t.Name)
		}
		if res.NextCursor == "" {
			return names, pages
		}
		cursor = res.NextCursor
	}
	tb.Fatalf("tools/list: more than 100 pages, the cursor does not advance")
	return nil, nil
}

// listAllResources pages resources/list to its end.
func listAllResources(tb testing.TB, c *client.Client) (uris []string, pages []int) {
	tb.Helper()
	var cursor mcp.Cursor
	for len(pages) < 100 {
		req := mcp.ListResourcesRequest{}
		req.Params.Cursor = cursor
		res, err := c.ListResourcesByPage(tb.Context(), req)
		if err != nil {
			tb.Fatalf("resources/list page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, len(res.Resources))
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if res.NextCursor == "" {
			return uris, pages
		}
		cursor = res.NextCursor
	}
	tb.Fatalf("resources/list: more than 100 pages, the cursor does not advance")
	return nil, nil
}

// TestToolsAndResourcesPaged serves 250 tools and 260 knowledge documents:
// with resources on, tools/list and resources/list are both paged (at most
// resourcePageSize items a page), and following nextCursor lists every
// tool and every document once, in both protocol eras; a tool listed on
// the last page is called like any other. Without resources, tools/list
// stays one page, as before resources existed.
func TestToolsAndResourcesPaged(t *testing.T) {
	const nTools, nDocs = 250, 260
	idx := knowledgeIndex(t, nDocs)
	builtins, err := idx.Tools(knowledge.ToolNames())
	if err != nil {
		t.Fatal(err)
	}
	tools := append(manyTools(t, nTools), builtins...)
	var want []string
	for _, tl := range tools {
		want = append(want, tl.Name())
	}
	slices.Sort(want)
	var wantDocs []string
	listing, cursor := []string{}, ""
	for {
		page, err := idx.Enumerate(t.Context(), "", cursor, knowledge.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Documents {
			listing = append(listing, DocumentURI(d.Path))
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	wantDocs = slices.Sorted(slices.Values(listing))
	if len(wantDocs) != nDocs {
		t.Fatalf("indexed documents: got %d, want %d", len(wantDocs), nDocs)
	}

	_, withResources := startServer(t, Config{Resources: idx}, tools)
	_, without := startServer(t, Config{}, tools)
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, withResources, e, nil)
			names, pages := listAllTools(t, c)
			if !slices.Equal(slices.Sorted(slices.Values(names)), want) || len(names) != len(want) {
				t.Errorf("tools/list with resources: got %d names over pages %v, want each of the %d tools once", len(names), pages, len(want))
			}
			if len(pages) < 3 || slices.Max(pages) > resourcePageSize {
				t.Errorf("tools/list with resources: got pages of %v, want three or more of at most %d", pages, resourcePageSize)
			}
			uris, rpages := listAllResources(t, c)
			if !slices.Equal(slices.Sorted(slices.Values(uris)), wantDocs) || len(uris) != nDocs {
				t.Errorf("resources/list: got %d resources over pages %v, want each of the %d documents once", len(uris), rpages, nDocs)
			}
			if len(rpages) < 3 || slices.Max(rpages) > resourcePageSize {
				t.Errorf("resources/list: got pages of %v, want three or more of at most %d", rpages, resourcePageSize)
			}
			last := want[len(want)-1]
			if res := callTool(t, c, last, map[string]any{}); res.IsError || resultText(res) != `"`+last+`"` {
				t.Errorf("calling %s from the last page: got %q (isError %t)", last, resultText(res), res.IsError)
			}

			plain := connect(t, without, e, nil)
			names, pages = listAllTools(t, plain)
			if len(pages) != 1 || !slices.Equal(slices.Sorted(slices.Values(names)), want) {
				t.Errorf("tools/list without resources: got %d names over pages %v, want all %d on one page", len(names), pages, len(want))
			}
		})
	}
}
