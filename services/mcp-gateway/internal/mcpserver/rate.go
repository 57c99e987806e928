package mcpserver

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/mcphttp"
)

// CodeRateLimited is the JSON-RPC error of a call over its caller's
// rate. MCP names no code for it; this is the one other MCP gateways
// answer (toolhive), with the wait in data.retryAfterSeconds.
const CodeRateLimited = -32029

// limitCall answers an MCP tools/call over its caller's rate with the
// JSON-RPC error CodeRateLimited, its wait in data.retryAfterSeconds and
// a Retry-After header, and reports true; anything else it leaves to the
// rest of the transport, having written nothing. It runs in both eras
// before the call is answered or made a task, and only when the policy
// sets a rate.
func (s *Server) limitCall(w http.ResponseWriter, r *http.Request, msg *message) bool {
	if !s.cfg.Policy.Rated() || msg.Method != string(mcp.MethodToolsCall) || len(msg.ID) == 0 {
		return false
	}
	var name string
	if json.Unmarshal(msg.Params.Name, &name) != nil {
		return false
	}
	v := s.core.Limit(r.Context(), &call.Request{
		Tool:     name,
		Args:     msg.Params.Arguments,
		Caller:   auth.CallerFrom(r.Context()),
		Protocol: r.Header.Get(mcp.HeaderProtocolVersion),
		Header:   r.Header,
	})
	if v == nil {
		return false
	}
	mcphttp.WriteRPC(w, mcphttp.RPCAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: msg.ID, Error: &mcp.JSONRPCErrorDetails{
		Code:    CodeRateLimited,
		Message: v.Message,
		Data:    map[string]any{"retryAfterSeconds": v.RetryAfterSeconds()},
	}}, "Retry-After", strconv.Itoa(v.RetryAfterSeconds()))
	return true
}
