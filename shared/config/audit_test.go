package config

import "testing"

func TestAuditRefusals(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"wildcard subject", "identity: ops\naudit: {subject: 'ops.audit.>'}\n", "audit.subject", `audit.subject "ops.audit.>" is not a NATS subject to publish on`},
		{"star in subject", "identity: ops\naudit: {subject: 'ops.*.audit'}\n", "audit.subject", "no wildcards"},
		{"empty token", "identity: ops\naudit: {subject: 'ops..audit'}\n", "audit.subject", "empty tokens"},
		{"space in subject", "identity: ops\naudit: {subject: 'ops audit'}\n", "audit.subject", "fix audit.subject"},
		{"unknown arguments mode", "identity: ops\naudit: {arguments: none}\n", "audit.arguments", `audit.arguments "none" is not one of full, digest`},
		{"relative spool", "identity: ops\naudit: {spool_dir: spool}\n", "audit.spool_dir", "is not an absolute path"},
		{"negative spool bound", "identity: ops\naudit: {spool_dir: /var/spool/x, spool_max: -1}\n", "audit.spool_max", "at least 0"},
		{"bound without spool", "identity: ops\naudit: {spool_max: 1000}\n", "audit.spool_max", "without audit.spool_dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefusal(t, ModeInfo, tt.yaml, tt.wantKey, tt.wantMsg) })
	}
}

func TestAuditSubjectAndDigest(t *testing.T) {
	tests := []struct {
		name        string
		yaml        string
		wantSubject string
		wantDigest  bool
	}{
		{"no audit key", "identity: ops\n", "choria.fisk-ai.audit.ops", false},
		{"empty audit key", "identity: ops\naudit: {}\n", "choria.fisk-ai.audit.ops", false},
		{"custom subject", "identity: ops\naudit: {subject: ops.audit.fleet}\n", "ops.audit.fleet", false},
		{"full arguments", "identity: ops\naudit: {arguments: full}\n", "choria.fisk-ai.audit.ops", false},
		{"digest only", "identity: ops\naudit: {arguments: digest}\n", "choria.fisk-ai.audit.ops", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			if _, err := c.Validate(ModeInfo); err != nil {
				t.Fatalf("Validate: got %v, want no error", err)
			}
			if got := c.AuditSubject(); got != tt.wantSubject {
				t.Errorf("AuditSubject: got %q, want %q", got, tt.wantSubject)
			}
			if got := c.AuditDigestOnly(); got != tt.wantDigest {
				t.Errorf("AuditDigestOnly: got %t, want %t", got, tt.wantDigest)
			}
		})
	}
}
