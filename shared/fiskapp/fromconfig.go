package fiskapp

import (
	"slices"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// OptionsFrom maps an agent configuration onto [Options], so both servers
// select and run commands by the same keys. The variable named by
// expose.agent.mcp.auth_token_env and knowledge.embeddings.api_key_env are
// scrubbed too ([config.Config.SecretEnv]): a served command must never see
// the token that guards it, or a key the gateway holds, whichever server
// runs it.
func OptionsFrom(cfg *config.Config) Options {
	scrub := slices.Clone(cfg.CredentialEnv)
	for _, name := range cfg.SecretEnv() {
		if !slices.Contains(scrub, name) {
			scrub = append(scrub, name)
		}
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
