package embed_test

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
)

// testKey is the API key every client here sends; no error may show it.
const testKey = "sk-fiskfleet-0123456789abcdef"

// start serves h on loopback until the test ends and returns its API root.
func start(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// newClient returns a client of baseURL that sends testKey.
func newClient(baseURL string, timeout time.Duration) *embed.Client {
	return embed.New(embed.Config{BaseURL: baseURL, Model: "nomic-embed-text", APIKey: testKey, Timeout: timeout})
}

// answer is a handler that reads the request and answers status and body.
func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// raw is a handler that writes resp, a whole HTTP response, on the bare
// connection and closes it: for answers net/http would not write.
func raw(resp string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = buf.WriteString(resp)
		_ = buf.Flush()
	}
}

// vector returns the JSON of dim numbers, each x.
func vector(dim int, x float64) string {
	nums := make([]string, dim)
	for k := range nums {
		nums[k] = fmt.Sprint(x)
	}
	return "[" + strings.Join(nums, ",") + "]"
}

// entry returns one data entry of an answer.
func entry(index int, embedding string) string {
	return fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, index, embedding)
}

// list returns an answer holding entries, as OpenAI writes it.
func list(entries ...string) string {
	return `{"object":"list","data":[` + strings.Join(entries, ",") + `],"model":"nomic-embed-text","usage":{"prompt_tokens":3,"total_tokens":3}}`
}

// texts returns n distinct texts.
func texts(n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("section %d", k)
	}
	return out
}

// embedWithin calls Embed in a goroutine and fails tb unless it returns
// within limit: a client that hangs on a hostile server fails here rather
// than at the test binary's timeout.
func embedWithin(tb testing.TB, c *embed.Client, in []string, dim int, limit time.Duration) ([][]float32, error) {
	tb.Helper()
	type result struct {
		vecs [][]float32
		err  error
	}
	done := make(chan result, 1)
	go func() {
		vecs, err := c.Embed(tb.Context(), in, dim)
		done <- result{vecs, err}
	}()
	select {
	case r := <-done:
		return r.vecs, r.err
	case <-time.After(limit):
		tb.Fatalf("Embed did not return within %s", limit)
		return nil, nil
	}
}

// checkErr fails tb unless err wraps want, contains every one of msgs, and
// shows no part of the key.
func checkErr(tb testing.TB, err, want error, msgs ...string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want one wrapping %v", want)
	}
	if !errors.Is(err, want) {
		tb.Errorf("got %v, want it to wrap %v", err, want)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			tb.Errorf("got %q, want it to say %q", err, m)
		}
	}
	if strings.Contains(err.Error(), testKey[:8]) {
		tb.Errorf("got %q, want no part of the API key in it", err)
	}
}

func TestEmbedRefusesHostileAnswers(t *testing.T) {
	t.Parallel()
	const jsonType = "application/json"
	long := strings.Repeat("a", 1000)
	tests := []struct {
		name    string
		texts   int
		dim     int
		handler http.HandlerFunc
		want    error
		msgs    []string
		notMsg  string
	}{
		{"wrong dimension", 1, 512, answer(200, jsonType, list(entry(0, vector(384, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 0 has 384 numbers, not 512"}, ""},
		{"mixed dimensions in one answer", 2, 0, answer(200, jsonType, list(entry(0, vector(384, 0.1)), entry(1, vector(768, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 1 has 768 numbers, not 384"}, ""},
		{"more numbers than any model", 1, 0, answer(200, jsonType, list(entry(0, vector(embed.MaxDim+1, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 0 has 8193 numbers (want 1 to 8192)"}, ""},
		{"empty embedding", 1, 0, answer(200, jsonType, list(entry(0, "[]"))),
			embed.ErrBadAnswer, []string{"vector 0 has 0 numbers (want 1 to 8192)"}, ""},
		{"null embedding", 1, 0, answer(200, jsonType, list(entry(0, "null"))),
			embed.ErrBadAnswer, []string{"vector 0 has 0 numbers"}, ""},
		{"NaN literal", 1, 0, answer(200, jsonType, list(entry(0, "[0.1,NaN,0.2]"))),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"Infinity literal", 1, 0, answer(200, jsonType, list(entry(0, "[0.1,Infinity]"))),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"-Infinity literal", 1, 0, answer(200, jsonType, list(entry(0, "[-Infinity,0.1]"))),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"number overflowing float32", 1, 0, answer(200, jsonType, list(entry(0, "[0.1,1e39,0.2]"))),
			embed.ErrBadAnswer, []string{"vector 0 holds 1e+39, not a finite number"}, ""},
		{"negative number overflowing float32", 1, 0, answer(200, jsonType, list(entry(0, "[0.1,-1e39]"))),
			embed.ErrBadAnswer, []string{"vector 0 holds -1e+39, not a finite number"}, ""},
		{"number overflowing float64", 1, 0, answer(200, jsonType, list(entry(0, "[0.1,1e400]"))),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"all-zero vector", 2, 0, answer(200, jsonType, list(entry(0, vector(4, 0.1)), entry(1, vector(4, 0)))),
			embed.ErrBadAnswer, []string{"vector 1 has no direction"}, ""},
		{"numbers too small for float32", 1, 0, answer(200, jsonType, list(entry(0, vector(4, 1e-50)))),
			embed.ErrBadAnswer, []string{"vector 0 has no direction"}, ""},
		{"base64 vector despite encoding_format float", 1, 0, answer(200, jsonType, list(entry(0, `"AACAPwAAAEA="`))),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"short data array", 3, 0, answer(200, jsonType, list(entry(0, vector(4, 0.1)), entry(1, vector(4, 0.1)))),
			embed.ErrBadAnswer, []string{"2 vectors for 3 texts"}, ""},
		{"long data array", 2, 0, answer(200, jsonType, list(entry(0, vector(4, 0.1)), entry(1, vector(4, 0.1)), entry(2, vector(4, 0.1)))),
			embed.ErrBadAnswer, []string{"3 vectors for 2 texts"}, ""},
		{"no data at all", 1, 0, answer(200, jsonType, `{"object":"list","model":"m"}`),
			embed.ErrBadAnswer, []string{"0 vectors for 1 texts"}, ""},
		{"data not an array", 1, 0, answer(200, jsonType, `{"data":{"index":0,"embedding":[0.1]}}`),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"duplicate indexes", 3, 0, answer(200, jsonType, list(entry(0, vector(4, 0.1)), entry(2, vector(4, 0.1)), entry(0, vector(4, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 2 has index 0: not a distinct index below 3"}, ""},
		{"index out of range", 2, 0, answer(200, jsonType, list(entry(0, vector(4, 0.1)), entry(2, vector(4, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 1 has index 2: not a distinct index below 2"}, ""},
		{"negative index", 2, 0, answer(200, jsonType, list(entry(-1, vector(4, 0.1)), entry(1, vector(4, 0.1)))),
			embed.ErrBadAnswer, []string{"vector 0 has index -1"}, ""},
		{"index missing on some entries", 3, 0, answer(200, jsonType, `{"data":[`+entry(1, vector(4, 0.1))+`,{"embedding":`+vector(4, 0.1)+`},`+entry(0, vector(4, 0.1))+`]}`),
			embed.ErrBadAnswer, []string{"vector 1 has no index while others do"}, ""},
		{"OpenAI-style error in a 200", 1, 0, answer(200, jsonType, `{"error":{"message":"model not found","type":"invalid_request_error"}}`),
			embed.ErrBadAnswer, []string{"an error in a 200 answer: model not found"}, ""},
		{"error string in a 200", 1, 0, answer(200, jsonType, `{"error":"model \"nomic\" not found, try pulling it first"}`),
			embed.ErrBadAnswer, []string{`an error in a 200 answer: model "nomic" not found, try pulling it first`}, ""},
		{"error beside data in a 200", 1, 0, answer(200, jsonType, `{"data":[`+entry(0, vector(4, 0.1))+`],"error":{"message":"partial failure"}}`),
			embed.ErrBadAnswer, []string{"an error in a 200 answer: partial failure"}, ""},
		{"500 with an error body", 1, 0, answer(500, jsonType, `{"error":{"message":"CUDA out of memory"}}`),
			embed.ErrUnreachable, []string{"500 Internal Server Error: CUDA out of memory"}, ""},
		{"401 with an error body", 1, 0, answer(401, jsonType, `{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`),
			embed.ErrUnreachable, []string{"401 Unauthorized: Incorrect API key provided"}, ""},
		{"429 with an error body", 1, 0, answer(429, jsonType, `{"error":{"message":"Rate limit reached for requests"}}`),
			embed.ErrUnreachable, []string{"429 Too Many Requests: Rate limit reached for requests"}, ""},
		{"500 with a long message, clipped", 1, 0, answer(500, jsonType, `{"error":{"message":"`+long+`"}}`),
			embed.ErrUnreachable, []string{"500 Internal Server Error: " + long[:200] + "…"}, long[:201]},
		{"500 with a long message, clipped on a character", 1, 0, answer(500, jsonType, `{"error":{"message":"`+long[:199]+`ééé"}}`),
			embed.ErrUnreachable, []string{"500 Internal Server Error: " + long[:199] + "…"}, ""},
		{"500 with a multi-line message, on one line", 1, 0, answer(500, jsonType, `{"error":{"message":"first line\n\tsecond line"}}`),
			embed.ErrUnreachable, []string{"500 Internal Server Error: first line second line"}, "\n"},
		{"502 with an HTML page", 1, 0, answer(502, "text/html", "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>"),
			embed.ErrUnreachable, []string{"502 Bad Gateway"}, "<html>"},
		{"404 with an empty body", 1, 0, answer(404, jsonType, ""),
			embed.ErrUnreachable, []string{"404 Not Found"}, ""},
		{"body that is not JSON", 1, 0, answer(200, "text/plain", "embeddings: 0.1 0.2 0.3"),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"HTML in a 200", 1, 0, answer(200, "text/html", "<!DOCTYPE html><html><body>Welcome to nginx!</body></html>"),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer", "invalid character '<'"}, "nginx"},
		{"empty body in a 200", 1, 0, answer(200, jsonType, ""),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"JSON cut short", 1, 0, answer(200, jsonType, `{"data":[{"index":0,"embedding":[0.1,0.2`),
			embed.ErrBadAnswer, []string{"not the JSON of an embeddings answer"}, ""},
		{"connection closed before the Content-Length", 1, 0,
			raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"data\":[{\"index\":0,"),
			embed.ErrUnreachable, []string{"reading the answer", "unexpected EOF"}, ""},
		{"connection closed without an answer", 1, 0, raw(""),
			embed.ErrUnreachable, []string{"EOF"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(start(t, tt.handler), 10*time.Second)
			vecs, err := embedWithin(t, c, texts(tt.texts), tt.dim, 20*time.Second)
			if vecs != nil {
				t.Errorf("got %d vectors, want none beside the error", len(vecs))
			}
			checkErr(t, err, tt.want, tt.msgs...)
			if err != nil && !utf8.ValidString(err.Error()) {
				t.Errorf("got %q, want valid UTF-8", err)
			}
			if err != nil && tt.notMsg != "" && strings.Contains(err.Error(), tt.notMsg) {
				t.Errorf("got %q, want it without %q", err, tt.notMsg)
			}
		})
	}
}

func TestEmbedTimesOutOnAServerThatHangs(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{})
	url := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server watches for the client going away only once the
		// body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		close(ended)
	}))
	_, err := embedWithin(t, newClient(url, 200*time.Millisecond), texts(1), 0, 2*time.Second)
	checkErr(t, err, embed.ErrUnreachable, "no answer within 200ms", url+"/embeddings")
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the handler's request context did not end: the client left the connection open")
	}
}

func TestEmbedTimesOutOnABodyThatTrickles(t *testing.T) {
	t.Parallel()
	url := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[`)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := io.WriteString(w, "0.1,"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	_, err := embedWithin(t, newClient(url, 200*time.Millisecond), texts(1), 0, 2*time.Second)
	checkErr(t, err, embed.ErrUnreachable, "the answer did not finish within 200ms")
}

func TestEmbedStopsReadingAHugeAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		gzip bool
	}{
		{"plain", false},
		// The transport asks for gzip and inflates it: the bound must hold
		// for the inflated answer, not the bytes on the wire.
		{"gzip", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var written atomic.Int64
			stopped := make(chan string, 1)
			url := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				var out io.Writer = w
				if tt.gzip {
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					defer zw.Close()
					out = zw
				}
				chunk := []byte(strings.Repeat("0.1,", 16<<10))
				if _, err := io.WriteString(out, `{"data":[{"index":0,"embedding":[`); err != nil {
					stopped <- err.Error()
					return
				}
				for {
					if err := r.Context().Err(); err != nil {
						stopped <- err.Error()
						return
					}
					if _, err := out.Write(chunk); err != nil {
						stopped <- err.Error()
						return
					}
					written.Add(int64(len(chunk)))
				}
			}))
			_, err := embedWithin(t, newClient(url, 30*time.Second), texts(1), 0, 20*time.Second)
			checkErr(t, err, embed.ErrBadAnswer, "the answer is larger than", "bytes for 1 texts")
			select {
			case why := <-stopped:
				t.Logf("the handler stopped after %d bytes: %s", written.Load(), why)
			case <-time.After(10 * time.Second):
				t.Fatalf("the handler still writes after %d bytes: the client did not let go of the answer", written.Load())
			}
			if n := written.Load(); n > 1<<30 {
				t.Errorf("got %d bytes written before the client let go, want far fewer than a gigabyte", n)
			}
		})
	}
}

func TestEmbedOnARefusedConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = embedWithin(t, newClient(url, 5*time.Second), texts(1), 0, 10*time.Second)
	checkErr(t, err, embed.ErrUnreachable, "connection refused")
	if got := strings.Count(err.Error(), url); got != 1 {
		t.Errorf("got %q naming the URL %d times, want once", err, got)
	}
}

// request is what a client sends.
type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

// seenRequest is what a server saw of one request.
type seenRequest struct {
	method, path string
	header       http.Header
	body         request
}

// echoServer answers every request with one vector per input, in order:
// input k gets [k+1, len(input k)], so a test can tell them apart. It sends
// what it saw of each request on seen.
func echoServer(tb testing.TB, seen chan<- seenRequest) string {
	tb.Helper()
	return start(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		seen <- seenRequest{r.Method, r.URL.Path, r.Header.Clone(), req}
		entries := make([]string, len(req.Input))
		for k, in := range req.Input {
			entries[k] = entry(k, fmt.Sprintf("[%d,%d]", k+1, len(in)))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, list(entries...))
	}))
}

func TestEmbedSendsTheAPIRequest(t *testing.T) {
	t.Parallel()
	seen := make(chan seenRequest, 1)
	url := echoServer(t, seen)
	c := newClient(url+"/", 5*time.Second)
	if got, want := c.URL(), url+"/embeddings"; got != want {
		t.Errorf("got URL %q, want %q (one slash)", got, want)
	}
	if _, err := c.Embed(t.Context(), []string{"restart the server", "", "  \t", "x"}, 0); err != nil {
		t.Fatal(err)
	}
	r := <-seen
	if r.method != http.MethodPost || r.path != "/v1/embeddings" {
		t.Errorf("got %s %s, want POST /v1/embeddings", r.method, r.path)
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", got)
	}
	if got, want := r.header.Get("Authorization"), "Bearer "+testKey; got != want {
		t.Errorf("got Authorization %q, want %q", got, want)
	}
	want := request{Model: "nomic-embed-text", Input: []string{"restart the server", " ", " ", "x"}, EncodingFormat: "float"}
	if r.body.Model != want.Model || !slices.Equal(r.body.Input, want.Input) || r.body.EncodingFormat != want.EncodingFormat {
		t.Errorf("got request %+v, want %+v (blank texts sent as one space)", r.body, want)
	}
}

func TestEmbedWithoutAKeySendsNoAuthorization(t *testing.T) {
	t.Parallel()
	seen := make(chan seenRequest, 1)
	c := embed.New(embed.Config{BaseURL: echoServer(t, seen), Model: "m"})
	if _, err := c.Embed(t.Context(), []string{"a"}, 0); err != nil {
		t.Fatal(err)
	}
	if got := (<-seen).header.Values("Authorization"); len(got) != 0 {
		t.Errorf("got Authorization %q, want none", got)
	}
}

func TestEmbedReturnsABatchInOrder(t *testing.T) {
	t.Parallel()
	c := newClient(echoServer(t, make(chan seenRequest, 1)), 5*time.Second)
	vecs, err := c.Embed(t.Context(), []string{"a", "bb", "ccc"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{1, 1}, {2, 2}, {3, 3}}
	if !slices.EqualFunc(vecs, want, slices.Equal) {
		t.Errorf("got %v, want %v", vecs, want)
	}
}

func TestEmbedOfNoTextsAsksNothing(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	url := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	vecs, err := newClient(url, time.Second).Embed(t.Context(), nil, 0)
	if vecs != nil || err != nil {
		t.Errorf("got %v, %v, want nil, nil", vecs, err)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("got %d requests, want none", n)
	}
}

func TestEmbedPutsVectorsInInputOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
	}{
		{"reordered indexes 2, 0, 1", list(entry(2, "[3,0.5]"), entry(0, "[1,0.5]"), entry(1, "[2,0.5]"))},
		{"no indexes: in input order", `{"data":[{"embedding":[1,0.5]},{"embedding":[2,0.5]},{"embedding":[3,0.5]}]}`},
		{"a null error beside the data", `{"data":[` + entry(0, "[1,0.5]") + "," + entry(1, "[2,0.5]") + "," + entry(2, "[3,0.5]") + `],"error":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(start(t, answer(200, "application/json", tt.body)), 5*time.Second)
			vecs, err := c.Embed(t.Context(), texts(3), 2)
			if err != nil {
				t.Fatal(err)
			}
			want := [][]float32{{1, 0.5}, {2, 0.5}, {3, 0.5}}
			if !slices.EqualFunc(vecs, want, slices.Equal) {
				t.Errorf("got %v, want %v", vecs, want)
			}
		})
	}
}

func TestEmbedNeverShowsTheKey(t *testing.T) {
	t.Parallel()
	// Each server echoes the Authorization header back, as some proxies
	// and debugging servers do. The message reaches logs and the model's
	// tier line, so the key must not.
	echo := func(status int, prefix string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			msg, _ := json.Marshal(prefix + r.Header.Get("Authorization"))
			answer(status, "application/json", `{"error":{"message":`+string(msg)+`}}`)(w, r)
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		msgs    []string
	}{
		{"401 echoing the header", echo(401, "invalid credentials: "), embed.ErrUnreachable, []string{"401 Unauthorized: invalid credentials: Bearer [redacted]"}},
		{"200 echoing the header", echo(200, "unknown key "), embed.ErrBadAnswer, []string{"an error in a 200 answer: unknown key Bearer [redacted]"}},
		// Clipping a message must not leave the key's first characters.
		{"key across the clip", echo(500, strings.Repeat("x", 180)), embed.ErrUnreachable, []string{"500 Internal Server Error: " + strings.Repeat("x", 180) + "Bearer [redacted]"}},
		{"key in the status line", raw("HTTP/1.1 403 no such key " + testKey + "\r\nContent-Length: 0\r\n\r\n"), embed.ErrUnreachable, []string{"403 no such key [redacted]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := newClient(start(t, tt.handler), 5*time.Second).Embed(t.Context(), texts(1), 0)
			checkErr(t, err, tt.want, tt.msgs...)
		})
	}
}

func TestNormalised(t *testing.T) {
	tests := []struct {
		name string
		v    []float32
		want bool
	}{
		{"unit", []float32{0.6, 0.8}, true},
		{"unit on one axis", []float32{0, -1, 0}, true},
		{"within 1e-3", []float32{0.6, 0.8004}, true},
		{"too long", []float32{1, 1}, false},
		{"too short", []float32{0.3, 0.4}, false},
		{"zero", []float32{0, 0}, false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := embed.Normalised(tt.v); got != tt.want {
				t.Errorf("Normalised(%v): got %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

func TestUnit(t *testing.T) {
	tests := []struct {
		name string
		v    []float32
		want []float32
	}{
		{"scaled down", []float32{3, 4}, []float32{0.6, 0.8}},
		{"scaled up", []float32{0, 0.25}, []float32{0, 1}},
		{"negative", []float32{-2, 0}, []float32{-1, 0}},
		{"zero stays zero", []float32{0, 0}, []float32{0, 0}},
		{"empty", []float32{}, []float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := slices.Clone(tt.v)
			got := embed.Unit(v)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Unit(%v): got %v, want %v", tt.v, got, tt.want)
			}
			if len(v) > 0 && &got[0] != &v[0] {
				t.Errorf("Unit(%v) returned a new slice, want v scaled in place", tt.v)
			}
			if len(v) > 0 && slices.ContainsFunc(tt.v, func(x float32) bool { return x != 0 }) && !embed.Normalised(got) {
				t.Errorf("Unit(%v) = %v is not Normalised", tt.v, got)
			}
		})
	}
}

func ExampleUnit() {
	v := embed.Unit([]float32{3, 4})
	fmt.Println(v, embed.Normalised(v))
	// Output: [0.6 0.8] true
}

func ExampleNormalised() {
	fmt.Println(embed.Normalised([]float32{0.6, 0.8}), embed.Normalised([]float32{3, 4}))
	// Output: true false
}
