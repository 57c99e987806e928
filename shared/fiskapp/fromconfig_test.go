package fiskapp_test

import (
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
