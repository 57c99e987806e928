package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/memtrim"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/procs"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing/otlp"
)

// env is what commands write to, bound by main so tests of the binary see
// exactly what an operator sees.
type env struct {
	stdout  io.Writer
	stderr  io.Writer
	version string
}

// exitCode is an error that ends the process with that code and no message:
// `call` mirrors the command's own exit code.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

type serveCmd struct {
	Config       string        `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"A2A_AGENT_CONFIG"`
	DrainTimeout time.Duration `help:"How long a stop waits for in-flight calls before cancelling them." default:"10s" env:"A2A_AGENT_DRAIN_TIMEOUT"`
	// HealthAddress is off by default: an agent on a bus needs no port,
	// and an orchestrator that probes names one.
	HealthAddress string `help:"Serve /healthz and /readyz on this host:port (off when empty; port 0 picks a free one, logged). Ready means connected to NATS with the service registered." env:"A2A_AGENT_HEALTH_ADDRESS"`
}

// loadA2A reads the config for mode and loads the application's commands.
func loadA2A(ctx context.Context, path string, mode config.Mode, log *slog.Logger) (*config.Config, *fiskapp.App, error) {
	cfg, warnings, err := config.LoadFor(path, mode)
	for _, w := range warnings {
		log.Warn(w)
	}
	if err != nil {
		return nil, nil, err
	}
	if cfg.ApplicationPath == "" {
		return cfg, nil, nil
	}
	app, err := fiskapp.Load(ctx, fiskapp.OptionsFrom(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: application_path: %w", cfg.File, err)
	}
	return cfg, app, nil
}

func serverConfig(cfg *config.Config, version string, log *slog.Logger) server.Config {
	sc := server.Config{Identity: cfg.Identity, Version: version, Logger: log}
	if a := cfg.Expose.Agent.A2A; a != nil {
		sc.MaxConcurrent = a.MaxConcurrentTools
		sc.Timeout = a.ToolTimeout.Duration
	}
	if sc.Version == "dev" || sc.Version == "" {
		sc.Version = natsbus.ServiceVersion
	}
	sc.Metadata = map[string]string{"fiskfleet.application": cfg.ApplicationPath}
	sc.AuditDigestOnly = cfg.AuditDigestOnly()
	return sc
}

func (c *serveCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, app, err := loadA2A(ctx, c.Config, config.ModeA2AServe, log)
	if err != nil {
		return err
	}
	for _, d := range app.Dropped {
		log.Info("tool not loaded", "agent", cfg.Identity, "tool", d.Name, "reason", d.Reason)
	}
	sc := serverConfig(cfg, e.version, log)
	tp, err := otlp.Setup(ctx, otlp.Options{Service: "a2a-agent", Logger: log})
	if err != nil {
		return err
	}
	// Flushed last, after the drain, so the spans of the calls it let
	// finish are exported too.
	defer tp.Close(log)
	sc.Tracer = tp.Tracer()
	if cfg.Expose.Agent.Metrics != nil {
		sc.Metrics = ops.NewMetrics("a2a-agent", cfg.Identity)
	}
	// Connected before the server is built: the audit publisher it is
	// given rides this connection. Connect fails at once when no server
	// answers, so the health listener below still starts within moments.
	nc, err := natsconn.Connect(natsconn.Options{Context: cfg.NATSContext, Name: "a2a-agent " + cfg.Identity, Logger: log})
	if err != nil {
		return fmt.Errorf("%s: nats_context: %w", cfg.File, err)
	}
	defer nc.Close()
	// One record per call on the trail; closed after the drain, so the
	// calls the drain let finish are recorded, and before the connection
	// closes, so the records are flushed. The deferred Close covers the
	// error paths; a second Close is a no-op.
	pub, err := audit.OpenPublisher(nc, audit.ConfigOf(cfg, log))
	if err != nil {
		return fmt.Errorf("%s: audit.spool_dir: %w", cfg.File, err)
	}
	sc.Metrics.AuditSpool(pub.Spooled, pub.SpoolDropped)
	defer closeAudit(pub, c.DrainTimeout, cfg.Identity, log)
	sc.Audit = pub
	if a := cfg.Approvals; a != nil && a.Operator {
		// Gated tools are served, each call waiting for an operator
		// over NATS; closed after the drain, which withdraws whatever
		// still waits.
		sc.Instance = server.DefaultInstance()
		broker, err := approval.NewBroker(nc, approval.Options{
			Identity: cfg.Identity,
			Instance: sc.Instance,
			Config:   approval.Config{Operator: true, Timeout: a.Timeout.Duration, SelfApproval: a.SelfApproval, Signers: a.Signers()},
			Logger:   log,
		})
		if err != nil {
			return fmt.Errorf("%s: approvals.operator: %w", cfg.File, err)
		}
		defer broker.Close()
		sc.Approvals = broker
	}
	srv, err := server.New(sc, app.Tools())
	if errors.Is(err, server.ErrNothingToServe) && len(app.Dropped) > 0 {
		// Most often the filters left nothing: name the keys to fix.
		return fmt.Errorf("%s: %w; %d more commands were not loaded: check include, exclude, expose.agent.tools and confirm_tags", cfg.File, err, len(app.Dropped))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	// The listeners stop with ctx, before the drain: a stopping agent is
	// no longer ready, and is not scraped while it drains.
	if m := cfg.Expose.Agent.Metrics; m != nil {
		if _, _, err := ops.ListenMetrics(ctx, m.HostPort(), sc.Metrics, "a2a-agent", cfg.Identity, log); err != nil {
			return fmt.Errorf("%s: %w", cfg.File, err)
		}
	}
	var conn atomic.Pointer[nats.Conn]
	if c.HealthAddress != "" {
		health := ops.NewHealth(
			ops.Check{Name: "nats", Ready: func() error { return natsReady(conn.Load()) }},
			ops.Check{Name: "service", Ready: srv.Ready},
		)
		bound, _, err := ops.Listen(ctx, c.HealthAddress, health.Handler(), log)
		if err != nil {
			return fmt.Errorf("--health-address: %w", err)
		}
		log.Info("serving health probes", "agent", cfg.Identity, "address", bound.String(), "live", ops.LivePath, "ready", ops.ReadyPath)
	}
	conn.Store(nc)
	if err := srv.Start(nc); err != nil {
		return err
	}
	names := make([]string, 0, len(srv.Served()))
	for _, t := range srv.Served() {
		names = append(names, t.Name())
	}
	log.Info("serving over A2A",
		"agent", cfg.Identity,
		"instance", srv.Self().Instance,
		"discovery_subject", natsbus.DiscoverySubject(cfg.Identity),
		"tool_subject", natsbus.ToolSubject(cfg.Identity),
		"queue_group", cfg.Identity,
		"audit_subject", cfg.AuditSubject(),
		"tools", strings.Join(names, ","),
		"dropped", len(srv.Dropped()),
		"gomaxprocs", runtime.GOMAXPROCS(0),
		"gogc", procs.GCPercent(),
		"timer_slack", procs.Slack())
	// Start-up leaves garbage behind (the application's introspection
	// JSON, the schema compiler's work, the libraries' init): a few
	// megabytes the runtime would otherwise keep resident for as long as
	// the agent idles. Collect it and hand the pages back once, now that
	// everything an idle agent holds is built; and so again after each
	// burst of calls, once the agent has gone quiet (about 3 MiB per
	// process after a burst, measured by make bench: see memtrim).
	debug.FreeOSMemory()
	go memtrim.Trimmer{Logger: log}.Run(ctx)

	<-ctx.Done()
	log.Info("stopping: draining in-flight calls", "agent", cfg.Identity, "timeout", c.DrainTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), c.DrainTimeout)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		return err
	}
	closeAudit(pub, c.DrainTimeout, cfg.Identity, log)
	// Requests NATS already delivered to this process are answered
	// ("stopping; call again") before the connection closes, not dropped.
	if err := natsconn.Drain(nc, c.DrainTimeout); err != nil {
		log.Warn("draining nats connection", "agent", cfg.Identity, "error", err)
	}
	log.Info("stopped", "agent", cfg.Identity)
	return nil
}

// closeAudit publishes the audit records still buffered and flushes them,
// within timeout; the records it cannot publish in time are logged by the
// publisher.
func closeAudit(pub *audit.Publisher, timeout time.Duration, identity string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := pub.Close(ctx); err != nil {
		log.Warn("closing the audit trail", "agent", identity, "error", err)
	}
}

// natsReady reports nil while nc is connected.
func natsReady(nc *nats.Conn) error {
	switch {
	case nc == nil:
		return errors.New("connecting")
	case !nc.IsConnected():
		return fmt.Errorf("not connected (%s)", strings.ToLower(nc.Status().String()))
	}
	return nil
}

type infoCmd struct {
	Config string `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"A2A_AGENT_CONFIG"`
}

func (c *infoCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, app, err := loadA2A(ctx, c.Config, config.ModeInfo, log)
	if err != nil {
		return err
	}
	if app == nil {
		return fmt.Errorf("%s: nothing to list: add application_path", cfg.File)
	}
	fmt.Fprintf(e.stdout, "agent %s over A2A: %s, %s\n\n", cfg.Identity, natsbus.DiscoverySubject(cfg.Identity), natsbus.ToolSubject(cfg.Identity))
	return a2aListing(cfg, app).Write(e.stdout)
}

// a2aListing is what info lists, init writes in its comments and serve
// serves: the commands the load kept as the A2A server selects them, then
// every command dropped, by the load and by the selection, with why.
func a2aListing(cfg *config.Config, app *fiskapp.App) tool.Listing {
	served, dropped := server.Select(app.Tools(), cfg.Approvals != nil && cfg.Approvals.Operator)
	return tool.Listing{Served: served, Dropped: slices.Concat(app.Dropped, dropped)}
}
