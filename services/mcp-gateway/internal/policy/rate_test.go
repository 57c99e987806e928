package policy_test

import (
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

func TestLimiterBuckets(t *testing.T) {
	var l policy.Limiter
	t0 := time.Unix(1_000_000, 0)
	perCaller := policy.Bound{Rate: config.MustRate("3/s")}
	deploy := policy.Bound{Scope: "tool:deploy", Rate: config.MustRate("1/m")}

	// A burst of the bucket's size, then the caller waits a refill.
	for i := range 3 {
		if wait, over := l.Take("alice", t0, perCaller); wait != 0 || over != -1 {
			t.Fatalf("call %d of alice's burst: got wait %s (bound %d), want it through", i+1, wait, over)
		}
	}
	wait, over := l.Take("alice", t0, perCaller)
	if over != 0 || wait <= 0 || wait > time.Second/3+time.Millisecond {
		t.Errorf("alice's 4th call at once: got wait %s (bound %d), want about 333ms on bound 0", wait, over)
	}
	// Another caller has its own bucket.
	if wait, _ := l.Take("bob", t0, perCaller); wait != 0 {
		t.Errorf("bob: got wait %s, want his own bucket", wait)
	}
	// A refill of one call a third of a second later.
	if wait, _ := l.Take("alice", t0.Add(time.Second/3+time.Millisecond), perCaller); wait != 0 {
		t.Errorf("alice after a refill: got wait %s, want through", wait)
	}

	// All or none: a call over its tool's bound spends nothing of the
	// caller's, and the wait is the longest bound's.
	t1 := t0.Add(time.Hour)
	if wait, _ := l.Take("carol", t1, perCaller, deploy); wait != 0 {
		t.Fatalf("carol's first deploy: got wait %s", wait)
	}
	wait, over = l.Take("carol", t1, perCaller, deploy)
	if over != 1 || wait < 59*time.Second || wait > time.Minute {
		t.Errorf("carol's second deploy: got wait %s (bound %d), want about a minute on the tool's bound", wait, over)
	}
	for i := range 2 {
		if wait, _ := l.Take("carol", t1, perCaller); wait != 0 {
			t.Errorf("carol's other call %d: got wait %s, want her refused deploy not charged to her rate", i+1, wait)
		}
	}
	// Unlimited bounds hold no bucket.
	before := l.Len()
	l.Take("dave", t1, policy.Bound{})
	if l.Len() != before {
		t.Errorf("an unlimited bound: got %d buckets, want %d", l.Len(), before)
	}
}

// TestLimiterSweep: buckets that filled up again are dropped, so the
// limiter's memory follows its callers of the moment.
func TestLimiterSweep(t *testing.T) {
	var l policy.Limiter
	t0 := time.Unix(2_000_000, 0)
	b := policy.Bound{Rate: config.MustRate("5/s")}
	for i := range 3000 {
		l.Take(string(rune('a'+i%26))+time.Duration(i).String(), t0.Add(time.Duration(i)*time.Millisecond), b)
	}
	// A sweep every 1024 new buckets keeps those of the last 200 ms
	// (a 5/s bucket refills one call in 200 ms): 200 and the 952 since.
	if n := l.Len(); n > 1024+200 {
		t.Errorf("after 3000 callers, one call each over 3 s: got %d buckets, want the full ones swept", n)
	}
}

func TestGrantRates(t *testing.T) {
	p := policy.New(&config.Policy{Roles: map[string]*config.Role{
		"ops":     {Match: []string{"ops"}, Rate: "60/m", ToolRates: map[string]string{"deploy": "2/m", "cluster_*": "10/s"}},
		"fast":    {Match: []string{"fast"}, Rate: "10/s", ToolRates: map[string]string{"deploy": "5/m"}},
		"free":    {Match: []string{"free"}, Include: config.Filter{Tools: []string{"echo"}}},
		"readers": {Match: []string{"readers"}, Include: config.Filter{Tools: []string{"echo", "deploy"}}},
	}})
	grant := func(groups ...string) *policy.Grant {
		c := &auth.Caller{Subject: "x", Groups: groups}
		if err := p.Authorize(c); err != nil {
			t.Fatal(err)
		}
		return p.For(c)
	}
	tests := []struct {
		name      string
		g         *policy.Grant
		rate      string
		tool      string
		toolRate  string
		unlimited bool
	}{
		{"one role", grant("ops"), "60/m", "deploy", "2/m", false},
		{"glob", grant("ops"), "60/m", "cluster_node_status", "10/s", false},
		{"no tool rate", grant("ops"), "60/m", "echo", "", true},
		{"most generous of two", grant("ops", "fast"), "10/s", "deploy", "5/m", false},
		// free has no rate: roles only add, so the caller has none.
		{"a role without a rate", grant("ops", "free"), "", "deploy", "2/m", false},
		// readers grants deploy with no tool rate for it.
		{"a role granting the tool unbounded", grant("ops", "readers"), "", "deploy", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.g.Rate; got != config.MustRate(tt.rate) {
				t.Errorf("Rate: got %s, want %q", got, tt.rate)
			}
			got := tt.g.ToolRate(tt.tool, nil, false)
			if got.Unlimited() != tt.unlimited || !tt.unlimited && got != config.MustRate(tt.toolRate) {
				t.Errorf("ToolRate(%s): got %s, want %q", tt.tool, got, tt.toolRate)
			}
		})
	}
	if r := policy.All.ToolRate("deploy", nil, false); !r.Unlimited() || !policy.All.Rate.Unlimited() {
		t.Error("All: got a rate, want none")
	}
}
