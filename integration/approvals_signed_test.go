package integration_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// TestApprovalsSigned: an agent whose approvals.approvers list public
// nkeys takes only signed answers. From another process, the real
// `a2a-agent approvals approve` with no key or an unlisted key is
// refused and the gated call does not run; with a listed key, signed
// while claiming another approver's name, it runs once and the decision
// names the key's approver.
func TestApprovalsSigned(t *testing.T) {
	t.Parallel()
	f := newApprFleet(t)
	seedFile := func(kp nkeys.KeyPair) (string, string) {
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		path := filepath.Join(t.TempDir(), "approver.nk")
		if err := os.WriteFile(path, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		return path, pub
	}
	olivia, _ := nkeys.CreateUser()
	mallory, _ := nkeys.CreateUser()
	oliviaSeed, oliviaPub := seedFile(olivia)
	mallorySeed, _ := seedFile(mallory)
	f.serve(t, "signed", 1, map[string]any{"operator": true, "timeout": "60s",
		"approvers": []map[string]any{{"name": "olivia", "nkey": oliviaPub}}}, nil)

	marker := filepath.Join(t.TempDir(), "deployed")
	call := f.callDeploy(t, "signed", "ci-bot", marker, false)
	req := f.waitRequest(t, "signed", marker)

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unsigned", nil, "unsigned"},
		{"an unlisted key", []string{"--nkey", mallorySeed}, "unknown_signer"},
	} {
		r := f.cli(t, append([]string{"approvals", "approve", req.ID, "--as", "olivia"}, c.args...)...)
		if r.ExitCode == 0 || !strings.Contains(r.Stdout+r.Stderr, c.want) {
			t.Errorf("approve with %s: got exit %d\n%s%s\nwant refused as %s", c.name, r.ExitCode, r.Stdout, r.Stderr, c.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("approve with %s: got the command run, want it waiting", c.name)
		}
		if !f.listed(t, "signed", req.ID) {
			t.Fatalf("approve with %s: got the request gone, want it waiting", c.name)
		}
	}

	r := f.cli(t, "approvals", "approve", req.ID, "--as", "somebody-else", "--nkey", oliviaSeed)
	if r.ExitCode != 0 {
		t.Fatalf("approve with olivia's key: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	if code := call.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the approved call: exit %d\n%s", code, call.Output())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the approved call: got no marker (%v), want it run", err)
	}
	rec := f.trail.one(t, req.Digest)
	if rec.Gate.Approver != "olivia" {
		t.Errorf("the audit record: got approver %q, want olivia, the key's name, not the claimed one", rec.Gate.Approver)
	}
}
