package knowledge

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// This file keeps the line scan knowledge_search used before the index,
// only as the baseline the benchmarks compare the index with: every call
// walks the directory and reads every file.

// scanMatch is one line that contains the query.
type scanMatch struct {
	Document string
	Line     int
	Text     string
}

// maxScanLine is the longest match text the scan returned, in bytes.
const maxScanLine = 400

// lineScan returns up to limit lines containing query, compared
// case-insensitively, in document name order and then line order.
func lineScan(ctx context.Context, dir, query string, limit int) ([]scanMatch, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	files, _, err := walkFiles(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []scanMatch
	needle := strings.ToLower(query)
	for _, f := range files {
		data, ok := readDocument(root, f.name)
		if !ok {
			continue
		}
		for n, line := range lines(data) {
			lower := strings.ToLower(line)
			at := strings.Index(lower, needle)
			if at < 0 {
				continue
			}
			if len(out) == limit {
				return out, nil
			}
			if len(lower) != len(line) {
				at = -1
			}
			out = append(out, scanMatch{Document: f.name, Line: n + 1, Text: excerpt(line, at, len(needle))})
		}
	}
	return out, nil
}

// excerpt cuts line to [maxScanLine] bytes around the match at byte offset
// at of length n; a negative at keeps the start of the line.
func excerpt(line string, at, n int) string {
	if len(line) <= maxScanLine {
		return line
	}
	start := 0
	if at >= 0 {
		// Show some context before the match, then as much of the match
		// as fits.
		start = at - maxScanLine/4
		if at+n > start+maxScanLine {
			start = min(at, at+n-maxScanLine)
		}
		start = max(0, min(start, len(line)-maxScanLine))
	}
	end := start + maxScanLine
	for start > 0 && !utf8.RuneStart(line[start]) {
		start++
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	out := line[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(line) {
		out += "…"
	}
	return out
}

// benchCorpus writes n generated markdown documents, the same for the
// same n, and returns the directory.
func benchCorpus(tb testing.TB, n int) string {
	tb.Helper()
	words := strings.Fields("stream consumer cluster server restart drain route leaf gateway account token certificate backup mirror bucket payload latency subject queue reply")
	dir := tb.TempDir()
	for d := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "# Document %d about %s\n\n", d, words[d%len(words)])
		for s := range 4 {
			fmt.Fprintf(&b, "## Part %d on %s\n\n", s, words[(d+s)%len(words)])
			for w := range 120 {
				b.WriteString(words[(d*7+s*13+w*w)%len(words)])
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
		}
		writeFile(tb, dir, fmt.Sprintf("d%03d/doc%05d.md", d%100, d), b.String())
	}
	return dir
}

// BenchmarkSearchVsScan compares a search of the index with the line scan
// it replaced, on the same generated corpus.
func BenchmarkSearchVsScan(b *testing.B) {
	dir := benchCorpus(b, 500)
	idx := openIndex(b, dir, Options{})
	update(b, idx)
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if _, err := idx.Search(b.Context(), "drain restart", DefaultTopK); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := lineScan(b.Context(), dir, "drain restart", 20); err != nil {
				b.Fatal(err)
			}
		}
	})
}
