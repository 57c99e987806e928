package gateway

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// fleetMember is what a gateway of a fleet (expose.agent.mcp.fleet) holds:
// the shared bucket's task store and its own membership. A nil
// *fleetMember is a gateway on its own: its methods then give the
// server's in-memory defaults.
type fleetMember struct {
	store      *tasks.KV
	fleet      *tasks.Fleet
	bucketName string
}

// joinFleet opens the fleet's bucket over nc when the config asks for a
// fleet, and returns nil otherwise. The caller owns nc.
func joinFleet(ctx context.Context, nc *nats.Conn, cfg *config.Config, instance string, log *slog.Logger) (*fleetMember, error) {
	f := cfg.Expose.Agent.MCP.Fleet
	if f == nil {
		return nil, nil
	}
	if nc == nil {
		return nil, fmt.Errorf("%s: expose.agent.mcp.fleet keeps tasks in JetStream: add nats_context: NAME", cfg.File)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
	}
	bucket := f.Bucket
	if bucket == "" {
		bucket = config.DefaultFleetBucket
	}
	store, err := tasks.NewKV(ctx, js, tasks.KVConfig{Bucket: bucket, Replicas: f.Replicas, Max: maxTasks(cfg.Expose.Agent.MCP)})
	if err != nil {
		return nil, fmt.Errorf("%s: expose.agent.mcp.fleet.bucket: %w: check that the account of nats_context %s has JetStream", cfg.File, err, cfg.NATSContext)
	}
	ttl := f.InstanceTTL.Duration
	if ttl == 0 {
		ttl = config.DefaultFleetInstanceTTL
	}
	membership, err := tasks.NewFleet(nc, store, tasks.FleetConfig{Identity: cfg.Identity, Instance: instance, InstanceTTL: ttl, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: expose.agent.mcp.fleet: %w", cfg.File, err)
	}
	return &fleetMember{store: store, fleet: membership, bucketName: bucket}, nil
}

func maxTasks(m *config.MCP) int {
	if m.MaxTasks > 0 {
		return m.MaxTasks
	}
	return config.DefaultMaxTasks
}

// taskStore is the fleet's task store, nil (memory) without a fleet.
func (f *fleetMember) taskStore() tasks.Store {
	if f == nil {
		return nil
	}
	return f.store
}

// canceller reaches the other gateways, nil without a fleet.
func (f *fleetMember) canceller() tasks.Canceller {
	if f == nil {
		return nil
	}
	return f.fleet
}

// bucket holds the pending approvals, nil (memory) without a fleet.
func (f *fleetMember) bucket() jetstream.KeyValue {
	if f == nil {
		return nil
	}
	return f.store.Bucket()
}
