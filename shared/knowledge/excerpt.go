package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Excerpts. FTS5's snippet() scores every window of the section against
// every match in it: on a section of 4 KiB whose words mostly match a
// long query, that is tens of thousands of window scores a hit, and five
// such hits cost tens of milliseconds. An excerpt is therefore cut here
// instead, from the section as highlight() marks it (one pass of the
// tokenizer), with one sliding window over its words.

// excerptMaxBytes bounds an excerpt, in bytes, when its words are long (a
// pasted blob is one "word"): the window is cut around its first match.
const excerptMaxBytes = 1024

// markerPairs are candidate marks for highlight(): characters a document
// is unlikely to hold, so the marks found in its output are FTS5's. The
// first pair absent from the section is used.
var markerPairs = [][2]string{
	{"\uE000", "\uE001"},
	{"\uE002", "\uE003"},
	{"\x01", "\x02"},
	{"\x03", "\x04"},
}

// excerptMarkers returns a pair of marks that text does not hold, and
// false when it holds all of them.
func excerptMarkers(text string) (open, close string, ok bool) {
	for _, m := range markerPairs {
		if !strings.Contains(text, m[0]) && !strings.Contains(text, m[1]) {
			return m[0], m[1], true
		}
	}
	return "", "", false
}

// excerptWord is one white-space separated word of a marked section.
type excerptWord struct {
	start, end int // byte offsets in the marked text
	// term is the lower-cased text of the first match the word holds,
	// "" when it holds none.
	term string
}

// cutExcerpt returns about [excerptTokens] words of marked (a section as
// highlight() returns it, matches between open and close) chosen as
// snippet() chooses them: the window holding the most different matched
// words, then the most matches, the earliest of equals, with its matches
// centred when the window has room. Matches are marked with
// [HighlightStart] and [HighlightEnd], and "…" shows where text was left
// out. The work is linear in the section.
func cutExcerpt(marked, open, close string) string {
	words := splitMarked(marked, open, close)
	if len(words) == 0 {
		return ""
	}
	n := min(excerptTokens, len(words))
	// Slide a window of n words, counting each matched word in it.
	counts := map[string]int{}
	distinct, hits := 0, 0
	add := func(w excerptWord, d int) {
		if w.term == "" {
			return
		}
		hits += d
		counts[w.term] += d
		switch {
		case d > 0 && counts[w.term] == 1:
			distinct++
		case d < 0 && counts[w.term] == 0:
			distinct--
		}
	}
	for _, w := range words[:n] {
		add(w, 1)
	}
	best, bestDistinct, bestHits := 0, distinct, hits
	for at := 1; at+n <= len(words); at++ {
		add(words[at-1], -1)
		add(words[at+n-1], 1)
		if distinct > bestDistinct || (distinct == bestDistinct && hits > bestHits) {
			best, bestDistinct, bestHits = at, distinct, hits
		}
	}
	// Centre the matches of the best window in it.
	first, last := -1, -1
	for k := best; k < best+n; k++ {
		if words[k].term != "" {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	start := best
	if first >= 0 {
		start = first - (n-(last-first+1))/2
		// Better still, the start of the sentence of the first match,
		// when it is near.
		for k := first; k >= max(0, first-n/2); k-- {
			if k == 0 || endsSentence(marked[words[k-1].start:words[k-1].end]) {
				start = k
				break
			}
		}
		start = max(0, min(start, len(words)-n))
	}
	end := start + n
	lo, hi := words[start].start, words[end-1].end
	if hi-lo > excerptMaxBytes {
		lo, hi = cutAround(marked, lo, hi, open)
	}
	out := strings.NewReplacer(open, HighlightStart, close, HighlightEnd).Replace(balanceMarks(marked[lo:hi], open, close))
	if strings.TrimSpace(marked[:lo]) != "" {
		out = "…" + out
	}
	if strings.TrimSpace(marked[hi:]) != "" {
		out = strings.TrimRight(out, ".,;:") + "…"
	}
	return out
}

// endsSentence reports whether word ends a sentence.
func endsSentence(word string) bool {
	word = strings.TrimRight(word, `"')]*_`)
	return strings.HasSuffix(word, ".") || strings.HasSuffix(word, "!") || strings.HasSuffix(word, "?") || strings.HasSuffix(word, ":")
}

// splitMarked splits marked text into white-space separated words,
// noting the match each holds.
func splitMarked(marked, open, close string) []excerptWord {
	var words []excerptWord
	at := 0
	for at < len(marked) {
		r, size := utf8.DecodeRuneInString(marked[at:])
		if unicode.IsSpace(r) {
			at += size
			continue
		}
		start := at
		for at < len(marked) {
			r, size := utf8.DecodeRuneInString(marked[at:])
			if unicode.IsSpace(r) {
				break
			}
			at += size
		}
		w := excerptWord{start: start, end: at}
		if o := strings.Index(marked[start:at], open); o >= 0 {
			rest := marked[start+o+len(open) : at]
			if c := strings.Index(rest, close); c >= 0 {
				rest = rest[:c]
			}
			w.term = strings.ToLower(rest)
			if w.term == "" {
				w.term = " " // a match, whatever its text
			}
		}
		words = append(words, w)
	}
	return words
}

// cutAround narrows marked[lo:hi] to [excerptMaxBytes] around its first
// open mark, on rune boundaries.
func cutAround(marked string, lo, hi int, open string) (int, int) {
	at := lo
	if o := strings.Index(marked[lo:hi], open); o >= 0 {
		at += o
	}
	from := max(lo, min(at-excerptMaxBytes/4, hi-excerptMaxBytes))
	to := min(hi, from+excerptMaxBytes)
	for from > lo && !utf8.RuneStart(marked[from]) {
		from++
	}
	for to < hi && !utf8.RuneStart(marked[to]) {
		to--
	}
	return from, to
}

// balanceMarks drops a close mark without its open mark and closes an
// open mark left open, as a cut leaves them.
func balanceMarks(text, open, close string) string {
	var b strings.Builder
	inside := false
	for len(text) > 0 {
		o, c := strings.Index(text, open), strings.Index(text, close)
		switch {
		case o < 0 && c < 0:
			b.WriteString(text)
			text = ""
		case c >= 0 && (o < 0 || c < o):
			b.WriteString(text[:c])
			if inside {
				b.WriteString(close)
				inside = false
			}
			text = text[c+len(close):]
		default:
			b.WriteString(text[:o])
			if !inside {
				b.WriteString(open)
				inside = true
			}
			text = text[o+len(open):]
		}
	}
	if inside {
		b.WriteString(close)
	}
	return b.String()
}
