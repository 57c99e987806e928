package embedtest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
)

// embeddingsResponse is the server's answer to POST /v1/embeddings.
type embeddingsResponse struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// errorResponse is the server's answer to a request it refuses.
type errorResponse struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// do sends a request with body (none when nil) and key as its bearer
// token (none when empty), and returns the status and the body read.
func do(tb testing.TB, method, url, key string, body []byte) (int, []byte) {
	tb.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tb.Context(), method, url, r)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, b
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// embed posts texts as one batch and returns the vectors in the order of
// the answer, checking the answer's shape on the way.
func embed(tb testing.TB, s *embedtest.Server, texts ...string) [][]float32 {
	tb.Helper()
	resp := post(tb, s, map[string]any{"model": embedtest.Model, "input": texts})
	vecs := make([][]float32, len(resp.Data))
	for i, d := range resp.Data {
		if err := json.Unmarshal(d.Embedding, &vecs[i]); err != nil {
			tb.Fatalf("data[%d].embedding: %v", i, err)
		}
	}
	return vecs
}

// post posts body to /v1/embeddings and decodes the answer, which must be
// a 200 with one embedding per input in order.
func post(tb testing.TB, s *embedtest.Server, body map[string]any) embeddingsResponse {
	tb.Helper()
	status, b := do(tb, http.MethodPost, s.URL+"/embeddings", "", mustJSON(tb, body))
	if status != http.StatusOK {
		tb.Fatalf("POST /v1/embeddings: got status %d, want 200: %s", status, b)
	}
	var resp embeddingsResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		tb.Fatalf("decoding the answer: %v: %s", err, b)
	}
	n := 1
	if in, ok := body["input"].([]string); ok {
		n = len(in)
	}
	if resp.Object != "list" || len(resp.Data) != n {
		tb.Fatalf("got object %q with %d items, want list with %d", resp.Object, len(resp.Data), n)
	}
	for i, d := range resp.Data {
		if d.Object != "embedding" || d.Index != i {
			tb.Errorf("data[%d]: got object %q index %d, want embedding index %d", i, d.Object, d.Index, i)
		}
	}
	return resp
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestEmbeddings(t *testing.T) {
	s := embedtest.Start(t)
	if reason, ok := embedtest.Available(); !ok {
		t.Errorf("Available after a Start: got false (%s), want true", reason)
	}

	texts := []string{"How do I restart the server?", "", "The cat sat on the mat"}
	resp := post(t, s, map[string]any{"model": "text-embedding-3-small", "input": texts})
	if resp.Model != "text-embedding-3-small" {
		t.Errorf("model: got %q, want the requested text-embedding-3-small", resp.Model)
	}
	if resp.Usage.PromptTokens <= 0 || resp.Usage.TotalTokens != resp.Usage.PromptTokens {
		t.Errorf("usage: got prompt_tokens %d total_tokens %d, want equal and positive", resp.Usage.PromptTokens, resp.Usage.TotalTokens)
	}
	batch := make([][]float32, len(resp.Data))
	for i, d := range resp.Data {
		if err := json.Unmarshal(d.Embedding, &batch[i]); err != nil {
			t.Fatalf("data[%d].embedding: %v", i, err)
		}
		if len(batch[i]) != embedtest.Dimensions {
			t.Fatalf("data[%d]: got %d floats, want %d", i, len(batch[i]), embedtest.Dimensions)
		}
		for j, x := range batch[i] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("data[%d][%d]: got %v, want a finite float", i, j, x)
			}
		}
	}
	// Each vector is its own text's: the same as that text embedded alone.
	for i, text := range texts {
		alone := embed(t, s, text)[0]
		if c := cosine(alone, batch[i]); c < 0.9999 {
			t.Errorf("data[%d] (%q): cosine with the text embedded alone is %.6f, want 1", i, text, c)
		}
	}
	// The one string input form answers like a batch of one.
	one := post(t, s, map[string]any{"model": embedtest.Model, "input": texts[0]})
	var v []float32
	if err := json.Unmarshal(one.Data[0].Embedding, &v); err != nil {
		t.Fatal(err)
	}
	if c := cosine(v, batch[0]); c < 0.9999 {
		t.Errorf("input as a string: cosine with the batch's vector is %.6f, want 1", c)
	}
}

func TestSimilarity(t *testing.T) {
	s := embedtest.Start(t)
	tests := []struct {
		name              string
		anchor, near, far string
	}{
		{"restart", "How do I restart the server?", "Steps to reboot the service", "The cat sat on the mat"},
		{"logs", "Where can I find the log files?", "Which directory holds the logs?", "I like to eat apples and bananas"},
		{"refusal", "The gateway rejected the request: permission denied", "Access was refused by the gateway", "My favourite colour is blue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := embed(t, s, tt.anchor, tt.near, tt.far)
			near, far, across := cosine(v[0], v[1]), cosine(v[0], v[2]), cosine(v[1], v[2])
			if near <= far || near <= across {
				t.Errorf("got cosine %.3f for %q and %q, want more than %.3f (with %q) and %.3f (%q with it)",
					near, tt.anchor, tt.near, far, tt.far, across, tt.near)
			}
		})
	}
}

func TestBase64(t *testing.T) {
	s := embedtest.Start(t)
	text := "Steps to reboot the service"
	want := embed(t, s, text)[0]
	resp := post(t, s, map[string]any{"model": embedtest.Model, "input": []string{text}, "encoding_format": "base64"})
	var enc string
	if err := json.Unmarshal(resp.Data[0].Embedding, &enc); err != nil {
		t.Fatalf("data[0].embedding: got %s, want a base64 string: %v", resp.Data[0].Embedding, err)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 4*embedtest.Dimensions {
		t.Fatalf("got %d bytes, want %d little-endian float32s", len(raw), embedtest.Dimensions)
	}
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
			t.Fatalf("float %d: got %v, want %v as in the JSON floats", i, got, want[i])
		}
	}
}

func TestAPIKey(t *testing.T) {
	const key = "embedtest-key-1"
	s := embedtest.Start(t, embedtest.WithAPIKeyEnv("EMBEDTEST_API_KEY", key))
	body := mustJSON(t, map[string]any{"model": embedtest.Model, "input": []string{"hello"}})
	tests := []struct {
		name, method, path, key string
		body                    []byte
		want                    int
	}{
		{"no key", http.MethodPost, "/embeddings", "", body, http.StatusUnauthorized},
		{"wrong key", http.MethodPost, "/embeddings", "not-the-key", body, http.StatusUnauthorized},
		{"wrong key for models", http.MethodGet, "/models", "not-the-key", nil, http.StatusUnauthorized},
		{"key", http.MethodPost, "/embeddings", key, body, http.StatusOK},
		{"key for models", http.MethodGet, "/models", key, nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := do(t, tt.method, s.URL+tt.path, tt.key, tt.body)
			if status != tt.want {
				t.Fatalf("got status %d, want %d: %s", status, tt.want, b)
			}
			if status != http.StatusUnauthorized {
				return
			}
			var e errorResponse
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
				t.Errorf("got body %s, want an error with code invalid_api_key", b)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	s := embedtest.Start(t)
	many := make([]string, 2049)
	for i := range many {
		many[i] = "a"
	}
	tests := []struct {
		name, method, path string
		body               []byte
		want               int
	}{
		{"malformed JSON", http.MethodPost, "/embeddings", []byte(`{"model": "m", "input": [`), http.StatusBadRequest},
		{"not an object", http.MethodPost, "/embeddings", []byte(`["hello"]`), http.StatusBadRequest},
		{"no input", http.MethodPost, "/embeddings", []byte(`{"model": "m"}`), http.StatusBadRequest},
		{"input a number", http.MethodPost, "/embeddings", []byte(`{"input": 5}`), http.StatusBadRequest},
		{"empty batch", http.MethodPost, "/embeddings", []byte(`{"input": []}`), http.StatusBadRequest},
		{"token arrays", http.MethodPost, "/embeddings", []byte(`{"input": [1, 2, 3]}`), http.StatusBadRequest},
		{"null in batch", http.MethodPost, "/embeddings", []byte(`{"input": ["a", null]}`), http.StatusBadRequest},
		{"model a number", http.MethodPost, "/embeddings", []byte(`{"model": 5, "input": "a"}`), http.StatusBadRequest},
		{"other dimensions", http.MethodPost, "/embeddings", []byte(`{"input": "a", "dimensions": 256}`), http.StatusBadRequest},
		{"unknown encoding", http.MethodPost, "/embeddings", []byte(`{"input": "a", "encoding_format": "int8"}`), http.StatusBadRequest},
		{"batch too large", http.MethodPost, "/embeddings", mustJSON(t, map[string]any{"input": many}), http.StatusBadRequest},
		{"input too long", http.MethodPost, "/embeddings", mustJSON(t, map[string]any{"input": strings.Repeat("a", 16385)}), http.StatusBadRequest},
		{"body too large", http.MethodPost, "/embeddings", mustJSON(t, map[string]any{"input": strings.Repeat("a", 9<<20)}), http.StatusRequestEntityTooLarge},
		{"wrong method", http.MethodGet, "/embeddings", nil, http.StatusMethodNotAllowed},
		{"unknown path", http.MethodGet, "/completions", nil, http.StatusNotFound},
		{"unknown model", http.MethodGet, "/models/gpt-4", nil, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := do(t, tt.method, s.URL+tt.path, "", tt.body)
			if status != tt.want {
				t.Fatalf("got status %d, want %d: %s", status, tt.want, b)
			}
			var e errorResponse
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
				t.Errorf("got body %s, want an error of type invalid_request_error with a message", b)
			}
		})
	}
	// The server still answers after every refusal.
	if v := embed(t, s, "still here"); len(v[0]) != embedtest.Dimensions {
		t.Errorf("after the refusals: got %d floats, want %d", len(v[0]), embedtest.Dimensions)
	}
}

func TestModelsAndHealth(t *testing.T) {
	s := embedtest.Start(t)
	status, b := do(t, http.MethodGet, s.URL+"/models", "", nil)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &models); status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/models: got status %d (%v): %s", status, err, b)
	}
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != embedtest.Model || models.Data[0].Object != "model" {
		t.Errorf("GET /v1/models: got %s, want a list of the one model %s", b, embedtest.Model)
	}
	if status, b := do(t, http.MethodGet, s.URL+"/models/"+embedtest.Model, "", nil); status != http.StatusOK {
		t.Errorf("GET /v1/models/%s: got status %d, want 200: %s", embedtest.Model, status, b)
	}
	health := strings.TrimSuffix(s.URL, "/v1") + "/healthz"
	if status, b := do(t, http.MethodGet, health, "", nil); status != http.StatusOK {
		t.Errorf("GET /healthz: got status %d, want 200: %s", status, b)
	}
}

func TestStopAndKill(t *testing.T) {
	tests := []struct {
		name string
		end  func(*embedtest.Server)
	}{
		{"stop", (*embedtest.Server).Stop},
		{"kill", (*embedtest.Server).Kill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := embedtest.Start(t)
			embed(t, s, "hello")
			tt.end(s)
			// Both are idempotent, in either order.
			s.Stop()
			s.Kill()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/models", nil)
			if err != nil {
				t.Fatal(err)
			}
			// A fresh transport: the default one may hold a connection
			// the server closed, which the refusal must not be mistaken for.
			client := &http.Client{Transport: &http.Transport{}}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("after %s: got status %d, want the connection refused", tt.name, resp.StatusCode)
			}
		})
	}
}

// TestWithPort starts a server again on the port of one that was killed:
// a client holding the old URL reaches the new one.
func TestWithPort(t *testing.T) {
	first := embedtest.Start(t)
	embed(t, first, "hello")
	first.Kill()
	again := embedtest.Start(t, embedtest.WithPort(first.Port()))
	if again.URL != first.URL {
		t.Fatalf("got URL %s, want %s", again.URL, first.URL)
	}
	if got := embed(t, again, "hello"); len(got) != 1 || len(got[0]) != embedtest.Dimensions {
		t.Errorf("got %d vectors, want one of %d numbers", len(got), embedtest.Dimensions)
	}
}
