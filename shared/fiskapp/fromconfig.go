package fiskapp

import (
	"slices"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// OptionsFrom maps an agent configuration onto [Options], so both servers
// select and run commands by the same keys. The variable named by
// expose.agent.mcp.auth_token_env is scrubbed too: a served command must
// never see the token that guards it, whichever server runs it.
func OptionsFrom(cfg *config.Config) Options {
	scrub := slices.Clone(cfg.CredentialEnv)
	if m := cfg.Expose.Agent.MCP; m != nil && m.AuthTokenEnv != "" && !slices.Contains(scrub, m.AuthTokenEnv) {
		scrub = append(scrub, m.AuthTokenEnv)
	}
	return Options{
		Path:          cfg.ApplicationPath,
		Include:       cfg.Include,
		Exclude:       cfg.Exclude,
		Expose:        cfg.Expose.Agent.Tools,
		ConfirmTags:   cfg.ConfirmTags,
		CredentialEnv: scrub,
	}
}
