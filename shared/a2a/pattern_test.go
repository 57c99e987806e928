package a2a

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// schemaPatterns returns every "pattern" of the embedded schemas.
func schemaPatterns(tb testing.TB) []string {
	tb.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if p, ok := v["pattern"].(string); ok && !slices.Contains(out, p) {
				out = append(out, p)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	entries, err := fs.ReadDir(schemas.FS(), "v1")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(schemas.FS(), "v1/"+e.Name())
		if err != nil {
			tb.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			tb.Fatal(err)
		}
		walk(doc)
	}
	slices.Sort(out)
	return out
}

// TestSchemaPatternsGetTheirOwnMatcher checks which schema patterns the
// engine takes over: every one of the ^literal[class]{min,max}$ shape, so
// a schema edit that changes a shape shows up here.
func TestSchemaPatternsGetTheirOwnMatcher(t *testing.T) {
	want := map[string]bool{
		IdentityPattern:                      true,
		`^[^\s]+$`:                           true,
		`^io\.choria\.fisk-ai\.v1\.[a-z.]+$`: true,
		`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`: false,
	}
	for _, p := range schemaPatterns(t) {
		w, known := want[p]
		if !known {
			t.Errorf("schema pattern %q: not in this test; add it", p)
			continue
		}
		re, err := compilePattern(p)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", p, err)
		}
		if _, own := re.(*classPattern); own != w {
			t.Errorf("compilePattern(%q): own matcher %v, want %v", p, own, w)
		}
		if re.String() != p {
			t.Errorf("String: got %q, want %q", re.String(), p)
		}
	}
}

// patternInputs are strings that probe the edges of the schema patterns:
// lengths, every class boundary, whitespace, non-ASCII and invalid UTF-8.
func patternInputs() []string {
	in := []string{
		"", "a", "A", "z", "Z", "0", "9", "_", "-", ".", "a.b", "a b", "a\tb", "a\nb", "a\n", "\n", " ",
		"\x0b", "\x0c", "\r", "\x00", "\x7f", "é", "\ufffd", "\xff", "a\xffb", "\xc0\x80", "\U0010ffff",
		"@", "[", "`", "{", "/", ":", "^", "$", "*", ">",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("é", 64),
		"io.choria.fisk-ai.v1.", "io.choria.fisk-ai.v1.tool.request", "io.choria.fisk-ai.v1.Tool", "io.choria.fisk-ai.v2.tool",
		"io.choria.fisk-ai.v1.tool.request\n", "xio.choria.fisk-ai.v1.tool", "iochoria.fisk-ai.v1.x",
		"1s", "1.5ms", "2h45m", "µs", "1µs",
	}
	return in
}

func TestClassPatternMatchesRegexp(t *testing.T) {
	patterns := append(schemaPatterns(t), `^[a-c]{2,}$`, `^ab[^x]*$`, `^[a-z]{0,0}$`, `^x[\d]{3}$`, `^[\p{Greek}]+$`)
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		got, err := compilePattern(p)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", p, err)
		}
		for _, s := range patternInputs() {
			if g, w := got.MatchString(s), re.MatchString(s); g != w {
				t.Errorf("%q matching %q: got %v, want %v", p, s, g, w)
			}
		}
	}
}

// FuzzClassPattern holds the engine to regexp on any pattern it takes over
// and any input.
func FuzzClassPattern(f *testing.F) {
	for _, p := range []string{IdentityPattern, `^[^\s]+$`, `^io\.choria\.fisk-ai\.v1\.[a-z.]+$`, `^(?i)ab[a-z]+$`, `^a[b-d]{2,5}$`, `^[^a]*$`, `^é[a]+$`, `(?m)^[a]+$`} {
		for _, s := range patternInputs() {
			f.Add(p, s)
		}
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			if _, err := compilePattern(pattern); err == nil {
				t.Fatalf("compilePattern(%q): got no error, regexp refuses it", pattern)
			}
			return
		}
		got, err := compilePattern(pattern)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", pattern, err)
		}
		if g, w := got.MatchString(s), re.MatchString(s); g != w {
			t.Fatalf("%q matching %q: got %v, want %v", pattern, s, g, w)
		}
	})
}
