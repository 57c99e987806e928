package knowledge

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// excerptBound is the most text an excerpt hit may carry: the section's
// heading line, the excerpt and its "…" marks.
func excerptBound(h Hit) int {
	return len(h.Heading) + 16 + excerptMaxBytes + 2*len(HighlightStart) + 8
}

// checkExcerpt fails unless h is an excerpt, bounded, valid UTF-8, with
// want highlighted and every highlight closed.
func checkExcerpt(t *testing.T, h Hit, want string) {
	t.Helper()
	if !h.Excerpt {
		t.Fatalf("%s: got the whole section (%d bytes), want an excerpt", h.Citation, len(h.Text))
	}
	if !strings.Contains(h.Text, HighlightStart+want+HighlightEnd) {
		t.Errorf("%s: got %q, want %q highlighted", h.Citation, h.Text, want)
	}
	if len(h.Text) > excerptBound(h) {
		t.Errorf("%s: got an excerpt of %d bytes, want at most %d", h.Citation, len(h.Text), excerptBound(h))
	}
	if !utf8.ValidString(h.Text) {
		t.Errorf("%s: got invalid UTF-8 %q", h.Citation, h.Text)
	}
	if strings.Count(h.Text, HighlightStart)%2 != 0 {
		t.Errorf("%s: got an unclosed highlight in %q", h.Citation, h.Text)
	}
}

// TestExcerptOfMegabyteParagraph searches a document of one paragraph of
// nearly 1 MiB (the largest file indexed): the part holding the word comes back as a bounded excerpt
// with the word highlighted, and opens whole by its citation.
func TestExcerptOfMegabyteParagraph(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Dump\n\n")
	for n := 0; b.Len() < MaxDocumentSize-64; n++ {
		if n == 40_000 { // about the middle
			b.WriteString("the kestrel hovers here ")
		}
		fmt.Fprintf(&b, "word%d filler ", n%97)
	}
	b.WriteString("\n")
	if b.Len() > MaxDocumentSize {
		t.Fatalf("wrote %d bytes, want a file the index reads (at most %d)", b.Len(), MaxDocumentSize)
	}
	idx := openIndex(t, writeDocs(t, map[string]string{"dump.md": b.String()}), Options{})
	update(t, idx)
	res, err := idx.Search(t.Context(), "kestrel", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 {
		t.Fatalf("got %d hits, want the one part holding the word", len(res.Hits))
	}
	h := res.Hits[0]
	checkExcerpt(t, h, "kestrel")
	sec, err := idx.Section(t.Context(), h.Citation)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sec.Text, "the kestrel hovers") || len(sec.Text) > MaxSectionBytes {
		t.Errorf("%s: got a section of %d bytes, want the part (at most %d) holding the word", h.Citation, len(sec.Text), MaxSectionBytes)
	}
}

// TestExcerptOfDenseSection searches long sections in which nearly every
// word matches a long query (where snippet() scored every window against
// every match): each excerpt is about excerptTokens words, highlighted.
func TestExcerptOfDenseSection(t *testing.T) {
	words := strings.Fields("the a to of and is in server stream cluster account token backup route queue reply subject")
	files := map[string]string{}
	for d := range 6 {
		var b strings.Builder
		fmt.Fprintf(&b, "# Dense %d\n\n", d)
		for n := 0; b.Len() < MaxSectionBytes-64; n++ {
			b.WriteString(words[(n*7+d)%len(words)] + " ")
		}
		files[fmt.Sprintf("dense%d.md", d)] = b.String()
	}
	idx := openIndex(t, writeDocs(t, files), Options{})
	update(t, idx)
	res, err := idx.Search(t.Context(), strings.Join(words, " "), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 5 {
		t.Fatalf("got %d hits, want 5", len(res.Hits))
	}
	for _, h := range res.Hits {
		checkExcerpt(t, h, "server")
		body := h.Text[strings.Index(h.Text, "\n\n")+2:]
		if n := len(strings.Fields(body)); n > excerptTokens {
			t.Errorf("%s: got %d words, want at most %d", h.Citation, n, excerptTokens)
		}
	}
}

// TestExcerptOfLongWord searches a section whose match sits next to a
// word of thousands of bytes (a pasted blob, multi-byte): the excerpt is
// cut to excerptMaxBytes around the match, on a rune boundary.
func TestExcerptOfLongWord(t *testing.T) {
	blob := strings.Repeat("é", 1800)
	text := "# Blob\n\nSee below. The osprey key " + blob + " ends here.\n"
	idx := openIndex(t, writeDocs(t, map[string]string{"blob.md": text}), Options{})
	update(t, idx)
	res, err := idx.Search(t.Context(), "osprey", 1)
	if err != nil || len(res.Hits) != 1 {
		t.Fatalf("got %v (%v), want one hit", res.Hits, err)
	}
	checkExcerpt(t, res.Hits[0], "osprey")
	if !strings.Contains(res.Hits[0].Text, "…") {
		t.Errorf("got %q, want … where the blob was cut", res.Hits[0].Text)
	}
}

// TestCutExcerpt pins the window an excerpt takes: the words with the
// most different matches, from the start of their sentence, marks closed
// where a cut splits them, and "…" only where text was left out.
func TestCutExcerpt(t *testing.T) {
	const o, c = "\uE000", "\uE001"
	var b strings.Builder
	for n := range 100 {
		fmt.Fprintf(&b, "w%d ", n)
	}
	b.WriteString("Start here. The " + o + "alpha" + c + " and " + o + "beta" + c + " sit together. ")
	for n := range 100 {
		fmt.Fprintf(&b, "v%d ", n)
	}
	b.WriteString(o + "alpha" + c + " alone.")
	got := cutExcerpt(b.String(), o, c)
	if !strings.HasPrefix(got, "…The **alpha** and **beta** sit together.") || !strings.HasSuffix(got, "…") {
		t.Errorf("got %q, want the window of both words from its sentence, cut on both sides", got)
	}
	if n := len(strings.Fields(got)); n != excerptTokens {
		t.Errorf("got %d words, want %d", n, excerptTokens)
	}
	if got := cutExcerpt("Short "+o+"text"+c+" here.", o, c); got != "Short **text** here." {
		t.Errorf("got %q for a short section, want it whole, highlighted, without …", got)
	}
	if got := cutExcerpt("No match at all.", o, c); got != "No match at all." {
		t.Errorf("got %q without a match, want the text from its start", got)
	}
	if got := balanceMarks("x"+c+" y "+o+"z", o, c); got != "x y "+o+"z"+c {
		t.Errorf("got %q, want the stray close dropped and the open one closed", got)
	}
	if open, close, ok := excerptMarkers("text with \uE000 and \uE001 in it"); !ok || open != "\uE002" || close != "\uE003" {
		t.Errorf("got marks %q %q (%t), want the next pair absent from the text", open, close, ok)
	}
}

// TestExcerptWithMarkerCharacters searches a long section that itself
// holds the characters excerpts mark matches with: the excerpt still
// highlights the match and shows the document's characters as written.
func TestExcerptWithMarkerCharacters(t *testing.T) {
	text := "# Odd\n\nPrivate \uE000use\uE001 characters. " + strings.Repeat("padding words ", 150) + "The heron waits. " + strings.Repeat("tail words ", 40) + "\n"
	idx := openIndex(t, writeDocs(t, map[string]string{"odd.md": text}), Options{})
	update(t, idx)
	res, err := idx.Search(t.Context(), "heron", 1)
	if err != nil || len(res.Hits) != 1 {
		t.Fatalf("got %v (%v), want one hit", res.Hits, err)
	}
	checkExcerpt(t, res.Hits[0], "heron")
	if strings.ContainsAny(res.Hits[0].Text, "\uE002\uE003") {
		t.Errorf("got %q, want no mark of the index left", res.Hits[0].Text)
	}
}

// BenchmarkSearchDenseExcerpts times searches whose five hits are long
// sections nearly every word of which matches the query: the excerpt
// path at its most expensive.
func BenchmarkSearchDenseExcerpts(b *testing.B) {
	words := strings.Fields("the a to of and is in server stream cluster account token backup route queue reply subject")
	files := map[string]string{}
	for d := range 20 {
		var s strings.Builder
		fmt.Fprintf(&s, "# Dense %d\n\n", d)
		for n := 0; s.Len() < MaxSectionBytes-64; n++ {
			s.WriteString(words[(n*7+d)%len(words)] + " ")
		}
		files[fmt.Sprintf("dense%02d.md", d)] = s.String()
	}
	idx := openIndex(b, writeDocs(b, files), Options{})
	update(b, idx)
	query := strings.Join(words, " ")
	for b.Loop() {
		res, err := idx.Search(b.Context(), query, DefaultTopK)
		if err != nil || len(res.Hits) != DefaultTopK || !res.Hits[0].Excerpt {
			b.Fatalf("got %d hits (%v), want %d excerpts", len(res.Hits), err, DefaultTopK)
		}
	}
}
