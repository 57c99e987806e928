package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
)

// needsIndex reports whether serving uses the knowledge index: a knowledge
// built-in is allowlisted or documents are served as resources.
func needsIndex(cfg *config.Config) bool {
	m := cfg.Expose.Agent.MCP
	if cfg.Knowledge == nil || cfg.Knowledge.Directory == "" || m == nil {
		return false
	}
	for _, b := range m.Builtins {
		if slices.Contains(knowledge.ToolNames(), b) {
			return true
		}
	}
	return slices.Contains(m.Resources, config.ResourceKnowledge)
}

// OpenIndex opens the index serving needs, or returns nil when nothing
// served uses it. Opening checks the store and creates it if absent; it
// does not index.
func OpenIndex(cfg *config.Config, rebuild bool, lookupEnv func(string) (string, bool), log *slog.Logger) (*knowledge.Index, error) {
	if !needsIndex(cfg) {
		return nil, nil
	}
	return OpenIndexOf(cfg, rebuild, lookupEnv, log)
}

// OpenIndexOf opens the index of cfg's knowledge.directory, whether or not
// serving uses it (the knowledge commands do); rebuild starts it afresh.
// With knowledge.embeddings the index gets the vector tier, and lookupEnv
// reads the server's key from the variable api_key_env names. A key
// variable that is named but not set is an error: a server that needs the
// key would refuse every request, and one that does not should not be
// given a name to look for.
func OpenIndexOf(cfg *config.Config, rebuild bool, lookupEnv func(string) (string, bool), log *slog.Logger) (*knowledge.Index, error) {
	k := cfg.Knowledge
	var emb *knowledge.Embeddings
	if e := k.Embeddings; e != nil {
		var key string
		if e.APIKeyEnv != "" {
			v, ok := lookupEnv(e.APIKeyEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("%s: knowledge.embeddings.api_key_env names %s, which is not set: export it with the embeddings server's key, or remove knowledge.embeddings.api_key_env", cfg.File, e.APIKeyEnv)
			}
			key = v
		}
		emb = &knowledge.Embeddings{
			Client:         embed.New(embed.Config{BaseURL: e.BaseURL, Model: e.Model, APIKey: key, Timeout: e.RequestTimeout()}),
			QueryPrefix:    e.QueryPrefix,
			DocumentPrefix: e.DocumentPrefix,
			Batch:          e.BatchSize(),
		}
	}
	idx, err := knowledge.Open(knowledge.Options{
		Embeddings:     emb,
		Directory:      k.Directory,
		Store:          k.Store,
		Identity:       cfg.Identity,
		MaxResultBytes: k.MaxResultBytes,
		CheckInterval:  k.CheckEvery(),
		Rebuild:        rebuild,
		Logger:         log,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return idx, nil
}

// resourcesIndex is the index to serve as MCP resources, or nil when
// expose.agent.mcp.resources does not list knowledge.
func resourcesIndex(cfg *config.Config, idx *knowledge.Index) *knowledge.Index {
	if m := cfg.Expose.Agent.MCP; idx != nil && m != nil && slices.Contains(m.Resources, config.ResourceKnowledge) {
		return idx
	}
	return nil
}

// keepIndexed builds the index and keeps it current until ctx ends,
// refreshing the resource listing after each change. It runs beside the
// listener, so serving never waits for a build.
func keepIndexed(ctx context.Context, idx *knowledge.Index, srv *mcpserver.Server, log *slog.Logger) {
	err := idx.Run(ctx, func(ch knowledge.Changes) {
		if err := srv.RefreshResources(ctx); err != nil && ctx.Err() == nil {
			log.Warn("refreshing knowledge resources", "error", err)
		}
	})
	if err != nil {
		log.Error("knowledge index not kept current: searches answer from the index as it was at start", "directory", idx.Dir(), "error", err)
	}
}
