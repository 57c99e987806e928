package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/gateway"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/procs"
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
	addr, err := resolveAddress(c.Address, c.Port, m)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	g, err := gateway.New(ctx, gateway.Config{
		File:      cfg,
		Address:   addr,
		Token:     token,
		Version:   e.version,
		LookupEnv: e.lookupEnv,
		Listening: func(a net.Addr) { fmt.Fprintln(e.stdout, addHint(cfg.Identity, a, m.AuthTokenEnv)) },
		Logger:    log,
	})
	if err != nil {
		return err
	}
	return g.Serve(ctx)
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

// addHint is the ready-to-paste `claude mcp add` line for a gateway bound
// to a, with the bearer header when a token is configured. A gateway
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
