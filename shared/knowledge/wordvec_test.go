package knowledge

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
)

// startWordVectors is [embedtest.StartWords].
func startWordVectors(tb testing.TB, dim int) *embedtest.Words { return embedtest.StartWords(tb, dim) }

// wordTier is a vector tier on w, with model as its model's name.
func wordTier(w *embedtest.Words, model string) *Embeddings {
	return &Embeddings{Client: embed.New(embed.Config{BaseURL: w.URL(), Model: model}), Batch: 64}
}

// unitVec scales v to unit length, as the index stores and queries.
func unitVec(v []float32) []float32 { return embed.Unit(v) }
