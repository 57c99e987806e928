package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// outcomePolicy is a call refused because the caller's policy grants no
// such tool.
const outcomePolicy = "refused_by_policy"

// grant returns what the caller of ctx may do. A request that reached a
// handler passed the authentication layer, which put its caller in the
// context; one without a caller (a server used without its handler) gets
// what the policy gives nobody.
func (s *Server) grant(ctx context.Context) (*auth.Caller, *policy.Grant) {
	c := auth.CallerFrom(ctx)
	return c, s.cfg.Policy.For(c)
}

// admit is the one place the call path asks whether this caller may run
// this tool. It runs before anything else looks at the call (arguments,
// approval), so a refused caller learns nothing of the tool. It returns
// the context to run with, which for a remote tool carries the caller's
// NATS connection when its role names one, or the in-band refusal.
func (s *Server) admit(ctx context.Context, e *entry, rec *record) (context.Context, *mcp.CallToolResult) {
	c, g := s.grant(ctx)
	if c != nil {
		rec.caller, rec.who = c.Subject, c
	}
	if !s.allowed(g, e) {
		rec.gate = audit.DecisionPolicy
		return nil, rec.fail(outcomePolicy, g.Refusal(e.def.Name))
	}
	if e.source == SourceLocal || s.cfg.RemoteContext == nil {
		return ctx, nil
	}
	name, err := g.RemoteContext()
	if err != nil {
		return nil, rec.fail(outcomePolicy, fmt.Sprintf("%s was not run: %v", e.def.Name, err))
	}
	if name == "" {
		return ctx, nil
	}
	rctx, err := s.cfg.RemoteContext(ctx, name)
	if err != nil {
		return nil, rec.fail(outcomeFailed, fmt.Sprintf("%s was not run: %v", e.def.Name, err))
	}
	return rctx, nil
}

// takeShare waits for one of the caller's own slots when its grant
// limits it (expose.agent.mcp.policy.roles.*.max_concurrent_tools). It
// comes after any approval and before the gateway's slot, so a caller over
// its share queues without holding a slot another caller could use.
func (s *Server) takeShare(ctx context.Context, name string, rec *record) (func(), *mcp.CallToolResult) {
	c, g := s.grant(ctx)
	if c == nil || g.Share == 0 {
		return func() {}, nil
	}
	release, err := s.shares.Acquire(ctx, c.Subject, g.Share)
	if err != nil {
		return nil, rec.fail(outcomeBusy, fmt.Sprintf("%s was not run: the request ended while waiting for a free slot of your share (%d at once for roles %s, expose.agent.mcp.policy.roles.*.max_concurrent_tools)", name, g.Share, strings.Join(g.Roles, ", ")))
	}
	return release, nil
}

// hooks are the server's mcp-go hooks: tasks (task.go), the audit of
// calls of hidden tools and the record of sessions (callsession.go).
func (s *Server) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddOnError(s.auditHidden)
	taskHooks(h)
	s.sessionHooks(h)
	return h
}

// auditHidden records a tools/call of a tool the caller's policy hides.
// mcp-go answered it exactly as it answers a name no one serves
// ([Server.visibleTools] is its tool filter), so that a caller cannot
// probe which hidden tools exist; the operator still learns who asked for
// what: the call goes down the call path, whose first step ([Server.admit])
// refuses it with an audit record, a log line and a metric, and its
// in-band answer is dropped.
func (s *Server) auditHidden(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	req, ok := message.(*mcp.CallToolRequest)
	if method != mcp.MethodToolsCall || !ok || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	if (*s.entries.Load())[req.Params.Name] == nil {
		return
	}
	s.handle(ctx, req.Params.Name, *req)
}

// Unreachable are, by policy role nats context
// (expose.agent.mcp.policy.roles.*.nats_context), the names of the remote
// tools whose agent refused that context's NATS user: a role is shown,
// and may call, only what its own credentials reach.
type Unreachable map[string]map[string]bool

// refuses reports whether g's nats context may not reach the remote tool
// name.
func (u Unreachable) refuses(g *policy.Grant, name string) bool {
	return g.NATSContext != "" && u[g.NATSContext][name]
}

// SetUnreachable replaces what each role's nats context may not reach.
// Calls see it at once; tools/list from the next [Server.SetTools], which
// the gateway calls right after (with the same tools, it only rebuilds
// the lists when this changed).
func (s *Server) SetUnreachable(u Unreachable) {
	if u == nil {
		u = Unreachable{}
	}
	s.unreachable.Store(&u)
}

// allowed reports whether grant g lets its caller see and run e: the
// policy allows it, and a remote tool's agent takes the role's nats
// context.
func (s *Server) allowed(g *policy.Grant, e *entry) bool {
	if !g.Allows(e.def.Name, e.tool.Tags(), e.source != SourceLocal) {
		return false
	}
	return e.source == SourceLocal || !s.unreachable.Load().refuses(g, e.def.Name)
}

// hidden reports whether the caller of ctx may not see the served tool e.
func (s *Server) hidden(ctx context.Context, e *entry) bool {
	_, g := s.grant(ctx)
	return !g.Everything() && !s.allowed(g, e)
}

// visibleTools narrows tools to what the caller's grant allows. It is
// mcp-go's tool filter, so it runs on tools/call too: a hidden tool gets
// the protocol's "not found" error, the same bytes as a name no one
// serves. (The gateway lists tools itself, toolslist.go, deciding alike.)
func (s *Server) visibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	_, g := s.grant(ctx)
	if g.Everything() {
		return tools
	}
	entries := *s.entries.Load()
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		e := entries[t.Name]
		if e != nil && s.allowed(g, e) {
			out = append(out, t)
		}
	}
	return out
}
