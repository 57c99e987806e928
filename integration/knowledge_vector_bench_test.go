package integration_test

// The vector tier's part of the benchmark report: its scale on the
// knowledge benchmark's corpus, and its quality on labelled questions
// over real documentation with the real test model.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/quality"
)

// vectorBenchDim is the dimension of the scale benchmark's vectors: the
// test model's, and the middle of what embedding models give.
const vectorBenchDim = 512

// knowledgeVectorFigures are the vector tier's keys, in
// [knowledgeFigures]. The scale figures use the word-vector server
// (embedtest.Words: a text's vector from its words, without a model),
// since the test model embeds some sixty sections a second and the corpus
// has a hundred thousand; the quality figures use the real model.
//
//   - knowledge_vector_embed_s: embedding every section of the built
//     index (Index.Embed, batches of 256, through loopback HTTP to the
//     word-vector server: mostly the JSON of the vectors);
//     knowledge_vector_store_mib: the store with the vectors.
//   - knowledge_hybrid_search_*: a fused search (Index.Search), including
//     its query's embedding request; knowledge_query_embed_*: that
//     request alone, timed apart for the same queries;
//     knowledge_vector_search_p50_us: the vector ranking alone
//     (SearchWith VectorOnly), its request included.
//   - knowledge_vector_recall_at10: the share of the exact top ten (every
//     vector compared) that the vector search returns, over the queries.
//   - knowledge_quality_<set>_<ranking>_top3 and _mrr: the labelled
//     questions of shared/knowledge/quality (set words: in the
//     documents' words; paraphrase: avoiding them), ranked lexically, by
//     the model's vectors alone, and fused.
type knowledgeVectorFigures struct {
	KnowledgeVectorEmbedS     float64 `json:"knowledge_vector_embed_s"`
	KnowledgeVectorStoreMiB   float64 `json:"knowledge_vector_store_mib"`
	KnowledgeHybridP50        float64 `json:"knowledge_hybrid_search_p50_us"`
	KnowledgeHybridP99        float64 `json:"knowledge_hybrid_search_p99_us"`
	KnowledgeQueryEmbedP50    float64 `json:"knowledge_query_embed_p50_us"`
	KnowledgeQueryEmbedP99    float64 `json:"knowledge_query_embed_p99_us"`
	KnowledgeVectorSearchP50  float64 `json:"knowledge_vector_search_p50_us"`
	KnowledgeVectorRecallAt10 float64 `json:"knowledge_vector_recall_at10"`

	KnowledgeQualityWordsLexicalTop3      float64 `json:"knowledge_quality_words_lexical_top3"`
	KnowledgeQualityWordsLexicalMRR       float64 `json:"knowledge_quality_words_lexical_mrr"`
	KnowledgeQualityWordsVectorTop3       float64 `json:"knowledge_quality_words_vector_top3"`
	KnowledgeQualityWordsVectorMRR        float64 `json:"knowledge_quality_words_vector_mrr"`
	KnowledgeQualityWordsHybridTop3       float64 `json:"knowledge_quality_words_hybrid_top3"`
	KnowledgeQualityWordsHybridMRR        float64 `json:"knowledge_quality_words_hybrid_mrr"`
	KnowledgeQualityParaphraseLexicalTop3 float64 `json:"knowledge_quality_paraphrase_lexical_top3"`
	KnowledgeQualityParaphraseLexicalMRR  float64 `json:"knowledge_quality_paraphrase_lexical_mrr"`
	KnowledgeQualityParaphraseVectorTop3  float64 `json:"knowledge_quality_paraphrase_vector_top3"`
	KnowledgeQualityParaphraseVectorMRR   float64 `json:"knowledge_quality_paraphrase_vector_mrr"`
	KnowledgeQualityParaphraseHybridTop3  float64 `json:"knowledge_quality_paraphrase_hybrid_top3"`
	KnowledgeQualityParaphraseHybridMRR   float64 `json:"knowledge_quality_paraphrase_hybrid_mrr"`
}

// benchKnowledgeVectors embeds the built index of dir (at store) and
// times hybrid searches of queries, then scores the labelled questions.
func benchKnowledgeVectors(tb testing.TB, dir, store string, queries []string) knowledgeVectorFigures {
	tb.Helper()
	ctx := tb.Context()
	var f knowledgeVectorFigures
	words := embedtest.StartWords(tb, vectorBenchDim)
	client := embed.New(embed.Config{BaseURL: words.URL(), Model: "words"})
	idx, err := knowledge.Open(knowledge.Options{Directory: dir, Store: store, Identity: "bench",
		Embeddings: &knowledge.Embeddings{Client: client, Batch: 256}})
	if err != nil {
		tb.Fatalf("opening the knowledge index with embeddings: %v", err)
	}
	defer idx.Close()
	start := time.Now()
	n, err := idx.Embed(ctx, nil)
	if err != nil {
		tb.Fatalf("embedding the knowledge index: %v", err)
	}
	f.KnowledgeVectorEmbedS = round(time.Since(start).Seconds(), 2)
	st, err := idx.Stats(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if st.Vectors.Vectors != st.Sections || n != st.Sections {
		tb.Fatalf("embedded %d; %d vectors for %d sections, want one each", n, st.Vectors.Vectors, st.Sections)
	}
	f.KnowledgeVectorStoreMiB = round(float64(st.StoreBytes)/(1<<20), 2)

	// The first search loads the codes; then hybrid searches and the
	// query's request alone take turns, query by query.
	if res, err := idx.Search(ctx, queries[0], knowledge.DefaultTopK); err != nil || res.Tier != "hybrid (model=words, dim=512)" {
		tb.Fatalf("first hybrid search: tier %q (%v), want hybrid", res.Tier, err)
	}
	var hybrid, embeds, vectors []time.Duration
	for _, q := range queries {
		start := time.Now()
		res, err := idx.Search(ctx, q, knowledge.DefaultTopK)
		hybrid = append(hybrid, time.Since(start))
		if err != nil || len(res.Hits) == 0 || res.Tier != "hybrid (model=words, dim=512)" {
			tb.Fatalf("hybrid search %q: %d hits, tier %q (%v)", q, len(res.Hits), res.Tier, err)
		}
		start = time.Now()
		if _, err := client.Embed(ctx, []string{q}, vectorBenchDim); err != nil {
			tb.Fatal(err)
		}
		embeds = append(embeds, time.Since(start))
		start = time.Now()
		if _, err := idx.SearchWith(ctx, q, knowledge.DefaultTopK, knowledge.VectorOnly); err != nil {
			tb.Fatal(err)
		}
		vectors = append(vectors, time.Since(start))
	}
	f.KnowledgeHybridP50, f.KnowledgeHybridP99 = micros(percentile(hybrid, 50)), micros(percentile(hybrid, 99))
	f.KnowledgeQueryEmbedP50, f.KnowledgeQueryEmbedP99 = micros(percentile(embeds, 50)), micros(percentile(embeds, 99))
	f.KnowledgeVectorSearchP50 = micros(percentile(vectors, 50))

	var recall float64
	for _, q := range queries {
		approx, err := idx.SearchWith(ctx, q, 10, knowledge.VectorOnly)
		if err != nil {
			tb.Fatal(err)
		}
		exact, err := idx.SearchWith(ctx, q, 10, knowledge.VectorExact)
		if err != nil {
			tb.Fatal(err)
		}
		found := map[string]bool{}
		for _, h := range approx.Hits {
			found[h.Citation] = true
		}
		hit := 0
		for _, h := range exact.Hits {
			if found[h.Citation] {
				hit++
			}
		}
		recall += float64(hit) / float64(max(1, len(exact.Hits)))
	}
	f.KnowledgeVectorRecallAt10 = round(recall/float64(len(queries)), 3)
	tb.Logf("knowledge vectors: %d sections embedded in %.1f s, store %.1f MiB; hybrid search p50 %.0f µs p99 %.0f µs, its query's request alone p50 %.0f µs p99 %.0f µs, vector search p50 %.0f µs; recall@10 %.3f",
		st.Sections, f.KnowledgeVectorEmbedS, f.KnowledgeVectorStoreMiB, f.KnowledgeHybridP50, f.KnowledgeHybridP99,
		f.KnowledgeQueryEmbedP50, f.KnowledgeQueryEmbedP99, f.KnowledgeVectorSearchP50, f.KnowledgeVectorRecallAt10)

	benchKnowledgeQuality(tb, &f)
	return f
}

// benchKnowledgeQuality scores the labelled questions with the real test
// model behind tools/embedder.
func benchKnowledgeQuality(tb testing.TB, f *knowledgeVectorFigures) {
	tb.Helper()
	srv := embedtest.Start(tb)
	idx := quality.Index(tb, knowledge.Options{Store: filepath.Join(tb.TempDir(), "quality"), Embeddings: &knowledge.Embeddings{
		Client: embed.New(embed.Config{BaseURL: srv.URL, Model: embedtest.Model}), Batch: 32}})
	if _, err := idx.Embed(tb.Context(), nil); err != nil {
		tb.Fatalf("embedding the quality corpus: %v", err)
	}
	score := func(r knowledge.Ranking) map[string]quality.Score {
		return quality.Evaluate(tb, func(q string) (knowledge.Results, error) {
			return idx.SearchWith(context.Background(), q, quality.Depth, r)
		}, nil)
	}
	lex, vec, hyb := score(knowledge.LexicalOnly), score(knowledge.VectorOnly), score(knowledge.Fused)
	w, p := quality.Words, quality.Paraphrase
	f.KnowledgeQualityWordsLexicalTop3, f.KnowledgeQualityWordsLexicalMRR = round(lex[w].Top3, 3), round(lex[w].MRR, 3)
	f.KnowledgeQualityWordsVectorTop3, f.KnowledgeQualityWordsVectorMRR = round(vec[w].Top3, 3), round(vec[w].MRR, 3)
	f.KnowledgeQualityWordsHybridTop3, f.KnowledgeQualityWordsHybridMRR = round(hyb[w].Top3, 3), round(hyb[w].MRR, 3)
	f.KnowledgeQualityParaphraseLexicalTop3, f.KnowledgeQualityParaphraseLexicalMRR = round(lex[p].Top3, 3), round(lex[p].MRR, 3)
	f.KnowledgeQualityParaphraseVectorTop3, f.KnowledgeQualityParaphraseVectorMRR = round(vec[p].Top3, 3), round(vec[p].MRR, 3)
	f.KnowledgeQualityParaphraseHybridTop3, f.KnowledgeQualityParaphraseHybridMRR = round(hyb[p].Top3, 3), round(hyb[p].MRR, 3)
	tb.Logf("knowledge quality (top-3 / MRR): words lexical %.3f/%.3f vector %.3f/%.3f hybrid %.3f/%.3f; paraphrase lexical %.3f/%.3f vector %.3f/%.3f hybrid %.3f/%.3f",
		lex[w].Top3, lex[w].MRR, vec[w].Top3, vec[w].MRR, hyb[w].Top3, hyb[w].MRR, lex[p].Top3, lex[p].MRR, vec[p].Top3, vec[p].MRR, hyb[p].Top3, hyb[p].MRR)
}
