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

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/mcphttp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A plain tools/call (one that asks for nothing but its result) needs
// nothing of mcp-go's per-request machinery: in the 2026-07-28 revision
// mcp-go still makes an ephemeral session and a goroutine to forward
// notifications and parses the message three times over, and in the
// session-based eras it decodes the message five times and forwards the
// session's notifications onto the request's own stream, which the
// benchmark's stage breakdown puts at about a round trip of the transport
// per call. serveToolsCall answers such a call itself, through the same
// handler mcp-go would call ([Server.callTool]), so every step of the
// call core (the policy, the input schema, the slots, the audit record)
// runs as before, and writes the bytes mcp-go would write
// (TestToolsCallMatchesMCPGo, TestSessionToolsCallMatchesMCPGo).
//
// Everything else goes to mcp-go, which answers it, errors included: a
// malformed request, or one whose headers or protocol version mcp-go
// would refuse; a call with a progressToken (notifications follow, on an
// event stream); a task; the retry of a call that asked for input; a tool
// that is gated (the approval asks for input), unknown, task-only, or
// whose schema binds parameters to headers. In the session-based eras
// also a message naming params more than once, a protocol version header
// that is missing or not of those eras, a _meta of the 2026-07-28 era,
// and a session mcp-go has not registered or that has notifications
// queued.
//
// In the session-based eras it differs from mcp-go in where a session's
// notifications go, never in what a call does or what its answer says.
// mcp-go writes those queued for the session (a tools/list_changed, say)
// onto whichever request of the session runs when they come, turning its
// answer into an event stream; the session's own stream (GET) takes them
// otherwise. Here a call leaves them to that stream, or to the session's
// next request that mcp-go answers: a call that finds any queued goes to
// mcp-go, which delivers them. For the same reason a call is answered as
// JSON where mcp-go, once it has sent the session any notification,
// answers every later request as an event stream: the transport lets a
// server answer a request either way, and requires a client to take both.

// callMessage is a POSTed message as [Server.serveToolsCall] reads it, in
// one decode: the JSON-RPC envelope and a tools/call's params.
type callMessage struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      any        `json:"id"`
	Method  string     `json:"method"`
	Params  callParams `json:"params"`
}

// serveToolsCall answers a plain tools/call as described above and
// reports true, or reports false, having written nothing. session is the
// live session id the request's session rules passed, "" for a request of
// the 2026-07-28 revision; a session's call is answered through a
// [cancelWriter], whose cancellation stops it as mcp-go's would.
func (s *Server) serveToolsCall(w http.ResponseWriter, r *http.Request, body []byte, session string) bool {
	msg, ok := readCall(r, body)
	if !ok {
		return false
	}
	req := msg.Params.request(msg.Method)
	var ctx context.Context
	if session == "" {
		ctx, ok = s.modernCall(r, &req)
	} else {
		ctx, ok = s.sessionCall(r, msg, &req, session)
	}
	if !ok || !plainCall(&req) || !s.fastTool(r.Context(), req.Params.Name) {
		return false
	}
	req.Header = r.Header
	if session != "" {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		if cw, ok := w.(*mcphttp.CancelWriter); ok {
			cw.StopWith(stop)
		}
	}
	s.answerCall(ctx, w, r, msg.ID, req, session == "")
	return true
}

// modernCall is the context of a 2026-07-28 call, or false when mcp-go is
// to answer it: a session id, or a version, capabilities or standard
// headers mcp-go would refuse.
func (s *Server) modernCall(r *http.Request, req *mcp.CallToolRequest) (context.Context, bool) {
	if r.Header.Get(server.HeaderKeySessionID) != "" {
		return nil, false
	}
	meta := req.Params.Meta
	version := meta.ProtocolVersion()
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || r.Header.Get(mcp.HeaderProtocolVersion) != version ||
		!s.streamable.SupportsProtocolVersion(version) || !mcp.IsValidProtocolVersion(version) || caps == nil ||
		!standardHeaders(r.Header, req.Params.Name) {
		return nil, false
	}
	return server.WithRequestProtocolInfo(r.Context(), &server.RequestProtocolInfo{
		Modern:             true,
		ProtocolVersion:    version,
		ClientInfo:         meta.ClientInfo(),
		ClientCapabilities: caps,
		LogLevel:           meta.LogLevel(),
	}), true
}

// sessionCall is the context of a call of the live session id in a
// session-based era, carrying the session mcp-go would give its handler
// (so the log line and the audit record name the negotiated protocol), or
// false when mcp-go is to answer it.
func (s *Server) sessionCall(r *http.Request, msg *callMessage, req *mcp.CallToolRequest, id string) (context.Context, bool) {
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	if header == "" || mcp.IsModernProtocol(header) || !s.streamable.SupportsProtocolVersion(header) || msg.Params.named != 1 {
		return nil, false
	}
	version := req.Params.Meta.ProtocolVersion()
	if mcp.IsModernProtocol(version) {
		return nil, false
	}
	v, ok := s.clientSessions.Load(id)
	if !ok {
		return nil, false
	}
	cs := v.(server.ClientSession)
	if len(cs.NotificationChannel()) > 0 {
		return nil, false
	}
	ctx := s.mcp.WithContext(r.Context(), cs)
	return server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{ProtocolVersion: version}), true
}

// sessionHooks keeps the sessions mcp-go registers, by id, for the calls
// served without it.
func (s *Server) sessionHooks(h *server.Hooks) {
	h.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) {
		s.clientSessions.Store(cs.SessionID(), cs)
	})
	h.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		s.clientSessions.CompareAndDelete(cs.SessionID(), cs)
	})
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
