package knowledge

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
)

// vectorDocs is a small directory of documents on different subjects.
func vectorDocs(tb testing.TB) string {
	return writeDocs(tb, map[string]string{
		"streams.md": "# Streams\n\nA stream stores messages on subjects.\n\n## Retention\n\nLimits, interest and work queue retention decide when messages go.\n",
		"kv.md":      "# Key value\n\nA bucket keeps the latest value of each key.\n\n## Watch\n\nA watcher is told of every change to a key.\n",
		"auth.md":    "# Accounts\n\nAccounts isolate subjects between tenants.\n\n## Users\n\nUsers sign in with credentials files or tokens.\n",
	})
}

// embedAll embeds every section and fails the test on error.
func embedAll(tb testing.TB, idx *Index) int {
	tb.Helper()
	n, err := idx.Embed(tb.Context(), nil)
	if err != nil {
		tb.Fatalf("embedding: %v", err)
	}
	return n
}

func stats(tb testing.TB, idx *Index) Stats {
	tb.Helper()
	s, err := idx.Stats(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestVectorTier: every section gets a vector and the store pins what
// made them; a search fuses and says so; an edited document is embedded
// again and nothing else; a removed one takes its vectors with it.
func TestVectorTier(t *testing.T) {
	w := startWordVectors(t, 64)
	dir := vectorDocs(t)
	idx := openIndex(t, dir, Options{Embeddings: wordTier(w, "words")})
	update(t, idx)
	s := stats(t, idx)
	if n := embedAll(t, idx); n != s.Sections || n == 0 {
		t.Fatalf("embedded %d sections, want all %d", n, s.Sections)
	}
	s = stats(t, idx)
	if s.Vectors.Vectors != s.Sections || s.Vectors.Missing != 0 || s.Vectors.Identity == nil {
		t.Fatalf("stats after embedding: %+v, want a vector for each of %d sections and an identity", s.Vectors, s.Sections)
	}
	if id := *s.Vectors.Identity; id.Model != "words" || id.Dim != 64 || id.Normalised {
		t.Errorf("pinned identity %+v, want model words, dim 64, not normalised", id)
	}
	res, err := idx.Search(t.Context(), "retention of messages", 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tier != "hybrid (model=words, dim=64)" || len(res.Hits) == 0 || res.Hits[0].Document != "streams.md" {
		t.Fatalf("search: tier %q, hits %+v; want the hybrid tier and streams.md first", res.Tier, res.Hits)
	}
	if n := embedAll(t, idx); n != 0 {
		t.Errorf("a second Embed embedded %d sections, want none: nothing changed", n)
	}

	before := w.Texts.Load()
	writeFile(t, dir, "kv.md", "# Key value\n\nA bucket keeps the latest value of each key, with history.\n")
	update(t, idx)
	if n := embedAll(t, idx); n != 1 {
		t.Errorf("after editing kv.md (now one section) embedded %d sections, want 1", n)
	}
	if got := w.Texts.Load() - before; got != 1 {
		t.Errorf("the server embedded %d texts for the edit, want 1", got)
	}
	removeFile(t, dir, "auth.md")
	update(t, idx)
	s = stats(t, idx)
	if s.Vectors.Vectors != s.Sections {
		t.Errorf("after removing auth.md: %d vectors for %d sections, want one each", s.Vectors.Vectors, s.Sections)
	}
	res, err = idx.Search(t.Context(), "credentials tokens users", 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		if h.Document == "auth.md" {
			t.Errorf("a search found the removed auth.md: %+v", h)
		}
	}
}

// TestVectorIdentityRefused: a store whose vectors another model made is
// refused at open, before anything is embedded, naming the rebuild; the
// rebuild takes the new model.
func TestVectorIdentityRefused(t *testing.T) {
	w := startWordVectors(t, 64)
	dir := vectorDocs(t)
	store := t.TempDir() + "/store"
	idx := openIndex(t, dir, Options{Store: store, Embeddings: wordTier(w, "words")})
	update(t, idx)
	embedAll(t, idx)
	idx.Close()

	served := w.Requests.Load()
	for _, change := range []func(*Embeddings){
		func(e *Embeddings) { e.Client = wordTier(w, "other").Client },
		func(e *Embeddings) { e.QueryPrefix = "query: " },
		func(e *Embeddings) { e.DocumentPrefix = "{title}: " },
	} {
		e := wordTier(w, "words")
		change(e)
		_, err := Open(Options{Directory: dir, Store: store, Embeddings: e})
		if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "--reindex") || !strings.Contains(err.Error(), "do not compare") {
			t.Errorf("opening with %+v: got %v, want ErrStore naming --reindex", e, err)
		}
	}
	if w.Requests.Load() != served {
		t.Errorf("refusing the store asked the server %d times, want none", w.Requests.Load()-served)
	}
	again := openIndex(t, dir, Options{Store: store, Embeddings: wordTier(w, "other"), Rebuild: true})
	update(t, again)
	embedAll(t, again)
	if id, ok := again.Identity(t.Context()); !ok || id.Model != "other" {
		t.Errorf("after --reindex: identity %+v, %t; want model other", id, ok)
	}
}

// TestVectorDimensionChanged: a server that now gives vectors of another
// dimension under the same model name is refused, and nothing of its is
// stored.
func TestVectorDimensionChanged(t *testing.T) {
	w := startWordVectors(t, 64)
	dir := vectorDocs(t)
	store := t.TempDir() + "/store"
	idx := openIndex(t, dir, Options{Store: store, Embeddings: wordTier(w, "words")})
	update(t, idx)
	embedAll(t, idx)
	idx.Close()

	narrow := startWordVectors(t, 32)
	idx = openIndex(t, dir, Options{Store: store, Embeddings: wordTier(narrow, "words")})
	writeFile(t, dir, "new.md", "# New\n\nSomething new.\n")
	update(t, idx)
	_, err := idx.Embed(t.Context(), nil)
	if !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "dim=32") || !strings.Contains(err.Error(), "--reindex") {
		t.Fatalf("Embed with a 32-dimension server on a 64-dimension store: got %v, want ErrStore naming both and --reindex", err)
	}
	if s := stats(t, idx); s.Vectors.Missing != 1 || s.Vectors.Identity.Dim != 64 {
		t.Errorf("after the refusal: %+v, want the new section without a vector and dim 64 kept", s.Vectors)
	}
}

// TestVectorServerFailsAtIndex: a server that cannot embed fails Embed
// naming knowledge.embeddings.base_url, and nothing is stored or pinned.
func TestVectorServerFailsAtIndex(t *testing.T) {
	for name, f := range map[string]embedtest.Failure{
		"status":        {Status: 500, Body: `{"error":{"message":"out of memory"}}`},
		"error in 200":  {Status: 200, Body: `{"error":{"message":"model not loaded"}}`},
		"short answer":  {Status: 200, Body: `{"data":[{"index":0,"embedding":[1,2]}]}`},
		"not json":      {Status: 200, Body: `<html>proxy error</html>`},
		"nan in vector": {Status: 200, Body: `{"data":[{"index":0,"embedding":[NaN,1]}]}`},
	} {
		t.Run(name, func(t *testing.T) {
			w := startWordVectors(t, 64)
			w.Fail(f)
			idx := openIndex(t, vectorDocs(t), Options{Embeddings: wordTier(w, "words")})
			update(t, idx)
			_, err := idx.Embed(t.Context(), nil)
			if !errors.Is(err, ErrEmbeddings) || !strings.Contains(err.Error(), "knowledge.embeddings.base_url "+w.URL()) {
				t.Fatalf("got %v, want ErrEmbeddings naming knowledge.embeddings.base_url", err)
			}
			if s := stats(t, idx); s.Vectors.Vectors != 0 || s.Vectors.Identity != nil {
				t.Errorf("after the failure: %+v, want nothing stored", s.Vectors)
			}
		})
	}
}

// TestSearchDegrades: a server gone at query time answers lexically and
// says why, is left alone for a pause, and is asked again after it.
func TestSearchDegrades(t *testing.T) {
	w := startWordVectors(t, 64)
	dir := vectorDocs(t)
	lexical := openIndex(t, dir, Options{})
	update(t, lexical)
	idx := openIndex(t, dir, Options{Embeddings: wordTier(w, "words")})
	update(t, idx)
	embedAll(t, idx)

	w.Fail(embedtest.Failure{Status: 503, Body: `{"error":{"message":"loading model"}}`})
	res, err := idx.Search(t.Context(), "bucket watch key", 3)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := lexical.Search(t.Context(), "bucket watch key", 3)
	if !strings.HasPrefix(res.Tier, "hybrid -> degraded to lexical (embeddings unreachable: ") || !strings.Contains(res.Tier, "loading model") {
		t.Errorf("tier %q, want degraded with the server's reason", res.Tier)
	}
	if fmt.Sprint(hitCitations(res)) != fmt.Sprint(hitCitations(want)) {
		t.Errorf("degraded hits %v, want the lexical ones %v", hitCitations(res), hitCitations(want))
	}
	asked := w.Requests.Load()
	if res, _ := idx.Search(t.Context(), "bucket", 3); !strings.HasPrefix(res.Tier, tierDegraded) || w.Requests.Load() != asked {
		t.Errorf("a search within the pause: tier %q and %d requests, want degraded without asking", res.Tier, w.Requests.Load()-asked)
	}
	w.Heal()
	idx.outage.mu.Lock()
	idx.outage.until = time.Now() // the pause is over
	idx.outage.mu.Unlock()
	if res, _ := idx.Search(t.Context(), "bucket", 3); res.Tier != "hybrid (model=words, dim=64)" {
		t.Errorf("after the pause, with the server back: tier %q, want hybrid", res.Tier)
	}
}

func hitCitations(r Results) []string {
	var out []string
	for _, h := range r.Hits {
		out = append(out, h.Citation)
	}
	return out
}

// TestVectorRecall: the codes' candidates, reranked, find what comparing
// every vector finds.
func TestVectorRecall(t *testing.T) {
	w := startWordVectors(t, 512)
	dir := variedCorpus(t, 600) // 3,000 sections
	idx := openIndex(t, dir, Options{Embeddings: wordTier(w, "words")})
	update(t, idx)
	embedAll(t, idx)
	recall := vectorRecall(t, idx, w, 40, 10)
	t.Logf("recall@10 over 40 queries, %d sections: %.3f", stats(t, idx).Sections, recall)
	if recall < 0.95 {
		t.Errorf("recall@10 %.3f, want at least 0.95", recall)
	}
}

// vectorRecall is the mean share of the exact top k that the vector
// search returns, over queries made of the corpus's words.
func vectorRecall(tb testing.TB, idx *Index, w *embedtest.Words, queries, k int) float64 {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(queries), 9))
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	var sum float64
	for q := range queries {
		_ = q
		text := fmt.Sprintf("w%03d w%03d w%03d", rng.IntN(400), rng.IntN(400), rng.IntN(400))
		v := w.Vector(text)
		snap, err := idx.snapshot(tb.Context())
		if err != nil {
			tb.Fatal(err)
		}
		unit := append([]float32(nil), v...)
		approx, err := snap.vectorRank(unitVec(unit), k)
		if err != nil {
			tb.Fatal(err)
		}
		exact, err := snap.exactVectorRank(unitVec(v), k)
		snap.close()
		if err != nil {
			tb.Fatal(err)
		}
		found := map[int64]bool{}
		for _, a := range approx {
			found[a.id] = true
		}
		hit := 0
		for _, e := range exact {
			if found[e.id] {
				hit++
			}
		}
		sum += float64(hit) / float64(len(exact))
	}
	return sum / float64(queries)
}

func removeFile(tb testing.TB, dir, name string) {
	tb.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
		tb.Fatal(err)
	}
}

// variedCorpus writes n documents of five sections, each section forty
// words drawn from a vocabulary of 400 with a skew (a few words common,
// most rare), as documentation has: no two sections alike, so a recall
// measures the search, not how it breaks ties between copies.
func variedCorpus(tb testing.TB, n int) string {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	vocab := make([]string, 400)
	for k := range vocab {
		vocab[k] = fmt.Sprintf("w%03d", k)
	}
	dir := tb.TempDir()
	for d := range n {
		var b strings.Builder
		fmt.Fprintf(&b, "# Document %d\n\n", d)
		for s := range 5 {
			fmt.Fprintf(&b, "## Part %d\n\n", s)
			for range 40 {
				b.WriteString(vocab[int(float64(len(vocab))*math.Pow(rng.Float64(), 2))])
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
		}
		writeFile(tb, dir, fmt.Sprintf("d%02d/doc%05d.md", d%50, d), b.String())
	}
	return dir
}

// TestVectorEditOfNewest edits the document holding the newest vectors,
// with no search between the update and the embedding, as a serving
// gateway's watcher and embedding loop do: the searches after see the
// new vectors, with no section left missing. The trigger that removes a
// replaced section's vector lowers max(seq), so a seq taken from it
// would repeat, and an index that loaded the old one would never load
// the new.
func TestVectorEditOfNewest(t *testing.T) {
	w := startWordVectors(t, 64)
	dir := vectorDocs(t)
	idx := openIndex(t, dir, Options{Embeddings: wordTier(w, "words")})
	update(t, idx)
	embedAll(t, idx)
	const want = "hybrid (model=words, dim=64)"
	if res, err := idx.Search(t.Context(), "retention of messages", 3); err != nil || res.Tier != want {
		t.Fatalf("search before the edit: got tier %q (%v), want %q", res.Tier, err, want)
	}
	// streams.md is indexed last: its sections hold the highest seqs.
	writeFile(t, dir, "streams.md", "# Streams\n\nA stream keeps a mirror of another.\n\n## Sources\n\nA sourced stream copies messages from many.\n")
	update(t, idx)
	if n := embedAll(t, idx); n == 0 {
		t.Fatal("the edit embedded nothing")
	}
	for range 2 {
		res, err := idx.Search(t.Context(), "sourced stream copies", 3)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tier != want || len(res.Hits) == 0 || res.Hits[0].Document != "streams.md" {
			t.Errorf("search after the edit: got tier %q, hits %+v; want %q with streams.md first", res.Tier, res.Hits, want)
		}
	}
}
