package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Cancellations keeps the answer to a cancelled request from being sent.
// The MCP spec says a request cancelled with notifications/cancelled should
// get no response; mcp-go cancels the handler's context (which stops the
// command's process group) but then writes the handler's result anyway.
// Each POSTed request is answered through a [CancelWriter] registered
// under its session and JSON-RPC id; a cancellation marks it, and a marked
// writer drops the JSON-RPC response, letting any notifications through.
//
// It is safe for concurrent use.
type Cancellations struct {
	mu sync.Mutex
	// byKey holds the writers of requests in progress; guarded by mu.
	byKey map[string]*CancelWriter
}

func NewCancellations() *Cancellations {
	return &Cancellations{byKey: map[string]*CancelWriter{}}
}

// requestKey identifies a request: its session and its id, compacted so
// that the id in notifications/cancelled matches however it was spaced.
func requestKey(session string, id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return ""
	}
	return session + "\x00" + b.String()
}

// watch returns the writer through which the request id of session is to
// be answered. Every watch must be followed by [Cancellations.Done].
func (c *Cancellations) Watch(w http.ResponseWriter, session string, id json.RawMessage) *CancelWriter {
	cw := &CancelWriter{ResponseWriter: w, key: requestKey(session, id), id: id}
	if cw.key == "" {
		return cw
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKey[cw.key] = cw
	return cw
}

// cancel marks the request id of session cancelled, if it is in progress.
func (c *Cancellations) Cancel(session string, id json.RawMessage) {
	c.mu.Lock()
	cw := c.byKey[requestKey(session, id)]
	c.mu.Unlock()
	if cw != nil {
		cw.markCancelled()
	}
}

// done forgets cw and sends what it held: the JSON answer, unless the
// request was cancelled, in which case the POST ends with 202 Accepted and
// no body.
func (c *Cancellations) Done(cw *CancelWriter) {
	c.mu.Lock()
	if c.byKey[cw.key] == cw {
		delete(c.byKey, cw.key)
	}
	c.mu.Unlock()
	cw.finish()
}

// CancelWriter answers one POSTed request. A JSON answer is held until the
// handler returns, so a cancellation that arrives meanwhile can still drop
// it; an event stream passes through as it is written, less the event that
// carries the response once the request is cancelled.
type CancelWriter struct {
	http.ResponseWriter
	key string
	id  json.RawMessage
	// Replace, when set, returns the result that takes the place of the
	// handler's in the response, or nil to leave it be: a task-augmented
	// call is answered with its CreateTaskResult (the gateway's tasks).
	Replace func() json.RawMessage

	mu sync.Mutex
	// The fields below are guarded by mu.
	cancelled bool
	// stop, when set, stops the request's handling: for a request the
	// gateway answers itself rather than mcp-go, which would otherwise
	// cancel it (see the gateway's plain tools/call).
	stop    func()
	status  int
	started bool // the header was decided: held (JSON) or passed on
	held    bool
	body    bytes.Buffer
}

func (cw *CancelWriter) markCancelled() {
	cw.mu.Lock()
	cw.cancelled = true
	stop := cw.stop
	cw.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// stopWith makes a cancellation call stop, at once if the request is
// already cancelled.
func (cw *CancelWriter) StopWith(stop func()) {
	cw.mu.Lock()
	cw.stop = stop
	cancelled := cw.cancelled
	cw.mu.Unlock()
	if cancelled {
		stop()
	}
}

// WriteHeader decides, from the content type the handler set, whether the
// answer is held (JSON) or streamed.
func (cw *CancelWriter) WriteHeader(status int) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.writeHeaderLocked(status)
}

func (cw *CancelWriter) writeHeaderLocked(status int) {
	if cw.started {
		return
	}
	cw.started, cw.status = true, status
	if strings.HasPrefix(cw.Header().Get("Content-Type"), "application/json") {
		cw.held = true
		return
	}
	cw.ResponseWriter.WriteHeader(status)
}

func (cw *CancelWriter) Write(p []byte) (int, error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.writeHeaderLocked(http.StatusOK)
	if cw.held {
		return cw.body.Write(p)
	}
	if cw.cancelled && CarriesResponse(p, cw.id) {
		return len(p), nil
	}
	if cw.Replace != nil && CarriesResponse(p, cw.id) {
		if result := cw.Replace(); result != nil {
			if _, err := cw.ResponseWriter.Write(eventWithResult(p, cw.id, result)); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return cw.ResponseWriter.Write(p)
}

// Flush passes a stream's events on; a held answer waits for finish.
func (cw *CancelWriter) Flush() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.held {
		return
	}
	if f, ok := cw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (cw *CancelWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// finish sends a held answer, or 202 for a cancelled one.
func (cw *CancelWriter) finish() {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if !cw.held {
		return
	}
	if cw.cancelled {
		cw.Header().Del("Content-Type")
		cw.Header().Del("Content-Length")
		cw.ResponseWriter.WriteHeader(http.StatusAccepted)
		return
	}
	body := cw.body.Bytes()
	if cw.Replace != nil {
		if result := cw.Replace(); result != nil {
			body = withResult(body, result)
		}
	}
	cw.ResponseWriter.WriteHeader(cw.status)
	_, _ = cw.ResponseWriter.Write(body)
}

// carriesResponse reports whether p, a piece of an event stream, holds the
// JSON-RPC response to the request id: a data line whose message has that
// id and a result or an error, and no method.
func CarriesResponse(p []byte, id json.RawMessage) bool {
	want := requestKey("", id)
	for _, line := range bytes.Split(p, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &m) == nil && m.Method == "" &&
			(m.Result != nil || m.Error != nil) && len(m.ID) > 0 && requestKey("", m.ID) == want {
			return true
		}
	}
	return false
}

// withResult returns the JSON-RPC response msg with its result replaced,
// or msg itself when it is not a result (an error stays an error).
func withResult(msg []byte, result json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["result"] == nil {
		return msg
	}
	m["result"] = result
	b, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	if bytes.HasSuffix(msg, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}

// eventWithResult returns an SSE event whose data is the JSON-RPC response
// to id with its result replaced.
func eventWithResult(p []byte, id, result json.RawMessage) []byte {
	lines := bytes.Split(p, []byte("\n"))
	for i, line := range lines {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || !CarriesResponse(line, id) {
			continue
		}
		lines[i] = append([]byte("data: "), withResult(bytes.TrimSpace(data), result)...)
	}
	return bytes.Join(lines, []byte("\n"))
}
