package mcphttp

import (
	"context"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A plain tools/call (one that asks for nothing but its result) is
// answered through the same handler mcp-go would call ([Backend.CallTool])
// with the bytes mcp-go would write (TestToolsCallMatchesMCPGo,
// TestSessionToolsCallMatchesMCPGo), so every step of the call core runs
// as before. Everything else goes to mcp-go, which answers it, errors
// included: a malformed request, or one whose headers or protocol version
// mcp-go would refuse; a call with a progressToken (notifications follow,
// on an event stream); a task; the retry of a call that asked for input;
// a tool that is not a [Backend.FastTool]. In the session-based eras also
// a message naming params more than once, a protocol version header that
// is missing or not of those eras, a _meta of the 2026-07-28 era, and a
// session mcp-go has not registered or that has notifications queued.
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

// ServeToolsCall answers a plain tools/call as described above and
// reports true, or reports false, having written nothing. session is the
// live session id the session rules passed, "" for a request of the
// 2026-07-28 revision; a session's call is answered through a
// [CancelWriter], whose cancellation stops it as mcp-go's would.
func (rt *Router) ServeToolsCall(w http.ResponseWriter, r *http.Request, body []byte, session string) bool {
	msg, ok := ReadCall(r, body)
	if !ok {
		return false
	}
	req := msg.Params.Request(msg.Method)
	var ctx context.Context
	if session == "" {
		ctx, ok = rt.modernCall(r, &req)
	} else {
		ctx, ok = rt.sessionCall(r, msg, &req, session)
	}
	if !ok || !PlainCall(&req) || !rt.Backend.FastTool(r.Context(), req.Params.Name) {
		return false
	}
	req.Header = r.Header
	if session != "" {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		if cw, ok := w.(*CancelWriter); ok {
			cw.StopWith(stop)
		}
	}
	res := rt.Backend.CallTool(ctx, req.Params.Name, req, nil)
	if r.Context().Err() != nil {
		// A client gone by the end gets nothing, as with mcp-go.
		return true
	}
	if session == "" {
		if res.ResultType == "" {
			res.ResultType = mcp.ResultTypeComplete
		}
		if m := res.EnsureResultMeta(); m != nil && m.ServerInfo() == nil {
			m.SetServerInfo(rt.List.Impl())
		}
	}
	w.Header()["Content-Type"] = contentJSON
	w.WriteHeader(http.StatusOK)
	// A result that cannot be encoded leaves the body empty, as mcp-go's
	// encoder would.
	answer, err := EncodeResponse(msg.ID, res)
	if err == nil {
		_, err = w.Write(answer)
	}
	if err != nil {
		rt.Log.Debug("answering tools/call", "agent", rt.Identity, "tool", req.Params.Name, "error", err)
	}
	return true
}

// modernCall is the context of a 2026-07-28 call, or false when mcp-go is
// to answer it: a session id, or a version, capabilities or standard
// headers mcp-go would refuse.
func (rt *Router) modernCall(r *http.Request, req *mcp.CallToolRequest) (context.Context, bool) {
	if r.Header.Get(server.HeaderKeySessionID) != "" {
		return nil, false
	}
	meta := req.Params.Meta
	version := meta.ProtocolVersion()
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || r.Header.Get(mcp.HeaderProtocolVersion) != version ||
		!rt.Streamable.SupportsProtocolVersion(version) || !mcp.IsValidProtocolVersion(version) || caps == nil ||
		!StandardHeaders(r.Header, req.Params.Name) {
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
func (rt *Router) sessionCall(r *http.Request, msg *CallMessage, req *mcp.CallToolRequest, id string) (context.Context, bool) {
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	if header == "" || mcp.IsModernProtocol(header) || !rt.Streamable.SupportsProtocolVersion(header) || msg.Params.Named() != 1 {
		return nil, false
	}
	version := req.Params.Meta.ProtocolVersion()
	if mcp.IsModernProtocol(version) {
		return nil, false
	}
	v, ok := rt.clientSessions.Load(id)
	if !ok {
		return nil, false
	}
	cs := v.(server.ClientSession)
	if len(cs.NotificationChannel()) > 0 {
		return nil, false
	}
	ctx := rt.MCP.WithContext(r.Context(), cs)
	return server.WithRequestProtocolInfo(ctx, &server.RequestProtocolInfo{ProtocolVersion: version}), true
}

// ClientSession reports whether mcp-go has registered session id.
func (rt *Router) ClientSession(id string) bool {
	_, ok := rt.clientSessions.Load(id)
	return ok
}
