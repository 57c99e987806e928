package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

type infoCmd struct {
	Config string `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"MCP_GATEWAY_CONFIG"`
}

func (c *infoCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, err := loadConfig(c.Config, config.ModeInfo, log)
	if err != nil {
		return err
	}
	idx, err := openIndex(cfg, false, log)
	if err != nil {
		return err
	}
	if idx != nil {
		defer idx.Close()
	}
	tools, appDropped, err := localTools(ctx, cfg, idx)
	if err != nil {
		return err
	}
	served, dropped := mcpserver.Select(tools)
	if m := cfg.Expose.Agent.MCP; m != nil {
		addr, err := resolveAddress("", nil, m)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.File, err)
		}
		fmt.Fprintf(e.stdout, "agent %s over MCP at http://%s/mcp (confirm_over_mcp %s)\n\n", cfg.Identity, addr, m.ConfirmOverMCP)
	} else {
		fmt.Fprintf(e.stdout, "agent %s: MCP serving is not enabled (add expose.agent.mcp: {}); this is what it would serve\n\n", cfg.Identity)
	}
	listing := tool.Listing{Served: served, Dropped: append(appDropped, dropped...)}
	if len(cfg.RemoteTools) > 0 {
		importRemoteForInfo(ctx, cfg, &listing, log)
	}
	return listing.Write(e.stdout)
}

// importRemoteForInfo adds the remote tools to listing leniently: a host
// that does not answer (or no NATS at all) is warned about, and every
// reachable host and local tool is still listed, so info works offline.
func importRemoteForInfo(ctx context.Context, cfg *config.Config, listing *tool.Listing, log *slog.Logger) {
	r, err := connectRemote(cfg, listing.Served, log)
	if err != nil {
		log.Warn("remote tools not listed", "error", err)
		return
	}
	defer r.Close()
	res := r.importer.Import(ctx)
	logResult(res, log)
	listing.Served = append(listing.Served, res.Tools...)
	listing.Dropped = append(listing.Dropped, res.Dropped...)
	listing.Origin = r.importer.Origin
}
