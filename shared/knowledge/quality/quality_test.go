package quality

import (
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
)

// TestQualityLabels keeps the quality questions honest: every wanted
// section exists in the index of the corpus, so a new release of a module
// that renames a heading fails here instead of silently lowering a score,
// and no paraphrase borrows a word from its target headings.
func TestQualityLabels(t *testing.T) {
	qs := Questions(t)
	sections := Sections(t, Index(t, knowledge.Options{}))
	perSet := map[string]int{}
	for _, q := range qs {
		perSet[q.Set]++
		for _, w := range q.Want {
			if sections[w] == 0 {
				t.Errorf("question %q: no section %q in %s", q.Q, w.Heading, w.Document)
			}
		}
		if q.Set != Paraphrase {
			continue
		}
		heading := map[string]bool{}
		for _, w := range q.Want {
			for _, term := range Terms(w.Heading) {
				heading[term] = true
			}
		}
		for _, term := range Terms(q.Q) {
			if heading[term] {
				t.Errorf("paraphrase %q: shares %q with its target headings", q.Q, term)
			}
		}
	}
	for _, set := range Sets {
		if perSet[set] < 30 {
			t.Errorf("got %d %s questions, want at least 30", perSet[set], set)
		}
	}
	t.Logf("%d questions (%v) over %d documents, %d distinct headings", len(qs), perSet, len(Documents), len(sections))
}

// TestQualityLexicalBaseline measures today's lexical search on the quality
// questions and logs top-3 hit rate and mean reciprocal rank per set. Only
// the words set is held to a floor, a margin below what the index scores,
// so the test fails when lexical ranking breaks; the paraphrase scores are
// the baseline a vector tier has to beat.
func TestQualityLexicalBaseline(t *testing.T) {
	const (
		topK      = 10
		wordsTop3 = 0.85
	)
	idx := Index(t, knowledge.Options{})
	ranks := map[string][]int{}
	for _, q := range Questions(t) {
		res, err := idx.Search(t.Context(), q.Q, topK)
		if err != nil {
			t.Fatalf("searching %q: %v", q.Q, err)
		}
		r := Rank(res, q)
		if q.Set == Words && (r == 0 || r > 3) {
			t.Logf("words %q: wanted section at rank %d (0: not in the top %d)", q.Q, r, topK)
		}
		ranks[q.Set] = append(ranks[q.Set], r)
	}
	for _, set := range Sets {
		top3, mrr := Scores(ranks[set])
		t.Logf("%s: %d questions, top-3 %.3f, MRR %.3f", set, len(ranks[set]), top3, mrr)
	}
	if top3, _ := Scores(ranks[Words]); top3 < wordsTop3 {
		t.Errorf("words set: got top-3 hit rate %.3f, want at least %.2f", top3, wordsTop3)
	}
}

func TestQualityScores(t *testing.T) {
	tests := []struct {
		name      string
		ranks     []int
		top3, mrr float64
	}{
		{name: "none", ranks: nil, top3: 0, mrr: 0},
		{name: "all first", ranks: []int{1, 1}, top3: 1, mrr: 1},
		{name: "mixed", ranks: []int{1, 2, 4, 0}, top3: 0.5, mrr: (1 + 0.5 + 0.25) / 4},
		{name: "all missed", ranks: []int{0, 0}, top3: 0, mrr: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top3, mrr := Scores(tt.ranks)
			if top3 != tt.top3 || mrr != tt.mrr {
				t.Errorf("got top-3 %v and MRR %v, want %v and %v", top3, mrr, tt.top3, tt.mrr)
			}
		})
	}
}

func TestQualityHitAt(t *testing.T) {
	q := Question{Want: []Want{{Document: "a.md", Heading: "A > B"}, {Document: "b.md", Heading: "C"}}}
	hits := func(hs ...knowledge.Hit) knowledge.Results { return knowledge.Results{Hits: hs} }
	tests := []struct {
		name    string
		results knowledge.Results
		want    int
	}{
		{name: "no hits", results: hits(), want: 0},
		{name: "first", results: hits(knowledge.Hit{Document: "b.md", Heading: "C"}), want: 1},
		{name: "later and second want", results: hits(knowledge.Hit{Document: "a.md", Heading: "A"}, knowledge.Hit{Document: "c.md", Heading: "A > B"}, knowledge.Hit{Document: "a.md", Heading: "A > B"}), want: 3},
		{name: "heading elsewhere", results: hits(knowledge.Hit{Document: "c.md", Heading: "C"}), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rank(tt.results, q); got != tt.want {
				t.Errorf("got rank %d, want %d", got, tt.want)
			}
		})
	}
}

func TestQualityTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: "KeyValue Store > Watching for changes on a bucket", want: []string{"keyvalue", "store", "watching", "change", "bucket"}},
		{in: "How do I list the streams?", want: []string{"list", "stream"}},
		{in: "Processing QoS acks: PUBACK, PUBREC", want: []string{"processing", "qo", "ack", "puback", "pubrec"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Terms(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
