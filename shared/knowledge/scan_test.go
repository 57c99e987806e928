package knowledge

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// writeDocs creates files (slash-separated name to content) under a fresh
// temporary directory and returns it.
func writeDocs(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatalf("creating %s: %v", name, err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatalf("writing %s: %v", name, err)
		}
	}
	return dir
}

// newIndex builds an index over dir or fails the test.
func newIndex(tb testing.TB, dir string) *Index {
	tb.Helper()
	idx, err := New(dir)
	if err != nil {
		tb.Fatalf("New(%s): %v", dir, err)
	}
	return idx
}

// call runs the named built-in with input and returns its outcome.
func call(tb testing.TB, idx *Index, name, input string) tool.Outcome {
	tb.Helper()
	tools, err := idx.Tools([]string{name})
	if err != nil {
		tb.Fatalf("Tools(%s): %v", name, err)
	}
	out, err := tools[0].Call(tb.Context(), tool.Request{Input: json.RawMessage(input)})
	if err != nil {
		tb.Fatalf("%s(%s): %v", name, input, err)
	}
	return out
}

func TestEnumerate(t *testing.T) {
	files := map[string]string{
		"runbook.md":       "---\ntitle: ignored\n---\nIntro line.\n\n## Restarting NATS ##\n\nSteps.\n",
		"notes.txt":        "\n\n  Deploy notes  \nmore\n",
		"sub/limits.yaml":  "# JetStream limits\nmax_bytes: 1G\n",
		"README":           "Read me first\r\nsecond\r\n",
		"empty.md":         "",
		"hashtag.md":       "#nota heading\n# Real heading\n",
		".hidden.md":       "# hidden\n",
		".git/HEAD":        "ref: refs/heads/main\n",
		"photo.png":        "\x89PNG\r\n",
		"nul.txt":          "text\x00more\n",
		"latin1.txt":       "caf\xe9\n",
		"big.md":           "# Big\n" + strings.Repeat("x", MaxDocumentSize),
		"just-at-limit.md": "# At the limit\n" + strings.Repeat("y", MaxDocumentSize-len("# At the limit\n")),
	}
	idx := newIndex(t, writeDocs(t, files))
	size := func(name string) int64 { return int64(len(files[name])) }

	got, err := idx.Enumerate(t.Context())
	if err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	want := []Document{
		{Name: "README", Bytes: size("README"), Title: "Read me first"},
		{Name: "empty.md", Bytes: 0, Title: ""},
		{Name: "hashtag.md", Bytes: size("hashtag.md"), Title: "Real heading"},
		{Name: "just-at-limit.md", Bytes: MaxDocumentSize, Title: "At the limit"},
		{Name: "notes.txt", Bytes: size("notes.txt"), Title: "Deploy notes"},
		{Name: "runbook.md", Bytes: size("runbook.md"), Title: "Restarting NATS"},
		{Name: "sub/limits.yaml", Bytes: size("sub/limits.yaml"), Title: "# JetStream limits"},
	}
	if !slices.Equal(got.Documents, want) {
		t.Errorf("got documents %+v, want %+v", got.Documents, want)
	}
	if got.Truncated {
		t.Errorf("got truncated true, want false")
	}

	// The tool returns the same listing as verbatim JSON.
	out := call(t, idx, EnumerateTool, "")
	if out.IsError {
		t.Fatalf("got in-band error %q, want a listing", out.Message)
	}
	var decoded Listing
	if err := json.Unmarshal(out.JSON, &decoded); err != nil {
		t.Fatalf("decoding %s: %v", out.JSON, err)
	}
	if !slices.Equal(decoded.Documents, want) {
		t.Errorf("got tool documents %+v, want %+v", decoded.Documents, want)
	}
}

func TestEnumerateEmptyDirectory(t *testing.T) {
	out := call(t, newIndex(t, t.TempDir()), EnumerateTool, "{}")
	if got, want := string(out.JSON), `{"documents":[]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestSearch(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"a.md":     "# Streams\nCreate a STREAM with nats stream add.\nnothing here\nStream limits apply.\n",
		"b/c.txt":  "stream one\nstream two\nstream three\n",
		"skip.png": "stream in a binary name\n",
	})
	idx := newIndex(t, dir)

	tests := []struct {
		name      string
		input     string
		want      []Match
		truncated bool
	}{
		{
			name:  "case-insensitive hits in name and line order",
			input: `{"query":"stream"}`,
			want: []Match{
				{Document: "a.md", Line: 1, Text: "# Streams"},
				{Document: "a.md", Line: 2, Text: "Create a STREAM with nats stream add."},
				{Document: "a.md", Line: 4, Text: "Stream limits apply."},
				{Document: "b/c.txt", Line: 1, Text: "stream one"},
				{Document: "b/c.txt", Line: 2, Text: "stream two"},
				{Document: "b/c.txt", Line: 3, Text: "stream three"},
			},
		},
		{
			name:  "upper-case query",
			input: `{"query":"LIMITS"}`,
			want:  []Match{{Document: "a.md", Line: 4, Text: "Stream limits apply."}},
		},
		{
			name:  "miss gives an empty list",
			input: `{"query":"consumer"}`,
			want:  []Match{},
		},
		{
			name:  "limit cuts and marks truncated",
			input: `{"query":"stream","limit":2}`,
			want: []Match{
				{Document: "a.md", Line: 1, Text: "# Streams"},
				{Document: "a.md", Line: 2, Text: "Create a STREAM with nats stream add."},
			},
			truncated: true,
		},
		{
			name:  "limit equal to the hits is not truncated",
			input: `{"query":"two","limit":1}`,
			want:  []Match{{Document: "b/c.txt", Line: 2, Text: "stream two"}},
		},
		{
			name:  "null limit means the default",
			input: `{"query":"three","limit":null}`,
			want:  []Match{{Document: "b/c.txt", Line: 3, Text: "stream three"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := call(t, idx, SearchTool, tt.input)
			if out.IsError {
				t.Fatalf("got in-band error %q, want matches", out.Message)
			}
			var got Results
			if err := json.Unmarshal(out.JSON, &got); err != nil {
				t.Fatalf("decoding %s: %v", out.JSON, err)
			}
			if !slices.Equal(got.Matches, tt.want) {
				t.Errorf("got %+v, want %+v", got.Matches, tt.want)
			}
			if got.Truncated != tt.truncated {
				t.Errorf("got truncated %v, want %v", got.Truncated, tt.truncated)
			}
			if got.Matches == nil {
				t.Errorf("got null matches in %s, want a list", out.JSON)
			}
		})
	}
}

func TestSearchIsDeterministic(t *testing.T) {
	files := map[string]string{}
	for _, n := range []string{"z.md", "m.md", "a.md", "d/b.md", "d/a.md"} {
		files[n] = "needle\nhay\nneedle\n"
	}
	idx := newIndex(t, writeDocs(t, files))
	first := call(t, idx, SearchTool, `{"query":"needle","limit":100}`)
	for range 5 {
		again := call(t, idx, SearchTool, `{"query":"needle","limit":100}`)
		if string(again.JSON) != string(first.JSON) {
			t.Fatalf("got %s, want %s", again.JSON, first.JSON)
		}
	}
}

func TestSearchLongLineExcerpt(t *testing.T) {
	line := strings.Repeat("a", 5000) + "NEEDLE" + strings.Repeat("b", 5000)
	idx := newIndex(t, writeDocs(t, map[string]string{"min.json": line}))
	res, err := idx.Search(t.Context(), "needle", 1)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if len(res.Matches) != 1 {
		t.Fatalf("got %d matches, want 1", len(res.Matches))
	}
	text := res.Matches[0].Text
	if !strings.Contains(text, "NEEDLE") {
		t.Errorf("got excerpt without the match: %q", text)
	}
	if max := MaxLineText + 2*len("…"); len(text) > max {
		t.Errorf("got excerpt of %d bytes, want at most %d", len(text), max)
	}
	if !strings.HasPrefix(text, "…") || !strings.HasSuffix(text, "…") {
		t.Errorf("got excerpt %q, want it marked as cut on both sides", text)
	}
}

func TestSymlinksAreNotFollowed(t *testing.T) {
	outside := writeDocs(t, map[string]string{"secret.md": "# Secret\npassword=hunter2\n"})
	const inside = "# Inside\npassword policy\n"
	dir := writeDocs(t, map[string]string{"inside.md": inside})
	for link, target := range map[string]string{
		"leak.md":     filepath.Join(outside, "secret.md"),
		"leakdir":     outside,
		"relative.md": filepath.Join("..", filepath.Base(outside), "secret.md"),
		"twice.md":    "inside.md",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Skipf("creating symlink: %v", err)
		}
	}
	idx := newIndex(t, dir)

	listing, err := idx.Enumerate(t.Context())
	if err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	if got, want := listing.Documents, []Document{{Name: "inside.md", Bytes: int64(len(inside)), Title: "Inside"}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	res, err := idx.Search(t.Context(), "password", MaxLimit)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if got, want := res.Matches, []Match{{Document: "inside.md", Line: 2, Text: "password policy"}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestSymlinkedDirectoryIsServed(t *testing.T) {
	// The configured directory itself may be a link: that is the operator's
	// choice, unlike links inside it.
	real := writeDocs(t, map[string]string{"doc.md": "# Doc\n"})
	link := filepath.Join(t.TempDir(), "knowledge")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("creating symlink: %v", err)
	}
	listing, err := newIndex(t, link).Enumerate(t.Context())
	if err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	if got := len(listing.Documents); got != 1 {
		t.Errorf("got %d documents, want 1", got)
	}
}

func TestHugeFileSkipped(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"huge.txt":  "needle\n" + strings.Repeat("z", 2*MaxDocumentSize),
		"small.txt": "needle\n",
	})
	res, err := newIndex(t, dir).Search(t.Context(), "needle", MaxLimit)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if got, want := res.Matches, []Match{{Document: "small.txt", Line: 1, Text: "needle"}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestBadInputIsInBand(t *testing.T) {
	idx := newIndex(t, writeDocs(t, map[string]string{"a.md": "x\n"}))
	tests := []struct {
		name  string
		tool  string
		input string
		want  string
	}{
		{"search without input", SearchTool, "", "query is required"},
		{"search null input", SearchTool, "null", "query is required"},
		{"search empty object", SearchTool, "{}", "query is required"},
		{"search null query", SearchTool, `{"query":null}`, "query is required"},
		{"search array", SearchTool, `["x"]`, "must be a JSON object"},
		{"search string", SearchTool, `"x"`, "must be a JSON object"},
		{"search number", SearchTool, `5`, "must be a JSON object"},
		{"search malformed", SearchTool, `{"query":`, "must be a JSON object"},
		{"search trailing data", SearchTool, `{"query":"x"} {}`, "must be a JSON object"},
		{"query not a string", SearchTool, `{"query":5}`, "query must be a string"},
		{"query blank", SearchTool, `{"query":"  "}`, "must not be empty"},
		{"query too long", SearchTool, `{"query":"` + strings.Repeat("q", maxQuery+1) + `"}`, "longer than"},
		{"limit a string", SearchTool, `{"query":"x","limit":"5"}`, "limit must be an integer"},
		{"limit fractional", SearchTool, `{"query":"x","limit":2.5}`, "limit must be an integer"},
		{"limit zero", SearchTool, `{"query":"x","limit":0}`, "between 1 and 100"},
		{"limit negative", SearchTool, `{"query":"x","limit":-1}`, "between 1 and 100"},
		{"limit over max", SearchTool, `{"query":"x","limit":101}`, "between 1 and 100"},
		{"limit huge", SearchTool, `{"query":"x","limit":1e400}`, "limit must be an integer"},
		{"unknown key", SearchTool, `{"query":"x","regex":true}`, `unknown argument "regex": it takes query, limit`},
		{"enumerate unknown key", EnumerateTool, `{"dir":"/etc"}`, `unknown argument "dir": it takes no arguments`},
		{"enumerate array", EnumerateTool, `[]`, "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := call(t, idx, tt.tool, tt.input)
			if !out.IsError {
				t.Fatalf("got success %s, want an in-band error", out.JSON)
			}
			if !strings.Contains(out.Message, tt.want) {
				t.Errorf("got message %q, want it to contain %q", out.Message, tt.want)
			}
			if !strings.HasPrefix(out.Message, tt.tool+": ") {
				t.Errorf("got message %q, want it to name %s", out.Message, tt.tool)
			}
		})
	}
}

func TestTools(t *testing.T) {
	idx := newIndex(t, t.TempDir())

	tests := []struct {
		name    string
		names   []string
		want    []string
		wantErr error
	}{
		{name: "none", names: nil, want: nil},
		{name: "both in the given order", names: []string{SearchTool, EnumerateTool}, want: []string{SearchTool, EnumerateTool}},
		{name: "duplicates once", names: []string{EnumerateTool, EnumerateTool}, want: []string{EnumerateTool}},
		{name: "only the named one", names: []string{SearchTool}, want: []string{SearchTool}},
		{name: "unknown", names: []string{SearchTool, "memory_store"}, wantErr: ErrUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := idx.Tools(tt.names)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			var got []string
			for _, tl := range tools {
				got = append(got, tl.Name())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}

	tools, err := idx.Tools(ToolNames())
	if err != nil {
		t.Fatalf("Tools(ToolNames()): %v", err)
	}
	for _, tl := range tools {
		if got, want := tl.Exposure(), tool.ExposeMCP; got != want {
			t.Errorf("%s: got exposure %v, want %v", tl.Name(), got, want)
		}
		if tl.Exposure().Allows(tool.ExposeA2A) {
			t.Errorf("%s: got A2A allowed, want MCP only", tl.Name())
		}
		if got, want := tl.Confirmation(), tool.ConfirmNone; got != want {
			t.Errorf("%s: got confirmation %v, want %v", tl.Name(), got, want)
		}
		if !slices.Contains(tl.Tags(), tool.TagReadOnly) {
			t.Errorf("%s: got tags %v, want %s", tl.Name(), tl.Tags(), tool.TagReadOnly)
		}
		var schema map[string]any
		if err := json.Unmarshal(tl.InputSchema(), &schema); err != nil {
			t.Errorf("%s: input schema is not JSON: %v", tl.Name(), err)
		}
		if schema["type"] != "object" {
			t.Errorf("%s: got schema type %v, want object", tl.Name(), schema["type"])
		}
	}
}

func TestNew(t *testing.T) {
	file := filepath.Join(writeDocs(t, map[string]string{"f.md": "x"}), "f.md")
	tests := []struct {
		name string
		dir  string
	}{
		{"empty", ""},
		{"missing", filepath.Join(t.TempDir(), "nope")},
		{"a file", file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.dir)
			if !errors.Is(err, ErrNoDirectory) {
				t.Errorf("got %v, want %v", err, ErrNoDirectory)
			}
		})
	}
}

func TestDirectoryRemovedAfterNew(t *testing.T) {
	dir := writeDocs(t, map[string]string{"a.md": "x"})
	idx := newIndex(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("removing %s: %v", dir, err)
	}
	if _, err := idx.Enumerate(t.Context()); !errors.Is(err, ErrNoDirectory) {
		t.Errorf("got %v, want %v", err, ErrNoDirectory)
	}
}

func TestDocumentsAreReadAtCallTime(t *testing.T) {
	dir := writeDocs(t, map[string]string{"a.md": "# A\n"})
	idx := newIndex(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "b.md"), []byte("# B\n"), 0o644); err != nil {
		t.Fatalf("writing b.md: %v", err)
	}
	listing, err := idx.Enumerate(t.Context())
	if err != nil {
		t.Fatalf("Enumerate: %v", err)
	}
	if got := len(listing.Documents); got != 2 {
		t.Errorf("got %d documents, want 2", got)
	}
}

func TestCanceledContext(t *testing.T) {
	idx := newIndex(t, writeDocs(t, map[string]string{"a.md": "x"}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := idx.Search(ctx, "x", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want %v", err, context.Canceled)
	}
}

func TestHeading(t *testing.T) {
	tests := []struct {
		line string
		want string
		ok   bool
	}{
		{"# Title", "Title", true},
		{"###   Spaced   ", "Spaced", true},
		{"## Closed ##", "Closed", true},
		{"# C# tips", "C# tips", true},
		{"   # Indented", "Indented", true},
		{"    # Code", "", false},
		{"#hashtag", "", false},
		{"####### Seven", "", false},
		{"#", "", false},
		{"plain", "", false},
	}
	for _, tt := range tests {
		got, ok := heading(tt.line)
		if got != tt.want || ok != tt.ok {
			t.Errorf("heading(%q): got %q, %v, want %q, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func BenchmarkSearch(b *testing.B) {
	files := map[string]string{}
	for n := range 50 {
		files[filepath.Join("docs", strings.Repeat("d", n%5+1), string(rune('a'+n%26))+".md")] = strings.Repeat("some operator note about streams\n", 200)
	}
	idx := newIndex(b, writeDocs(b, files))
	for b.Loop() {
		if _, err := idx.Search(b.Context(), "consumer", DefaultLimit); err != nil {
			b.Fatal(err)
		}
	}
}
