package agent2agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
)

// JSON-RPC error codes: the specification's own, then the protocol's.
const (
	codeParseError        = -32700
	codeInvalidRequest    = -32600
	codeMethodNotFound    = -32601
	codeInvalidParams     = -32602
	codeInternalError     = -32603
	codeTaskNotFound      = -32001
	codeTaskNotCancelable = -32002
	codePushNotSupported  = -32003
	codeUnsupported       = -32004
	// codeRateLimited is a call over its caller's rate: the code the MCP
	// surface answers it with (mcpserver.CodeRateLimited), so a client of
	// either surface reads one refusal.
	codeRateLimited = -32029
)

// Methods of protocol 1.0's JSON-RPC binding.
const (
	methodSend        = "SendMessage"
	methodStream      = "SendStreamingMessage"
	methodGetTask     = "GetTask"
	methodCancelTask  = "CancelTask"
	methodSubscribe   = "SubscribeToTask"
	methodListTasks   = "ListTasks"
	methodExtended    = "GetExtendedAgentCard"
	methodPushGet     = "GetTaskPushNotificationConfig"
	methodPushSet     = "CreateTaskPushNotificationConfig"
	methodPushList    = "ListTaskPushNotificationConfigs"
	methodPushDelete  = "DeleteTaskPushNotificationConfig"
	jsonrpcVersion    = "2.0"
	contentTypeJSON   = "application/json"
	contentTypeStream = "text/event-stream"
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	// dialect is the protocol version the method is of; Method is
	// then its 1.0 name.
	dialect dialect
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	// status, when set, is the HTTP status the answer goes with, and
	// retryAfter its Retry-After in seconds: a call over its caller's
	// rate is 429, as HTTP clients and proxies expect.
	status     int
	retryAfter int
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// errorf is a JSON-RPC error with a message.
func errorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// serveRPC answers one JSON-RPC request on an endpoint. The body has
// passed the gateway's cap and read timeout, the caller its
// authentication.
func (s *Service) serveRPC(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	if _, err := body.ReadFrom(r.Body); err != nil {
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req rpcRequest
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		writeRPC(w, rpcResponse{Error: errorf(codeParseError, "the body is not a JSON-RPC request: %v", err)})
		return
	}
	if req.JSONRPC != jsonrpcVersion || req.Method == "" || !validID(req.ID) {
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeInvalidRequest, `a request needs "jsonrpc": "2.0", a method, and an id that is a string or a number`)})
		return
	}
	req.dialect, req.Method = dialectOf(req.Method)
	ctx, sc := r.Context(), scopeOf(r)
	switch req.Method {
	case methodSend:
		s.send(w, r, sc, &req)
	case methodStream:
		s.stream(w, r, sc, &req)
	case methodSubscribe:
		s.subscribe(w, r, &req)
	case methodGetTask:
		var p taskParams
		if e := decodeParams(req.Params, &p); e != nil {
			writeRPC(w, rpcResponse{ID: req.ID, Error: e})
			return
		}
		t, err := s.cfg.Tasks.Get(ctx, owner(ctx), p.ID)
		if err != nil {
			writeRPC(w, rpcResponse{ID: req.ID, Error: taskError(p.ID, err)})
			return
		}
		writeRPC(w, rpcResponse{ID: req.ID, Result: req.task(view(t))})
	case methodCancelTask:
		var p taskParams
		if e := decodeParams(req.Params, &p); e != nil {
			writeRPC(w, rpcResponse{ID: req.ID, Error: e})
			return
		}
		t, err := s.cfg.Tasks.Cancel(ctx, owner(ctx), p.ID)
		switch {
		case errors.Is(err, tasks.ErrFinished):
			writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeTaskNotCancelable, "task %s is already %s: only a task still running can be cancelled", clip(p.ID), state(t).String())})
			return
		case err != nil:
			writeRPC(w, rpcResponse{ID: req.ID, Error: taskError(p.ID, err)})
			return
		}
		s.log.Info("Agent2Agent task cancelled", "agent", s.cfg.Identity, "tool", t.Tool, "task", t.ID)
		writeRPC(w, rpcResponse{ID: req.ID, Result: req.task(view(t))})
	case methodExtended:
		if !s.authenticated() {
			writeRPC(w, rpcResponse{ID: req.ID, Error: &rpcError{Code: -32007, Message: "this gateway has no extended card: its public card lists every tool"}})
			return
		}
		writeRPC(w, rpcResponse{ID: req.ID, Result: s.card(r, sc, s.tools(ctx, sc))})
	case methodListTasks:
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeUnsupported, "%s is not served: read a task by its id with %s", req.Method, methodGetTask)})
	case methodPushGet, methodPushSet, methodPushList, methodPushDelete:
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codePushNotSupported, "push notifications are not served: stream with %s or %s, or poll %s",
			req.name(methodStream), req.name(methodSubscribe), req.name(methodGetTask))})
	default:
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeMethodNotFound, "method %q is not served: use %s, %s, %s, %s, %s or %s (Agent2Agent 1.0), or their 0.3 names (message/send, message/stream, tasks/get, ...)", clip(req.Method),
			methodSend, methodStream, methodGetTask, methodCancelTask, methodSubscribe, methodExtended)})
	}
}

// validID reports whether a request id is a string or a number. A
// request without one is a notification, which no method here is.
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')
}

// decodeParams decodes a method's params object into v.
func decodeParams(raw json.RawMessage, v any) *rpcError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return errorf(codeInvalidParams, "params must be an object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errorf(codeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

// taskError answers a task that could not be read.
func taskError(id string, err error) *rpcError {
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(codeTaskNotFound, "task %s not found: it does not exist for this caller, or it finished longer ago than expose.agent.mcp.task_retention", clip(id))
	}
	return errorf(codeInternalError, "the task store cannot be read now, try again: %v", err)
}

// clip shortens a hostile value for an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return string(bytes.ToValidUTF8([]byte(s[:max]), nil)) + "..."
	}
	return s
}

func writeRPC(w http.ResponseWriter, resp rpcResponse) {
	resp.JSONRPC = jsonrpcVersion
	if len(resp.ID) == 0 {
		resp.ID = json.RawMessage("null")
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(rpcResponse{JSONRPC: jsonrpcVersion, ID: resp.ID, Error: errorf(codeInternalError, "encoding the answer: %v", err)})
	}
	w.Header().Set("Content-Type", contentTypeJSON)
	if e := resp.Error; e != nil && e.status != 0 {
		if e.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
		}
		w.WriteHeader(e.status)
	}
	_, _ = w.Write(append(b, '\n'))
}

// ctxDone is a context's end as a JSON-RPC answer not worth writing.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
