package knowledge

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// qualityDocuments are the documents of the quality corpus: markdown
// shipped inside modules the shared module requires, at the versions its
// go.mod selects. The text belongs to those projects, so it is read from the
// module cache when a test runs and never copied into this repository. Name
// is the document's path in the corpus, and so in every label.
var qualityDocuments = []struct {
	module, file, name string
}{
	{"github.com/nats-io/nats.go", "README.md", "nats.go/README.md"},
	{"github.com/nats-io/nats.go", "jetstream/README.md", "nats.go/jetstream/README.md"},
	{"github.com/nats-io/nats.go", "jetstream/MIGRATION.md", "nats.go/jetstream/MIGRATION.md"},
	{"github.com/nats-io/nats.go", "micro/README.md", "nats.go/micro/README.md"},
	{"github.com/nats-io/nats.go", "legacy_jetstream.md", "nats.go/legacy_jetstream.md"},
	{"github.com/nats-io/nats.go", "TESTING.md", "nats.go/TESTING.md"},
	{"github.com/nats-io/nats-server/v2", "server/README-MQTT.md", "nats-server/README-MQTT.md"},
}

// qualityCorpus copies the quality corpus into a fresh temporary directory
// and returns it. A module missing from the module cache is downloaded
// first; a document missing from its module fails the test, since every
// label in testdata/quality/questions.json points into one.
func qualityCorpus(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	dirs := map[string]string{}
	for _, d := range qualityDocuments {
		src, ok := dirs[d.module]
		if !ok {
			src = moduleDir(tb, d.module)
			dirs[d.module] = src
		}
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(d.file)))
		if err != nil {
			tb.Fatalf("reading %s of module %s: %v", d.file, d.module, err)
		}
		writeFile(tb, dir, d.name, string(data))
	}
	return dir
}

// moduleDir returns the module cache directory of module at the version
// the shared module's go.mod selects. The workspace is switched off so
// another module of go.work cannot select a different version.
func moduleDir(tb testing.TB, module string) string {
	tb.Helper()
	var info struct{ Version, Dir string }
	goJSON(tb, &info, "list", "-m", "-json", module)
	if info.Dir != "" {
		return info.Dir
	}
	if info.Version == "" {
		tb.Fatalf("module %s: go list reports no version; is it required in shared/go.mod?", module)
	}
	goJSON(tb, &info, "mod", "download", "-json", module+"@"+info.Version)
	if info.Dir == "" {
		tb.Fatalf("module %s@%s: go mod download reports no directory", module, info.Version)
	}
	return info.Dir
}

// goJSON runs the go command with args in the package directory and
// decodes its JSON output into v.
func goJSON(tb testing.TB, v any, args ...string) {
	tb.Helper()
	cmd := exec.CommandContext(tb.Context(), "go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("running go %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := json.Unmarshal(out, v); err != nil {
		tb.Fatalf("decoding the output of go %s: %v", strings.Join(args, " "), err)
	}
}

// qualityFile holds the labelled questions of the quality benchmark.
const qualityFile = "testdata/quality/questions.json"

// The question sets of [qualityFile]. Words questions use the documents'
// own key words; paraphrase questions ask for the same kind of content
// while avoiding the target section's distinctive words, which is where a
// lexical index is weakest.
const (
	qualityWords      = "words"
	qualityParaphrase = "paraphrase"
)

// qualitySets lists the question sets in report order.
var qualitySets = []string{qualityWords, qualityParaphrase}

// qualityWant names one section that answers a question: a document of the
// corpus and the heading path the index reports for it. Every section of a
// split chunk carries the same heading, so any of them matches.
type qualityWant struct {
	Document string `json:"document"`
	Heading  string `json:"heading"`
}

// qualityQuestion is one labelled question of [qualityFile]: its set, the
// question as a user would type it, and the one to three sections that
// answer it.
type qualityQuestion struct {
	Set  string        `json:"set"`
	Q    string        `json:"q"`
	Want []qualityWant `json:"want"`
}

// loadQuality reads and checks [qualityFile]: every question names a known
// set, has text and one to three wanted sections.
func loadQuality(tb testing.TB) []qualityQuestion {
	tb.Helper()
	data, err := os.ReadFile(qualityFile)
	if err != nil {
		tb.Fatalf("reading the quality questions: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var qs []qualityQuestion
	if err := dec.Decode(&qs); err != nil {
		tb.Fatalf("decoding %s: %v", qualityFile, err)
	}
	seen := map[string]bool{}
	for i, q := range qs {
		switch {
		case !slices.Contains(qualitySets, q.Set):
			tb.Fatalf("%s question %d (%q): got set %q, want one of %v", qualityFile, i+1, q.Q, q.Set, qualitySets)
		case strings.TrimSpace(q.Q) == "":
			tb.Fatalf("%s question %d: empty question", qualityFile, i+1)
		case len(q.Want) < 1 || len(q.Want) > 3:
			tb.Fatalf("%s question %d (%q): got %d wanted sections, want 1 to 3", qualityFile, i+1, q.Q, len(q.Want))
		case seen[q.Q]:
			tb.Fatalf("%s question %d (%q): asked twice", qualityFile, i+1, q.Q)
		}
		seen[q.Q] = true
	}
	return qs
}

// qualityIndex returns an index of [qualityCorpus], built and closed when
// the test ends.
func qualityIndex(tb testing.TB) *Index {
	tb.Helper()
	idx := openIndex(tb, qualityCorpus(tb), Options{})
	if ch := update(tb, idx); len(ch.Added) != len(qualityDocuments) {
		tb.Fatalf("got %d documents added, want %d", len(ch.Added), len(qualityDocuments))
	}
	return idx
}

// qualitySections returns every section of idx by document and heading,
// with how many sections share each.
func qualitySections(tb testing.TB, idx *Index) map[qualityWant]int {
	tb.Helper()
	out := map[qualityWant]int{}
	for cursor := ""; ; {
		page, err := idx.Enumerate(tb.Context(), "", cursor, PageSize)
		if err != nil {
			tb.Fatalf("listing the indexed documents: %v", err)
		}
		for _, d := range page.Documents {
			for n := 1; n <= d.Sections; n++ {
				s, err := idx.Section(tb.Context(), Citation(d.Path, n))
				if err != nil {
					tb.Fatalf("reading section %s: %v", Citation(d.Path, n), err)
				}
				out[qualityWant{Document: s.Document, Heading: s.Heading}]++
			}
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// hitAt returns the 1-based rank of the first hit of results that is one of
// q's wanted sections, or 0 when none is in the list.
func hitAt(results Results, q qualityQuestion) int {
	for i, h := range results.Hits {
		if slices.Contains(q.Want, qualityWant{Document: h.Document, Heading: h.Heading}) {
			return i + 1
		}
	}
	return 0
}

// qualityScores returns, for the ranks [hitAt] gave a set of questions, the
// share found in the top 3 and the mean reciprocal rank (a question whose
// answer was not returned counts 0). Both are 0 for no questions.
func qualityScores(ranks []int) (top3 float64, mrr float64) {
	if len(ranks) == 0 {
		return 0, 0
	}
	for _, r := range ranks {
		if r <= 0 {
			continue
		}
		if r <= 3 {
			top3++
		}
		mrr += 1 / float64(r)
	}
	n := float64(len(ranks))
	return top3 / n, mrr / n
}

// qualityStopwords are the words a paraphrase may share with the headings
// of its target sections: function words that say nothing about a topic.
var qualityStopwords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true,
	"to": true, "in": true, "on": true, "at": true, "by": true, "for": true,
	"from": true, "with": true, "into": true, "as": true, "is": true,
	"are": true, "be": true, "it": true, "its": true, "i": true, "my": true,
	"me": true, "do": true, "does": true, "how": true, "what": true,
	"which": true, "when": true, "why": true, "can": true, "no": true,
	"not": true, "this": true, "that": true,
}

// qualityTerms returns the words of s a paraphrase must not share with
// its target headings: lower-cased, split at anything but letters and
// digits, stopwords dropped and one trailing "s" stripped.
func qualityTerms(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if qualityStopwords[w] {
			continue
		}
		if w = strings.TrimSuffix(w, "s"); w != "" && !qualityStopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

// TestQualityLabels keeps the quality questions honest: every wanted
// section exists in the index of the corpus, so a new release of a module
// that renames a heading fails here instead of silently lowering a score,
// and no paraphrase borrows a word from its target headings.
func TestQualityLabels(t *testing.T) {
	qs := loadQuality(t)
	sections := qualitySections(t, qualityIndex(t))
	perSet := map[string]int{}
	for _, q := range qs {
		perSet[q.Set]++
		for _, w := range q.Want {
			if sections[w] == 0 {
				t.Errorf("question %q: no section %q in %s", q.Q, w.Heading, w.Document)
			}
		}
		if q.Set != qualityParaphrase {
			continue
		}
		heading := map[string]bool{}
		for _, w := range q.Want {
			for _, term := range qualityTerms(w.Heading) {
				heading[term] = true
			}
		}
		for _, term := range qualityTerms(q.Q) {
			if heading[term] {
				t.Errorf("paraphrase %q: shares %q with its target headings", q.Q, term)
			}
		}
	}
	for _, set := range qualitySets {
		if perSet[set] < 30 {
			t.Errorf("got %d %s questions, want at least 30", perSet[set], set)
		}
	}
	t.Logf("%d questions (%v) over %d documents, %d distinct headings", len(qs), perSet, len(qualityDocuments), len(sections))
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
	idx := qualityIndex(t)
	ranks := map[string][]int{}
	for _, q := range loadQuality(t) {
		res, err := idx.Search(t.Context(), q.Q, topK)
		if err != nil {
			t.Fatalf("searching %q: %v", q.Q, err)
		}
		r := hitAt(res, q)
		if q.Set == qualityWords && (r == 0 || r > 3) {
			t.Logf("words %q: wanted section at rank %d (0: not in the top %d)", q.Q, r, topK)
		}
		ranks[q.Set] = append(ranks[q.Set], r)
	}
	for _, set := range qualitySets {
		top3, mrr := qualityScores(ranks[set])
		t.Logf("%s: %d questions, top-3 %.3f, MRR %.3f", set, len(ranks[set]), top3, mrr)
	}
	if top3, _ := qualityScores(ranks[qualityWords]); top3 < wordsTop3 {
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
			top3, mrr := qualityScores(tt.ranks)
			if top3 != tt.top3 || mrr != tt.mrr {
				t.Errorf("got top-3 %v and MRR %v, want %v and %v", top3, mrr, tt.top3, tt.mrr)
			}
		})
	}
}

func TestQualityHitAt(t *testing.T) {
	q := qualityQuestion{Want: []qualityWant{{Document: "a.md", Heading: "A > B"}, {Document: "b.md", Heading: "C"}}}
	hits := func(hs ...Hit) Results { return Results{Hits: hs} }
	tests := []struct {
		name    string
		results Results
		want    int
	}{
		{name: "no hits", results: hits(), want: 0},
		{name: "first", results: hits(Hit{Document: "b.md", Heading: "C"}), want: 1},
		{name: "later and second want", results: hits(Hit{Document: "a.md", Heading: "A"}, Hit{Document: "c.md", Heading: "A > B"}, Hit{Document: "a.md", Heading: "A > B"}), want: 3},
		{name: "heading elsewhere", results: hits(Hit{Document: "c.md", Heading: "C"}), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hitAt(tt.results, q); got != tt.want {
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
			if got := qualityTerms(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
