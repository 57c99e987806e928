package mcpserver

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The session-based eras (before 2026-07-28) are what the MCP clients in
// use today speak. mcp-go answers each of their tools/call requests with
// machinery a plain call does not use: the message decoded five times
// over, a goroutine to forward the session's notifications onto the
// request's own event stream, and the bookkeeping of server requests that
// could ride it. serveSessionToolsCall answers such a call itself when
// none of that can be needed, calling the handler mcp-go would, in the
// session mcp-go would give it (so the log line and the audit record name
// the negotiated protocol), and writing the bytes mcp-go would write
// (TestSessionToolsCallMatchesMCPGo).
//
// It differs from mcp-go in where a session's notifications go, never in
// what a call does or what its answer says. mcp-go writes those queued for the session
// (a tools/list_changed, say) onto whichever request of the session runs
// when they come, turning its answer into an event stream; the session's
// own stream (GET) takes them otherwise. Here a call leaves them to that
// stream, or to the session's next request that mcp-go answers: a call
// that finds any queued goes to mcp-go, which delivers them. For the same
// reason a call is answered as JSON where mcp-go, once it has sent the
// session any notification, answers every later request as an event
// stream: the transport lets a server answer a request either way, and
// requires a client to take both.
//
// What it leaves to mcp-go is what [Server.serveToolsCall] leaves (a
// progress token, a task, a gated, unknown or task-only tool, a header
// parameter), and: a message naming params more than once, a protocol
// version header that is missing or not of a session-based era, a _meta
// of the 2026-07-28 era, a session mcp-go has not registered.

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

// serveSessionToolsCall answers a tools/call of the live session id, whose
// session rules have passed, through cw, as described above, and reports
// true; or reports false, having written nothing. A cancellation of the
// request through cw stops the call, as mcp-go's would.
func (s *Server) serveSessionToolsCall(cw *cancelWriter, r *http.Request, body []byte, id string) bool {
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	if header == "" || mcp.IsModernProtocol(header) || !s.streamable.SupportsProtocolVersion(header) {
		return false
	}
	msg, ok := readCall(r, body)
	if !ok || msg.Params.named != 1 {
		return false
	}
	req := msg.Params.request(msg.Method)
	version := req.Params.Meta.ProtocolVersion()
	if mcp.IsModernProtocol(version) || !plainCall(&req) || !s.fastTool(r.Context(), req.Params.Name) {
		return false
	}
	v, ok := s.clientSessions.Load(id)
	if !ok {
		return false
	}
	cs := v.(server.ClientSession)
	if len(cs.NotificationChannel()) > 0 {
		return false
	}
	req.Header = r.Header
	ctx := s.mcp.WithContext(r.Context(), cs)
	ctx = server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{ProtocolVersion: version})
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	cw.stopWith(stop)
	s.answerCall(ctx, cw, r, msg.ID, req, false)
	return true
}
