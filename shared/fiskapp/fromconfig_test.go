package fiskapp_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

func TestOptionsFromScrubsTheMCPToken(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity: demo
application_path: /bin/true
credential_env: [VAULT_TOKEN]
expose:
  agent:
    mcp:
      auth_token_env: GATEWAY_TOKEN
`), "agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := fiskapp.OptionsFrom(cfg)
	if want := []string{"VAULT_TOKEN", "GATEWAY_TOKEN"}; !slices.Equal(opts.CredentialEnv, want) {
		t.Errorf("credential env: got %v, want %v", opts.CredentialEnv, want)
	}
	if !slices.Equal(cfg.CredentialEnv, []string{"VAULT_TOKEN"}) {
		t.Errorf("config modified: got %v, want it untouched", cfg.CredentialEnv)
	}
}

func TestOptionsFromScrubsEverySecretTheServersHold(t *testing.T) {
	cfg, err := config.Parse([]byte(`
identity: demo
application_path: /bin/true
credential_env: [VAULT_TOKEN, EMBED_KEY]
expose: {agent: {mcp: {auth_token_env: GATEWAY_TOKEN}}}
approvals:
  operator: true
  approvers: [{name: ann, token_env: ANN_TOKEN}]
  web: {client_id: page, client_secret_env: APPROVALS_SECRET}
knowledge:
  directory: docs
  embeddings: {base_url: 'https://embed.example.com/v1', model: m, api_key_env: EMBED_KEY}
`), "agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := fiskapp.OptionsFrom(cfg)
	if want := []string{"VAULT_TOKEN", "EMBED_KEY", "GATEWAY_TOKEN", "ANN_TOKEN", "APPROVALS_SECRET"}; !slices.Equal(opts.CredentialEnv, want) {
		t.Errorf("credential env: got %v, want %v (each name once)", opts.CredentialEnv, want)
	}
}

func TestCommandNeverSeesTheEmbeddingsKey(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("FISKAPP_TEST_EMBED_KEY", "sk-embed-secret")
	t.Setenv("FISKAPP_TEST_VISIBLE", "plain")
	cfg, err := config.Parse([]byte(`
identity: demo
application_path: /bin/true
knowledge:
  directory: docs
  embeddings: {base_url: 'http://127.0.0.1:11434/v1', model: nomic-embed-text, api_key_env: FISKAPP_TEST_EMBED_KEY}
`), "agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	getenv := demoCommand(t, fiskapp.OptionsFrom(cfg), "getenv")
	tests := []struct {
		name string
		want string
	}{
		{name: "FISKAPP_TEST_EMBED_KEY", want: "FISKAPP_TEST_EMBED_KEY unset\n"},
		{name: "FISKAPP_TEST_VISIBLE", want: "FISKAPP_TEST_VISIBLE=plain\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input, _ := json.Marshal(map[string]string{"name": tt.name})
			if res := call(t, getenv, string(input)); res.Output != tt.want {
				t.Errorf("got %q, want %q", res.Output, tt.want)
			}
		})
	}
}
