package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// roleConns are the NATS connections of the policy roles that name a nats
// context of their own: a caller of such a role makes its remote calls
// over that connection, so the fleet's subject permissions, not the
// gateway, decide which agents the role reaches.
type roleConns struct {
	conns   []*nats.Conn
	clients map[string]*a2a.Client // by nats context

	mu sync.Mutex
	// refused is what the last [roleConns.unreachable] found, to log
	// changes only; guarded by mu.
	refused map[roleProbe]bool
}

// roleProbe is one role context's discovery of one host.
type roleProbe struct{ context, host string }

// connectRoles connects once per distinct nats context the policy's roles
// name. First it refuses a context that cannot be loaded, naming the
// role's key: Validate reads no files, and a role that silently fell back
// to the gateway's own credentials would reach more of the fleet than the
// operator meant. Without remote_tools a role's context has nothing to
// reach, which is logged.
func connectRoles(cfg *config.Config, log *slog.Logger) (*roleConns, error) {
	contexts := cfg.PolicyContexts()
	keys := slices.Sorted(maps.Keys(contexts))
	for _, key := range keys {
		if err := natsconn.Check(contexts[key]); err != nil {
			return nil, fmt.Errorf("%s: %s %q: %w: fix %s or create the context with nats context add", cfg.File, key, contexts[key], err, key)
		}
	}
	if len(contexts) == 0 {
		return nil, nil
	}
	if len(cfg.RemoteTools) == 0 {
		log.Warn("policy roles name nats contexts, but there are no remote_tools to call through them", "agent", cfg.Identity)
		return nil, nil
	}
	rc := &roleConns{clients: map[string]*a2a.Client{}}
	for _, key := range keys {
		name := contexts[key]
		if rc.clients[name] != nil {
			continue
		}
		nc, err := natsconn.Connect(natsconn.Options{Context: name, Name: "mcp-gateway " + cfg.Identity + " role context " + name, Logger: log})
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("%s: %s: %w", cfg.File, key, err)
		}
		rc.conns = append(rc.conns, nc)
		client, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: cfg.Identity})
		if err != nil {
			rc.Close()
			return nil, err
		}
		rc.clients[name] = client
	}
	return rc, nil
}

// remoteVia is mcpserver's Config.RemoteVia: the client of the role's
// nats context.
func (rc *roleConns) remoteVia(natsContext string) (any, error) {
	c := rc.clients[natsContext]
	if c == nil {
		return nil, fmt.Errorf("no connection for nats context %q of expose.agent.mcp.policy", natsContext)
	}
	return c, nil
}

// roleDiscoveryTimeout bounds one role context's discovery of one host.
const roleDiscoveryTimeout = 5 * time.Second

// unreachable discovers every remote host with each role's nats context:
// the tools of a host whose discovery the NATS server refuses that
// context's user are hidden from the role, so a role is shown what its
// own credentials reach (grant discovery.IDENTITY where tool.IDENTITY and
// stream.IDENTITY are granted, as nats-server-roles.conf does). A host
// that does not answer is left as the gateway sees it: its calls fail
// in-band, naming the host. tools are the imported tools, origin their
// host.
func (rc *roleConns) unreachable(ctx context.Context, hosts []config.RemoteHost, tools []tool.Tool, origin func(tool.Tool) string, log *slog.Logger) mcpserver.Unreachable {
	if rc == nil {
		return nil
	}
	var (
		mu      sync.Mutex
		refused = map[roleProbe]bool{}
		wg      sync.WaitGroup
	)
	for name, c := range rc.clients {
		for _, h := range hosts {
			wg.Go(func() {
				dctx, cancel := context.WithTimeout(ctx, roleDiscoveryTimeout)
				defer cancel()
				if _, err := c.Discover(dctx, h.Host); errors.Is(err, a2a.ErrPermission) {
					mu.Lock()
					refused[roleProbe{name, h.Host}] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	rc.mu.Lock()
	for p := range refused {
		if !rc.refused[p] {
			log.Info("a policy role's nats context may not reach a remote host: its tools are hidden from the role", "nats_context", p.context, "host", p.host)
		}
	}
	for p := range rc.refused {
		if !refused[p] {
			log.Info("a policy role's nats context reaches a remote host again: its tools are shown to the role", "nats_context", p.context, "host", p.host)
		}
	}
	rc.refused = refused
	rc.mu.Unlock()
	out := mcpserver.Unreachable{}
	for p := range refused {
		for _, t := range tools {
			if origin(t) == p.host {
				if out[p.context] == nil {
					out[p.context] = map[string]bool{}
				}
				out[p.context][t.Name()] = true
			}
		}
	}
	return out
}

// Close closes the role connections.
func (rc *roleConns) Close() {
	if rc == nil {
		return
	}
	for _, nc := range rc.conns {
		nc.Close()
	}
}
