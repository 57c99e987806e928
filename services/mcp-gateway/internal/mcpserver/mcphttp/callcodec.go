package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// CallMessage is a POSTed message as the gateway's plain tools/call path reads it, in
// one decode: the JSON-RPC envelope and a tools/call's params.
type CallMessage struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      any        `json:"id"`
	Method  string     `json:"method"`
	Params  CallParams `json:"params"`
}

// ReadCall decodes a POSTed tools/call for either fast path, reporting
// false for anything else: another method or verb, a body that is not
// JSON, a resumption (Last-Event-ID), an id that is neither a string nor
// a number.
func ReadCall(r *http.Request, body []byte) (*CallMessage, bool) {
	if r.Method != http.MethodPost || !bytes.Contains(body, []byte(mcp.MethodToolsCall)) || r.Header.Get(mcp.HeaderLastEventID) != "" {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	msg := &CallMessage{}
	if json.Unmarshal(body, msg) != nil || msg.Method != string(mcp.MethodToolsCall) || msg.JSONRPC != mcp.JSONRPC_VERSION {
		return nil, false
	}
	switch msg.ID.(type) {
	case string, float64:
	default:
		return nil, false
	}
	return msg, true
}

// PlainCall reports whether req asks for nothing but its result: no
// progress notifications, no task, not the retry of a call that asked for
// input.
func PlainCall(req *mcp.CallToolRequest) bool {
	p := &req.Params
	return (p.Meta == nil || p.Meta.ProgressToken == nil) && p.Task == nil && len(p.InputResponses) == 0 && p.RequestState == ""
}

// CallParams is what the fast path decodes of a tools/call's params:
// mcp.CallToolParams as mcp-go reads it off the wire, but with the
// arguments kept as the raw bytes the call path takes
//
//	and not also decoded into a map nothing here reads.
type CallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *mcp.Meta       `json:"_meta,omitempty"`
	Task      *mcp.TaskParams `json:"task,omitempty"`
	mcp.MultiRoundTripParams
	// named counts the params members of the message: more than one is
	// left to mcp-go on the session-based path, where its decoders do not
	// all agree on what such a message says ([CallParams.Named]).
	named int
}

// UnmarshalJSON decodes params as mcp.CallToolParams does, so that every
// message reads as it does for mcp-go: arguments with a number mcp-go's
// map cannot hold fail the decode (see [NumbersFit]), and a message naming
// params more than once has each occurrence set every field but the
// arguments, which one without any leaves as they were.
func (p *CallParams) UnmarshalJSON(data []byte) error {
	type fields CallParams // without this method
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	if len(f.Arguments) > 0 && !NumbersFit(f.Arguments) {
		return errNumberRange
	}
	p.Name, p.Meta, p.Task, p.MultiRoundTripParams = f.Name, f.Meta, f.Task, f.MultiRoundTripParams
	p.named++
	if len(f.Arguments) > 0 {
		p.Arguments = f.Arguments
	}
	return nil
}

// errNumberRange is a call's arguments holding a number beyond float64:
// mcp-go refuses the request, and so answers it.
var errNumberRange = errors.New("arguments: a number out of float64's range")

// StandardHeaders reports whether a 2026-07-28 tools/call's standard
// headers agree with its body, whose params name the tool name: what
// mcp.ValidateStandardHeaders checks, without decoding the params once
// more for the name.
func StandardHeaders(h http.Header, name string) bool {
	if h.Get(mcp.HeaderMethod) != string(mcp.MethodToolsCall) {
		return false
	}
	encoded := h.Get(mcp.HeaderName)
	decoded, ok := mcp.DecodeHeaderValue(encoded)
	return encoded != "" && ok && decoded == name
}

// NumbersFit reports whether every number in raw, valid JSON, fits a
// float64, as it must for mcp-go's decoding of a call's arguments into a
// map (strconv.ParseFloat, as encoding/json parses them): the fast path
// does not make that map, and leaves a call mcp-go refuses to it.
func NumbersFit(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			// Skip the string, escapes and all.
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(string(raw[i:j]), 64); err != nil {
				return false
			}
			i = j - 1
		}
	}
	return true
}

// Request is the mcp.CallToolRequest the call path takes.
func (p *CallParams) Request(method string) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Method = method
	req.Params = mcp.CallToolParams{
		Name: p.Name, Meta: p.Meta, Task: p.Task, MultiRoundTripParams: p.MultiRoundTripParams,
	}
	if len(p.Arguments) > 0 {
		req.Params.RawArguments = p.Arguments
	}
	return req
}

// EncodeResponse returns the JSON-RPC response carrying res: the bytes
// json.Encoder writes for mcp.NewJSONRPCResultResponse(id, res), built
// without the encoder's reflection over the envelope. The result is
// written as its own MarshalJSON would write it ([AppendResult]), compact
// and already HTML-escaped, which is all the encoder would do to it.
func EncodeResponse(id any, res *mcp.CallToolResult) ([]byte, error) {
	rid, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(512)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(rid)
	buf.WriteString(`,"result":`)
	if err := AppendResult(&buf, res); err != nil {
		return nil, err
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// AppendResult writes to b the bytes of r.MarshalJSON() without the map
// that method builds and sorts for every result: the same members, under
// the same conditions, written in the order json.Marshal sorts the map's
// keys, each value encoded as the map's encoder encodes it (HTML-escaped,
// a json.RawMessage compacted), so the bytes are the same
// (TestAppendResult). On an error, b holds part of a result.
func AppendResult(b *bytes.Buffer, r *mcp.CallToolResult) error {
	// An Encoder writes each value straight into b, escaping as
	// json.Marshal does, and ends it with a newline, dropped here.
	enc := json.NewEncoder(b)
	sep := byte('{')
	member := func(key string, v any) error {
		b.WriteByte(sep)
		sep = ','
		b.WriteString(key)
		b.WriteByte(':')
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Truncate(b.Len() - 1)
		return nil
	}
	// As in MarshalJSON: content is always present, an empty list when
	// there is none.
	content := make([]any, len(r.Content))
	for i, c := range r.Content {
		content[i] = c
	}
	var structured any
	if len(r.RawStructuredContent) > 0 {
		structured = json.RawMessage(r.RawStructuredContent)
	} else if r.StructuredContent != nil {
		structured = r.StructuredContent
	}
	// The members in the map's sorted key order.
	for _, m := range [...]struct {
		key     string
		present bool
		value   any
	}{
		{`"_meta"`, r.Meta != nil, r.Meta},
		{`"content"`, true, content},
		{`"inputRequests"`, len(r.InputRequests) > 0, r.InputRequests},
		{`"isError"`, r.IsError, true},
		{`"requestState"`, r.RequestState != "", r.RequestState},
		{`"resultType"`, r.ResultType != "", r.ResultType},
		{`"structuredContent"`, structured != nil, structured},
	} {
		if !m.present {
			continue
		}
		if err := member(m.key, m.value); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// HasHeaderParams reports whether t's input schema binds a parameter to a
// header (x-mcp-header): calls of such a tool stay with mcp-go, which
// checks that the header and the argument agree.
func HasHeaderParams(t *mcp.Tool) bool {
	b, err := json.Marshal(t.InputSchema)
	return err != nil || bytes.Contains(b, []byte("x-mcp-header")) || bytes.Contains(t.RawInputSchema, []byte("x-mcp-header"))
}

// Named is how many times the message named params.
func (p *CallParams) Named() int { return p.named }
