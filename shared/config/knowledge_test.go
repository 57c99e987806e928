package config

import (
	"strings"
	"testing"
	"time"
)

func TestKnowledgeRefusals(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"max result bytes too small", "identity: ops\nknowledge: {directory: docs, max_result_bytes: 10}\n", "knowledge.max_result_bytes", "knowledge.max_result_bytes must be at least 1024, got 10"},
		{"max result bytes negative", "identity: ops\nknowledge: {directory: docs, max_result_bytes: -1}\n", "knowledge.max_result_bytes", "must be at least"},
		{"store inside directory", "identity: ops\nknowledge: {directory: docs, store: docs/.index}\n", "knowledge.store", "knowledge.store docs/.index is inside knowledge.directory docs"},
		{"check interval too short", "identity: ops\nknowledge: {directory: docs, check_interval: 10ms}\n", "knowledge.check_interval", "knowledge.check_interval must be at least 1s, got 10ms"},
		{"check interval negative", "identity: ops\nknowledge: {directory: docs, check_interval: -1m}\n", "knowledge.check_interval", "must be at least 1s"},
		{"store is the directory", "identity: ops\nknowledge: {directory: docs, store: ./docs}\n", "knowledge.store", "is inside knowledge.directory"},
		{"resources without knowledge", "identity: ops\nexpose: {agent: {mcp: {resources: [knowledge]}}}\n", "knowledge.directory",
			"agent.yaml: expose.agent.mcp.resources lists knowledge, which serves documents as resources: add knowledge.directory: PATH"},
		{"unknown resource kind", "identity: ops\nknowledge: {directory: docs}\nexpose: {agent: {mcp: {resources: [files]}}}\n", "expose.agent.mcp.resources[0]",
			`expose.agent.mcp.resources[0] "files" is not a resource kind: use knowledge`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefusal(t, ModeInfo, tt.yaml, tt.wantKey, tt.wantMsg) })
	}
}

func TestKnowledgeAccepted(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"directory only, as before", "identity: ops\nknowledge: {directory: docs}\n"},
		{"every key", "identity: ops\nknowledge: {directory: docs, store: /var/cache/ops-index, max_result_bytes: 65536}\nexpose: {agent: {mcp: {builtins: [knowledge_search], resources: [knowledge]}}}\n"},
		{"check interval off", "identity: ops\nknowledge: {directory: docs, check_interval: 0}\n"},
		{"check interval", "identity: ops\nknowledge: {directory: docs, check_interval: 1m}\n"},
		{"store beside the directory", "identity: ops\nknowledge: {directory: docs, store: docs-index}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			if _, err := c.Validate(ModeInfo); err != nil {
				t.Fatalf("got %v, want no refusal", err)
			}
		})
	}
	c := mustParse(t, "identity: ops\nknowledge: {directory: docs, store: /tmp/x, max_result_bytes: 2048}\n")
	if got, want := c.Knowledge.Store, "/tmp/x"; got != want {
		t.Errorf("got store %q, want %q", got, want)
	}
	if got, want := c.Knowledge.MaxResultBytes, 2048; got != want {
		t.Errorf("got max_result_bytes %d, want %d", got, want)
	}
	for yaml, want := range map[string]time.Duration{"": 0, ", check_interval: 0": -1, ", check_interval: 90s": 90 * time.Second} {
		c := mustParse(t, "identity: ops\nknowledge: {directory: docs"+yaml+"}\n")
		if got := c.Knowledge.CheckEvery(); got != want {
			t.Errorf("%q: got CheckEvery %v, want %v (0 the default, negative off)", yaml, got, want)
		}
	}
}

func TestKnowledgeUnknownKey(t *testing.T) {
	_, err := Parse([]byte("identity: ops\nknowledge: {directory: docs, stor: x}\n"), testFile)
	if err == nil || !strings.Contains(err.Error(), "knowledge.stor") {
		t.Fatalf("got %v, want a refusal naming knowledge.stor", err)
	}
}
