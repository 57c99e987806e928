// Package policy decides, per caller, which of the gateway's tools it may
// see and run (expose.agent.mcp.policy).
//
// A caller's roles are those whose match values its token's policy claim
// holds; its tools are the union of what its roles grant. The policy is
// applied after every other filter, so it can only narrow what the gateway
// serves: a tool tagged ai:deny was never loaded and no role brings it
// back. A token that matches no role is refused at the door (403, naming
// expose.agent.mcp.policy), and a call of a tool outside the caller's set
// is answered as a call of a tool no one serves, so that a caller cannot
// tell which hidden tools exist.
//
// Beside what a caller may run, a role bounds how much: a share of the
// gateway's slots ([Shares]) and a rate, over all its tools and per tool
// ([Limiter]).
//
// Remote tools carry no tags the gateway can trust for selection (their
// agent's description is all discovery says), so a role's tag filters
// never select one: only name globs do, and a tag-only include grants no
// remote tool.
//
// A [Grant] is what one set of roles allows. Grants are computed once per
// distinct set of roles and shared, so the call path does a map lookup,
// not a policy evaluation.
package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// ErrNoRole is a caller whose token matches no role of the policy.
var ErrNoRole = errors.New("no role of expose.agent.mcp.policy matches the caller")

// Policy is a parsed expose.agent.mcp.policy. A nil *Policy is no policy:
// every caller may see and run everything the gateway serves. It is safe
// for concurrent use.
type Policy struct {
	claim string
	roles []role // sorted by name

	mu     sync.Mutex
	grants map[string]*Grant // by the roles' key; guarded by mu
}

// role is one role as configured, with its rates parsed.
type role struct {
	name string
	config.Role
	rate config.Rate
	// toolRates are the role's tool_rates, sorted by glob.
	toolRates []toolRate
}

type toolRate struct {
	glob string
	rate config.Rate
}

// New returns the policy of p, or nil when p is nil. p must have passed
// [config.Config.Validate].
func New(p *config.Policy) *Policy {
	if p == nil {
		return nil
	}
	pol := &Policy{claim: cmp.Or(p.Claim, config.DefaultPolicyClaim), grants: map[string]*Grant{}}
	for _, name := range slices.Sorted(maps.Keys(p.Roles)) {
		r := p.Roles[name]
		if r == nil {
			continue
		}
		ro := role{name: name, Role: *r, rate: config.MustRate(r.Rate)}
		for _, glob := range slices.Sorted(maps.Keys(r.ToolRates)) {
			ro.toolRates = append(ro.toolRates, toolRate{glob: glob, rate: config.MustRate(r.ToolRates[glob])})
		}
		pol.roles = append(pol.roles, ro)
	}
	return pol
}

// Rated reports whether a role sets a rate or tool_rates, so that the
// call path asks the [Limiter] only then.
func (p *Policy) Rated() bool {
	if p == nil {
		return false
	}
	return slices.ContainsFunc(p.roles, func(r role) bool { return !r.rate.Unlimited() || len(r.toolRates) > 0 })
}

// Claim is the token claim that holds a caller's groups.
func (p *Policy) Claim() string {
	if p == nil {
		return config.DefaultPolicyClaim
	}
	return p.claim
}

// Names returns the role names, sorted.
func (p *Policy) Names() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.roles))
	for i, r := range p.roles {
		out[i] = r.name
	}
	return out
}

// Authorize sets c.Roles to the roles c matches. A caller of a token that
// matches none is refused with an error wrapping [ErrNoRole]. The static
// caller (a shared token, or none) has the role default when the policy
// defines one, else every tool. Without a policy every caller passes with
// no roles.
func (p *Policy) Authorize(c *auth.Caller) error {
	if p == nil {
		return nil
	}
	if c.Static {
		if p.has(config.DefaultRole) {
			c.Roles = []string{config.DefaultRole}
		}
		return nil
	}
	c.Roles = nil
	for _, r := range p.roles {
		if slices.ContainsFunc(r.Match, func(m string) bool { return slices.Contains(c.Groups, m) }) {
			c.Roles = append(c.Roles, r.name)
		}
	}
	if len(c.Roles) == 0 {
		return fmt.Errorf("%w: its %s claim holds %s; add one of them to the match list of a role in expose.agent.mcp.policy.roles",
			ErrNoRole, p.claim, describeGroups(c.Groups))
	}
	return nil
}

func describeGroups(groups []string) string {
	if len(groups) == 0 {
		return "nothing"
	}
	const most = 8
	if len(groups) > most {
		return fmt.Sprintf("[%s, … %d more]", strings.Join(groups[:most], ", "), len(groups)-most)
	}
	return "[" + strings.Join(groups, ", ") + "]"
}

func (p *Policy) has(name string) bool {
	return slices.ContainsFunc(p.roles, func(r role) bool { return r.name == name })
}

// For returns what caller c may do. Without a policy, and for the static
// caller of a policy without a default role, that is everything; for any
// other caller it is the union of c.Roles, which [Policy.Authorize] set.
// A caller with no roles gets nothing.
func (p *Policy) For(c *auth.Caller) *Grant {
	if p == nil {
		return All
	}
	if c == nil {
		return none
	}
	if c.Static && len(c.Roles) == 0 {
		return All
	}
	return p.grant(c.Roles)
}

// Role returns the grant of the one role name, for `info --role`; false
// when the policy has no such role.
func (p *Policy) Role(name string) (*Grant, bool) {
	if p == nil || !p.has(name) {
		return nil, false
	}
	return p.grant([]string{name}), true
}

func (p *Policy) grant(names []string) *Grant {
	key := strings.Join(names, "\x00")
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.grants[key]; ok {
		return g
	}
	g := &Grant{Key: key}
	unlimited := false
	for _, r := range p.roles {
		if !slices.Contains(names, r.name) {
			continue
		}
		g.Roles = append(g.Roles, r.name)
		g.roles = append(g.roles, r)
		g.Approve = g.Approve || r.Approve
		unlimited = unlimited || r.MaxConcurrentTools == 0
		g.Share = max(g.Share, r.MaxConcurrentTools)
		if len(g.roles) == 1 || r.rate.More(g.Rate) {
			g.Rate = r.rate
		}
		if len(g.roles) == 1 {
			g.NATSContext = r.NATSContext
		}
		g.contextConflict = g.contextConflict || r.NATSContext != g.NATSContext
	}
	if unlimited {
		g.Share = 0
	}
	if g.contextConflict {
		g.NATSContext = ""
	}
	// A policy caller meets only a bounded number of role sets (at most
	// 2^roles, in practice a handful), so the cache needs no eviction
	// beyond a cap against a pathological policy.
	if len(p.grants) < maxGrants {
		p.grants[key] = g
	}
	return g
}

// maxGrants caps the cached grants: distinct role sets seen.
const maxGrants = 1024

// Grant is what one set of roles may do. A Grant is immutable.
type Grant struct {
	// Key identifies the set of roles: grants with equal keys allow the
	// same. It is empty for [All].
	Key string
	// Roles are the role names, sorted.
	Roles []string
	// Approve reports whether the caller may approve others' gated
	// calls.
	Approve bool
	// Share is the most calls the caller may run at once, its largest
	// role's max_concurrent_tools; 0 means no share of its own (the
	// gateway's slots bound it).
	Share int
	// NATSContext is the nats context remote calls go through, "" for
	// the gateway's own.
	NATSContext string
	// Rate bounds how often the caller calls tools, all together: the
	// most generous of its roles' rates, unlimited when one of its
	// roles sets none (roles only add to what a caller may do).
	Rate config.Rate

	all             bool
	roles           []role
	contextConflict bool
}

// All is the grant of every tool: no policy, or the static caller of a
// policy without a default role.
var All = &Grant{all: true}

// none is the grant of nothing: a caller that was never authorized.
var none = &Grant{Key: "\x00none"}

// Everything reports whether the grant allows every tool.
func (g *Grant) Everything() bool { return g.all }

// Allows reports whether the grant lets its caller see and run the tool
// named name with tags; remote marks an imported tool, whose tags select
// nothing. A tool is allowed when one of the roles allows it: its include
// (empty: everything) matches and its exclude does not.
func (g *Grant) Allows(name string, tags []string, remote bool) bool {
	if g.all {
		return true
	}
	if remote {
		tags = nil
	}
	for _, r := range g.roles {
		if allows(r, name, tags) {
			return true
		}
	}
	return false
}

func allows(r role, name string, tags []string) bool {
	if !r.Include.Empty() && !matches(r.Include, name, tags) {
		return false
	}
	return !matches(r.Exclude, name, tags)
}

func matches(f config.Filter, name string, tags []string) bool {
	for _, g := range f.Tools {
		if ok, _ := path.Match(g, name); ok { // validated at parse time
			return true
		}
	}
	return slices.ContainsFunc(f.Tags, func(t string) bool { return slices.Contains(tags, t) })
}

// ToolRate is the bound on how often the caller calls the tool name, on
// its own: of the roles that grant the tool, the most generous of their
// tool_rates matching name (the first glob in order, per role), and
// unlimited when one of them has none for it.
func (g *Grant) ToolRate(name string, tags []string, remote bool) config.Rate {
	if g.all {
		return config.Rate{}
	}
	if remote {
		tags = nil
	}
	var best config.Rate
	granted := false
	for _, r := range g.roles {
		if !allows(r, name, tags) {
			continue
		}
		i := slices.IndexFunc(r.toolRates, func(t toolRate) bool { ok, _ := path.Match(t.glob, name); return ok })
		if i < 0 {
			return config.Rate{}
		}
		if !granted || r.toolRates[i].rate.More(best) {
			best = r.toolRates[i].rate
		}
		granted = true
	}
	return best
}

// RemoteContext returns the nats context the caller's remote calls use:
// "" for the gateway's own. A caller whose roles name different contexts
// cannot be given one NATS identity, so that is an error naming the
// roles: the call is refused rather than made with either.
func (g *Grant) RemoteContext() (string, error) {
	if g.contextConflict {
		return "", fmt.Errorf("the caller's roles %s name different expose.agent.mcp.policy.roles.*.nats_context values, so no one NATS identity can make its remote calls: give them the same nats_context", strings.Join(g.Roles, ", "))
	}
	return g.NATSContext, nil
}

// Refusal is the in-band message for a call of a tool outside the
// caller's grant. It never says whether the tool exists for anyone else.
func (g *Grant) Refusal(name string) string {
	return fmt.Sprintf("%s is not available to you: expose.agent.mcp.policy grants your roles (%s) no such tool", name, strings.Join(g.Roles, ", "))
}
