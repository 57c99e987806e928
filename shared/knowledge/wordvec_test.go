package knowledge

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
)

// wordVectors is an embeddings server for the tests that need many
// vectors fast or a server that misbehaves on cue: a text's vector is the
// sum of a fixed random vector per word plus noise seeded by the whole
// text, so texts sharing words point the same way, as a model's do,
// without a model. The tests of meaning use the real model
// (tools/embedder); this one serves the store's mechanics and its scale.
type wordVectors struct {
	dim   int
	srv   *httptest.Server
	words sync.Map // word -> []float32

	// requests counts the requests served; texts the texts embedded.
	requests atomic.Int64
	texts    atomic.Int64
	// fail, when set, answers every request with its status and body.
	fail atomic.Pointer[failure]
}

type failure struct {
	status int
	body   string
}

// startWordVectors serves /v1/embeddings on loopback until the test ends.
func startWordVectors(tb testing.TB, dim int) *wordVectors {
	tb.Helper()
	w := &wordVectors{dim: dim}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	tb.Cleanup(w.srv.Close)
	return w
}

// URL is the base_url of the server.
func (w *wordVectors) URL() string { return w.srv.URL + "/v1" }

// embeddings is a vector tier on w, with model as its model's name.
func (w *wordVectors) embeddings(model string) *Embeddings {
	return &Embeddings{Client: embed.New(embed.Config{BaseURL: w.URL(), Model: model}), Batch: 64}
}

func (w *wordVectors) serve(rw http.ResponseWriter, r *http.Request) {
	w.requests.Add(1)
	if f := w.fail.Load(); f != nil {
		rw.WriteHeader(f.status)
		_, _ = rw.Write([]byte(f.body))
		return
	}
	var req struct {
		Input []string `json:"input"`
	}
	if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(rw, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	w.texts.Add(int64(len(req.Input)))
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Data []item `json:"data"`
	}{}
	for n, t := range req.Input {
		out.Data = append(out.Data, item{n, w.vector(t)})
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// vector is the vector of text.
func (w *wordVectors) vector(text string) []float32 {
	v := make([]float32, w.dim)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	for _, word := range words {
		wv := w.word(word)
		for k := range v {
			v[k] += wv[k]
		}
	}
	h := fnv.New64a()
	h.Write([]byte(text))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	scale := float32(math.Sqrt(float64(len(words)+1)) * 0.5)
	for k := range v {
		v[k] += scale * float32(rng.NormFloat64())
	}
	return v
}

// word is the fixed random vector of one word.
func (w *wordVectors) word(word string) []float32 {
	if v, ok := w.words.Load(word); ok {
		return v.([]float32)
	}
	h := fnv.New64a()
	h.Write([]byte(word))
	rng := rand.New(rand.NewPCG(h.Sum64(), 2))
	v := make([]float32, w.dim)
	for k := range v {
		v[k] = float32(rng.NormFloat64())
	}
	w.words.Store(word, v)
	return v
}

// unitVec scales v to unit length, as the index stores and queries.
func unitVec(v []float32) []float32 { return embed.Unit(v) }
