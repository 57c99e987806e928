package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// testPolicy is the policy most tests share:
//
//   - ops (group ops): everything but deploy_*; may approve; nats ctx-ops.
//   - dev (groups dev, eng): read-tagged tools and echo, remote tools named
//     peer_*; share 2.
//   - auditor (group audit): only tools tagged read, so no remote tool.
//   - batch (group batch): everything; share 1.
//   - other (group other): everything; nats ctx-other.
func testPolicy() *config.Policy {
	return &config.Policy{
		Claim: "roles",
		Roles: map[string]*config.Role{
			"ops": {
				Match:       []string{"ops"},
				Exclude:     config.Filter{Tools: []string{"deploy_*"}},
				Approve:     true,
				NATSContext: "ctx-ops",
			},
			"dev": {
				Match:              []string{"dev", "eng"},
				Include:            config.Filter{Tools: []string{"echo", "peer_*"}, Tags: []string{"read"}},
				MaxConcurrentTools: 2,
			},
			"auditor": {
				Match:   []string{"audit"},
				Include: config.Filter{Tags: []string{"read"}},
			},
			"batch": {
				Match:              []string{"batch"},
				MaxConcurrentTools: 1,
			},
			"other": {
				Match:       []string{"other"},
				NATSContext: "ctx-other",
			},
		},
	}
}

func TestNew(t *testing.T) {
	t.Run("nil config is no policy", func(t *testing.T) {
		if p := New(nil); p != nil {
			t.Fatalf("got %v, want a nil policy", p)
		}
	})
	t.Run("roles sorted and claim kept", func(t *testing.T) {
		p := New(testPolicy())
		if got, want := p.Names(), []string{"auditor", "batch", "dev", "ops", "other"}; !slices.Equal(got, want) {
			t.Errorf("got names %v, want %v", got, want)
		}
		if got := p.Claim(); got != "roles" {
			t.Errorf("got claim %q, want roles", got)
		}
	})
	t.Run("empty claim means the default", func(t *testing.T) {
		p := New(&config.Policy{Roles: map[string]*config.Role{"a": {Match: []string{"x"}}}})
		if got := p.Claim(); got != config.DefaultPolicyClaim {
			t.Errorf("got claim %q, want %q", got, config.DefaultPolicyClaim)
		}
	})
	t.Run("nil role is skipped", func(t *testing.T) {
		p := New(&config.Policy{Roles: map[string]*config.Role{"a": {Match: []string{"x"}}, "b": nil}})
		if got, want := p.Names(), []string{"a"}; !slices.Equal(got, want) {
			t.Errorf("got names %v, want %v", got, want)
		}
	})
}

func TestNilPolicy(t *testing.T) {
	var p *Policy
	c := &auth.Caller{Subject: "alice", Groups: []string{"whatever"}}
	if err := p.Authorize(c); err != nil {
		t.Fatalf("got %v, want every caller to pass without a policy", err)
	}
	if len(c.Roles) != 0 {
		t.Errorf("got roles %v, want none", c.Roles)
	}
	if g := p.For(c); g != All || !g.Everything() {
		t.Errorf("got grant %+v, want All", g)
	}
	if g := p.For(nil); g != All {
		t.Errorf("got grant %+v for no caller, want All without a policy", g)
	}
	if got := p.Claim(); got != config.DefaultPolicyClaim {
		t.Errorf("got claim %q, want %q", got, config.DefaultPolicyClaim)
	}
	if got := p.Names(); got != nil {
		t.Errorf("got names %v, want none", got)
	}
	if _, ok := p.Role("ops"); ok {
		t.Error("got a role of a nil policy, want none")
	}
}

func TestAuthorize(t *testing.T) {
	p := New(testPolicy())
	tests := []struct {
		name      string
		groups    []string
		wantRoles []string
		wantErr   bool
		// wantInErr are strings the refusal must hold.
		wantInErr []string
	}{
		{name: "one group one role", groups: []string{"ops"}, wantRoles: []string{"ops"}},
		{name: "second match value", groups: []string{"eng"}, wantRoles: []string{"dev"}},
		{name: "several roles sorted", groups: []string{"other", "audit", "ops", "unrelated"}, wantRoles: []string{"auditor", "ops", "other"}},
		{name: "two values of one role count once", groups: []string{"dev", "eng"}, wantRoles: []string{"dev"}},
		{
			name: "no match", groups: []string{"guests", "visitors"}, wantErr: true,
			wantInErr: []string{"expose.agent.mcp.policy", "roles claim", "[guests, visitors]"},
		},
		{
			name: "no groups at all", groups: nil, wantErr: true,
			wantInErr: []string{"expose.agent.mcp.policy", "roles claim", "nothing"},
		},
		{
			name: "match is exact, not a prefix or case fold", groups: []string{"OPS", "op", "ops "}, wantErr: true,
			wantInErr: []string{"expose.agent.mcp.policy"},
		},
		{
			name:   "many groups are summarised",
			groups: []string{"g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9", "g10"}, wantErr: true,
			wantInErr: []string{"g8", "2 more"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Stale roles must not survive a new authorization.
			c := &auth.Caller{Subject: "someone", Groups: tt.groups, Roles: []string{"ops"}}
			err := p.Authorize(c)
			if tt.wantErr {
				if !errors.Is(err, ErrNoRole) {
					t.Fatalf("got error %v, want one wrapping ErrNoRole", err)
				}
				for _, want := range tt.wantInErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("got error %q, want it to contain %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "g9") {
					t.Errorf("got error %q, want groups past the eighth left out", err)
				}
				if len(c.Roles) != 0 {
					t.Errorf("got roles %v after a refusal, want none", c.Roles)
				}
				if g := p.For(c); g.Allows("echo", nil, false) {
					t.Errorf("got a refused caller allowed echo, want nothing")
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !slices.Equal(c.Roles, tt.wantRoles) {
				t.Errorf("got roles %v, want %v", c.Roles, tt.wantRoles)
			}
		})
	}
}

func TestAuthorizeDefaultClaimNamed(t *testing.T) {
	p := New(&config.Policy{Roles: map[string]*config.Role{"a": {Match: []string{"x"}}}})
	err := p.Authorize(&auth.Caller{Subject: "bob", Groups: []string{"y"}})
	if err == nil || !strings.Contains(err.Error(), "groups claim") {
		t.Errorf("got %v, want an error naming the groups claim", err)
	}
}

func TestStaticCaller(t *testing.T) {
	t.Run("default role defined", func(t *testing.T) {
		cfg := testPolicy()
		cfg.Roles[config.DefaultRole] = &config.Role{Include: config.Filter{Tools: []string{"echo"}}}
		p := New(cfg)
		c := &auth.Caller{Subject: auth.StaticSubject, Static: true}
		if err := p.Authorize(c); err != nil {
			t.Fatalf("got %v, want the static caller authorized", err)
		}
		if want := []string{config.DefaultRole}; !slices.Equal(c.Roles, want) {
			t.Errorf("got roles %v, want %v", c.Roles, want)
		}
		g := p.For(c)
		if g.Everything() {
			t.Fatal("got everything, want only the default role's tools")
		}
		if !g.Allows("echo", nil, false) || g.Allows("ls", nil, false) {
			t.Errorf("got echo %t, ls %t; want only echo", g.Allows("echo", nil, false), g.Allows("ls", nil, false))
		}
	})
	t.Run("no default role", func(t *testing.T) {
		p := New(testPolicy())
		c := &auth.Caller{Subject: auth.StaticSubject, Static: true}
		if err := p.Authorize(c); err != nil {
			t.Fatalf("got %v, want the static caller authorized", err)
		}
		if len(c.Roles) != 0 {
			t.Errorf("got roles %v, want none", c.Roles)
		}
		if g := p.For(c); g != All {
			t.Errorf("got grant %+v, want All", g)
		}
	})
	t.Run("groups of a static caller are ignored", func(t *testing.T) {
		p := New(testPolicy())
		c := &auth.Caller{Subject: auth.StaticSubject, Static: true, Groups: []string{"auditor"}}
		if err := p.Authorize(c); err != nil {
			t.Fatalf("got %v, want the static caller authorized", err)
		}
		if p.For(c) != All {
			t.Errorf("got a narrowed grant, want All for the static caller of a policy without default")
		}
	})
	t.Run("subject static-token from a token is no static caller", func(t *testing.T) {
		p := New(testPolicy())
		c := &auth.Caller{Subject: auth.StaticSubject, Groups: []string{"nobody"}}
		if err := p.Authorize(c); !errors.Is(err, ErrNoRole) {
			t.Errorf("got %v, want ErrNoRole: only Static marks the static caller", err)
		}
		if p.For(c) == All {
			t.Error("got All for a token caller named static-token, want nothing")
		}
	})
}

func TestForWithoutCaller(t *testing.T) {
	p := New(testPolicy())
	g := p.For(nil)
	if g.Everything() || g.Allows("echo", nil, false) || g.Allows("peer_x", nil, true) {
		t.Errorf("got a grant allowing something for no caller, want nothing")
	}
	// A token caller that was never authorized has no roles and gets
	// nothing either.
	g = p.For(&auth.Caller{Subject: "bob"})
	if g.Everything() || g.Allows("echo", nil, false) {
		t.Errorf("got a grant allowing something for a caller with no roles, want nothing")
	}
}

func TestAllows(t *testing.T) {
	p := New(&config.Policy{Roles: map[string]*config.Role{
		// all: include empty, so everything.
		"all": {Match: []string{"all"}},
		// noDeploy: everything but deploy_* and tools tagged danger.
		"noDeploy": {Match: []string{"nd"}, Exclude: config.Filter{Tools: []string{"deploy_*"}, Tags: []string{"danger"}}},
		// reader: tools tagged read, except those named *_secret.
		"reader": {Match: []string{"r"}, Include: config.Filter{Tags: []string{"read"}}, Exclude: config.Filter{Tools: []string{"*_secret"}}},
		// deployer: deploy_* by name.
		"deployer": {Match: []string{"d"}, Include: config.Filter{Tools: []string{"deploy_*"}}},
		// peers: remote tools by name, and tools tagged peer.
		"peers": {Match: []string{"p"}, Include: config.Filter{Tools: []string{"peer_*"}, Tags: []string{"peer"}}},
		// selfExclude: includes echo and excludes it: exclude wins.
		"selfExclude": {Match: []string{"se"}, Include: config.Filter{Tools: []string{"echo", "ls"}}, Exclude: config.Filter{Tools: []string{"echo"}}},
	}})
	type check struct {
		name   string
		tags   []string
		remote bool
		want   bool
	}
	tests := []struct {
		name   string
		roles  []string
		checks []check
	}{
		{name: "empty include is everything", roles: []string{"all"}, checks: []check{
			{name: "echo", want: true},
			{name: "deploy_prod", tags: []string{"danger"}, want: true},
			{name: "peer_hello", remote: true, want: true},
		}},
		{name: "exclude by name and by tag", roles: []string{"noDeploy"}, checks: []check{
			{name: "echo", want: true},
			{name: "deploy_prod", want: false},
			{name: "rm", tags: []string{"danger"}, want: false},
			{name: "peer_hello", remote: true, want: true},
		}},
		{name: "tag include with name exclude", roles: []string{"reader"}, checks: []check{
			{name: "ls", tags: []string{"read"}, want: true},
			{name: "ls", tags: []string{"write"}, want: false},
			{name: "ls", want: false},
			{name: "db_secret", tags: []string{"read"}, want: false},
		}},
		{name: "tag include grants no remote tool", roles: []string{"reader"}, checks: []check{
			{name: "peer_ls", tags: []string{"read"}, remote: true, want: false},
			{name: "ls", tags: []string{"read"}, remote: true, want: false},
		}},
		{name: "remote tools only by name glob", roles: []string{"peers"}, checks: []check{
			{name: "peer_hello", remote: true, want: true},
			{name: "hello", tags: []string{"peer"}, remote: true, want: false},
			{name: "hello", tags: []string{"peer"}, want: true},
		}},
		{name: "exclude wins within a role", roles: []string{"selfExclude"}, checks: []check{
			{name: "echo", want: false},
			{name: "ls", want: true},
			{name: "cat", want: false},
		}},
		{name: "union over roles", roles: []string{"deployer", "noDeploy"}, checks: []check{
			// noDeploy excludes deploy_prod, deployer includes it.
			{name: "deploy_prod", want: true},
			{name: "echo", want: true},
			{name: "rm", tags: []string{"danger"}, want: false},
		}},
		{name: "union of two narrow roles", roles: []string{"deployer", "reader"}, checks: []check{
			{name: "deploy_x", want: true},
			{name: "ls", tags: []string{"read"}, want: true},
			{name: "echo", want: false},
			{name: "deploy_x", remote: true, want: true},
			{name: "ls", tags: []string{"read"}, remote: true, want: false},
		}},
		{name: "glob does not cross into a prefix", roles: []string{"deployer"}, checks: []check{
			{name: "deploy", want: false},
			{name: "redeploy_x", want: false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := p.grant(tt.roles)
			for _, c := range tt.checks {
				if got := g.Allows(c.name, c.tags, c.remote); got != c.want {
					t.Errorf("got Allows(%q, %v, remote %t) %t, want %t", c.name, c.tags, c.remote, got, c.want)
				}
			}
		})
	}
}

func TestGrantFields(t *testing.T) {
	p := New(testPolicy())
	tests := []struct {
		name        string
		groups      []string
		wantShare   int
		wantApprove bool
		wantContext string
		wantErrIn   []string
	}{
		{name: "one role with a share", groups: []string{"dev"}, wantShare: 2},
		{name: "one role without a share", groups: []string{"ops"}, wantShare: 0, wantApprove: true, wantContext: "ctx-ops"},
		{name: "largest share of several", groups: []string{"dev", "batch"}, wantShare: 2},
		{name: "a role without a share makes it unlimited", groups: []string{"dev", "batch", "audit"}, wantShare: 0},
		{name: "a role with a context and one without conflict", groups: []string{"audit", "ops"}, wantApprove: true, wantErrIn: []string{"auditor, ops", "nats_context", "expose.agent.mcp.policy"}},
		{name: "different contexts conflict", groups: []string{"ops", "other"}, wantApprove: true, wantErrIn: []string{"ops, other", "nats_context", "expose.agent.mcp.policy"}},
		{name: "roles without a context use the gateway's", groups: []string{"dev", "audit"}, wantShare: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &auth.Caller{Subject: "x", Groups: tt.groups}
			if err := p.Authorize(c); err != nil {
				t.Fatalf("authorizing %v: %v", tt.groups, err)
			}
			g := p.For(c)
			if g.Share != tt.wantShare {
				t.Errorf("got share %d, want %d", g.Share, tt.wantShare)
			}
			if g.Approve != tt.wantApprove {
				t.Errorf("got approve %t, want %t", g.Approve, tt.wantApprove)
			}
			if !slices.Equal(g.Roles, c.Roles) {
				t.Errorf("got grant roles %v, want the caller's %v", g.Roles, c.Roles)
			}
			name, err := g.RemoteContext()
			if tt.wantErrIn != nil {
				if err == nil {
					t.Fatalf("got context %q, want an error for roles %v", name, c.Roles)
				}
				for _, want := range tt.wantErrIn {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("got error %q, want it to contain %q", err, want)
					}
				}
				return
			}
			if err != nil || name != tt.wantContext {
				t.Errorf("got context %q, error %v; want %q, nil", name, err, tt.wantContext)
			}
		})
	}
}

func TestRoleLookup(t *testing.T) {
	p := New(testPolicy())
	g, ok := p.Role("dev")
	if !ok || !slices.Equal(g.Roles, []string{"dev"}) || g.Share != 2 {
		t.Errorf("got %+v, %t; want the dev grant", g, ok)
	}
	if _, ok := p.Role("nope"); ok {
		t.Error("got a grant for an undefined role, want none")
	}
}

func TestGrantCached(t *testing.T) {
	p := New(testPolicy())
	a := &auth.Caller{Subject: "alice", Groups: []string{"ops", "dev"}}
	b := &auth.Caller{Subject: "bob", Groups: []string{"eng", "ops", "unrelated"}}
	for _, c := range []*auth.Caller{a, b} {
		if err := p.Authorize(c); err != nil {
			t.Fatalf("authorizing %s: %v", c.Subject, err)
		}
	}
	ga, gb := p.For(a), p.For(b)
	if ga != gb {
		t.Errorf("got different grants %p and %p for the same roles, want one shared", ga, gb)
	}
	if again := p.For(a); again != ga {
		t.Errorf("got a new grant on the second lookup, want the cached one")
	}
	if dev, _ := p.Role("dev"); dev == ga {
		t.Error("got the same grant for {dev} as for {dev, ops}, want distinct grants")
	}
	if ga.Key == "" {
		t.Error("got an empty key for a role grant, want it to differ from All's")
	}
}

func TestGrantConcurrent(t *testing.T) {
	p := New(testPolicy())
	groups := [][]string{{"ops"}, {"dev"}, {"ops", "dev"}, {"audit", "batch"}, {"other"}}
	done := make(chan *Grant, 200)
	for i := range 200 {
		go func() {
			c := &auth.Caller{Subject: fmt.Sprint(i), Groups: groups[i%len(groups)]}
			if err := p.Authorize(c); err != nil {
				t.Errorf("authorizing: %v", err)
			}
			done <- p.For(c)
		}()
	}
	seen := map[string]*Grant{}
	for range 200 {
		g := <-done
		if prev, ok := seen[g.Key]; ok && prev != g {
			t.Errorf("got two grants for roles %v, want one", g.Roles)
		}
		seen[g.Key] = g
	}
	if len(seen) != len(groups) {
		t.Errorf("got %d distinct grants, want %d", len(seen), len(groups))
	}
}

func TestRefusal(t *testing.T) {
	p := New(testPolicy())
	c := &auth.Caller{Subject: "carol", Groups: []string{"audit", "dev"}}
	if err := p.Authorize(c); err != nil {
		t.Fatalf("authorizing: %v", err)
	}
	g := p.For(c)
	// deploy_prod is a tool ops has; no_such_tool exists for nobody. The
	// two refusals must differ only in the name.
	existing := g.Refusal("deploy_prod")
	missing := g.Refusal("no_such_tool")
	for _, want := range []string{"deploy_prod", "expose.agent.mcp.policy", "auditor, dev"} {
		if !strings.Contains(existing, want) {
			t.Errorf("got %q, want it to contain %q", existing, want)
		}
	}
	if got := strings.ReplaceAll(missing, "no_such_tool", "deploy_prod"); got != existing {
		t.Errorf("got refusals %q and %q, want them to differ only in the tool name", existing, missing)
	}
	for _, leak := range []string{"ops", "other", "batch", "ctx-", "carol"} {
		if strings.Contains(existing, leak) {
			t.Errorf("got %q, want it not to mention %q", existing, leak)
		}
	}
}

// ExampleGrant_Allows shows a tag-only include granting a local tool and
// not a remote one of the same tags.
func ExampleGrant_Allows() {
	p := New(&config.Policy{Roles: map[string]*config.Role{
		"reader": {Match: []string{"readers"}, Include: config.Filter{Tags: []string{"read"}}},
	}})
	c := &auth.Caller{Subject: "alice", Groups: []string{"readers"}}
	if err := p.Authorize(c); err != nil {
		fmt.Println(err)
		return
	}
	g := p.For(c)
	fmt.Println(g.Allows("ls", []string{"read"}, false))
	fmt.Println(g.Allows("peer_ls", []string{"read"}, true))
	// Output:
	// true
	// false
}
