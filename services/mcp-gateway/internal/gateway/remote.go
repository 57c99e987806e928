package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/remotetools"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// sourceRemote is the mcpserver source the imported tools are served as;
// local tools are registered first, so a remote tool never takes a local
// name.
const sourceRemote = "remote"

// remote is the gateway's connection to the fleet: present only when
// remote_tools is configured.
type remote struct {
	nc       *nats.Conn
	importer *remotetools.Importer
}

// connectNATS connects with the gateway's nats_context.
func connectNATS(cfg *config.Config, log *slog.Logger) (*nats.Conn, error) {
	return natsconn.Connect(natsconn.Options{Context: cfg.NATSContext, Name: "mcp-gateway " + cfg.Identity, Logger: log})
}

// newRemote prepares the importer of cfg.RemoteTools over nc, which the
// caller owns; local are the names local tools already hold.
func newRemote(nc *nats.Conn, cfg *config.Config, local []tool.Tool) (*remote, error) {
	client, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: cfg.Identity})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(local))
	for _, t := range local {
		names = append(names, t.Name())
	}
	return &remote{nc: nc, importer: remotetools.NewImporter(client, cfg.RemoteTools, names)}, nil
}

// natsReady reports nil while the fleet connection is up.
func (r *remote) natsReady() error {
	if !r.nc.IsConnected() {
		return fmt.Errorf("not connected (%s)", strings.ToLower(r.nc.Status().String()))
	}
	return nil
}

// hostsReady reports nil once every remote host has answered discovery at
// least once; it counts the others rather than naming them.
func (r *remote) hostsReady() error {
	hosts := r.importer.Hosts()
	missing := 0
	for _, h := range hosts {
		if !h.Discovered {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d hosts never discovered", missing, len(hosts))
	}
	return nil
}

// hostStates is what the remote host metrics report.
func (r *remote) hostStates() []ops.HostState {
	hosts := r.importer.Hosts()
	out := make([]ops.HostState, len(hosts))
	for i, h := range hosts {
		out[i] = ops.HostState{Host: h.Host, Discovered: h.Discovered, Reachable: h.Reachable}
	}
	return out
}

// logResult logs what an import left out.
func logResult(res remotetools.Result, log *slog.Logger) {
	for _, d := range res.Dropped {
		log.Warn("remote tool not imported", "tool", d.Name, "reason", d.Reason)
	}
	for host, err := range res.Failed {
		log.Warn("remote host did not answer discovery", "host", host, "error", err)
	}
}

// serve imports strictly (any host error or collision refuses to
// start, naming the host and the cause), serves the tools beside the local
// ones, and keeps them current every interval until ctx ends.
func (r *remote) serve(ctx context.Context, cfg *config.Config, srv *mcpserver.Server, roles *roleConns, log *slog.Logger) error {
	res, err := r.importer.ImportStrict(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	logResult(res, log)
	// What each role reaches first, so the lists of the new tools are
	// built with it; again every interval, since a role's permissions
	// may change while the tools do not.
	var mu sync.Mutex
	current := res.Tools
	set := func(tools []tool.Tool) error {
		mu.Lock()
		defer mu.Unlock()
		current = tools
		if roles != nil {
			srv.SetUnreachable(roles.unreachable(ctx, cfg.RemoteTools, tools, r.importer.Origin, log))
		}
		return srv.SetTools(sourceRemote, tools)
	}
	if err := set(res.Tools); err != nil {
		return fmt.Errorf("%s: remote_tools: %w", cfg.File, err)
	}
	log.Info("imported remote tools", "agent", cfg.Identity, "hosts", len(cfg.RemoteTools), "tools", len(res.Tools), "refresh", cfg.RefreshInterval())
	go r.importer.Watch(ctx, cfg.RefreshInterval(), log, func(res remotetools.Result) {
		if err := set(res.Tools); err != nil {
			log.Error("serving refreshed remote tools", "error", err)
		}
	})
	if roles != nil && cfg.RefreshInterval() > 0 {
		go func() {
			t := time.NewTicker(cfg.RefreshInterval())
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				mu.Lock()
				tools := current
				mu.Unlock()
				if err := set(tools); err != nil {
					log.Error("serving remote tools with what each role reaches", "error", err)
				}
			}
		}()
	}
	return nil
}

// ImportRemote adds the remote tools to listing leniently: a host
// that does not answer (or no NATS at all) is warned about, and every
// reachable host and local tool is still listed, so info works offline.
func ImportRemote(ctx context.Context, cfg *config.Config, listing *tool.Listing, log *slog.Logger) {
	nc, err := connectNATS(cfg, log)
	if err != nil {
		log.Warn("remote tools not listed", "error", fmt.Errorf("%s: nats_context (needed by remote_tools): %w", cfg.File, err))
		return
	}
	defer nc.Close()
	r, err := newRemote(nc, cfg, listing.Served)
	if err != nil {
		log.Warn("remote tools not listed", "error", err)
		return
	}
	res := r.importer.Import(ctx)
	logResult(res, log)
	listing.Served = append(listing.Served, res.Tools...)
	listing.Dropped = append(listing.Dropped, res.Dropped...)
	listing.Origin = r.importer.Origin
}
