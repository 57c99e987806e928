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
	tools, appDropped, err := localTools(ctx, cfg)
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
	return tool.Listing{Served: served, Dropped: append(appDropped, dropped...)}.Write(e.stdout)
}
