package knowledge

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkVectorRank times the vector search alone (codes, finer
// estimate, rerank from the store) on a varied corpus of
// KNOWLEDGE_VECTOR_DOCS documents (default 2,000: 10,000 sections), and
// reports recall@10 against comparing every vector.
func BenchmarkVectorRank(b *testing.B) {
	docs := 2000
	if n, err := strconv.Atoi(os.Getenv("KNOWLEDGE_VECTOR_DOCS")); err == nil {
		docs = n
	}
	w := startWordVectors(b, 512)
	dir := variedCorpus(b, docs)
	idx := openIndex(b, dir, Options{Embeddings: wordTier(w, "words")})
	start := time.Now()
	update(b, idx)
	indexed := time.Since(start)
	embedAll(b, idx)
	b.Logf("%d sections: indexed in %s, embedded in %s", stats(b, idx).Sections, indexed.Round(time.Millisecond), (time.Since(start) - indexed).Round(time.Millisecond))
	recall := vectorRecall(b, idx, w, 40, 10)
	rng := rand.New(rand.NewPCG(1, 2))
	var qs [][]float32
	for range 64 {
		qs = append(qs, unitVec(w.Vector(fmt.Sprintf("w%03d w%03d w%03d", rng.IntN(400), rng.IntN(400), rng.IntN(400)))))
	}
	idx.mu.RLock()
	defer idx.mu.RUnlock()
	n := 0
	b.ResetTimer()
	for b.Loop() {
		snap, err := idx.snapshot(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := snap.vectorRank(qs[n%len(qs)], 10); err != nil {
			b.Fatal(err)
		}
		snap.close()
		n++
	}
	b.ReportMetric(recall, "recall@10")
}
