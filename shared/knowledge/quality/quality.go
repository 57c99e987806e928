// Package quality is the knowledge index's quality benchmark: labelled
// questions over real documentation nobody on this project wrote (the
// markdown that ships inside nats.go and nats-server, read from the Go
// module cache, never copied into the repository), in two sets: questions
// in the documents' own words, and paraphrases that avoid them. Tests of
// shared/knowledge and the integration benchmarks score lexical, vector
// and fused rankings on it with [Evaluate].
package quality

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
)

// Documents are the documents of the quality corpus: markdown
// shipped inside modules the shared module requires, at the versions its
// go.mod selects. The text belongs to those projects, so it is read from the
// module cache when a test runs and never copied into this repository. Name
// is the document's path in the corpus, and so in every label.
var Documents = []struct {
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

// Corpus copies the quality corpus into a fresh temporary directory
// and returns it. A module missing from the module cache is downloaded
// first; a document missing from its module fails the test, since every
// label in testdata/quality/questions.json points into one.
func Corpus(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	dirs := map[string]string{}
	for _, d := range Documents {
		src, ok := dirs[d.module]
		if !ok {
			src = moduleDir(tb, d.module)
			dirs[d.module] = src
		}
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(d.file)))
		if err != nil {
			tb.Fatalf("reading %s of module %s: %v", d.file, d.module, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(d.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
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

// file holds the labelled questions of the quality benchmark.
const file = "questions.json"

//go:embed questions.json
var questionsJSON []byte

// The question sets of [file]. Words questions use the documents'
// own key words; paraphrase questions ask for the same kind of content
// while avoiding the target section's distinctive words, which is where a
// lexical index is weakest.
const (
	Words      = "words"
	Paraphrase = "paraphrase"
)

// Sets lists the question sets in report order.
var Sets = []string{Words, Paraphrase}

// Want names one section that answers a question: a document of the
// corpus and the heading path the index reports for it. Every section of a
// split chunk carries the same heading, so any of them matches.
type Want struct {
	Document string `json:"document"`
	Heading  string `json:"heading"`
}

// Question is one labelled question of [file]: its set, the
// question as a user would type it, and the one to three sections that
// answer it.
type Question struct {
	Set  string `json:"set"`
	Q    string `json:"q"`
	Want []Want `json:"want"`
}

// Questions reads and checks [file]: every question names a known
// set, has text and one to three wanted sections.
func Questions(tb testing.TB) []Question {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(questionsJSON))
	dec.DisallowUnknownFields()
	var qs []Question
	if err := dec.Decode(&qs); err != nil {
		tb.Fatalf("decoding %s: %v", file, err)
	}
	seen := map[string]bool{}
	for i, q := range qs {
		switch {
		case !slices.Contains(Sets, q.Set):
			tb.Fatalf("%s question %d (%q): got set %q, want one of %v", file, i+1, q.Q, q.Set, Sets)
		case strings.TrimSpace(q.Q) == "":
			tb.Fatalf("%s question %d: empty question", file, i+1)
		case len(q.Want) < 1 || len(q.Want) > 3:
			tb.Fatalf("%s question %d (%q): got %d wanted sections, want 1 to 3", file, i+1, q.Q, len(q.Want))
		case seen[q.Q]:
			tb.Fatalf("%s question %d (%q): asked twice", file, i+1, q.Q)
		}
		seen[q.Q] = true
	}
	return qs
}

// Index returns an index of [Corpus], built and closed when
// the test ends.
func Index(tb testing.TB, opts knowledge.Options) *knowledge.Index {
	tb.Helper()
	opts.Directory = Corpus(tb)
	if opts.Store == "" {
		opts.Store = filepath.Join(tb.TempDir(), "store")
	}
	idx, err := knowledge.Open(opts)
	if err != nil {
		tb.Fatalf("opening the quality corpus's index: %v", err)
	}
	tb.Cleanup(func() { idx.Close() })
	ch, err := idx.Update(tb.Context(), nil)
	if err != nil {
		tb.Fatalf("indexing the quality corpus: %v", err)
	}
	if len(ch.Added) != len(Documents) {
		tb.Fatalf("got %d documents added, want %d", len(ch.Added), len(Documents))
	}
	return idx
}

// Sections returns every section of idx by document and heading,
// with how many sections share each.
func Sections(tb testing.TB, idx *knowledge.Index) map[Want]int {
	tb.Helper()
	out := map[Want]int{}
	for cursor := ""; ; {
		page, err := idx.Enumerate(tb.Context(), "", cursor, knowledge.PageSize)
		if err != nil {
			tb.Fatalf("listing the indexed documents: %v", err)
		}
		for _, d := range page.Documents {
			for n := 1; n <= d.Sections; n++ {
				s, err := idx.Section(tb.Context(), knowledge.Citation(d.Path, n))
				if err != nil {
					tb.Fatalf("reading section %s: %v", knowledge.Citation(d.Path, n), err)
				}
				out[Want{Document: s.Document, Heading: s.Heading}]++
			}
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// Rank returns the 1-based rank of the first hit of results that is one of
// q's wanted sections, or 0 when none is in the list.
func Rank(results knowledge.Results, q Question) int {
	for i, h := range results.Hits {
		if slices.Contains(q.Want, Want{Document: h.Document, Heading: h.Heading}) {
			return i + 1
		}
	}
	return 0
}

// Scores returns, for the ranks [Rank] gave a set of questions, the
// share found in the top 3 and the mean reciprocal rank (a question whose
// answer was not returned counts 0). Both are 0 for no questions.
func Scores(ranks []int) (top3 float64, mrr float64) {
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

// stopwords are the words a paraphrase may share with the headings
// of its target sections: function words that say nothing about a topic.
var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true,
	"to": true, "in": true, "on": true, "at": true, "by": true, "for": true,
	"from": true, "with": true, "into": true, "as": true, "is": true,
	"are": true, "be": true, "it": true, "its": true, "i": true, "my": true,
	"me": true, "do": true, "does": true, "how": true, "what": true,
	"which": true, "when": true, "why": true, "can": true, "no": true,
	"not": true, "this": true, "that": true,
}

// Terms returns the words of s a paraphrase must not share with
// its target headings: lower-cased, split at anything but letters and
// digits, stopwords dropped and one trailing "s" stripped.
func Terms(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if stopwords[w] {
			continue
		}
		if w = strings.TrimSuffix(w, "s"); w != "" && !stopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

// Score is one set's figures: how many questions, the share answered in
// the top 3, and the mean reciprocal rank over the top [Depth].
type Score struct {
	Questions int     `json:"questions"`
	Top3      float64 `json:"top3"`
	MRR       float64 `json:"mrr"`
}

// Depth is how many hits each question is scored over.
const Depth = 10

// Evaluate asks every question through search (which returns the top
// Depth hits of a query) and scores each set. miss, when set, is called
// with each question whose answer is not in the top 3, and its rank.
func Evaluate(tb testing.TB, search func(query string) (knowledge.Results, error), miss func(q Question, rank int)) map[string]Score {
	tb.Helper()
	ranks := map[string][]int{}
	for _, q := range Questions(tb) {
		res, err := search(q.Q)
		if err != nil {
			tb.Fatalf("searching %q: %v", q.Q, err)
		}
		r := Rank(res, q)
		if miss != nil && (r == 0 || r > 3) {
			miss(q, r)
		}
		ranks[q.Set] = append(ranks[q.Set], r)
	}
	out := map[string]Score{}
	for _, set := range Sets {
		top3, mrr := Scores(ranks[set])
		out[set] = Score{Questions: len(ranks[set]), Top3: top3, MRR: mrr}
	}
	return out
}
