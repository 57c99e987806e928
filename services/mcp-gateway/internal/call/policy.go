package call

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// admit is the one place the call path asks whether this caller may run
// this tool. It runs before anything else looks at the call (arguments,
// approval), so a refused caller learns nothing of the tool. It returns
// the connection a remote tool's call is to be made over when the
// caller's role names one (nil: the gateway's own), or the refusal.
func (c *Core) admit(r *Request, e *Entry, rec *record) (via any, refused *Verdict) {
	g := c.cfg.Policy.For(r.Caller)
	if !c.allowed(g, e) {
		rec.gate = audit.DecisionPolicy
		v := rec.fail(audit.EndMCPRefusedByPolicy, g.Refusal(e.Name()))
		return nil, &v
	}
	if !e.Remote() || c.cfg.RemoteVia == nil {
		return nil, nil
	}
	name, err := g.RemoteContext()
	if err != nil {
		v := rec.fail(audit.EndMCPRefusedByPolicy, fmt.Sprintf("%s was not run: %v", e.Name(), err))
		return nil, &v
	}
	if name == "" {
		return nil, nil
	}
	via, err = c.cfg.RemoteVia(name)
	if err != nil {
		v := rec.fail(audit.EndMCPFailed, fmt.Sprintf("%s was not run: %v", e.Name(), err))
		return nil, &v
	}
	return via, nil
}

// Unreachable are, by policy role nats context
// (expose.agent.mcp.policy.roles.*.nats_context), the names of the remote
// tools whose agent refused that context's NATS user: a role is shown,
// and may call, only what its own credentials reach.
type Unreachable map[string]map[string]bool

// Refuses reports whether g's nats context may not reach the remote tool
// name.
func (u Unreachable) Refuses(g *policy.Grant, name string) bool {
	return g.NATSContext != "" && u[g.NATSContext][name]
}

// SetUnreachable replaces what each role's nats context may not reach.
// Calls see it at once.
func (c *Core) SetUnreachable(u Unreachable) {
	if u == nil {
		u = Unreachable{}
	}
	c.unreachable.Store(&u)
}

// Unreachable is what [Core.SetUnreachable] last set.
func (c *Core) Unreachable() Unreachable { return *c.unreachable.Load() }

// allowed reports whether grant g lets its caller see and run e: the
// policy allows it, and a remote tool's agent takes the role's nats
// context.
func (c *Core) allowed(g *policy.Grant, e *Entry) bool {
	if !g.Allows(e.Name(), e.Tool.Tags(), e.Remote()) {
		return false
	}
	return !e.Remote() || !c.unreachable.Load().Refuses(g, e.Name())
}

// Allows reports whether grant g lets its caller see and run e.
func (c *Core) Allows(g *policy.Grant, e *Entry) bool { return g.Everything() || c.allowed(g, e) }

// Grant is what the policy gives caller (nil: nobody).
func (c *Core) Grant(caller *auth.Caller) *policy.Grant { return c.cfg.Policy.For(caller) }

// Hidden reports whether caller may not see the served tool e.
func (c *Core) Hidden(caller *auth.Caller, e *Entry) bool {
	return !c.Allows(c.cfg.Policy.For(caller), e)
}

// ServedTool is a served tool as one caller may see it, for a surface's
// listing (an agent card's skills).
type ServedTool struct {
	// Name is the name the tool is served under.
	Name        string
	Title       string
	Description string
	Tags        []string
	// Gated is set for a tool that needs a human's approval here.
	Gated bool
	// Remote is set for a tool imported from an agent on the bus.
	Remote bool
	// InputSchema is the JSON Schema of the call's arguments.
	InputSchema json.RawMessage
	// Command is set for a tool that runs a command and answers with
	// the command result envelope (its output schema).
	Command bool
	// Tool is the served tool itself.
	Tool tool.Tool
}

// Visible returns the served tools caller may see and call, in
// registration order.
func (c *Core) Visible(caller *auth.Caller) []ServedTool {
	g := c.cfg.Policy.For(caller)
	served := c.Served()
	out := make([]ServedTool, 0, len(served))
	for _, e := range served {
		if c.allowed(g, e) {
			out = append(out, e.served())
		}
	}
	return out
}

// Lookup returns the served tool name as caller sees it, and false when it
// is unknown or hidden from that caller: the two are one answer, so a
// caller cannot tell which hidden tools exist.
func (c *Core) Lookup(caller *auth.Caller, name string) (ServedTool, bool) {
	e := c.Entry(name)
	if e == nil || !c.allowed(c.cfg.Policy.For(caller), e) {
		return ServedTool{}, false
	}
	return e.served(), true
}

// served is the entry as [ServedTool] describes it.
func (e *Entry) served() ServedTool {
	t := e.Tool
	return ServedTool{
		Name:        e.Name(),
		Title:       t.Title(),
		Description: t.Description(),
		Tags:        t.Tags(),
		Gated:       e.Gated,
		Remote:      e.Remote(),
		InputSchema: t.InputSchema(),
		Command:     e.Command(),
		Tool:        t,
	}
}

// RetryAfterSeconds is a rate refusal's wait in whole seconds, at least
// 1, for Retry-After and retryAfterSeconds.
func (v Verdict) RetryAfterSeconds() int { return max(1, int(math.Ceil(v.RetryAfter.Seconds()))) }

// Rated reports whether the policy sets a rate, so that a surface reads
// what [Core.Limit] needs of a call only when it can refuse one.
func (c *Core) Rated() bool { return c.cfg.Policy.Rated() }

// Limit spends one call of r's tool for its caller, and returns the
// refusal when the caller is over its rate or the tool's; nil lets the
// call go on to [Core.Call], which does not spend again. A surface calls
// it before it starts the call, since it answers a refusal apart (MCP's
// JSON-RPC error, HTTP 429 and Retry-After). The refusal is the call's
// verdict: logged, counted, traced and audited (refused_rate) here, once,
// as every call is. An unknown or hidden name is never limited: its
// answer is the surface's unknown-tool one.
func (c *Core) Limit(ctx context.Context, r *Request) *Verdict {
	if !c.cfg.Policy.Rated() || r.Caller == nil {
		return nil
	}
	e := c.Entry(r.Tool)
	if e == nil {
		return nil
	}
	g := c.cfg.Policy.For(r.Caller)
	if g.Everything() || !c.allowed(g, e) {
		return nil
	}
	tr := g.ToolRate(e.Name(), e.Tool.Tags(), e.Remote())
	if g.Rate.Unlimited() && tr.Unlimited() {
		return nil
	}
	wait, over := c.limits.Take(r.Caller.Subject, time.Now(), policy.Bound{Rate: g.Rate}, policy.Bound{Scope: "tool:" + e.Name(), Rate: tr})
	if over < 0 {
		return nil
	}
	start := time.Now()
	rec := c.newRecord(r)
	ctx, span := c.startCall(ctx, r)
	secs := Verdict{RetryAfter: wait}.RetryAfterSeconds()
	msg := fmt.Sprintf("%s was not run: you are over your rate of %s calls (roles %s, expose.agent.mcp.policy.roles.*.rate); retry in %ds", e.Name(), g.Rate, joinRoles(g), secs)
	if over > 0 {
		msg = fmt.Sprintf("%s was not run: you are over your rate of %s calls of it (roles %s, expose.agent.mcp.policy.roles.*.tool_rates); retry in %ds", e.Name(), tr, joinRoles(g), secs)
	}
	v := rec.fail(audit.EndMCPRefusedRate, msg)
	v.RetryAfter = wait
	c.finish(ctx, span, rec, start)
	return &v
}
