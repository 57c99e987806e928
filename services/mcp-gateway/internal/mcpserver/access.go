package mcpserver

import (
	"context"
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
	if !g.Allows(e.def.Name, e.tool.Tags(), e.source != SourceLocal) {
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

// hooks are the server's mcp-go hooks: tasks (task.go), the policy's
// narrowing of tools/list and the record of sessions (callsession.go).
func (s *Server) hooks() *server.Hooks {
	h := &server.Hooks{}
	// The policy runs first, so the task hook marks only what is shown.
	h.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if res != nil {
			res.Tools = s.visibleTools(ctx, res.Tools)
		}
	})
	taskHooks(h)
	s.sessionHooks(h)
	return h
}

// visibleTools narrows a tools/list answer to what the caller's grant
// allows. It is a hook on the answer, not an mcp-go tool filter: such a
// filter also runs on tools/call and answers a hidden tool with the
// protocol's "not found" error, where a caller should be told in-band
// that the policy refuses it ([Server.admit]).
func (s *Server) visibleTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	_, g := s.grant(ctx)
	if g.Everything() {
		return tools
	}
	entries := *s.entries.Load()
	out := make([]mcp.Tool, 0, len(tools))
	for _, t := range tools {
		e := entries[t.Name]
		if e != nil && g.Allows(t.Name, e.tool.Tags(), e.source != SourceLocal) {
			out = append(out, t)
		}
	}
	return out
}
