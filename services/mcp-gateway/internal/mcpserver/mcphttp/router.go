package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/toolslist"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
)

// CodeRateLimited is the JSON-RPC error of a call over its caller's
// rate. MCP names no code for it; this is the one other MCP gateways
// answer (toolhive), with the wait in data.retryAfterSeconds.
const CodeRateLimited = -32029

// Backend is the MCP server behind a [Router]: the tool handler mcp-go
// calls, which the router also calls for the requests it answers itself.
type Backend interface {
	// CallTool runs the tools/call req of name and answers with its
	// result; cleared, when set, is told once the call is about to run.
	CallTool(ctx context.Context, name string, req mcp.CallToolRequest, cleared func()) *mcp.CallToolResult
	// FastTool reports whether the caller of ctx may have calls of name
	// answered without mcp-go: a served tool it may see, not gated, not
	// task-only, binding no parameter to a header.
	FastTool(ctx context.Context, name string) bool
}

// Router is the gateway's MCP endpoint: mcp-go's streamable server behind
// the rules and answers of this package (see the package doc). Set every
// field before the first request; [Router.Hooks] must be among the hooks
// of MCP.
type Router struct {
	Identity string
	Log      *slog.Logger
	Backend  Backend
	// Core is the call core, for the caller's grant and rate.
	Core *call.Core
	// Tasks runs the MCP tasks; TaskRetention caps the ttl a task may ask.
	Tasks         *tasks.Manager
	TaskRetention time.Duration
	// Authenticated is set when callers are authenticated (a shared token
	// or OAuth), so that tasks belong to callers, not sessions.
	Authenticated bool

	Sessions   *Sessions
	Cancels    *Cancellations
	List       *toolslist.Cache
	MCP        *server.MCPServer
	Streamable *server.StreamableHTTPServer

	// clientSessions holds mcp-go's registered sessions by id, for the
	// calls served without it (call.go).
	clientSessions sync.Map
}

// ServeHTTP decodes each POSTed message once, then applies, for the
// session-based protocol eras (before 2026-07-28; requests of the
// sessionless era pass untouched), the session rules mcp-go v1.2.1 does
// not:
//
//   - an id the gateway did not issue, or has forgotten, is 404 on every
//     method (mcp-go opens a fresh stream for a GET of one, and answers a
//     DELETE with 200), and a missing one 400;
//   - a session idle longer than expose.agent.mcp.session_idle_timeout is
//     ended, through mcp-go's own DELETE path, and at most
//     expose.agent.mcp.max_sessions live at once: an initialize beyond
//     the cap gets 503, never a session in use evicted;
//   - a session is bound to the caller that opened it ([Sessions]);
//   - the answer to a cancelled request is not sent ([Cancellations]);
//   - MCP tasks are served here (task.go).
//
// Then, in both eras, a call over its rate is refused, and tools/list and
// a plain tools/call are answered without mcp-go ([toolslist.Cache.Serve],
// [Router.ServeToolsCall]). Each rule is tested through a real HTTP
// client, so that a test passing without it says mcp-go has caught up.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Method == http.MethodPost {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	next := rt.Streamable
	var msg message
	valid := r.Method == http.MethodPost && json.Unmarshal(body, &msg) == nil
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		if rt.serveToolsList(w, r, body) || valid && rt.limitCall(w, r, &msg) || rt.ServeToolsCall(w, r, body, "") {
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	if r.Method == http.MethodPost && (!valid || msg.modern()) {
		// Not JSON-RPC (mcp-go answers the parse error) or a
		// sessionless-era message.
		if !rt.serveToolsList(w, r, body) {
			next.ServeHTTP(w, r)
		}
		return
	}
	subject := subjectOf(r)
	switch {
	case r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodDelete:
		next.ServeHTTP(w, r)
		return
	case r.Method == http.MethodPost && msg.Method == string(mcp.MethodInitialize) && id == "":
		if rt.Sessions.Full() {
			rt.Log.Warn("refused a new MCP session: the session limit is reached", "agent", rt.Identity, "max_sessions", rt.Sessions.Max())
			http.Error(w, fmt.Sprintf("too many MCP sessions (%d live): try again later, or raise expose.agent.mcp.max_sessions", rt.Sessions.Max()), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(rt.Sessions.Binding(w, subject), r)
		return
	case r.Method == http.MethodPost && msg.Method == "":
		// A response to a server request, which mcp-go matches by
		// session itself (and a ping answer needs none). It must come
		// from the session's owner: an answer is what approves a gated
		// call, and mcp-go numbers its requests from 1, so anyone
		// holding a leaked session id could otherwise answer another
		// caller's approval form.
		if id != "" && !rt.Sessions.Owns(id, subject) {
			http.Error(w, errSessionNotFound, http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
		return
	case id == "":
		http.Error(w, "bad request: missing Mcp-Session-Id header; send initialize first", http.StatusBadRequest)
		return
	case !rt.Sessions.Begin(id, subject):
		http.Error(w, errSessionNotFound, http.StatusNotFound)
		return
	}
	defer rt.Sessions.End(id)
	switch {
	case msg.Method == string(mcp.MethodToolsCall) && rt.limitCall(w, r, &msg),
		// Answered from the kept lists, before the cancellation watch:
		// there is nothing to cancel in writing kept bytes.
		msg.Method == string(mcp.MethodToolsList) && rt.serveToolsList(w, r, body):
		return
	case msg.Method == string(mcp.MethodInitialize):
		// A client may initialize again on a session it holds; the new
		// session is bound to it as well.
		w = rt.Sessions.Binding(w, subject)
	case msg.Method == string(mcp.MethodNotificationCancelled):
		rt.Cancels.Cancel(id, msg.Params.RequestID)
	case r.Method == http.MethodPost && isTaskMethod(msg.Method):
		rt.serveTaskMethod(w, r, rt.taskOwner(r, id), &msg)
		return
	}
	if r.Method != http.MethodPost || len(msg.ID) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	var tr *taskRequest
	if msg.Method == string(mcp.MethodToolsCall) {
		var ok bool
		if tr, ok = rt.taskCall(w, r, rt.taskOwner(r, id), id, &msg); !ok {
			return
		}
	}
	if tr != nil {
		// Runs last, after the answer is written: the room goes back
		// unless the call became a task.
		defer tr.room.Release()
	}
	cw := rt.Cancels.Watch(w, id, msg.ID)
	defer rt.Cancels.Done(cw)
	if tr != nil {
		cw.Replace = tr.result
		next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), taskRequestKey{}, tr)))
		return
	}
	if msg.Method != string(mcp.MethodToolsCall) || !rt.ServeToolsCall(cw, r, body, id) {
		next.ServeHTTP(cw, r)
	}
}

const errSessionNotFound = "session not found: it was deleted, expired or never issued; send initialize to start a new one"

// subjectOf is the subject of the request's caller, "" when it has none
// (a router used without its authentication layer).
func subjectOf(r *http.Request) string {
	if c := auth.CallerFrom(r.Context()); c != nil {
		return c.Subject
	}
	return ""
}

// message is what the router reads of a POSTed message, in one decode:
// what the session rules, the rate limit, tasks and cancellations decide
// on. A path that must read the message exactly as mcp-go does (the plain
// tools/call, the kept tools/list) reads its own part.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		// Meta is read only by [message.modern]: a malformed _meta is
		// mcp-go's to refuse, and must not keep a call from its rate.
		Meta      json.RawMessage `json:"_meta"`
		RequestID json.RawMessage `json:"requestId"`
		// Name and Arguments are a tools/call's, raw: a name that is not
		// a string is mcp-go's to refuse, not the router's.
		Name      json.RawMessage `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Task is a tools/call's task parameter; TaskID and Cursor are
		// those of the tasks/* methods.
		Task   json.RawMessage `json:"task"`
		TaskID json.RawMessage `json:"taskId"`
		Cursor json.RawMessage `json:"cursor"`
	} `json:"params"`
}

// modern reports whether the message declares the sessionless era in its
// _meta, as mcp-go also accepts, or has a _meta mcp-go cannot read (which
// it refuses whatever the session).
func (m *message) modern() bool {
	if len(m.Params.Meta) == 0 {
		return false
	}
	var meta *mcp.Meta
	if json.Unmarshal(m.Params.Meta, &meta) != nil {
		return true
	}
	return meta != nil && mcp.IsModernProtocol(meta.ProtocolVersion())
}

// limitCall answers a tools/call over its caller's rate with the JSON-RPC
// error CodeRateLimited, its wait in data.retryAfterSeconds and a
// Retry-After header, and reports true; anything else it leaves to the
// rest of the router, having written nothing. It runs in both eras before
// the call is answered or made a task, and only when the policy sets a
// rate.
func (rt *Router) limitCall(w http.ResponseWriter, r *http.Request, msg *message) bool {
	if !rt.Core.Rated() || msg.Method != string(mcp.MethodToolsCall) || len(msg.ID) == 0 {
		return false
	}
	var name string
	if json.Unmarshal(msg.Params.Name, &name) != nil {
		return false
	}
	v := rt.Core.Limit(r.Context(), &call.Request{
		Tool:     name,
		Args:     msg.Params.Arguments,
		Caller:   auth.CallerFrom(r.Context()),
		Protocol: r.Header.Get(mcp.HeaderProtocolVersion),
		Header:   r.Header,
	})
	if v == nil {
		return false
	}
	WriteRPC(w, RPCAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: msg.ID, Error: &mcp.JSONRPCErrorDetails{
		Code:    CodeRateLimited,
		Message: v.Message,
		Data:    map[string]any{"retryAfterSeconds": v.RetryAfterSeconds()},
	}}, "Retry-After", strconv.Itoa(v.RetryAfterSeconds()))
	return true
}

// serveToolsList answers a tools/list from the kept lists and reports
// true, or reports false, having written nothing, for anything mcp-go is
// to answer.
func (rt *Router) serveToolsList(w http.ResponseWriter, r *http.Request, body []byte) bool {
	return rt.List.Serve(w, r, body, func() *policy.Grant { return rt.Core.Grant(auth.CallerFrom(r.Context())) },
		rt.Streamable.SupportsProtocolVersion, rt.Log)
}

// ExpireIdle ends the sessions idle past the timeout and sweeps the
// expired tasks, every tick, until done is closed. A session is ended by
// a DELETE through mcp-go's own handler, exactly as a client's would be,
// so nothing of it stays behind.
func (rt *Router) ExpireIdle(tick time.Duration, done <-chan struct{}) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		rt.sweepTasks()
		idle := rt.Sessions.IdleOnes()
		for _, id := range idle {
			rt.endSession(id)
		}
		if len(idle) > 0 {
			rt.Log.Info("MCP sessions expired", "agent", rt.Identity, "count", len(idle), "idle_timeout", rt.Sessions.Idle(), "live", rt.Sessions.Count())
		}
		if len(idle) >= releaseAfter {
			// A burst of abandoned sessions (a client restarting in a
			// loop, a scan) is memory the process will not need again
			// soon; give it back now rather than when the runtime gets
			// round to it, which on an idle gateway can be never.
			debug.FreeOSMemory()
		}
	}
}

// releaseAfter is how many sessions one sweep must end before the memory
// they held is handed back to the operating system at once: a forced
// collection costs a few milliseconds, worth it for a burst, not for the
// odd session.
const releaseAfter = 256

// endSession deletes session id through mcp-go's handler.
func (rt *Router) endSession(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	rt.Streamable.ServeHTTP(discard{header: http.Header{}}, req)
	// mcp-go terminates it through [Sessions.Terminate]; make sure even
	// if it answered otherwise.
	_, _ = rt.Sessions.Terminate(id)
}

// discard is a ResponseWriter for requests the gateway makes of itself.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(statusCode int)  {}

// Hooks adds the router's mcp-go hooks to h: the record of mcp-go's
// sessions, for the calls served without it, and the advertising of
// tasks (task.go).
func (rt *Router) Hooks(h *server.Hooks) {
	h.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) {
		rt.clientSessions.Store(cs.SessionID(), cs)
	})
	h.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		rt.clientSessions.CompareAndDelete(cs.SessionID(), cs)
	})
	taskHooks(h)
}
