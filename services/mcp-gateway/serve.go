package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/agent2agent"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/approvalweb"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
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

// env is what commands read and write besides their flags, bound by main so
// tests of the binary see exactly what an operator sees.
type env struct {
	stdout    io.Writer
	version   string
	lookupEnv func(string) (string, bool)
	// setProcs is set in the binary, which [serveProcs] may run on one
	// P; unset, the process is left as it is, as tests that run a command
	// in their own process want.
	setProcs bool
}

// serveProcs runs a serving gateway on one P ([procs.Single]) unless the
// gateway keeps a knowledge index: indexing knowledge is CPU work of its
// own, minutes of it for a large directory, which on one P would share the
// CPU with the calls, so such a gateway keeps the runtime's default.
func serveProcs(cfg *config.Config, e env) {
	if e.setProcs && cfg.Knowledge == nil {
		procs.Single(e.lookupEnv)
	}
}

// Address defaults: the loopback interface, so serving beyond this host is
// always an explicit choice.
const (
	defaultHost = "127.0.0.1"
	defaultPort = 8080
)

type serveCmd struct {
	Config  string `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"MCP_GATEWAY_CONFIG"`
	Address string `help:"Address to listen on: a host, or host:port. Overrides expose.agent.mcp.address (default 127.0.0.1)." env:"MCP_GATEWAY_ADDRESS"`
	Port    *int   `help:"Port to listen on; 0 picks a free one. Overrides expose.agent.mcp.port (default 8080)." env:"MCP_GATEWAY_PORT"`
}

func (c *serveCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, err := loadConfig(c.Config, config.ModeMCP, log)
	if err != nil {
		return err
	}
	serveProcs(cfg, e)
	m := cfg.Expose.Agent.MCP
	token := ""
	if m.AuthTokenEnv != "" {
		v, ok := e.lookupEnv(m.AuthTokenEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s: expose.agent.mcp.auth_token_env names %s, which is not set: export %s with the token clients must send, or remove expose.agent.mcp.auth_token_env",
				cfg.File, m.AuthTokenEnv, m.AuthTokenEnv)
		}
		token = strings.TrimSpace(v)
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
	for _, d := range appDropped {
		log.Info("tool not loaded", "agent", cfg.Identity, "tool", d.Name, "reason", d.Reason)
	}

	addr, err := resolveAddress(c.Address, c.Port, m)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	if host, _, _ := net.SplitHostPort(addr); !loopback(host) {
		if m.Auth != nil {
			log.Warn("serving on a non-loopback address: access tokens travel in clear text unless a TLS proxy fronts the gateway",
				"agent", cfg.Identity, "address", addr)
		} else if token == "" {
			log.Warn("serving on a non-loopback address without a token: anyone who can reach it can call these tools; set expose.agent.mcp.auth_token_env to require a bearer token",
				"agent", cfg.Identity, "address", addr)
		} else {
			log.Warn("serving on a non-loopback address: the bearer token travels in clear text unless a TLS proxy fronts the gateway",
				"agent", cfg.Identity, "address", addr)
		}
	}

	tp, err := otlp.Setup(ctx, otlp.Options{Service: "mcp-gateway", Logger: log, Getenv: func(k string) string {
		v, _ := e.lookupEnv(k)
		return v
	}})
	if err != nil {
		return err
	}
	// Flushed once serving has stopped, so the last calls' spans are
	// exported too.
	defer tp.Close(log)

	var metrics *ops.Metrics
	if mc := cfg.Expose.Agent.Metrics; mc != nil {
		metrics = ops.NewMetrics("mcp-gateway", cfg.Identity)
	}
	// r is set below before the listener starts; the checks only run on
	// its requests.
	var r *remote
	var checks []ops.Check
	if len(cfg.RemoteTools) > 0 {
		checks = []ops.Check{
			{Name: "nats", Ready: func() error { return r.natsReady() }},
			{Name: "remote_hosts", Ready: func() error { return r.hostsReady() }},
		}
	}

	if err := checkPolicyContexts(cfg); err != nil {
		return err
	}
	// The fleet connection serves remote_tools and carries the audit
	// trail; without nats_context the trail goes to the log.
	var nc *nats.Conn
	if cfg.NATSContext != "" {
		if nc, err = connectNATS(cfg, log); err != nil {
			return fmt.Errorf("%s: nats_context: %w", cfg.File, err)
		}
		defer nc.Close()
	}
	// instance names this process on the approval subjects and in its
	// audit records.
	instance := nuid.Next()
	trail, err := audit.OpenPublisher(nc, audit.ConfigOf(cfg, log))
	if err != nil {
		return fmt.Errorf("%s: audit.spool_dir: %w", cfg.File, err)
	}
	metrics.AuditSpool(trail.Spooled, trail.SpoolDropped)
	// Closed after serving has stopped, so the last calls are recorded,
	// and before the connection closes, so they are flushed.
	defer closeAudit(trail, cfg.Identity, log)
	roles, err := connectRoles(cfg, log)
	if err != nil {
		return err
	}
	defer roles.Close()
	var remoteVia func(string) (any, error)
	if roles != nil {
		remoteVia = roles.remoteVia
	}

	// With OAuth the gateway names itself in its metadata and in the
	// audience it accepts, so its URL must be known before it serves: the
	// configured resource, else the address it listens on, bound now so
	// that a port picked at start is known too.
	var ln net.Listener
	var oauth *auth.Verifier
	var resource string
	if m.Auth != nil {
		resource = m.Auth.Resource
		if resource == "" {
			var lc net.ListenConfig
			if ln, err = lc.Listen(ctx, "tcp", addr); err != nil {
				return fmt.Errorf("%s: listening on %s: %w", cfg.File, addr, err)
			}
			defer ln.Close()
			if resource, err = listenResource(ln.Addr()); err != nil {
				return fmt.Errorf("%s: %w", cfg.File, err)
			}
		}
		oauth, err = auth.NewVerifier(ctx, auth.Config{Auth: *m.Auth, Resource: resource, Claim: policyClaim(m), Logger: log})
		if err != nil {
			return fmt.Errorf("%s: expose.agent.mcp.auth: %w", cfg.File, err)
		}
		defer oauth.Close()
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
			return fmt.Errorf("%s: approvals.operator: %w", cfg.File, err)
		}
		defer broker.Close()
	}
	pol := policy.New(m.Policy)
	page, err := approvalsPage(cfg, nc, resource, pol, e, log)
	if err != nil {
		return err
	}
	if page != nil {
		defer page.Close()
		if open == nil {
			open = map[string]http.Handler{}
		}
		open["/approvals"] = page.Handler()
		open["/approvals/"] = page.Handler()
	}

	// With fleet, tasks and pending approvals live in the bucket the
	// identity's gateways share, and this gateway heartbeats there.
	fl, err := joinFleet(ctx, nc, cfg, instance, log)
	if err != nil {
		return err
	}
	if fl != nil {
		checks = append(checks, ops.Check{Name: "fleet_bucket", Ready: fl.fleet.Ready})
	}

	// Agent2Agent clients reach the same tools on the same listener.
	var a2s *agent2agent.Service
	var surfaces []func(*mcpserver.Server) mcpserver.Routes
	if a := m.Agent2Agent; a != nil {
		base := a.URL
		if base == "" && resource != "" {
			base = strings.TrimSuffix(strings.TrimSuffix(resource, "/"), "/mcp")
		}
		a2s = agent2agent.New(agent2agent.Config{
			Identity:      cfg.Identity,
			Version:       e.version,
			Description:   a.Description,
			BaseURL:       base,
			Auth:          m.Auth,
			BearerToken:   token != "",
			TaskRetention: m.TaskRetention.Duration,
			Logger:        log,
		})
		surfaces = append(surfaces, a2s.Routes)
		log.Info("serving Agent2Agent", "agent", cfg.Identity, "card", agent2agent.CardPath, "endpoint", agent2agent.EndpointPath)
	}

	srv, err := mcpserver.New(mcpserver.Config{
		Identity:           cfg.Identity,
		Version:            e.version,
		Address:            addr,
		Instructions:       m.Instructions,
		MaxConcurrent:      m.MaxConcurrentTools,
		Timeout:            m.ToolTimeout.Duration,
		Confirm:            m.ConfirmOverMCP,
		AuthToken:          token,
		AllowedOrigins:     m.AllowedOrigins,
		SessionIdleTimeout: m.SessionIdleTimeout.Duration,
		MaxSessions:        m.MaxSessions,
		TaskRetention:      m.TaskRetention.Duration,
		MaxTasks:           m.MaxTasks,
		ToolsPageSize:      m.ToolsPageSize,
		ToolsListTTL:       toolsListTTL(cfg),
		TaskStore:          fl.taskStore(),
		TaskCanceller:      fl.canceller(),
		ApprovalBucket:     fl.bucket(),
		Resources:          resourcesIndex(cfg, idx),
		Instance:           instance,
		Approvals:          broker,
		Audit:              trail,
		AuditDigestOnly:    cfg.AuditDigestOnly(),
		Authenticate:       authn,
		Open:               open,
		Surfaces:           surfaces,
		Policy:             pol,
		RemoteVia:          remoteVia,
		Metrics:            metrics,
		Tracer:             tp.Tracer(),
		Checks:             checks,
		Listening:          func(a net.Addr) { printAddHint(e.stdout, cfg.Identity, a, m.AuthTokenEnv) },
		Logger:             log,
	}, tools)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	if len(srv.Served()) == 0 && len(cfg.RemoteTools) == 0 {
		srv.Close()
		return fmt.Errorf("%s: nothing to serve over MCP: add application_path, or list built-ins in expose.agent.mcp.builtins", cfg.File)
	}
	if fl != nil {
		if err := fl.fleet.Start(ctx, srv.Tasks()); err != nil {
			srv.Close()
			return fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
		}
		// Stopped once serving has stopped (deferred calls run last
		// first): this gateway's tasks are ended by then, so its
		// instance key can go.
		defer fl.fleet.Stop()
		log.Info("serving as a member of a gateway fleet", "agent", cfg.Identity, "instance", instance,
			"bucket", fl.bucketName, "instance_ttl", fl.fleet.InstanceTTL())
	}
	if len(cfg.RemoteTools) > 0 {
		r, err = newRemote(nc, cfg, srv.Served())
		if err != nil {
			srv.Close()
			return err
		}
		metrics.RemoteHosts(r.hostStates)
		if a2s != nil {
			a2s.SetOrigin(r.importer.Origin)
		}
		if err := r.serve(ctx, cfg, srv, roles, log); err != nil {
			srv.Close()
			return err
		}
	}
	if idx != nil {
		go keepIndexed(ctx, idx, srv, log)
	}
	if mc := cfg.Expose.Agent.Metrics; mc != nil {
		if _, _, err := ops.ListenMetrics(ctx, mc.HostPort(), metrics, "mcp-gateway", cfg.Identity, log); err != nil {
			srv.Close()
			return fmt.Errorf("%s: %w", cfg.File, err)
		}
	}
	// Start-up leaves garbage behind (the application's introspection
	// JSON, the schema compiler's work, the libraries' init): megabytes
	// an idle gateway would otherwise keep resident. Collect it and hand
	// the pages back once, before serving; and again after each burst of
	// calls, once the gateway has gone quiet (see memtrim).
	debug.FreeOSMemory()
	go memtrim.Trimmer{Logger: log}.Run(ctx)
	if ln != nil {
		return srv.ServeListener(ctx, ln)
	}
	return srv.Serve(ctx)
}

// approvalsPage is the /approvals page, when operator approvals are on
// and approvers can sign in to it: with approvals.approvers' tokens, or at
// the gateway's authorization server (approvals.web). resource is the
// gateway's URL of /mcp under OAuth, which names the page's callback.
func approvalsPage(cfg *config.Config, nc *nats.Conn, resource string, pol *policy.Policy, e env, log *slog.Logger) (*approvalweb.Page, error) {
	a := cfg.Approvals
	if a == nil || !a.Operator || (!slices.ContainsFunc(a.Approvers, func(ap config.Approver) bool { return ap.TokenEnv != "" }) && a.Web == nil) {
		return nil, nil
	}
	pc := approvalweb.Config{NATS: nc, Logger: log}
	if a.SigningKey != "" {
		seed, err := os.ReadFile(a.SigningKey)
		if err != nil {
			return nil, fmt.Errorf("%s: approvals.signing_key: %w", cfg.File, err)
		}
		if pc.Signer, err = approval.ParseSigner(seed); err != nil {
			return nil, fmt.Errorf("%s: approvals.signing_key %s: %w", cfg.File, a.SigningKey, err)
		}
	}
	for i, ap := range a.Approvers {
		if ap.TokenEnv == "" {
			// An approver who signs answers over NATS only.
			continue
		}
		v, ok := e.lookupEnv(ap.TokenEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%s: approvals.approvers[%d].token_env names %s, which is not set: export it with %s's token", cfg.File, i, ap.TokenEnv, ap.Name)
		}
		pc.Tokens = append(pc.Tokens, approvalweb.Token{Name: ap.Name, Token: strings.TrimSpace(v)})
	}
	if w := a.Web; w != nil {
		secret := ""
		if w.ClientSecretEnv != "" {
			v, ok := e.lookupEnv(w.ClientSecretEnv)
			if !ok || strings.TrimSpace(v) == "" {
				return nil, fmt.Errorf("%s: approvals.web.client_secret_env names %s, which is not set", cfg.File, w.ClientSecretEnv)
			}
			secret = strings.TrimSpace(v)
		}
		m := cfg.Expose.Agent.MCP
		pc.OIDC = &approvalweb.OIDC{
			Issuer:       m.Auth.Issuer,
			ClientID:     w.ClientID,
			ClientSecret: secret,
			RedirectURL:  strings.TrimSuffix(strings.TrimSuffix(resource, "/"), "/mcp") + "/approvals/callback",
			Policy:       pol,
			Algorithms:   m.Auth.Algorithms,
		}
	}
	page, err := approvalweb.New(pc)
	if err != nil {
		return nil, fmt.Errorf("%s: approvals: %w", cfg.File, err)
	}
	log.Info("serving the approvals page", "agent", cfg.Identity, "path", "/approvals")
	return page, nil
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
// its metadata, open beside /mcp; nil and nil without OAuth, for the
// static token check.
func accessLayer(v *auth.Verifier) (func(http.Handler, func(*auth.Caller) error) http.Handler, map[string]http.Handler) {
	if v == nil {
		return nil, nil
	}
	open := map[string]http.Handler{}
	for _, p := range v.MetadataPaths() {
		open[p] = v.MetadataHandler()
	}
	return v.Middleware, open
}

// policyClaim is the token claim the policy reads groups from.
func policyClaim(m *config.MCP) string {
	if m.Policy != nil && m.Policy.Claim != "" {
		return m.Policy.Claim
	}
	return config.DefaultPolicyClaim
}

// listenResource is the gateway's URL of /mcp on a bound listener, when
// expose.agent.mcp.auth.resource does not say it: only a loopback address
// names the gateway for its clients; behind any other, clients may reach it
// by a name or a proxy the gateway cannot know.
func listenResource(a net.Addr) (string, error) {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil || !loopback(host) {
		return "", fmt.Errorf("expose.agent.mcp.auth.resource is required when the gateway listens on %s: set it to the URL clients use to reach /mcp, such as https://mcp.example.com/mcp", a)
	}
	return "http://" + net.JoinHostPort(host, port) + "/mcp", nil
}

// loadConfig reads the file and validates it for mode, logging the
// warnings even when it refuses.
func loadConfig(path string, mode config.Mode, log *slog.Logger) (*config.Config, error) {
	cfg, warnings, err := config.LoadFor(path, mode)
	for _, w := range warnings {
		log.Warn(w)
	}
	return cfg, err
}

// localTools loads the gateway's own tools in registration order: the
// application's commands first, then the allowlisted built-ins, so a
// built-in can never take a command's name. It also returns the commands
// the application selection dropped.
func localTools(ctx context.Context, cfg *config.Config, idx *knowledge.Index) ([]tool.Tool, []tool.Dropped, error) {
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

// resolveAddress picks the listen address: the flag (or its environment
// variable), then expose.agent.mcp.address and .port, then
// 127.0.0.1:8080. An address that carries its own port keeps it unless a
// port is given explicitly.
func resolveAddress(flagAddress string, flagPort *int, m *config.MCP) (string, error) {
	host, port := defaultHost, defaultPort
	if m != nil && m.Address != "" {
		host = m.Address
	}
	if m != nil && m.Port != 0 {
		port = m.Port
	}
	if flagAddress != "" {
		host = flagAddress
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil {
			return "", fmt.Errorf("address %q: port %q is not a number", host, p)
		}
		host, port = h, n
	}
	if flagPort != nil {
		port = *flagPort
	}
	if port < 0 || port > 65535 {
		return "", fmt.Errorf("port %d is not a TCP port: use 0-65535", port)
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)), nil
}

// loopback reports whether host only reaches this machine. An empty host
// or an unspecified address listens on every interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// printAddHint prints the ready-to-paste command that adds this gateway to
// Claude Code, with the bearer header when a token is configured.
func printAddHint(w io.Writer, identity string, a net.Addr, tokenEnv string) {
	fmt.Fprintln(w, addHint(identity, a, tokenEnv))
}

// addHint is the `claude mcp add` line for a gateway bound to a. A gateway
// listening on every interface is shown at its loopback address, which
// works from this machine; clients elsewhere use the host's name.
func addHint(identity string, a net.Addr, tokenEnv string) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		host, port = a.String(), ""
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = defaultHost
		if ip.Is6() && !ip.Is4In6() {
			host = "::1"
		}
	}
	line := fmt.Sprintf("claude mcp add --transport http %s http://%s/mcp", identity, net.JoinHostPort(host, port))
	if tokenEnv != "" {
		line += fmt.Sprintf(` --header "Authorization: Bearer $%s"`, tokenEnv)
	}
	return line
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
