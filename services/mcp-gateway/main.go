// Command mcp-gateway serves a fisk application's commands, and the tools of
// agents on the NATS bus, to MCP clients such as Claude Code over streamable
// HTTP.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type cli struct {
	Version kong.VersionFlag `help:"Print the version and exit."`

	Serve serveCmd `cmd:"" help:"Serve the configured tools over MCP (streamable HTTP)."`
}

type serveCmd struct {
	Config string `help:"Agent configuration file." type:"existingfile" required:"" env:"MCP_GATEWAY_CONFIG"`
}

func (c *serveCmd) Run(ctx context.Context) error {
	return fmt.Errorf("serve: not built yet")
}

func main() {
	var c cli
	kctx := kong.Parse(&c,
		kong.Name("mcp-gateway"),
		kong.Description("Serve a fisk application's commands to MCP clients over streamable HTTP."),
		kong.Vars{"version": version},
		kong.UsageOnError(),
	)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.FatalIfErrorf(kctx.Run())
}
