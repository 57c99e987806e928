// Package gateway is the mcp-gateway's composition root: from a validated
// configuration it builds every part of a serving gateway (the tools, the
// NATS connections, the audit trail, the policy and OAuth, the operator
// approvals, the fleet, the call core and its surfaces) and mounts the
// surfaces on one HTTP edge. Package main maps flags onto [Config]; the
// work is here, where tests can drive it without the command line.
package gateway

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/agent2agent"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/memtrim"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/procs"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing/otlp"
)

// Config is what a gateway is built from: the configuration file, and
// what the command line and the environment add to it.
type Config struct {
	// File is the loaded, validated configuration.
	File *config.Config
	// Address is the host:port to listen on, resolved from the flags and
	// the file.
	Address string
	// Token is the bearer token clients must send (the value of
	// expose.agent.mcp.auth_token_env); empty means none.
	Token string
	// Version is the gateway's version, as clients and cards see it.
	Version string
	// LookupEnv reads the environment: the approvers' tokens, OTLP's
	// settings, OAuth's client secret.
	LookupEnv func(string) (string, bool)
	// Listening, when set, is called once the address is bound, with the
	// address actually bound.
	Listening func(net.Addr)
	// Logger receives everything the gateway logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Gateway is one serving gateway, built by [New] and run by
// [Gateway.Serve].
type Gateway struct {
	cfg     *config.Config
	log     *slog.Logger
	srv     *mcpserver.Server
	handler http.Handler
	ln      net.Listener
	addr    string
	// listening is told the address once it is bound.
	listening   func(net.Addr)
	readTimeout time.Duration
	// start runs once serving begins: what needs the context serving
	// runs under (fleet membership, remote import and refresh, indexing,
	// metrics).
	start []func(ctx context.Context) error
	// closers undo what New built, last first.
	closers []func()
}

// onClose schedules f for [Gateway.close], which runs the closers last
// first, as deferred calls would.
func (g *Gateway) onClose(f func()) { g.closers = append(g.closers, f) }

func (g *Gateway) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

// New builds the gateway of c. ctx bounds what building waits for (the
// OAuth issuer's metadata, the fleet's bucket); the fleet membership, the
// remote hosts' import and everything else that lives while serving run
// under the context [Gateway.Serve] gets.
// On an error everything built so far is closed again.
func New(ctx context.Context, c Config) (_ *Gateway, err error) {
	log := cmp.Or(c.Logger, slog.Default())
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	cfg := c.File
	m := cfg.Expose.Agent.MCP
	g := &Gateway{cfg: cfg, log: log, addr: c.Address, listening: c.Listening}
	defer func() {
		if err != nil {
			g.close()
		}
	}()

	idx, err := OpenIndex(cfg, false, c.LookupEnv, log)
	if err != nil {
		return nil, err
	}
	if idx != nil {
		g.onClose(func() { idx.Close() })
	}
	tools, appDropped, err := LocalTools(ctx, cfg, idx)
	if err != nil {
		return nil, err
	}
	for _, d := range appDropped {
		log.Info("tool not loaded", "agent", cfg.Identity, "tool", d.Name, "reason", d.Reason)
	}
	warnExposure(c, log)

	tp, err := otlp.Setup(ctx, otlp.Options{Service: "mcp-gateway", Logger: log, Getenv: func(k string) string {
		v, _ := c.LookupEnv(k)
		return v
	}})
	if err != nil {
		return nil, err
	}
	// Flushed once serving has stopped, so the last calls' spans are
	// exported too.
	g.onClose(func() { tp.Close(log) })

	var metrics *ops.Metrics
	if mc := cfg.Expose.Agent.Metrics; mc != nil {
		metrics = ops.NewMetrics("mcp-gateway", cfg.Identity)
	}
	var checks []ops.Check
	roles, err := connectRoles(cfg, log)
	if err != nil {
		return nil, err
	}
	g.onClose(func() { roles.Close() })
	var remoteVia func(string) (any, error)
	if roles != nil {
		remoteVia = roles.remoteVia
	}
	// The fleet connection serves remote_tools and carries the audit
	// trail; without nats_context the trail goes to the log.
	var nc *nats.Conn
	if cfg.NATSContext != "" {
		if nc, err = connectNATS(cfg, log); err != nil {
			return nil, fmt.Errorf("%s: nats_context: %w", cfg.File, err)
		}
		g.onClose(nc.Close)
	}
	// instance names this process on the approval subjects and in its
	// audit records.
	instance := nuid.Next()
	trail, err := audit.OpenPublisher(nc, audit.ConfigOf(cfg, log))
	if err != nil {
		return nil, fmt.Errorf("%s: audit.spool_dir: %w", cfg.File, err)
	}
	metrics.AuditSpool(trail.Spooled, trail.SpoolDropped)
	// Closed after serving has stopped, so the last calls are recorded,
	// and before the connection closes, so they are flushed.
	g.onClose(func() { closeAudit(trail, cfg.Identity, log) })

	// With OAuth the gateway names itself in its metadata and in the
	// audience it accepts, so its URL must be known before it serves: the
	// configured resource, else the address it listens on, bound now so
	// that a port picked at start is known too.
	pol := policy.New(m.Policy)
	var oauth *auth.Verifier
	var resource string
	if m.Auth != nil {
		resource = m.Auth.Resource
		if resource == "" {
			if err := g.bind(ctx); err != nil {
				return nil, err
			}
			if resource, err = listenResource(g.ln.Addr()); err != nil {
				return nil, fmt.Errorf("%s: %w", cfg.File, err)
			}
		}
		oauth, err = auth.NewVerifier(ctx, auth.Config{Auth: *m.Auth, Resource: resource, Claim: pol.Claim(), Logger: log})
		if err != nil {
			return nil, fmt.Errorf("%s: expose.agent.mcp.auth: %w", cfg.File, err)
		}
		g.onClose(func() { oauth.Close() })
		checks = append(checks, ops.Check{Name: "oauth_keys", Ready: func() error {
			if !oauth.Ready() {
				return fmt.Errorf("the keys of %s are not fetched yet", m.Auth.Issuer)
			}
			return nil
		}})
		log.Info("accepting OAuth access tokens", "agent", cfg.Identity, "issuer", m.Auth.Issuer, "resource", resource, "metadata", oauth.MetadataURL())
	}
	authn, open := accessLayer(oauth)

	// Operators approve the gated calls of clients that cannot elicit.
	var broker *approval.Broker
	if a := cfg.Approvals; a != nil && a.Operator {
		broker, err = approval.NewBroker(nc, approval.Options{
			Identity: cfg.Identity,
			Instance: instance,
			Config:   approval.Config{Operator: true, Timeout: a.Timeout.Duration, SelfApproval: a.SelfApproval, Signers: a.Signers()},
			Logger:   log,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: approvals.operator: %w", cfg.File, err)
		}
		g.onClose(func() { _ = broker.Close() })
	}
	page, err := approvalsPage(cfg, nc, resource, pol, c.LookupEnv, log)
	if err != nil {
		return nil, err
	}
	if page != nil {
		g.onClose(func() { _ = page.Close() })
		open["/approvals"] = page.Handler()
		open["/approvals/"] = page.Handler()
	}

	// With fleet, tasks and pending approvals live in the bucket the
	// identity's gateways share, and this gateway heartbeats there.
	fl, err := joinFleet(ctx, nc, cfg, instance, log)
	if err != nil {
		return nil, err
	}
	if fl.fleet != nil {
		checks = append(checks, ops.Check{Name: "fleet_bucket", Ready: fl.fleet.Ready})
	}

	srv, err := mcpserver.New(mcpserver.Config{
		Identity:           cfg.Identity,
		Version:            c.Version,
		Instructions:       m.Instructions,
		MaxConcurrent:      m.MaxConcurrentTools,
		Timeout:            m.ToolTimeout.Duration,
		Confirm:            m.ConfirmOverMCP,
		AuthToken:          c.Token,
		SessionIdleTimeout: m.SessionIdleTimeout.Duration,
		MaxSessions:        m.MaxSessions,
		TaskRetention:      m.TaskRetention.Duration,
		MaxTasks:           m.MaxTasks,
		ToolsPageSize:      m.ToolsPageSize,
		ToolsListTTL:       toolsListTTL(cfg),
		TaskStore:          fl.store,
		TaskCanceller:      fl.canceller,
		ApprovalBucket:     fl.bucket,
		Resources:          resourcesIndex(cfg, idx),
		Instance:           instance,
		Approvals:          broker,
		Audit:              trail,
		AuditDigestOnly:    cfg.AuditDigestOnly(),
		Authenticate:       authn,
		Policy:             pol,
		RemoteVia:          remoteVia,
		Metrics:            metrics,
		Tracer:             tp.Tracer(),
		Logger:             log,
	}, tools)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	g.srv = srv
	// The server closes itself once it has served; closing it here too,
	// after a failure or before Serve, is harmless (Close is idempotent).
	g.onClose(srv.Close)
	if len(srv.Served()) == 0 && len(cfg.RemoteTools) == 0 {
		return nil, fmt.Errorf("%s: nothing to serve over MCP: add application_path, or list built-ins in expose.agent.mcp.builtins", cfg.File)
	}
	var r *remote
	if len(cfg.RemoteTools) > 0 {
		if r, err = newRemote(nc, cfg, srv.Served()); err != nil {
			return nil, err
		}
		metrics.RemoteHosts(r.hostStates)
		checks = append([]ops.Check{{Name: "nats", Ready: r.natsReady}, {Name: "remote_hosts", Ready: r.hostsReady}}, checks...)
	}

	// Every surface sits behind one edge: the same probes, Origin check,
	// caller check and body cap for each route.
	edge := httpedge.New(httpedge.Config{
		AuthToken:      c.Token,
		Authenticate:   authn,
		Authorize:      pol.Authorize,
		AllowedOrigins: m.AllowedOrigins,
		Checks:         checks,
	})
	edge.Authenticated("/mcp", srv.MCPHandler())
	for p, h := range open {
		edge.Open(p, h)
	}
	// Agent2Agent clients reach the same tools, through the same call
	// core, on the same listener.
	var a2s *agent2agent.Service
	if a := m.Agent2Agent; a != nil {
		base := a.URL
		if base == "" && resource != "" {
			base = strings.TrimSuffix(strings.TrimSuffix(resource, "/"), "/mcp")
		}
		a2s = agent2agent.New(agent2agent.Config{
			Identity:      cfg.Identity,
			Version:       c.Version,
			Description:   a.Description,
			BaseURL:       base,
			Auth:          m.Auth,
			BearerToken:   c.Token != "",
			TaskRetention: m.TaskRetention.Duration,
			Core:          srv.Core(),
			Tasks:         srv.Tasks(),
			Invoke: func(ctx context.Context, r *call.Request) (*mcp.CallToolResult, call.Verdict) {
				v := srv.Core().Call(ctx, r)
				return srv.Result(r.Tool, v), v
			},
			Logger: log,
		})
		a2s.Mount(edge)
		log.Info("serving Agent2Agent", "agent", cfg.Identity, "card", agent2agent.CardPath, "endpoint", agent2agent.EndpointPath)
	}
	g.handler, g.readTimeout = edge.Handler(), edge.ReadTimeout()
	if tp.Tracer() != nil {
		g.handler = call.MarkArrival(g.handler)
	}
	if fl.fleet != nil {
		g.start = append(g.start, func(ctx context.Context) error {
			if err := fl.fleet.Start(ctx, srv.Tasks()); err != nil {
				return fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
			}
			// Stopped once serving has stopped: this gateway's tasks
			// are ended by then, so its instance key can go.
			g.onClose(func() { fl.fleet.Stop() })
			log.Info("serving as a member of a gateway fleet", "agent", cfg.Identity, "instance", instance,
				"bucket", fl.bucket.Bucket(), "instance_ttl", fl.fleet.InstanceTTL())
			return nil
		})
	}
	if r != nil {
		if a2s != nil {
			a2s.SetOrigin(r.importer.Origin)
		}
		g.start = append(g.start, func(ctx context.Context) error { return r.serve(ctx, cfg, srv, roles, log) })
	}
	if idx != nil {
		g.start = append(g.start, func(ctx context.Context) error {
			go keepIndexed(ctx, idx, srv, log)
			return nil
		})
	}
	if mc := cfg.Expose.Agent.Metrics; mc != nil {
		g.start = append(g.start, func(ctx context.Context) error {
			if _, _, err := ops.ListenMetrics(ctx, mc.HostPort(), metrics, "mcp-gateway", cfg.Identity, log); err != nil {
				return fmt.Errorf("%s: %w", cfg.File, err)
			}
			return nil
		})
	}
	return g, nil
}

// Serve runs the gateway until ctx ends, then stops it within the shutdown
// budget and closes everything [New] built. It is called once.
func (g *Gateway) Serve(ctx context.Context) error {
	defer g.close()
	// The server's sessions and tasks end first, before what they use
	// (the fleet's membership, the audit trail) is closed.
	defer g.srv.Close()
	for _, start := range g.start {
		if err := start(ctx); err != nil {
			return err
		}
	}
	// Start-up leaves garbage behind (the application's introspection
	// JSON, the schema compiler's work, the libraries' init): megabytes
	// an idle gateway would otherwise keep resident. Collect it and hand
	// the pages back once, before serving; and again after each burst of
	// calls, once the gateway has gone quiet (see memtrim).
	debug.FreeOSMemory()
	go memtrim.Trimmer{Logger: g.log}.Run(ctx)
	if g.ln == nil {
		if err := g.bind(ctx); err != nil {
			return err
		}
	}
	log, srv := g.log, g.srv
	log.Info("serving over MCP", "agent", g.cfg.Identity, "address", g.ln.Addr().String(), "tools", len(srv.Served()),
		"gomaxprocs", runtime.GOMAXPROCS(0), "timer_slack", procs.Slack())
	if g.listening != nil {
		g.listening(g.ln.Addr())
	}
	return httpedge.Serve(ctx, g.ln, g.handler, httpedge.ServeOptions{
		ReadTimeout: g.readTimeout,
		Logger:      log,
		Attrs:       []any{"agent", g.cfg.Identity},
		// Tasks outlive their requests, so the base context does not
		// reach them: their commands are stopped within the same budget.
		Stopping: srv.Tasks().Close,
	})
}

// bind listens on the gateway's address ahead of serving.
func (g *Gateway) bind(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", g.addr)
	if err != nil {
		return fmt.Errorf("%s: listening on %s: %w", g.cfg.File, g.addr, err)
	}
	g.ln = ln
	g.onClose(func() { _ = ln.Close() })
	return nil
}

// warnExposure warns of a gateway listening beyond loopback, saying what
// travels in clear text or who can call.
func warnExposure(c Config, log *slog.Logger) {
	host, _, _ := net.SplitHostPort(c.Address)
	if config.IsLoopback(host) {
		return
	}
	msg := "serving on a non-loopback address: the bearer token travels in clear text unless a TLS proxy fronts the gateway"
	switch {
	case c.File.Expose.Agent.MCP.Auth != nil:
		msg = "serving on a non-loopback address: access tokens travel in clear text unless a TLS proxy fronts the gateway"
	case c.Token == "":
		msg = "serving on a non-loopback address without a token: anyone who can reach it can call these tools; set expose.agent.mcp.auth_token_env to require a bearer token"
	}
	log.Warn(msg, "agent", c.File.Identity, "address", c.Address)
}

// closeAudit publishes the audit records still buffered and flushes them,
// within the shutdown budget; the publisher logs what it cannot publish.
func closeAudit(trail *audit.Publisher, identity string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), mcpserver.ShutdownTimeout)
	defer cancel()
	if err := trail.Close(ctx); err != nil {
		log.Warn("closing the audit trail", "agent", identity, "error", err)
	}
}

// accessLayer is what checks callers: the OAuth verifier's middleware and
// its metadata, open beside /mcp; without OAuth, no middleware (the
// static token check) and nothing open yet.
func accessLayer(v *auth.Verifier) (func(http.Handler, func(*auth.Caller) error) http.Handler, map[string]http.Handler) {
	open := map[string]http.Handler{}
	if v == nil {
		return nil, open
	}
	for _, p := range v.MetadataPaths() {
		open[p] = v.MetadataHandler()
	}
	return v.Middleware, open
}

// listenResource is the gateway's URL of /mcp on a bound listener, when
// expose.agent.mcp.auth.resource does not say it: only a loopback address
// names the gateway for its clients; behind any other, clients may reach it
// by a name or a proxy the gateway cannot know.
func listenResource(a net.Addr) (string, error) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || !config.IsLoopback(host) {
		return "", fmt.Errorf("expose.agent.mcp.auth.resource is required when the gateway listens on %s: set it to the URL clients use to reach /mcp, such as https://mcp.example.com/mcp", a)
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp", nil
}

// LocalTools loads the gateway's own tools in registration order: the
// application's commands first, then the allowlisted built-ins, so a
// built-in can never take a command's name. It also returns the commands
// the application selection dropped.
func LocalTools(ctx context.Context, cfg *config.Config, idx *knowledge.Index) ([]tool.Tool, []tool.Dropped, error) {
	var tools []tool.Tool
	var dropped []tool.Dropped
	if cfg.ApplicationPath != "" {
		app, err := fiskapp.Load(ctx, fiskapp.OptionsFrom(cfg))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: application_path: %w", cfg.File, err)
		}
		tools = app.Tools()
		dropped = app.Dropped
	}
	if m := cfg.Expose.Agent.MCP; m != nil && len(m.Builtins) > 0 {
		if idx == nil {
			return nil, nil, fmt.Errorf("%s: expose.agent.mcp.builtins lists knowledge built-ins: add knowledge.directory: PATH", cfg.File)
		}
		builtins, err := idx.Tools(m.Builtins)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: expose.agent.mcp.builtins: %w", cfg.File, err)
		}
		tools = append(tools, builtins...)
	}
	return tools, dropped, nil
}

// toolsListTTL is how long a 2026-07-28 client may cache tools/list: the
// remote refresh interval, the longest the gateway takes to notice that a
// remote tool appeared, changed or went, so a cached list lags the
// gateway's by at most one more interval (and clients that listen hear
// notifications/tools/list_changed at once). Without remote tools, or
// with refreshing off, the list changes only with a restart, and the
// server's default applies.
func toolsListTTL(cfg *config.Config) time.Duration {
	if len(cfg.RemoteTools) == 0 {
		return 0
	}
	return cfg.RefreshInterval()
}
