// Command mcp-gateway serves a fisk application's commands, and the tools of
// agents on the NATS bus, to MCP clients such as Claude Code over streamable
// HTTP.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/fiskfleet/fiskfleet/shared/buildinfo"
	"github.com/fiskfleet/fiskfleet/shared/logging"
	"github.com/fiskfleet/fiskfleet/shared/procs"
)

// version, commit and date are stamped by release builds (make dist) with
// -ldflags "-X main.version=... -X main.commit=... -X main.date=...";
// buildinfo.New turns what is left unset into its stand-ins.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

type root struct {
	Version kong.VersionFlag `help:"Print the version and exit."`
	logging.Flags

	Serve     serveCmd     `cmd:"" help:"Serve the configured tools over MCP (streamable HTTP at /mcp)."`
	Info      infoCmd      `cmd:"" help:"List what serve would serve, and why each dropped tool is dropped."`
	Knowledge knowledgeCmd `cmd:"" help:"Build, search and inspect the knowledge index (knowledge.directory)."`
}

func main() {
	// Nothing can read this process's heap profile (no pprof endpoint is
	// served), yet a linked runtime/pprof keeps the runtime sampling
	// allocations into it, at the cost of anonymous memory in every
	// gateway. Set before anything else, as the runtime asks.
	runtime.MemProfileRate = 0
	var r root
	bi := buildinfo.New(version, commit, date)
	kctx := kong.Parse(&r,
		kong.Name("mcp-gateway"),
		kong.Description("Serve a fisk application's commands to MCP clients over streamable HTTP."),
		kong.Vars{"version": bi.String("mcp-gateway")},
		kong.UsageOnError(),
	)
	log, err := r.Logger(os.Stderr)
	kctx.FatalIfErrorf(err)
	if kctx.Command() == "serve" {
		slack, err := procs.SlackSetting(os.LookupEnv)
		kctx.FatalIfErrorf(err)
		if err := procs.ApplySlack(slack); err != nil {
			log.Warn("serving with the timer slack the process was started with", "error", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.Bind(log, env{stdout: os.Stdout, version: bi.Version, lookupEnv: os.LookupEnv, setProcs: true})
	if err := kctx.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "mcp-gateway: %v\n", err)
		os.Exit(1)
	}
}
