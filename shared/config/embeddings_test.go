package config

import (
	"slices"
	"testing"
	"time"
)

// withEmbeddings is an identity with knowledge.embeddings set to body (a
// YAML flow mapping's contents).
func withEmbeddings(body string) string {
	return "identity: ops\nknowledge: {directory: docs, embeddings: {" + body + "}}\n"
}

func TestEmbeddingsAccepted(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"ollama on loopback over http", "base_url: 'http://127.0.0.1:11434/v1', model: nomic-embed-text"},
		{"localhost over http", "base_url: 'http://localhost:8080/v1', model: m"},
		{"IPv6 loopback over http", "base_url: 'http://[::1]:8080/v1', model: m"},
		{"remote over https", "base_url: 'https://api.openai.com/v1', model: text-embedding-3-small, api_key_env: OPENAI_EMBED_KEY"},
		{"every key", "base_url: 'https://embed.example.com/v1', model: m, api_key_env: EMBED_KEY, timeout: 1m, batch: 64, query_prefix: 'search_query: ', document_prefix: 'search_document: {title}: '"},
		{"the bounds", "base_url: 'http://127.0.0.1/v1', model: m, timeout: 10m, batch: 2048"},
		{"the lower bounds", "base_url: 'http://127.0.0.1/v1', model: m, timeout: 1s, batch: 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, withEmbeddings(tt.body))
			if _, err := c.Validate(ModeInfo); err != nil {
				t.Fatalf("got %v, want no refusal", err)
			}
		})
	}
}

func TestEmbeddingsRefusals(t *testing.T) {
	const key = "knowledge.embeddings"
	tests := []struct {
		name    string
		body    string
		wantKey string
		wantMsg string
	}{
		{"base_url missing", "model: m", key + ".base_url", key + ".base_url is required"},
		{"not http", "base_url: 'ftp://127.0.0.1/v1', model: m", key + ".base_url", key + `.base_url "ftp://127.0.0.1/v1" is not an http(s) URL`},
		{"no host", "base_url: '127.0.0.1:11434/v1', model: m", key + ".base_url", "is not an http(s) URL"},
		{"http off this machine", "base_url: 'http://embed.example.com/v1', model: m", key + ".base_url",
			key + ".base_url http://embed.example.com/v1 is not on this machine and not https"},
		{"http on a LAN address", "base_url: 'http://192.168.1.20:11434/v1', model: m", key + ".base_url", "use https"},
		{"user and password in the URL", "base_url: 'https://ann:hunter2@embed.example.com/v1', model: m", key + ".base_url",
			"without credentials, query or fragment: fix " + key + ".base_url (the key goes in " + key + ".api_key_env)"},
		{"query in the URL", "base_url: 'https://embed.example.com/v1?key=abc', model: m", key + ".base_url", "without credentials, query or fragment"},
		{"model missing", "base_url: 'http://127.0.0.1:11434/v1'", key + ".model", key + ".model is required"},
		{"model blank", "base_url: 'http://127.0.0.1:11434/v1', model: '  '", key + ".model", key + ".model is required"},
		{"api_key_env not a variable name", "base_url: 'https://embed.example.com/v1', model: m, api_key_env: 'sk-abc123'", key + ".api_key_env",
			key + `.api_key_env "sk-abc123" is not an environment variable name`},
		{"timeout too short", "base_url: 'http://127.0.0.1/v1', model: m, timeout: 500ms", key + ".timeout",
			key + ".timeout must be between 1s and 10m, got 500ms"},
		{"timeout too long", "base_url: 'http://127.0.0.1/v1', model: m, timeout: 11m", key + ".timeout",
			key + ".timeout must be between 1s and 10m, got 11m0s"},
		{"batch negative", "base_url: 'http://127.0.0.1/v1', model: m, batch: -1", key + ".batch",
			key + ".batch must be between 1 and 2048, got -1"},
		{"batch too large", "base_url: 'http://127.0.0.1/v1', model: m, batch: 5000", key + ".batch",
			key + ".batch must be between 1 and 2048, got 5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefusal(t, ModeInfo, withEmbeddings(tt.body), tt.wantKey, tt.wantMsg) })
	}
}

func TestEmbeddingsDefaults(t *testing.T) {
	c := mustParse(t, withEmbeddings("base_url: 'http://127.0.0.1:11434/v1', model: m"))
	e := c.Knowledge.Embeddings
	if got, want := e.RequestTimeout(), 30*time.Second; got != want {
		t.Errorf("got RequestTimeout %v, want %v", got, want)
	}
	if got, want := e.BatchSize(), 32; got != want {
		t.Errorf("got BatchSize %d, want %d", got, want)
	}
	c = mustParse(t, withEmbeddings("base_url: 'http://127.0.0.1:11434/v1', model: m, timeout: 2m, batch: 8"))
	e = c.Knowledge.Embeddings
	if got, want := e.RequestTimeout(), 2*time.Minute; got != want {
		t.Errorf("got RequestTimeout %v, want %v", got, want)
	}
	if got, want := e.BatchSize(), 8; got != want {
		t.Errorf("got BatchSize %d, want %d", got, want)
	}
}

func TestSecretEnv(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"none", "identity: ops\n", nil},
		{"every secret", `identity: ops
expose: {agent: {mcp: {auth_token_env: MCP_TOKEN}}}
approvals:
  operator: true
  approvers: [{name: ann, token_env: ANN_TOKEN}, {name: bob, token_env: BOB_TOKEN}, {name: cy, nkey: UABC}]
  web: {client_id: page, client_secret_env: APPROVALS_SECRET}
knowledge: {directory: docs, embeddings: {base_url: 'https://embed.example.com/v1', model: m, api_key_env: EMBED_KEY}}
`, []string{"MCP_TOKEN", "ANN_TOKEN", "BOB_TOKEN", "APPROVALS_SECRET", "EMBED_KEY"}},
		{"the embeddings key alone", withEmbeddings("base_url: 'https://embed.example.com/v1', model: m, api_key_env: EMBED_KEY"), []string{"EMBED_KEY"}},
		{"embeddings without a key", withEmbeddings("base_url: 'http://127.0.0.1/v1', model: m"), nil},
		{"a name given twice, once", `identity: ops
expose: {agent: {mcp: {auth_token_env: SHARED_TOKEN}}}
knowledge: {directory: docs, embeddings: {base_url: 'https://embed.example.com/v1', model: m, api_key_env: SHARED_TOKEN}}
`, []string{"SHARED_TOKEN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.yaml).SecretEnv(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
