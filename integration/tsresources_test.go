package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// tsResourcesAnswer is what integration/tsclient/resources.mjs prints.
type tsResourcesAnswer struct {
	ResourcesCapability *struct {
		ListChanged bool `json:"listChanged"`
	} `json:"resourcesCapability"`
	Pages [][]struct {
		URI      string `json:"uri"`
		Name     string `json:"name"`
		Title    string `json:"title"`
		MIMEType string `json:"mimeType"`
	} `json:"pages"`
	Templates []string      `json:"templates"`
	Document  *tsReadAnswer `json:"document"`
	Search    struct {
		IsError bool   `json:"isError"`
		Text    string `json:"text"`
	} `json:"search"`
	Links []tsReadAnswer `json:"links"`
}

// tsReadAnswer is one resources/read as the script reports it.
type tsReadAnswer struct {
	Name     string `json:"name"`
	URI      string `json:"uri"`
	Contents []struct {
		URI      string  `json:"uri"`
		MIMEType string  `json:"mimeType"`
		Text     *string `json:"text"`
	} `json:"contents"`
}

// text is the one text content of a read, failing tb otherwise.
func (r tsReadAnswer) text(tb testing.TB) string {
	tb.Helper()
	if len(r.Contents) != 1 || r.Contents[0].Text == nil || r.Contents[0].URI != r.URI {
		tb.Fatalf("resources/read %s: got %+v, want one text content of that URI", r.URI, r.Contents)
	}
	return *r.Contents[0].Text
}

// TestTSClientKnowledgeResources serves more knowledge documents than one
// resources/list page holds and drives the gateway with the official
// TypeScript SDK client: it lists every document across the pages, reads
// one, and follows the resource_link of a knowledge_search result with
// resources/read, getting the text the search returned for that section.
func TestTSClientKnowledgeResources(t *testing.T) {
	t.Parallel()
	ts := findTSClient(t)
	ts.script = filepath.Join(filepath.Dir(ts.script), "resources.mjs")
	b := newBus(t)

	const docs = 230 // three pages of resources/list
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "guide"), 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range docs {
		name := fmt.Sprintf("guide/topic%03d.md", n)
		body := fmt.Sprintf("# Topic %d\n\nGeneral notes on topic %d.\n\n## Details\n\nMore about the setup of topic %d.\n", n, n, n)
		if n == 117 {
			body += "\n## Feeding the pangolin\n\nThe pangolin eats ants at dusk, never before.\n"
		}
		fleettest.WriteFile(t, filepath.Join(dir, "guide"), filepath.Base(name), body)
		names = append(names, name)
	}
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "kbts",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"builtins": []string{"knowledge_search"}, "resources": []string{"knowledge"}},
		Extra:           map[string]any{"knowledge": map[string]any{"directory": dir, "store": filepath.Join(t.TempDir(), "store")}},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	c := connectMCP(t, gw.URL, nil)
	fisktest.WaitFor(t, 30*time.Second, "the first index build", func() bool {
		a := searchKnowledge(t, c, "pangolin")
		return !a.Building && a.cites("guide/topic117.md")
	})

	var got tsResourcesAnswer
	ts.run(t, os.Environ(), gw.URL, &got, "pangolin")

	if got.ResourcesCapability == nil || !got.ResourcesCapability.ListChanged {
		t.Errorf("resources capability: got %+v, want one with listChanged", got.ResourcesCapability)
	}
	var uris []string
	for i, page := range got.Pages {
		if len(page) == 0 || len(page) > 100 {
			t.Errorf("page %d: got %d resources, want 1 to 100", i, len(page))
		}
		for _, r := range page {
			if r.MIMEType != "text/markdown" || !strings.HasPrefix(r.Title, "Topic ") {
				t.Errorf("resource %s: got mime type %q, title %q, want text/markdown and the document's title", r.URI, r.MIMEType, r.Title)
			}
			uris = append(uris, r.URI)
		}
	}
	want := make([]string, len(names))
	for i, n := range names {
		want[i] = "knowledge:///doc/" + n
	}
	if len(got.Pages) < 3 || !slices.Equal(slices.Sorted(slices.Values(uris)), want) {
		t.Fatalf("resources/list: got %d resources over %d pages, want each of the %d documents once over three pages or more", len(uris), len(got.Pages), docs)
	}
	if !slices.Contains(got.Templates, "knowledge:///section/{ordinal}/{+path}") {
		t.Errorf("resource templates: got %v, want the section template", got.Templates)
	}

	if got.Document == nil {
		t.Fatal("no document read")
	}
	first := got.Document.text(t)
	src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(got.Document.URI, "knowledge:///doc/"))))
	if err != nil {
		t.Fatalf("the document the client read, %s: %v", got.Document.URI, err)
	}
	if strings.TrimSpace(first) != strings.TrimSpace(string(src)) {
		t.Errorf("resources/read %s: got %q, want the document's text %q", got.Document.URI, first, src)
	}

	if got.Search.IsError {
		t.Fatalf("knowledge_search: got isError %q", got.Search.Text)
	}
	answer := decodeJSON[knowledgeAnswer](t, "the knowledge_search answer", got.Search.Text)
	if len(answer.Results) == 0 || len(got.Links) != len(answer.Results) {
		t.Fatalf("knowledge_search pangolin: got %d results and %d resource links, want one link per result and some", len(answer.Results), len(got.Links))
	}
	for i, r := range answer.Results {
		l := got.Links[i]
		if l.Name != r.Citation {
			t.Errorf("link %d: got name %q, want the citation %q", i, l.Name, r.Citation)
		}
		if text := l.text(t); text != r.Text {
			t.Errorf("link %s: resources/read got %q, want the section text the search returned, %q", l.URI, text, r.Text)
		}
	}
	if top := got.Links[0]; !strings.HasPrefix(top.URI, "knowledge:///section/") || !strings.Contains(top.text(t), "The pangolin eats ants at dusk, never before.") {
		t.Errorf("top link %s: got %q, want the pangolin section", top.URI, top.text(t))
	}
}
