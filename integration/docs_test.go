package integration_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages returns README.md and every page of docs/, relative to this
// directory.
func docPages(tb testing.TB) []string {
	tb.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(pages) == 0 {
		tb.Fatal("docs/: got no pages, want one per concern")
	}
	return append([]string{filepath.Join("..", "README.md")}, pages...)
}

// docPage is a Markdown page's prose (code blocks and code spans left out)
// and the anchors of its headings.
type docPage struct {
	// lines are the page's lines with code replaced by nothing, so a link
	// or heading inside code does not count.
	lines   []string
	anchors map[string]bool
}

func readDocPage(tb testing.TB, path string) docPage {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	codeSpan := regexp.MustCompile("`[^`]*`")
	p := docPage{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			p.lines = append(p.lines, "")
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") {
			p.lines = append(p.lines, "")
			continue
		}
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			a := anchor(title)
			if n := seen[a]; n > 0 {
				p.anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				p.anchors[a] = true
			}
			seen[a]++
		}
		p.lines = append(p.lines, codeSpan.ReplaceAllString(line, ""))
	}
	return p
}

// anchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, and every character but letters, digits, hyphens and
// underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Audit trail", "audit-trail"},
		{"Traces (OpenTelemetry)", "traces-opentelemetry"},
		{"Who is calling: OAuth, a policy per caller, an audit trail", "who-is-calling-oauth-a-policy-per-caller-an-audit-trail"},
		{"Fisk AI's own agents", "fisk-ais-own-agents"},
		{"The `knowledge` key", "the-knowledge-key"},
	}
	for _, tt := range tests {
		if got := anchor(tt.heading); got != tt.want {
			t.Errorf("anchor(%q): got %q, want %q", tt.heading, got, tt.want)
		}
	}
}

// TestDocLinks checks every relative link of README.md and docs/: the file
// or directory it names exists, and a fragment names a heading of the page
// it points to (or of its own page). It also checks that README.md links
// every page of docs/ and that each page starts with its title.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pages := docPages(t)
	parsed := map[string]docPage{}
	page := func(path string) docPage {
		path = filepath.Clean(path)
		if p, ok := parsed[path]; ok {
			return p
		}
		parsed[path] = readDocPage(t, path)
		return parsed[path]
	}
	readmeLinks := map[string]bool{}
	for _, from := range pages {
		for i, line := range page(from).lines {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := from
				if file != "" {
					path = filepath.Join(filepath.Dir(from), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: link %s: got %v, want the file to exist", from, i+1, target, err)
						continue
					}
				}
				if from == pages[0] {
					readmeLinks[filepath.Clean(path)] = true
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s:%d: link %s: got a fragment on a file that is not Markdown, want none", from, i+1, target)
					continue
				}
				if !page(path).anchors[frag] {
					t.Errorf("%s:%d: link %s: got no heading #%s in %s, want one (headings there: %v)", from, i+1, target, frag, path, slices.Sorted(maps.Keys(page(path).anchors)))
				}
			}
		}
	}
	for _, p := range pages[1:] {
		if !readmeLinks[filepath.Clean(p)] {
			t.Errorf("README.md: got no link to %s, want every docs page in its table of contents", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# ") {
			t.Errorf("%s: got first line %q, want the page's title (# …)", p, strings.SplitN(string(data), "\n", 2)[0])
		}
	}
}

// architecturePage is the page that names the packages of the repository
// by their paths, relative to this directory.
var architecturePage = filepath.Join("..", "docs", "architecture.md")

// pathSpan is a code span that may name a path: path characters only,
// with no leading slash (an HTTP route) and no scheme.
var pathSpan = regexp.MustCompile(`^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$`)

// repoPath reports whether the code span s names a file or directory of
// the repository: a path with a slash, or a Go file. A span whose first
// segment holds a dot, and is no file at the root, is a module path
// (github.com/…), not one of ours.
func repoPath(s string, rootEntry func(string) bool) bool {
	if !pathSpan.MatchString(s) || !strings.Contains(s, "/") && !strings.HasSuffix(s, ".go") {
		return false
	}
	first, _, nested := strings.Cut(s, "/")
	return !nested || !strings.Contains(first, ".") || rootEntry(first)
}

// diagramPath finds, in a line of a fenced block, the words that name a
// package of a module whose directory cannot be mistaken for anything
// else (services/, shared/, schemas/, integration/): the diagrams name
// packages by their paths too. tools/ is left out, since tools/call and
// tools/list are MCP methods.
var diagramPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])((?:services|shared|schemas|integration)/[A-Za-z0-9_./-]*[A-Za-z0-9_-])`)

// TestArchitecturePaths checks that every repository path docs/architecture.md
// names exists: each code span that looks like a file or directory path
// (services/mcp-gateway/internal/call, shared/tool,
// services/mcp-gateway/main.go), and each package path in its diagrams.
// Paths are from the repository root, so a span such as internal/call,
// which names no path from there, fails too.
func TestArchitecturePaths(t *testing.T) {
	root := filepath.Join("..")
	rootEntry := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}

	t.Run("classify", func(t *testing.T) {
		tests := []struct {
			span string
			want bool
		}{
			{"services/mcp-gateway/internal/call", true},
			{"shared/tool", true},
			{"shared/", true},
			{"services/mcp-gateway/main.go", true},
			{"internal/call", true},
			{"main.go", true},
			{"README.md", false},
			{"call.Core.Call", false},
			{"/mcp", false},
			{"/.well-known/agent-card.json", false},
			{"choria.fisk-ai.tool.<identity>", false},
			{"github.com/mark3labs/mcp-go", false},
			{"https://example.com/mcp", false},
			{"GOWORK=off go build ./...", false},
			{"expose.agent.mcp.tool_timeout", false},
		}
		for _, tt := range tests {
			if got := repoPath(tt.span, rootEntry); got != tt.want {
				t.Errorf("repoPath(%q): got %v, want %v", tt.span, got, tt.want)
			}
		}
	})

	data, err := os.ReadFile(architecturePage)
	if err != nil {
		t.Fatal(err)
	}
	codeSpan := regexp.MustCompile("`([^`]+)`")
	seen := map[string]bool{}
	check := func(line int, path string) {
		seen[path] = true
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("%s:%d: %s: got %v, want a path from the repository root that exists", architecturePage, line, path, err)
		}
	}
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			for _, m := range diagramPath.FindAllStringSubmatch(line, -1) {
				check(i+1, m[1])
			}
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			if repoPath(m[1], rootEntry) {
				check(i+1, m[1])
			}
		}
	}
	// The page is about the packages: a reading that finds few paths has
	// gone wrong, whatever it checked.
	for _, want := range []string{"shared/", "services/mcp-gateway/internal/call", "services/a2a-agent/internal/server", "shared/a2a/natsbus"} {
		if !seen[want] {
			t.Errorf("%s: got no mention of %s, want the page to name it in backticks", architecturePage, want)
		}
	}
}
