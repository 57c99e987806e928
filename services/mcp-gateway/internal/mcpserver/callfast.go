package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The 2026-07-28 revision made a tools/call self-contained: one POST, one
// JSON answer, no session. For that case mcp-go's transport still does
// what the session-based eras need (an ephemeral session, a goroutine to
// forward notifications, the message parsed three times over), which the
// benchmark's stage breakdown puts at about a round trip of the transport
// per call. serveToolsCall answers such a call itself when nothing of that
// is needed, calling the same handler mcp-go would, so every check of the
// call path (the policy, the input schema, the slots, the audit record)
// runs as before, and writing the same bytes mcp-go would write
// (TestToolsCallMatchesMCPGo holds it to that).
//
// Everything else goes to mcp-go, which answers it, errors included: a
// session-based request, a malformed one, or one whose headers or
// protocol version mcp-go would refuse; a call with a progressToken
// (notifications follow, on an event stream); a task; the retry of a
// call that asked for input; a tool that is gated (the approval asks for
// input), unknown, task-only, or whose schema binds parameters to
// headers.

// callMessage is a POSTed message as [Server.serveToolsCall] reads it, in
// one decode: the JSON-RPC envelope and a tools/call's params.
type callMessage struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      any        `json:"id"`
	Method  string     `json:"method"`
	Params  callParams `json:"params"`
}

// serveToolsCall answers a 2026-07-28 tools/call as described above and
// reports true, or reports false, having written nothing.
func (s *Server) serveToolsCall(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Header.Get(server.HeaderKeySessionID) != "" {
		return false
	}
	msg, ok := readCall(r, body)
	if !ok {
		return false
	}
	req := msg.Params.request(msg.Method)
	meta := req.Params.Meta
	version := meta.ProtocolVersion()
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || header != version ||
		!s.streamable.SupportsProtocolVersion(version) || !mcp.IsValidProtocolVersion(version) || caps == nil ||
		!standardHeaders(r.Header, req.Params.Name) {
		return false
	}
	if !plainCall(&req) || !s.fastTool(r.Context(), req.Params.Name) {
		return false
	}
	req.Header = r.Header
	info := &server.RequestProtocolInfo{
		Modern:             true,
		ProtocolVersion:    version,
		ClientInfo:         meta.ClientInfo(),
		ClientCapabilities: caps,
		LogLevel:           meta.LogLevel(),
	}
	ctx := server.WithRequestProtocolInfo(r.Context(), info)
	s.answerCall(ctx, w, r, msg.ID, req, true)
	return true
}

// readCall decodes a POSTed tools/call for either fast path, reporting
// false for anything else: another method or verb, a body that is not
// JSON, a resumption (Last-Event-ID), an id that is neither a string nor
// a number.
func readCall(r *http.Request, body []byte) (*callMessage, bool) {
	if r.Method != http.MethodPost || !bytes.Contains(body, []byte(mcp.MethodToolsCall)) || r.Header.Get(mcp.HeaderLastEventID) != "" {
		return nil, false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, false
	}
	msg := &callMessage{}
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

// plainCall reports whether req asks for nothing but its result: no
// progress notifications, no task, not the retry of a call that asked for
// input.
func plainCall(req *mcp.CallToolRequest) bool {
	p := &req.Params
	return (p.Meta == nil || p.Meta.ProgressToken == nil) && p.Task == nil && len(p.InputResponses) == 0 && p.RequestState == ""
}

// fastTool reports whether calls of name may be answered on a fast path:
// a served tool the caller of ctx may see (mcp-go answers a hidden one as
// unknown), not gated (its approval asks for input), not task-only, and
// binding no parameter to a header.
func (s *Server) fastTool(ctx context.Context, name string) bool {
	e := (*s.entries.Load())[name]
	return e != nil && !e.Gated && !e.headerParams && (e.def.Execution == nil || e.def.Execution.TaskSupport != mcp.TaskSupportRequired) && !s.hidden(ctx, e)
}

// answerCall runs req, a call of the tools/call id, under ctx, and writes
// its JSON-RPC answer as mcp-go would: with the 2026-07-28 era's result
// type and server info when modern. A client gone by the end gets nothing,
// as with mcp-go.
func (s *Server) answerCall(ctx context.Context, w http.ResponseWriter, r *http.Request, id any, req mcp.CallToolRequest, modern bool) {
	res := s.callTool(ctx, req.Params.Name, req, nil)
	if r.Context().Err() != nil {
		return
	}
	if modern {
		if res.ResultType == "" {
			res.ResultType = mcp.ResultTypeComplete
		}
		if m := res.EnsureResultMeta(); m != nil && m.ServerInfo() == nil {
			m.SetServerInfo(s.list.impl)
		}
	}
	w.Header()["Content-Type"] = contentJSON
	w.WriteHeader(http.StatusOK)
	// A result that cannot be encoded leaves the body empty, as mcp-go's
	// encoder would.
	answer, err := encodeResponse(id, res)
	if err == nil {
		_, err = w.Write(answer)
	}
	if err != nil {
		s.log.Debug("answering tools/call", "agent", s.cfg.Identity, "tool", req.Params.Name, "error", err)
	}
}

// callParams is what the fast path decodes of a tools/call's params:
// mcp.CallToolParams as mcp-go reads it off the wire, but with the
// arguments kept as the raw bytes the call path takes
// ([callInput]) and not also decoded into a map nothing here reads.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      *mcp.Meta       `json:"_meta,omitempty"`
	Task      *mcp.TaskParams `json:"task,omitempty"`
	mcp.MultiRoundTripParams
	// named counts the params members of the message: more than one is
	// left to mcp-go on the session-based path, where its decoders do not
	// all agree on what such a message says.
	named int
}

// UnmarshalJSON decodes params as mcp.CallToolParams does, so that every
// message reads as it does for mcp-go: arguments with a number mcp-go's
// map cannot hold fail the decode (see [numbersFit]), and a message naming
// params more than once has each occurrence set every field but the
// arguments, which one without any leaves as they were.
func (p *callParams) UnmarshalJSON(data []byte) error {
	type fields callParams // without this method
	var f fields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	if len(f.Arguments) > 0 && !numbersFit(f.Arguments) {
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

// standardHeaders reports whether a 2026-07-28 tools/call's standard
// headers agree with its body, whose params name the tool name: what
// mcp.ValidateStandardHeaders checks, without decoding the params once
// more for the name.
func standardHeaders(h http.Header, name string) bool {
	if h.Get(mcp.HeaderMethod) != string(mcp.MethodToolsCall) {
		return false
	}
	encoded := h.Get(mcp.HeaderName)
	decoded, ok := mcp.DecodeHeaderValue(encoded)
	return encoded != "" && ok && decoded == name
}

// numbersFit reports whether every number in raw, valid JSON, fits a
// float64, as it must for mcp-go's decoding of a call's arguments into a
// map (strconv.ParseFloat, as encoding/json parses them): the fast path
// does not make that map, and leaves a call mcp-go refuses to it.
func numbersFit(raw []byte) bool {
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

// request is the mcp.CallToolRequest the call path takes.
func (p *callParams) request(method string) mcp.CallToolRequest {
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

// encodeResponse returns the JSON-RPC response carrying res: the bytes
// json.Encoder writes for mcp.NewJSONRPCResultResponse(id, res), built
// without the encoder's reflection over the envelope. The result is
// written as its own MarshalJSON would write it ([appendResult]), compact
// and already HTML-escaped, which is all the encoder would do to it.
func encodeResponse(id any, res *mcp.CallToolResult) ([]byte, error) {
	rid, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(512)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(rid)
	buf.WriteString(`,"result":`)
	if err := appendResult(&buf, res); err != nil {
		return nil, err
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// appendResult writes to b the bytes of r.MarshalJSON() without the map
// that method builds and sorts for every result: the same members, under
// the same conditions, written in the order json.Marshal sorts the map's
// keys, each value encoded as the map's encoder encodes it (HTML-escaped,
// a json.RawMessage compacted), so the bytes are the same
// (TestAppendResult). On an error, b holds part of a result.
func appendResult(b *bytes.Buffer, r *mcp.CallToolResult) error {
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

// hasHeaderParams reports whether t's input schema binds a parameter to a
// header (x-mcp-header): calls of such a tool stay with mcp-go, which
// checks that the header and the argument agree.
func hasHeaderParams(t *mcp.Tool) bool {
	b, err := json.Marshal(t.InputSchema)
	return err != nil || bytes.Contains(b, []byte("x-mcp-header")) || bytes.Contains(t.RawInputSchema, []byte("x-mcp-header"))
}
