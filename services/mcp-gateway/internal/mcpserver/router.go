package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
)

// route is the gateway's MCP router. It decodes each POSTed message once,
// then applies the streamable HTTP transport's session rules that mcp-go's
// handler (v1.2.1) does not, for the session-based protocol eras (before
// 2026-07-28; requests of the sessionless era pass untouched):
//
//   - mcp-go answers a GET with an unknown, deleted or missing session id
//     by opening a fresh event stream, and a DELETE of one with 200; here
//     an id the gateway did not issue, or has forgotten, is 404 on every
//     method, and a missing one 400, as a POST other than initialize
//     without one is;
//   - mcp-go keeps sessions until they are deleted; here a session idle
//     longer than expose.agent.mcp.session_idle_timeout is ended (through
//     mcp-go's own DELETE path, so all its state goes) and at most
//     expose.agent.mcp.max_sessions live at once: an initialize beyond the
//     cap gets 503, never a session in use evicted;
//   - mcp-go still answers a request its client has cancelled with
//     notifications/cancelled; here that answer is not sent (see
//     [mcphttp.Cancellations]);
//   - MCP tasks are served here, not by mcp-go (see task.go): the tasks/*
//     methods are answered from the gateway's task store, for the
//     requesting caller (or session, without authentication) only, and a task-augmented tools/call is
//     prepared for the tool handler and answered with its task;
//   - tools/list, in both eras, is answered from the lists kept per tool
//     set ([mcphttp.ToolsList.Serve]), once the rules above have passed;
//     so is a plain tools/call, through the call core without mcp-go's
//     machinery ([Server.serveToolsCall]).
//
// It is a layer of its own, not a fork, so that it can go as mcp-go learns
// these rules: each rule is tested through a real HTTP client, and a test
// that starts passing without the layer says the library has caught up.
func (s *Server) route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Method == http.MethodPost {
			var err error
			if body, err = io.ReadAll(r.Body); err != nil {
				http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		// The message is decoded once here, for every rule and path
		// below; a path that must read it exactly as mcp-go does (the
		// plain tools/call, the kept tools/list) reads its own part.
		var msg message
		valid := r.Method == http.MethodPost && json.Unmarshal(body, &msg) == nil
		if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			if s.serveToolsList(w, r, body) || valid && s.limitCall(w, r, &msg) || s.serveToolsCall(w, r, body, "") {
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get(server.HeaderKeySessionID)
		if r.Method == http.MethodPost {
			if !valid || msg.modern() {
				// Not JSON-RPC (mcp-go answers the parse error) or a
				// sessionless-era message.
				if !s.serveToolsList(w, r, body) {
					next.ServeHTTP(w, r)
				}
				return
			}
		}
		switch {
		case r.Method != http.MethodPost && r.Method != http.MethodGet && r.Method != http.MethodDelete:
			next.ServeHTTP(w, r)
			return
		case r.Method == http.MethodPost && msg.Method == string(mcp.MethodInitialize) && id == "":
			if s.sessions.Full() {
				s.log.Warn("refused a new MCP session: the session limit is reached", "agent", s.cfg.Identity, "max_sessions", s.sessions.Max())
				http.Error(w, fmt.Sprintf("too many MCP sessions (%d live): try again later, or raise expose.agent.mcp.max_sessions", s.sessions.Max()), http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(s.sessions.Binding(w, subjectOf(r)), r)
			return
		case r.Method == http.MethodPost && msg.Method == "":
			// A response to a server request, which mcp-go matches by
			// session itself (and a ping answer needs none). It must
			// come from the session's owner: an answer is what approves
			// a gated call, and mcp-go numbers its requests from 1, so
			// anyone holding a leaked session id could otherwise answer
			// another caller's approval form.
			if id != "" && !s.sessions.Owns(id, subjectOf(r)) {
				http.Error(w, "session not found: it was deleted, expired or never issued; send initialize to start a new one", http.StatusNotFound)
				return
			}
			next.ServeHTTP(w, r)
			return
		case id == "":
			http.Error(w, "bad request: missing Mcp-Session-Id header; send initialize first", http.StatusBadRequest)
			return
		case !s.sessions.Begin(id, subjectOf(r)):
			http.Error(w, "session not found: it was deleted, expired or never issued; send initialize to start a new one", http.StatusNotFound)
			return
		}
		defer s.sessions.End(id)
		if msg.Method == string(mcp.MethodToolsCall) && s.limitCall(w, r, &msg) {
			return
		}
		if msg.Method == string(mcp.MethodToolsList) && s.serveToolsList(w, r, body) {
			// Answered from the kept lists, before the cancellation
			// watch: there is nothing to cancel in writing kept bytes.
			return
		}
		if msg.Method == string(mcp.MethodInitialize) {
			// A client may initialize again on a session it holds; the
			// new session is bound to it as well.
			w = s.sessions.Binding(w, subjectOf(r))
		}
		if msg.Method == string(mcp.MethodNotificationCancelled) {
			s.cancels.Cancel(id, msg.Params.RequestID)
		}
		if r.Method == http.MethodPost && isTaskMethod(msg.Method) {
			s.serveTaskMethod(w, r, s.taskOwner(r, id), &msg)
			return
		}
		var tr *taskRequest
		if r.Method == http.MethodPost && msg.Method == string(mcp.MethodToolsCall) && len(msg.ID) > 0 {
			var ok bool
			if tr, ok = s.taskCall(w, r, s.taskOwner(r, id), id, &msg); !ok {
				return
			}
			if tr != nil {
				// Runs last, after the answer is written: the room goes
				// back unless the call became a task.
				defer tr.room.Release()
				r = r.WithContext(context.WithValue(r.Context(), taskRequestKey{}, tr))
			}
		}
		if r.Method == http.MethodPost && len(msg.ID) > 0 {
			cw := s.cancels.Watch(w, id, msg.ID)
			if tr != nil {
				cw.Replace = tr.result
			}
			defer s.cancels.Done(cw)
			if tr != nil || msg.Method != string(mcp.MethodToolsCall) || !s.serveToolsCall(cw, r, body, id) {
				next.ServeHTTP(cw, r)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// subjectOf is the subject of the request's caller, "" when it has none
// (a server used without its authentication layer).
func subjectOf(r *http.Request) string {
	if c := auth.CallerFrom(r.Context()); c != nil {
		return c.Subject
	}
	return ""
}

// message is what the router reads of a POSTed message, in one decode:
// what the session rules, the rate limit, tasks and cancellations decide
// on.
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

// expireIdle ends the sessions idle past the timeout, every tick, until
// done is closed. A session is ended by a DELETE through mcp-go's own
// handler, exactly as a client's would be, so nothing of it stays behind.
func (s *Server) expireIdle(tick time.Duration, done <-chan struct{}) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		s.sweepTasks()
		idle := s.sessions.IdleOnes()
		for _, id := range idle {
			s.endSession(id)
		}
		if len(idle) > 0 {
			s.log.Info("MCP sessions expired", "agent", s.cfg.Identity, "count", len(idle), "idle_timeout", s.sessions.Idle(), "live", s.sessions.Count())
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
func (s *Server) endSession(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	s.streamable.ServeHTTP(discard{header: http.Header{}}, req)
	// mcp-go terminates it through [sessions.Terminate]; make sure even
	// if it answered otherwise.
	_, _ = s.sessions.Terminate(id)
}

// discard is a ResponseWriter for requests the gateway makes of itself.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(statusCode int)  {}

// serveToolsList answers a tools/list from the kept lists
// ([mcphttp.ToolsList.Serve]) and reports true, or reports false, having
// written nothing, for anything mcp-go is to answer.
func (s *Server) serveToolsList(w http.ResponseWriter, r *http.Request, body []byte) bool {
	grant := func() *policy.Grant { return s.core.Grant(auth.CallerFrom(r.Context())) }
	return s.list.Serve(w, r, body, grant, s.streamable.SupportsProtocolVersion, s.log)
}
