// Command a2a-agent serves a fisk application's commands to other agents
// over NATS, and is the operator's client for agents on the bus.
package main

import (
	"context"
	"errors"
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

// agentGCPercent is a serving agent's GOGC unless the environment sets
// one: a collection once the heap has grown by half rather than doubled.
// An agent's live heap is a few MiB, so a cycle costs little beside a
// call's fork, and what one more process of an identity holds right after
// a burst of calls is mostly the garbage of the current cycle. Measured
// side by side (`make bench BASE=HEAD BASE_ENV=GOGC=50`), anonymous memory
// right after the benchmark's load went from 8.2 to 6.8 MiB with no change
// in the calls' overhead.
const agentGCPercent = 50

type root struct {
	Version kong.VersionFlag `help:"Print the version and exit."`
	logging.Flags

	Serve    serveCmd    `cmd:"" help:"Serve the configured tools over NATS as a micro service."`
	Discover discoverCmd `cmd:"" help:"Show the agent card of IDENTITY: its served tools."`
	Call     callCmd     `cmd:"" help:"Call TOOL on IDENTITY and print the CommandResult."`
	Info     infoCmd     `cmd:"" help:"List what serve would serve, and why each dropped tool is dropped."`
	// Init writes a file for info and serve to read; it never replaces
	// one unless told to.
	Init initCmd `cmd:"" help:"Write an agent.yaml for a fisk application: the keys that serve it, its commands as serve selects them (in comments, with why each dropped one is dropped), and every other key commented out with its default. With neither --a2a nor --mcp, both are enabled."`
	// Approvals answers what the fleet's gated calls wait on. Who may
	// answer is decided by NATS permissions, not by the --as name.
	Approvals approvalsCmd `cmd:"" help:"List, watch and answer the operator approval requests of gated commands."`
	Audit     auditCmd     `cmd:"" help:"Follow the audit trail: one record per tool call, published by agents and gateways on NATS."`
}

func main() {
	// Nothing can read this process's heap profile (no pprof endpoint is
	// served), yet a linked runtime/pprof (nats-server's, through
	// natscontext) keeps the runtime sampling allocations into it: about
	// 0.4 MiB of anonymous memory per agent after a load of calls. Set
	// before anything else, as the runtime asks.
	runtime.MemProfileRate = 0
	var r root
	bi := buildinfo.New(version, commit, date)
	kctx := kong.Parse(&r,
		kong.Name("a2a-agent"),
		kong.Description("Serve a fisk application's commands to other agents over NATS, and call agents on the bus."),
		kong.Vars{"version": bi.String("a2a-agent")},
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
		procs.Single(os.LookupEnv)
		procs.GC(os.LookupEnv, agentGCPercent)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.Bind(log, env{stdout: os.Stdout, stderr: os.Stderr, version: bi.Version}, input{r: os.Stdin})
	if err := kctx.Run(); err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			os.Exit(int(ec))
		}
		fmt.Fprintf(os.Stderr, "a2a-agent: %v\n", err)
		os.Exit(1)
	}
}
