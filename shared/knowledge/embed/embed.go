// Package embed is a client of the OpenAI-compatible embeddings API
// (POST <base_url>/embeddings), which Ollama, LM Studio, llama.cpp's
// server, vLLM and text-embeddings-inference all serve. The knowledge
// index embeds its sections and queries through it.
//
// The server is trusted with the text, not with the index: every answer is
// checked before a vector is used (one vector per input, each index once,
// one dimension, finite numbers, not all zero, within a size bound), so a
// broken or hostile server yields an error, never a wrong vector stored.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
)

// Limits of one answer.
const (
	// MaxDim is the largest dimension accepted. Embedding models in use
	// have 384 to 4096.
	MaxDim = 8192
	// bytesPerNumber bounds a number's JSON text ("-0.012345678901234567,"
	// is 22 bytes; exponents add a few).
	bytesPerNumber = 32
	// answerSlack is what an answer may hold beside its numbers (field
	// names, usage, a model name).
	answerSlack = 64 << 10
)

// Errors, each wrapped with its cause.
var (
	// ErrUnreachable is a server that did not answer: refused, reset,
	// timed out, or answered with a status other than 200.
	ErrUnreachable = errors.New("embeddings server unreachable")
	// ErrBadAnswer is an answer that cannot be used: not the JSON of the
	// API, an error in a 200, vectors missing, reordered twice over, of
	// the wrong dimension, not finite, or too large.
	ErrBadAnswer = errors.New("embeddings server answered wrongly")
)

// Config configures a [Client].
type Config struct {
	// BaseURL is the API root; requests go to BaseURL + "/embeddings".
	BaseURL string
	// Model is the model asked for.
	Model string
	// APIKey, when set, is sent as a bearer token. It is never part of an
	// error.
	APIKey string
	// Timeout bounds one request; zero means
	// [spec.DefaultEmbeddingsTimeout].
	Timeout time.Duration
	// HTTPClient makes the requests; nil means one without a timeout of
	// its own (Timeout bounds each request).
	HTTPClient *http.Client
}

// Client embeds texts. It is safe for concurrent use.
type Client struct {
	url    string
	model  string
	key    string
	limit  time.Duration
	client *http.Client
}

// New returns a client of cfg's server. It contacts nothing.
func New(cfg Config) *Client {
	c := &Client{
		url:    strings.TrimSuffix(cfg.BaseURL, "/") + "/embeddings",
		model:  cfg.Model,
		key:    cfg.APIKey,
		limit:  cfg.Timeout,
		client: cfg.HTTPClient,
	}
	if c.limit <= 0 {
		c.limit = spec.DefaultEmbeddingsTimeout
	}
	if c.client == nil {
		c.client = &http.Client{}
	}
	return c
}

// Model returns the model the client asks for.
func (c *Client) Model() string { return c.model }

// URL returns where requests go.
func (c *Client) URL() string { return c.url }

// Embed returns one vector per text, in the order of texts, each of dim
// numbers (dim 0: whatever the server gives, the same for all). An empty
// text is sent as one space: some servers refuse "".
func (c *Client) Embed(ctx context.Context, texts []string, dim int) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	input := make([]string, len(texts))
	for n, t := range texts {
		if strings.TrimSpace(t) == "" {
			t = " "
		}
		input[n] = t
	}
	body, err := json.Marshal(struct {
		Model  string   `json:"model"`
		Input  []string `json:"input"`
		Format string   `json:"encoding_format"`
	}{c.model, input, "float"})
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the request: %w", ErrBadAnswer, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, c.url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("%w: %s: no answer within %s", ErrUnreachable, c.url, c.limit)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, c.url, stripURL(err))
	}
	defer resp.Body.Close()
	perVector := MaxDim
	if dim > 0 {
		perVector = dim
	}
	limit := int64(len(texts))*int64(perVector)*bytesPerNumber + answerSlack
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("%w: %s: the answer did not finish within %s", ErrUnreachable, c.url, c.limit)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: reading the answer: %w", ErrUnreachable, c.url, stripURL(err))
	case int64(len(data)) > limit:
		return nil, fmt.Errorf("%w: %s: the answer is larger than %d bytes for %d texts", ErrBadAnswer, c.url, limit, len(texts))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: %s%s", ErrUnreachable, c.url, clean(resp.Status, c.key), errorText(data, c.key))
	}
	return parse(data, len(texts), dim, c.key)
}

// answer is the API's answer.
type answer struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
	Error json.RawMessage `json:"error"`
}

// parse checks an answer for n texts and returns its vectors in input
// order; key is redacted from a message the server sent.
func parse(data []byte, n, dim int, key string) ([][]float32, error) {
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("%w: not the JSON of an embeddings answer: %w", ErrBadAnswer, err)
	}
	if len(a.Error) > 0 && string(a.Error) != "null" {
		return nil, fmt.Errorf("%w: an error in a 200 answer%s", ErrBadAnswer, errorText(data, key))
	}
	if len(a.Data) != n {
		return nil, fmt.Errorf("%w: %d vectors for %d texts", ErrBadAnswer, len(a.Data), n)
	}
	out := make([][]float32, n)
	for pos, d := range a.Data {
		at := pos
		if d.Index != nil {
			at = *d.Index
		} else if a.Data[0].Index != nil {
			return nil, fmt.Errorf("%w: vector %d has no index while others do", ErrBadAnswer, pos)
		}
		if at < 0 || at >= n || out[at] != nil {
			return nil, fmt.Errorf("%w: vector %d has index %d: not a distinct index below %d", ErrBadAnswer, pos, at, n)
		}
		if dim == 0 {
			dim = len(d.Embedding)
		}
		switch {
		case len(d.Embedding) == 0 || len(d.Embedding) > MaxDim:
			return nil, fmt.Errorf("%w: vector %d has %d numbers (want 1 to %d)", ErrBadAnswer, at, len(d.Embedding), MaxDim)
		case len(d.Embedding) != dim:
			return nil, fmt.Errorf("%w: vector %d has %d numbers, not %d", ErrBadAnswer, at, len(d.Embedding), dim)
		}
		v := make([]float32, dim)
		var norm float64
		for k, x := range d.Embedding {
			f := float32(x)
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("%w: vector %d holds %v, not a finite number", ErrBadAnswer, at, x)
			}
			v[k] = f
			norm += float64(f) * float64(f)
		}
		if norm == 0 || math.IsInf(norm, 0) {
			return nil, fmt.Errorf("%w: vector %d has no direction (all zero, or too large to measure)", ErrBadAnswer, at)
		}
		out[at] = v
	}
	return out, nil
}

// errorText returns the message of an OpenAI-style error body, cleaned
// of key, for an error: ": <message>", or "" when there is none.
func errorText(data []byte, key string) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil || len(e.Error) == 0 {
		return ""
	}
	var msg string
	var obj struct {
		Message string `json:"message"`
	}
	switch {
	case json.Unmarshal(e.Error, &msg) == nil:
	case json.Unmarshal(e.Error, &obj) == nil:
		msg = obj.Message
	}
	if msg = clean(msg, key); msg == "" {
		return ""
	}
	return ": " + msg
}

// clean makes text from the server fit an error: on one line, without
// key (servers and proxies echo the Authorization header, and the error
// reaches logs and the model's tier line), and clipped to 200 bytes on a
// character boundary. The key goes before the clip, so no prefix of it
// survives.
func clean(text, key string) string {
	text = strings.Join(strings.Fields(text), " ")
	if key != "" {
		text = strings.ReplaceAll(text, key, "[redacted]")
	}
	if len(text) > 200 {
		text = strings.ToValidUTF8(text[:200], "") + "…"
	}
	return text
}

// stripURL drops the URL net/http puts in its errors: the caller names it
// once.
func stripURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// Normalised reports whether v has unit length, as a server that
// normalises gives it.
func Normalised(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Abs(math.Sqrt(s)-1) < 1e-3
}

// Unit scales v to unit length in place and returns it: the index compares
// vectors by their angle only.
func Unit(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(s))
	for k := range v {
		v[k] *= inv
	}
	return v
}
