package mcpserver

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"

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

// callRequest is what [Server.serveToolsCall] reads first of a POSTed
// message: enough to decide, before the full decode.
type callRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// serveToolsCall answers a 2026-07-28 tools/call as described above and
// reports true, or reports false, having written nothing.
func (s *Server) serveToolsCall(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if r.Method != http.MethodPost || !bytes.Contains(body, []byte(mcp.MethodToolsCall)) ||
		r.Header.Get(server.HeaderKeySessionID) != "" || r.Header.Get(mcp.HeaderLastEventID) != "" {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	var head callRequest
	if json.Unmarshal(body, &head) != nil || head.Method != string(mcp.MethodToolsCall) || head.JSONRPC != mcp.JSONRPC_VERSION {
		return false
	}
	switch head.ID.(type) {
	case string, float64:
	default:
		return false
	}
	var req mcp.CallToolRequest
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	meta := req.Params.Meta
	version := meta.ProtocolVersion()
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || header != version ||
		!s.streamable.SupportsProtocolVersion(version) || !mcp.IsValidProtocolVersion(version) || caps == nil ||
		mcp.ValidateStandardHeaders(r.Header.Get, version, mcp.MethodToolsCall, head.Params) != nil {
		return false
	}
	if meta.ProgressToken != nil || req.Params.Task != nil || len(req.Params.InputResponses) > 0 || req.Params.RequestState != "" {
		return false
	}
	e := (*s.entries.Load())[req.Params.Name]
	if e == nil || e.gated || e.headerParams || e.def.Execution != nil && e.def.Execution.TaskSupport == mcp.TaskSupportRequired {
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
	s.inFlight.Add(1)
	res := s.handle(ctx, req.Params.Name, req)
	s.inFlight.Add(-1)
	if ctx.Err() != nil {
		// The client went away: there is no one to answer, as with mcp-go.
		return true
	}
	if res.ResultType == "" {
		res.ResultType = mcp.ResultTypeComplete
	}
	if m := res.EnsureResultMeta(); m != nil && m.ServerInfo() == nil {
		m.SetServerInfo(s.list.impl)
	}
	w.Header()["Content-Type"] = contentJSON
	w.WriteHeader(http.StatusOK)
	if err := json.NewEncoder(w).Encode(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(head.ID), res)); err != nil {
		s.log.Debug("answering tools/call", "agent", s.cfg.Identity, "tool", req.Params.Name, "error", err)
	}
	return true
}

// hasHeaderParams reports whether t's input schema binds a parameter to a
// header (x-mcp-header): calls of such a tool stay with mcp-go, which
// checks that the header and the argument agree.
func hasHeaderParams(t *mcp.Tool) bool {
	b, err := json.Marshal(t.InputSchema)
	return err != nil || bytes.Contains(b, []byte("x-mcp-header")) || bytes.Contains(t.RawInputSchema, []byte("x-mcp-header"))
}
