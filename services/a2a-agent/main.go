// Command a2a-agent serves a fisk application's commands to other agents
// over NATS, and is the operator's client for agents on the bus.
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

	Serve serveCmd `cmd:"" help:"Serve the configured tools over NATS."`
}

type serveCmd struct {
	Config string `help:"Agent configuration file." type:"existingfile" required:"" env:"A2A_AGENT_CONFIG"`
}

func (c *serveCmd) Run(ctx context.Context) error {
	return fmt.Errorf("serve: not built yet")
}

func main() {
	var c cli
	kctx := kong.Parse(&c,
		kong.Name("a2a-agent"),
		kong.Description("Serve a fisk application's commands to other agents over NATS."),
		kong.Vars{"version": version},
		kong.UsageOnError(),
	)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.FatalIfErrorf(kctx.Run())
}
