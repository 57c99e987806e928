package gateway

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// fleetMember is what a gateway of a fleet (expose.agent.mcp.fleet) holds:
// the shared bucket's task store, the pending approvals' bucket and its own
// membership, which reaches the other gateways. The zero fleetMember is a
// gateway on its own: its nil fields give the server's in-memory defaults.
type fleetMember struct {
	store     tasks.Store
	bucket    jetstream.KeyValue
	canceller tasks.Canceller
	fleet     *tasks.Fleet
}

// joinFleet opens the fleet's bucket over nc when the config asks for a
// fleet, and returns the zero fleetMember otherwise. The caller owns nc.
func joinFleet(ctx context.Context, nc *nats.Conn, cfg *config.Config, instance string, log *slog.Logger) (fleetMember, error) {
	f := cfg.Expose.Agent.MCP.Fleet
	if f == nil {
		return fleetMember{}, nil
	}
	if nc == nil {
		return fleetMember{}, fmt.Errorf("%s: expose.agent.mcp.fleet keeps tasks in JetStream: add nats_context: NAME", cfg.File)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fleetMember{}, fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
	}
	store, err := tasks.NewKV(ctx, js, tasks.KVConfig{Bucket: cmp.Or(f.Bucket, config.DefaultFleetBucket), Replicas: f.Replicas, Max: maxTasks(cfg.Expose.Agent.MCP)})
	if err != nil {
		return fleetMember{}, fmt.Errorf("%s: expose.agent.mcp.fleet.bucket: %w: check that the account of nats_context %s has JetStream", cfg.File, err, cfg.NATSContext)
	}
	membership, err := tasks.NewFleet(nc, store, tasks.FleetConfig{Identity: cfg.Identity, Instance: instance, InstanceTTL: cmp.Or(f.InstanceTTL.Duration, config.DefaultFleetInstanceTTL), Logger: log})
	if err != nil {
		return fleetMember{}, fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
	}
	return fleetMember{store: store, bucket: store.Bucket(), canceller: membership, fleet: membership}, nil
}

func maxTasks(m *config.MCP) int {
	if m.MaxTasks > 0 {
		return m.MaxTasks
	}
	return config.DefaultMaxTasks
}
