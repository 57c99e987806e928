package embedtest

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
)

// Words is an embeddings server for the tests and benchmarks that need
// many vectors fast or a server that misbehaves on cue: a text's vector is
// the sum of a fixed random vector per word plus noise seeded by the whole
// text, so texts sharing words point the same way, as a model's do,
// without a model. It embeds a hundred thousand sections in seconds where
// the real model takes half an hour. The tests of meaning use the real
// model ([Start]); this one serves the store's mechanics and its scale.
type Words struct {
	dim   int
	srv   *httptest.Server
	words sync.Map // word -> []float32

	// Requests counts the requests served; Texts the texts embedded.
	Requests atomic.Int64
	Texts    atomic.Int64
	fail     atomic.Pointer[Failure]
}

// Failure is an answer a misbehaving server gives every request.
type Failure struct {
	Status int
	Body   string
}

// StartWords serves /v1/embeddings of dim-dimensional vectors on loopback
// until the test ends.
func StartWords(tb testing.TB, dim int) *Words {
	tb.Helper()
	w := &Words{dim: dim}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	tb.Cleanup(w.srv.Close)
	return w
}

// URL is the base_url of the server.
func (w *Words) URL() string { return w.srv.URL + "/v1" }

// Fail makes every request answer f until Heal.
func (w *Words) Fail(f Failure) { w.fail.Store(&f) }

// Heal ends Fail.
func (w *Words) Heal() { w.fail.Store(nil) }

func (w *Words) serve(rw http.ResponseWriter, r *http.Request) {
	w.Requests.Add(1)
	if f := w.fail.Load(); f != nil {
		rw.WriteHeader(f.Status)
		_, _ = rw.Write([]byte(f.Body))
		return
	}
	var req struct {
		Input []string `json:"input"`
	}
	if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(rw, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	w.Texts.Add(int64(len(req.Input)))
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Data []item `json:"data"`
	}{}
	for n, t := range req.Input {
		out.Data = append(out.Data, item{n, w.Vector(t)})
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// Vector is the vector the server gives text.
func (w *Words) Vector(text string) []float32 {
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
func (w *Words) word(word string) []float32 {
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
