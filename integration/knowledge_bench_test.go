package integration_test

// The knowledge part of the benchmark report (see benchreport_test.go):
// the index of shared/knowledge on a generated corpus, against the line
// scan knowledge_search ran before the index existed, measured in the same
// run on the same files with the same queries.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/linescan"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Corpus sizes. The full corpus is the issue's: 10,000 markdown documents
// of about 50 MB. The quick one is a tenth of it, so `make bench-quick`
// stays quick (its scan baseline reads 5 MB a query instead of 50).
const (
	knowledgeFullDocs  = 10_000
	knowledgeQuickDocs = 1_000
	// knowledgeQueries is how many searches each of the index and the
	// scan answers, timed one after the other per query.
	knowledgeQueries = 100
	// knowledgeEdits is how many single-file edits are timed through the
	// watcher's update path, and knowledgeRewalks how many full updates
	// after one changed file.
	knowledgeEdits   = 20
	knowledgeRewalks = 5
)

// knowledgeFigures are the report's knowledge keys, embedded in
// [benchReport] so they stay flat. Units as there: _us microseconds, _ms
// milliseconds, _s seconds, _mib mebibytes; _ratio_* plain numbers.
//
//   - knowledge_documents, knowledge_corpus_mib, knowledge_sections: the
//     generated corpus (deterministic for a size) and what the index cut
//     it into.
//   - knowledge_index_s: a full build of an empty store (Index.Update);
//     knowledge_store_mib: the store after it (database and write-ahead
//     log).
//   - knowledge_noop_update_ms: a full update that finds nothing changed
//     (a gateway restarting on an indexed directory), the second one after
//     the build.
//   - knowledge_edit_p50_ms, _max_ms: one rewritten file brought into the
//     index through Index.UpdatePaths, the path the watcher takes for an
//     edit (goal: under 100 ms).
//   - knowledge_rewalk_p50_ms: a full update (walk and stat of every file)
//     after one file changed: `mcp-gateway knowledge index` after an edit.
//   - knowledge_open_ms: opening the built store again, as a gateway
//     restarting does before it listens; knowledge_check_ms: the check of
//     the whole store it then runs in the background (Index.Check, from
//     Index.Run), before the searches below.
//   - knowledge_search_*: the knowledge_search tool (input decoding, search,
//     JSON answer) in process, knowledge_scan_*: the same queries through
//     the old line scan tool (scan and JSON answer); knowledge_speedup_* is
//     the scan's percentile over the search's (goal: 100 or more; search
//     p50 goal: under 5 ms on the full corpus).
type knowledgeFigures struct {
	KnowledgeDocuments   int     `json:"knowledge_documents"`
	KnowledgeCorpusMiB   float64 `json:"knowledge_corpus_mib"`
	KnowledgeSections    int     `json:"knowledge_sections"`
	KnowledgeIndexS      float64 `json:"knowledge_index_s"`
	KnowledgeStoreMiB    float64 `json:"knowledge_store_mib"`
	KnowledgeNoopMS      float64 `json:"knowledge_noop_update_ms"`
	KnowledgeEditP50MS   float64 `json:"knowledge_edit_p50_ms"`
	KnowledgeEditMaxMS   float64 `json:"knowledge_edit_max_ms"`
	KnowledgeRewalkP50MS float64 `json:"knowledge_rewalk_p50_ms"`
	KnowledgeOpenMS      float64 `json:"knowledge_open_ms"`
	KnowledgeCheckMS     float64 `json:"knowledge_check_ms"`
	KnowledgeQueries     int     `json:"knowledge_queries"`
	KnowledgeSearchP50   float64 `json:"knowledge_search_p50_us"`
	KnowledgeSearchP99   float64 `json:"knowledge_search_p99_us"`
	KnowledgeScanP50     float64 `json:"knowledge_scan_p50_us"`
	KnowledgeScanP99     float64 `json:"knowledge_scan_p99_us"`
	KnowledgeSpeedupP50  float64 `json:"knowledge_speedup_ratio_p50"`
	KnowledgeSpeedupP99  float64 `json:"knowledge_speedup_ratio_p99"`

	knowledgeVectorFigures // knowledge_vector_*, _hybrid_*, _quality_*: see knowledge_vector_bench_test.go
}

// reportKeys counts the JSON keys of a flat report struct's zero value:
// its exported fields, with the fields of an embedded struct counted where
// they land; an embedded pointer is nil there, and gives none.
func reportKeys(t reflect.Type) int {
	n := 0
	for f := range t.Fields() {
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Pointer:
		case f.Anonymous:
			n += reportKeys(f.Type)
		case f.IsExported():
			n++
		}
	}
	return n
}

// benchKnowledge generates the corpus for the mode, indexes it and times
// the index against the old scan. It fails tb when any step fails or a
// query finds nothing, and asserts nothing about the figures.
func benchKnowledge(tb testing.TB, quick bool) knowledgeFigures {
	tb.Helper()
	ctx := tb.Context()
	docs := knowledgeFullDocs
	if quick {
		docs = knowledgeQuickDocs
	}
	var f knowledgeFigures
	dir := tb.TempDir()
	corpus := writeKnowledgeCorpus(tb, dir, docs, 1)
	f.KnowledgeDocuments = docs
	f.KnowledgeCorpusMiB = round(float64(corpus.bytes)/(1<<20), 2)

	idx, err := knowledge.Open(knowledge.Options{Directory: dir, Store: filepath.Join(tb.TempDir(), "store"), Identity: "bench"})
	if err != nil {
		tb.Fatalf("opening the knowledge index: %v", err)
	}
	defer idx.Close()
	start := time.Now()
	ch, err := idx.Update(ctx, nil)
	built := time.Since(start)
	if err != nil {
		tb.Fatalf("building the knowledge index: %v", err)
	}
	if len(ch.Added) != docs || ch.Incomplete {
		tb.Fatalf("first build: got %d added (incomplete %v), want all %d documents", len(ch.Added), ch.Incomplete, docs)
	}
	st, err := idx.Stats(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	f.KnowledgeIndexS = round(built.Seconds(), 2)
	f.KnowledgeSections = st.Sections
	f.KnowledgeStoreMiB = round(float64(st.StoreBytes)/(1<<20), 2)
	tb.Logf("knowledge: %d documents, %.2f MiB, %d sections indexed in %s; store %.2f MiB", docs, f.KnowledgeCorpusMiB, st.Sections, built.Round(time.Millisecond), f.KnowledgeStoreMiB)

	// The first update after the build reads again the files written
	// just before it (see racyWindow in shared/knowledge); the second is
	// what a restart on a settled directory costs.
	for range 2 {
		start = time.Now()
		if ch, err = idx.Update(ctx, nil); err != nil || !ch.Empty() {
			tb.Fatalf("update of an unchanged directory: got %+v (%v), want no change", ch, err)
		}
		f.KnowledgeNoopMS = millis(time.Since(start))
	}

	// Edits: each rewrites a different document with a word no other one
	// holds, updates it as the watcher would and checks the word is found.
	var edits []time.Duration
	for n := range knowledgeEdits {
		name := corpus.names[(n*7919)%len(corpus.names)]
		marker := fmt.Sprintf("zqxedit%04d", n)
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), corpus.edited(name, marker), 0o644); err != nil {
			tb.Fatal(err)
		}
		start := time.Now()
		ch, err := idx.UpdatePaths(ctx, []string{name})
		edits = append(edits, time.Since(start))
		if err != nil || len(ch.Changed) != 1 {
			tb.Fatalf("update of edited %s: got %+v (%v), want it changed", name, ch, err)
		}
		res, err := idx.Search(ctx, marker, 1)
		if err != nil || len(res.Hits) != 1 || res.Hits[0].Document != name {
			tb.Fatalf("search for %s after editing %s: got %+v (%v), want that document", marker, name, res.Hits, err)
		}
	}
	f.KnowledgeEditP50MS, f.KnowledgeEditMaxMS = millis(percentile(edits, 50)), millis(percentile(edits, 100))

	var rewalks []time.Duration
	for n := range knowledgeRewalks {
		name := corpus.names[(n*104729+13)%len(corpus.names)]
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), corpus.edited(name, fmt.Sprintf("zqxwalk%d", n)), 0o644); err != nil {
			tb.Fatal(err)
		}
		start := time.Now()
		ch, err := idx.Update(ctx, nil)
		rewalks = append(rewalks, time.Since(start))
		if err != nil || len(ch.Changed) != 1 || ch.Unchanged != docs-1 {
			tb.Fatalf("full update after editing %s: got %d changed, %d unchanged (%v), want 1 and %d", name, len(ch.Changed), ch.Unchanged, err, docs-1)
		}
	}
	f.KnowledgeRewalkP50MS = millis(percentile(rewalks, 50))
	tb.Logf("knowledge: no-op update %.1f ms; one edit through the watcher's path p50 %.1f ms, max %.1f ms; full update after one edit p50 %.1f ms",
		f.KnowledgeNoopMS, f.KnowledgeEditP50MS, f.KnowledgeEditMaxMS, f.KnowledgeRewalkP50MS)

	// A gateway restarting on the store opens it (and checks it) before
	// it listens.
	if err := idx.Close(); err != nil {
		tb.Fatal(err)
	}
	start = time.Now()
	idx, err = knowledge.Open(knowledge.Options{Directory: dir, Store: st.Store, Identity: "bench"})
	if err != nil {
		tb.Fatalf("reopening the knowledge index: %v", err)
	}
	f.KnowledgeOpenMS = millis(time.Since(start))
	defer idx.Close()
	// Then, in the background, before its first update (Index.Run), it
	// reads the whole store for damage, which also brings it into memory.
	start = time.Now()
	if err := idx.Check(ctx); err != nil {
		tb.Fatalf("checking the knowledge index: %v", err)
	}
	f.KnowledgeCheckMS = millis(time.Since(start))
	tb.Logf("knowledge: reopening the store %.1f ms, then checking it %.1f ms", f.KnowledgeOpenMS, f.KnowledgeCheckMS)

	// Searches: the new tool and the old one take turns, ten queries at
	// a time, so a slow spell of the machine falls on both alike.
	tools, err := idx.Tools([]string{knowledge.SearchTool})
	if err != nil {
		tb.Fatal(err)
	}
	search := tools[0]
	queries := corpus.queries(knowledgeQueries, 2)
	searchOnce := func(q string) error {
		in, _ := json.Marshal(map[string]any{"query": q})
		o, err := search.Call(ctx, tool.Request{Input: in})
		if err != nil || o.IsError {
			return fmt.Errorf("knowledge_search %q: got %+v (%v)", q, o, err)
		}
		var res knowledge.Results
		if err := json.Unmarshal(o.JSON, &res); err != nil || len(res.Hits) == 0 {
			return fmt.Errorf("knowledge_search %q: got %s (%v), want at least one section", q, o.JSON, err)
		}
		return nil
	}
	scanOnce := func(q string) error {
		res, err := linescan.Search(ctx, dir, q, linescan.DefaultLimit)
		if err != nil || len(res.Matches) == 0 {
			return fmt.Errorf("line scan %q: got %d matches (%v), want at least one", q, len(res.Matches), err)
		}
		_, err = json.Marshal(res) // the old tool answered with this JSON
		return err
	}
	for _, q := range queries[:5] {
		if err := searchOnce(q); err != nil {
			tb.Fatal(err)
		}
	}
	if err := scanOnce(queries[0]); err != nil {
		tb.Fatal(err)
	}
	searches := make([]time.Duration, 0, len(queries))
	scans := make([]time.Duration, 0, len(queries))
	const batch = 10
	for from := 0; from < len(queries); from += batch {
		for _, s := range []struct {
			run  func(string) error
			into *[]time.Duration
		}{{searchOnce, &searches}, {scanOnce, &scans}} {
			for n, q := range queries[from:min(from+batch, len(queries))] {
				// The scan leaves a hundred megabytes of garbage a
				// query; collected here, it is not collected on the
				// next call's clock.
				runtime.GC()
				start := time.Now()
				err := s.run(q)
				*s.into = append(*s.into, time.Since(start))
				if err != nil {
					tb.Fatalf("query %d: %v", from+n, err)
				}
			}
		}
	}
	f.KnowledgeQueries = len(queries)
	f.KnowledgeSearchP50, f.KnowledgeSearchP99 = micros(percentile(searches, 50)), micros(percentile(searches, 99))
	f.KnowledgeScanP50, f.KnowledgeScanP99 = micros(percentile(scans, 50)), micros(percentile(scans, 99))
	f.KnowledgeSpeedupP50, f.KnowledgeSpeedupP99 = ratio(f.KnowledgeScanP50, f.KnowledgeSearchP50), ratio(f.KnowledgeScanP99, f.KnowledgeSearchP99)
	tb.Logf("knowledge: %d queries: search p50 %.1f µs p99 %.1f µs; old scan p50 %.1f µs p99 %.1f µs; speed-up ×%.1f p50, ×%.1f p99",
		len(queries), f.KnowledgeSearchP50, f.KnowledgeSearchP99, f.KnowledgeScanP50, f.KnowledgeScanP99, f.KnowledgeSpeedupP50, f.KnowledgeSpeedupP99)
	f.knowledgeVectorFigures = benchKnowledgeVectors(tb, dir, st.Store, queries)
	return f
}

// millis is d in milliseconds, to 0.01 ms.
func millis(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }

// knowledgeCorpus is a generated document tree: names in write order and,
// per document, its seed and some of its body lines, from which queries
// are drawn.
type knowledgeCorpus struct {
	names []string
	seeds map[string]uint64
	lines [][]string
	bytes int64
}

// corpusFunctionWords head the generated vocabulary: common English words,
// the head of the Zipf distribution as in real prose, so sections hold
// words found in nearly every other section.
var corpusFunctionWords = strings.Fields(`the of and to a in is for that on with as by it be are this from or at an
	not when each which can if will all one its has more use set new run then than into only also`)

// corpusWords is the generated vocabulary: [corpusFunctionWords], then
// technical words (common in a docs tree, found in one section in ten),
// then made-up words of two or three syllables, rarer and rarer.
var corpusWords = func() []string {
	words := slices.Clone(corpusFunctionWords)
	words = append(words, strings.Fields(`server stream cluster account token backup route queue reply subject bucket mirror leaf gateway
		consumer payload latency restart drain certificate config deploy rollback replica snapshot
		quota limit index shard timeout retry journal ledger schema tenant proxy socket cache policy`)...)
	syllables := strings.Fields("ka lo mi ne ru sa te vi zo pa qu fe ri do mu ta ben cor dal fin gal hor jin kel lum mor nal pir ros sul tar vex wen")
	for a := range syllables {
		for b := range syllables {
			words = append(words, syllables[a]+syllables[b])
			words = append(words, syllables[b]+syllables[a]+syllables[(a+b)%len(syllables)])
		}
	}
	return words
}()

// writeKnowledgeCorpus writes n markdown documents under dir (100
// subfolders), the same bytes for the same n and seed, of 2.5 to 8 KB each
// (about 5.2 KB on average): a title, an introduction, then three to eight
// sections of wrapped paragraphs, some with a subsection, a list or a code
// block.
func writeKnowledgeCorpus(tb testing.TB, dir string, n int, seed uint64) *knowledgeCorpus {
	tb.Helper()
	c := &knowledgeCorpus{seeds: map[string]uint64{}}
	for d := range n {
		name := fmt.Sprintf("area%02d/doc%05d.md", d%100, d)
		s := seed*1_000_003 + uint64(d)
		data, lines := corpusDocument(s, "")
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		c.names = append(c.names, name)
		c.seeds[name] = s
		c.lines = append(c.lines, lines)
		c.bytes += int64(len(data))
	}
	return c
}

// edited returns a document's text with marker added to a new last
// section: a different content of the same shape.
func (c *knowledgeCorpus) edited(name, marker string) []byte {
	data, _ := corpusDocument(c.seeds[name], marker)
	return data
}

// queries returns n queries of one to three adjacent words of a body line
// of a random document, the first and last of them not function words:
// what someone remembers of a page ("restart the server"), never "of the".
// Both the index and the scan find each at least once.
func (c *knowledgeCorpus) queries(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]string, 0, n)
	for len(out) < n {
		lines := c.lines[r.IntN(len(c.lines))]
		words := strings.Fields(lines[r.IntN(len(lines))])
		k := 1 + len(out)%3
		if len(words) < k {
			continue
		}
		at := r.IntN(len(words) - k + 1)
		if slices.Contains(corpusFunctionWords, words[at]) || slices.Contains(corpusFunctionWords, words[at+k-1]) {
			continue
		}
		out = append(out, strings.Join(words[at:at+k], " "))
	}
	return out
}

// corpusDocument generates one document from seed, with a last section
// holding marker when it is not empty. It returns the text and the body
// lines queries may be drawn from.
func corpusDocument(seed uint64, marker string) ([]byte, []string) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(corpusWords)-1))
	word := func() string { return corpusWords[zipf.Uint64()] }
	phrase := func(lo, hi int) string {
		ws := make([]string, lo+r.IntN(hi-lo+1))
		for i := range ws {
			ws[i] = word()
		}
		return strings.Join(ws, " ")
	}
	var b bytes.Buffer
	var bodyLines []string
	paragraph := func() {
		line := ""
		for range 25 + r.IntN(50) {
			w := word()
			if len(line)+1+len(w) > 78 {
				b.WriteString(line + "\n")
				bodyLines = append(bodyLines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		b.WriteString(line + ".\n\n")
		bodyLines = append(bodyLines, line)
	}
	target := 2500 + r.IntN(5500)
	fmt.Fprintf(&b, "# %s\n\n", titleCase(phrase(2, 5)))
	paragraph()
	for b.Len() < target {
		fmt.Fprintf(&b, "## %s\n\n", titleCase(phrase(2, 4)))
		for range 1 + r.IntN(3) {
			paragraph()
		}
		switch r.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "### %s\n\n", titleCase(phrase(2, 4)))
			paragraph()
		case 1:
			for range 3 + r.IntN(3) {
				fmt.Fprintf(&b, "- %s\n", phrase(3, 9))
			}
			b.WriteString("\n")
		case 2:
			fmt.Fprintf(&b, "```sh\n%s --%s %s\n```\n\n", word(), word(), word())
		}
	}
	if marker != "" {
		fmt.Fprintf(&b, "## Changes\n\nRevised: %s %s.\n", marker, phrase(5, 10))
	}
	return b.Bytes(), bodyLines
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// TestKnowledgeBench runs the knowledge part of the report alone, on the
// quick corpus, when FISKFLEET_BENCH_KNOWLEDGE is set: for working on the
// index without running the fleet. Set it to "full" for the full corpus.
func TestKnowledgeBench(t *testing.T) {
	mode := os.Getenv("FISKFLEET_BENCH_KNOWLEDGE")
	if mode == "" {
		t.Skip("set FISKFLEET_BENCH_KNOWLEDGE=quick or full to time the knowledge index alone (make bench includes it)")
	}
	f := benchKnowledge(t, mode != "full")
	data, _ := json.MarshalIndent(f, "", "  ")
	t.Logf("%s", data)
}

// TestKnowledgeCorpusDeterministic pins that the generated corpus is the
// same bytes for the same seed, and that queries are drawn from it.
func TestKnowledgeCorpusDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ca := writeKnowledgeCorpus(t, a, 12, 1)
	cb := writeKnowledgeCorpus(t, b, 12, 1)
	if ca.bytes != cb.bytes || ca.bytes < 12*2500 {
		t.Fatalf("corpus bytes: got %d and %d, want the same, at least 2500 a document", ca.bytes, cb.bytes)
	}
	for _, name := range ca.names {
		x, _ := os.ReadFile(filepath.Join(a, filepath.FromSlash(name)))
		y, _ := os.ReadFile(filepath.Join(b, filepath.FromSlash(name)))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s: differs between two runs of the same seed", name)
		}
	}
	qa, qb := ca.queries(10, 2), cb.queries(10, 2)
	if !reflect.DeepEqual(qa, qb) {
		t.Fatalf("queries: got %q and %q, want the same", qa, qb)
	}
	for _, q := range qa {
		res, err := linescan.Search(t.Context(), a, q, linescan.DefaultLimit)
		if err != nil || len(res.Matches) == 0 {
			t.Errorf("query %q: got %d scan matches (%v), want one at least", q, len(res.Matches), err)
		}
	}
}
