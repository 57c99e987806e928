package mcpserver

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
)

// Unreachable are, by policy role nats context, the names of the remote
// tools whose agent refused that context's NATS user ([call.Unreachable]).
type Unreachable = call.Unreachable

// SetUnreachable replaces what each role's nats context may not reach.
// Calls see it at once; tools/list from the next [Server.SetTools], which
// the gateway calls right after (with the same tools, it only rebuilds
// the lists when this changed).
func (s *Server) SetUnreachable(u Unreachable) { s.core.SetUnreachable(u) }

// hooks are the server's mcp-go hooks: the audit of calls of hidden
// tools, and the router's ([mcphttp.Router.Hooks]).
func (s *Server) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddOnError(s.auditHidden)
	s.router.Hooks(h)
	return h
}

// auditHidden records a tools/call of a tool the caller's policy hides.
// mcp-go answered it exactly as it answers a name no one serves
// ([Server.visibleTools] is its tool filter), so that a caller cannot
// probe which hidden tools exist; the operator still learns who asked for
// what: the call goes to the call core, whose first step refuses it with
// an audit record, a log line and a metric, and its in-band answer is
// dropped.
func (s *Server) auditHidden(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	req, ok := message.(*mcp.CallToolRequest)
	if method != mcp.MethodToolsCall || !ok || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	if s.core.Entry(req.Params.Name) == nil {
		return
	}
	s.CallTool(ctx, req.Params.Name, *req, nil)
}

// hidden reports whether the caller of ctx may not see the served tool e.
func (s *Server) hidden(ctx context.Context, e *entry) bool {
	return s.core.Hidden(auth.CallerFrom(ctx), e.Entry)
}

// visibleTools narrows tools to what the caller's grant allows. It is
// mcp-go's tool filter, so it runs on tools/call too: a hidden tool gets
// the protocol's "not found" error, the same bytes as a name no one
// serves. (The gateway lists tools itself, package toolslist, deciding alike.)
func (s *Server) visibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	g := s.core.Grant(auth.CallerFrom(ctx))
	if g.Everything() {
		return tools
	}
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		if e := s.core.Entry(t.Name); e != nil && s.core.Allows(g, e) {
			out = append(out, t)
		}
	}
	return out
}
