package mcpserver

import (
	"context"
	"net/http"

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

// serveToolsCall answers a plain tools/call as described above and
// reports true, or reports false, having written nothing. session is the
// live session id the request's session rules passed, "" for a request of
// the 2026-07-28 revision; a session's call is answered through a
// [cancelWriter], whose cancellation stops it as mcp-go's would.
func (s *Server) serveToolsCall(w http.ResponseWriter, r *http.Request, body []byte, session string) bool {
	msg, ok := mcphttp.ReadCall(r, body)
	if !ok {
		return false
	}
	req := msg.Params.Request(msg.Method)
	var ctx context.Context
	if session == "" {
		ctx, ok = s.modernCall(r, &req)
	} else {
		ctx, ok = s.sessionCall(r, msg, &req, session)
	}
	if !ok || !mcphttp.PlainCall(&req) || !s.fastTool(r.Context(), req.Params.Name) {
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
		!mcphttp.StandardHeaders(r.Header, req.Params.Name) {
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
func (s *Server) sessionCall(r *http.Request, msg *mcphttp.CallMessage, req *mcp.CallToolRequest, id string) (context.Context, bool) {
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	if header == "" || mcp.IsModernProtocol(header) || !s.streamable.SupportsProtocolVersion(header) || msg.Params.Named() != 1 {
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
			m.SetServerInfo(s.list.Impl())
		}
	}
	w.Header()["Content-Type"] = mcphttp.ContentJSON
	w.WriteHeader(http.StatusOK)
	// A result that cannot be encoded leaves the body empty, as mcp-go's
	// encoder would.
	answer, err := mcphttp.EncodeResponse(id, res)
	if err == nil {
		_, err = w.Write(answer)
	}
	if err != nil {
		s.log.Debug("answering tools/call", "agent", s.cfg.Identity, "tool", req.Params.Name, "error", err)
	}
}
