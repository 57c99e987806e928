package quality_test

import (
	"context"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/quality"
)

// TestQualityTiers scores the three rankings on the labelled questions
// with the real test model (Universal Sentence Encoder lite, through
// tools/embedder), and holds the fusion to its promise: on questions in
// the documents' words it is never below lexical, and on paraphrases it
// finds, by more than a question or two, what lexical misses.
func TestQualityTiers(t *testing.T) {
	srv := embedtest.Start(t)
	idx := quality.Index(t, knowledge.Options{Embeddings: &knowledge.Embeddings{
		Client: embed.New(embed.Config{BaseURL: srv.URL, Model: "use-lite"}),
		Batch:  32,
	}})
	if _, err := idx.Embed(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	scores := map[knowledge.Ranking]map[string]quality.Score{}
	for _, r := range []knowledge.Ranking{knowledge.LexicalOnly, knowledge.VectorOnly, knowledge.Fused} {
		scores[r] = quality.Evaluate(t, func(q string) (knowledge.Results, error) {
			return idx.SearchWith(context.Background(), q, quality.Depth, r)
		}, nil)
	}
	names := map[knowledge.Ranking]string{knowledge.LexicalOnly: "lexical", knowledge.VectorOnly: "vector", knowledge.Fused: "hybrid"}
	for _, set := range quality.Sets {
		for _, r := range []knowledge.Ranking{knowledge.LexicalOnly, knowledge.VectorOnly, knowledge.Fused} {
			s := scores[r][set]
			t.Logf("%-10s %-7s top-3 %.3f  MRR %.3f  (%d questions)", set, names[r], s.Top3, s.MRR, s.Questions)
		}
	}
	lex, hyb := scores[knowledge.LexicalOnly], scores[knowledge.Fused]
	if w := quality.Words; hyb[w].Top3 < lex[w].Top3 || hyb[w].MRR < lex[w].MRR-0.005 {
		t.Errorf("words: hybrid top-3 %.3f MRR %.3f, below lexical's %.3f and %.3f", hyb[w].Top3, hyb[w].MRR, lex[w].Top3, lex[w].MRR)
	}
	// More than noise: at least three more paraphrases answered in the
	// top 3 than lexical answers.
	p := quality.Paraphrase
	if gain := (hyb[p].Top3 - lex[p].Top3) * float64(hyb[p].Questions); gain < 3 || hyb[p].MRR <= lex[p].MRR {
		t.Errorf("paraphrase: hybrid top-3 %.3f MRR %.3f against lexical's %.3f and %.3f: want at least three more answered in the top 3", hyb[p].Top3, hyb[p].MRR, lex[p].Top3, lex[p].MRR)
	}
}
