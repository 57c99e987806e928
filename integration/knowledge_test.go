package integration_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// knowledgeAnswer is what knowledge_search returns, as far as these tests
// read it.
type knowledgeAnswer struct {
	Results []struct {
		Citation string `json:"citation"`
		Text     string `json:"text"`
	} `json:"results"`
	Building bool `json:"building"`
}

// searchKnowledge calls knowledge_search through the gateway.
func searchKnowledge(tb testing.TB, c *client.Client, query string) knowledgeAnswer {
	tb.Helper()
	res := callMCP(tb, c, "knowledge_search", map[string]any{"query": query})
	if res.IsError {
		tb.Fatalf("knowledge_search %q: got isError %q", query, mcpText(res))
	}
	var a knowledgeAnswer
	if err := json.Unmarshal([]byte(mcpText(res)), &a); err != nil {
		tb.Fatalf("knowledge_search %q: decoding %q: %v", query, mcpText(res), err)
	}
	return a
}

// cites reports whether a names a section of doc.
func (a knowledgeAnswer) cites(doc string) bool {
	for _, r := range a.Results {
		if strings.HasPrefix(r.Citation, doc+"#") {
			return true
		}
	}
	return false
}

// TestKnowledgeLive serves a docs folder through a real gateway and edits
// it while the gateway runs: an edit, a new file and a deletion are each
// searchable within seconds, with no restart, and a section opened as an
// MCP resource holds the text the search cited.
func TestKnowledgeLive(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	docs := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(docs, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("install.md", "# Install\n\n## From source\n\nBuild the gateway with make build; the binaries land in bin.\n")
	write("rotate.md", "# Rotating credentials\n\nThe nats context holds the credentials file; replace it and restart.\n")
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "kb",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"builtins": []string{"knowledge_search", "knowledge_enumerate"}, "resources": []string{"knowledge"}},
		Extra:           map[string]any{"knowledge": map[string]any{"directory": docs}},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	c := connectMCP(t, gw.URL, nil)
	settle := func(what string, cond func() bool) {
		t.Helper()
		start := time.Now()
		fisktest.WaitFor(t, 20*time.Second, what, cond)
		t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	}

	settle("the first index to answer", func() bool {
		a := searchKnowledge(t, c, "binaries")
		return !a.Building && a.cites("install.md")
	})

	write("install.md", "# Install\n\n## From source\n\nCompile everything with the zigzag toolchain.\n")
	settle("an edit to be searchable", func() bool { return searchKnowledge(t, c, "zigzag").cites("install.md") })

	write("backup.md", "# Backups\n\nSnapshot the stream nightly with the quokka schedule.\n")
	settle("a new file to be searchable", func() bool { return searchKnowledge(t, c, "quokka").cites("backup.md") })

	if err := os.Remove(filepath.Join(docs, "rotate.md")); err != nil {
		t.Fatal(err)
	}
	settle("a deleted file to leave the index", func() bool { return !searchKnowledge(t, c, "credentials").cites("rotate.md") })

	t.Run("a cited section opens as a resource", func(t *testing.T) {
		a := searchKnowledge(t, c, "quokka")
		if len(a.Results) == 0 {
			t.Fatal("no result")
		}
		res, err := c.ListResources(t.Context(), mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		var uris []string
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if len(uris) != 2 {
			t.Errorf("resources: got %v, want the two documents left", uris)
		}
		var link string
		call := callMCP(t, c, "knowledge_search", map[string]any{"query": "quokka"})
		for _, item := range call.Content {
			if l, ok := item.(mcp.ResourceLink); ok {
				link = l.URI
				break
			}
		}
		if link == "" {
			t.Fatalf("knowledge_search: got no resource_link in %+v", call.Content)
		}
		read, err := c.ReadResource(t.Context(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: link}})
		if err != nil {
			t.Fatalf("resources/read %s: %v", link, err)
		}
		var text string
		for _, rc := range read.Contents {
			if tc, ok := rc.(mcp.TextResourceContents); ok {
				text += tc.Text
			}
		}
		if !strings.Contains(text, "quokka") || !strings.Contains(a.Results[0].Text, "quokka") {
			t.Errorf("section %s: got %q, want the text the search cited (%q)", link, text, a.Results[0].Text)
		}
	})
}
