package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/gateway"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

type infoCmd struct {
	Config string `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"MCP_GATEWAY_CONFIG"`
	Role   string `help:"Show only what this role of expose.agent.mcp.policy gets."`
}

func (c *infoCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, err := loadConfig(c.Config, config.ModeInfo, log)
	if err != nil {
		return err
	}
	idx, err := gateway.OpenIndex(cfg, false, e.lookupEnv, log)
	if err != nil {
		return err
	}
	if idx != nil {
		defer idx.Close()
	}
	tools, appDropped, err := gateway.LocalTools(ctx, cfg, idx)
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
		gateway.ImportRemote(ctx, cfg, &listing, log)
	}
	if c.Role != "" {
		if err := narrowToRole(cfg, c.Role, &listing, e); err != nil {
			return err
		}
	}
	return listing.Write(e.stdout)
}

// narrowToRole keeps in listing only what role is granted, listing the
// rest as dropped by the policy.
func narrowToRole(cfg *config.Config, role string, listing *tool.Listing, e env) error {
	var pc *config.Policy
	if m := cfg.Expose.Agent.MCP; m != nil {
		pc = m.Policy
	}
	pol := policy.New(pc)
	g, ok := pol.Role(role)
	if !ok {
		if pol == nil {
			return fmt.Errorf("%s: --role %s: there is no expose.agent.mcp.policy, so every caller gets everything listed", cfg.File, role)
		}
		return fmt.Errorf("%s: --role %s: expose.agent.mcp.policy.roles has no such role (roles: %s)", cfg.File, role, strings.Join(pol.Names(), ", "))
	}
	var kept []tool.Tool
	for _, t := range listing.Served {
		remote := listing.Origin != nil && listing.Origin(t) != "local"
		if g.Allows(t.Name(), t.Tags(), remote) {
			kept = append(kept, t)
			continue
		}
		listing.Dropped = append(listing.Dropped, tool.Dropped{Name: t.Name(), Reason: "not granted to role " + role + " by expose.agent.mcp.policy"})
	}
	listing.Served = kept
	fmt.Fprintf(e.stdout, "role %s: %d tools", role, len(kept))
	if g.Share > 0 {
		fmt.Fprintf(e.stdout, ", at most %d at once per caller", g.Share)
	}
	if g.NATSContext != "" {
		fmt.Fprintf(e.stdout, ", remote calls through nats context %s", g.NATSContext)
	}
	if g.Approve {
		fmt.Fprint(e.stdout, ", may approve others' gated calls")
	}
	fmt.Fprint(e.stdout, "\n(remote tools carry no tags: a role's tag filters never select them, only its name globs do)\n\n")
	return nil
}
