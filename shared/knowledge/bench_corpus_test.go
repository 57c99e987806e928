package knowledge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/linescan"
)

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
			if _, err := linescan.Search(b.Context(), dir, "drain restart", linescan.DefaultLimit); err != nil {
				b.Fatal(err)
			}
		}
	})
}
