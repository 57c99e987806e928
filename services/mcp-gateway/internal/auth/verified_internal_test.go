package auth

import (
	"testing"
	"time"
)

func TestVerifiedCache(t *testing.T) {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	var vc verified
	c := &Caller{Subject: "alice", Groups: []string{"dev"}, Scopes: []string{"mcp"}, Roles: []string{"readers"}}

	vc.store("tok", c, now.Add(10*time.Minute), now)
	got, ok := vc.lookup("tok", now.Add(time.Second))
	if !ok || got.Subject != "alice" || len(got.Groups) != 1 || got.Roles != nil {
		t.Fatalf("got %+v, %t; want alice's caller without roles (the policy sets them per request)", got, ok)
	}
	got.Groups[0] = "changed"
	if again, _ := vc.lookup("tok", now.Add(time.Second)); again.Groups[0] != "dev" {
		t.Errorf("got groups %v after a caller changed its copy, want [dev]: each lookup is a copy", again.Groups)
	}
	if _, ok := vc.lookup("other", now); ok {
		t.Error("got a hit for a token never stored")
	}
	if _, ok := vc.lookup("tok", now.Add(verifiedTTL)); ok {
		t.Errorf("got a hit %s after the check, want none: a withdrawn key must stop working within that time", verifiedTTL)
	}

	// A token expiring before the cache's own limit is trusted only until
	// its exp.
	vc.store("short", c, now.Add(5*time.Second), now)
	if _, ok := vc.lookup("short", now.Add(4*time.Second)); !ok {
		t.Error("got no hit before exp")
	}
	if _, ok := vc.lookup("short", now.Add(5*time.Second)); ok {
		t.Error("got a hit at exp, want none")
	}
	vc.store("expired", c, now.Add(-time.Second), now)
	if _, ok := vc.lookup("expired", now); ok {
		t.Error("got a hit for a token stored already expired")
	}

	vc.store("tok", c, now.Add(time.Hour), now)
	vc.clear()
	if _, ok := vc.lookup("tok", now); ok {
		t.Error("got a hit after clear")
	}

	for i := range verifiedMax + 1 {
		vc.store(string(rune('a'+i%26))+time.Duration(i).String(), c, now.Add(time.Hour), now)
	}
	vc.mu.Lock()
	n := len(vc.byDigest)
	vc.mu.Unlock()
	if n > verifiedMax {
		t.Errorf("got %d entries, want at most %d", n, verifiedMax)
	}
}
