package fiskapp

import "github.com/fiskfleet/fiskfleet/shared/config"

// OptionsFrom maps an agent configuration onto [Options], so both servers
// select and run commands by the same keys.
func OptionsFrom(cfg *config.Config) Options {
	return Options{
		Path:          cfg.ApplicationPath,
		Include:       cfg.Include,
		Exclude:       cfg.Exclude,
		Expose:        cfg.Expose.Agent.Tools,
		ConfirmTags:   cfg.ConfirmTags,
		CredentialEnv: cfg.CredentialEnv,
	}
}
