package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
)

// DefaultInstanceTTL is how long a gateway of a fleet may go without a
// heartbeat before the others take it for dead and fail its running
// tasks (expose.agent.mcp.fleet.instance_ttl): long enough to ride out a
// garbage collection or a JetStream leader election, short enough that a
// client polling a task of a dead gateway learns it within seconds.
const DefaultInstanceTTL = 15 * time.Second

// CancelSubject is the subject on which the gateway instance of identity
// takes the cancels of the task calls it runs: one process listens, with
// no queue group, since only the process running a call can stop it.
func CancelSubject(identity, instance string) string {
	return natsbus.SubjectPrefix + ".gateway." + identity + "." + instance + ".cancel"
}

// FleetConfig configures a [Fleet].
type FleetConfig struct {
	// Identity is the gateways' identity, in the cancel subjects.
	Identity string
	// Instance names this gateway; it must be unique in the fleet (the
	// gateway's random instance name is).
	Instance string
	// InstanceTTL is the heartbeat timeout; 0 means [DefaultInstanceTTL].
	// A heartbeat goes out every third of it, and a gateway whose last
	// heartbeat is two thirds of it old (two missed) is dead, so that
	// with a check every sixth of it, a gateway's tasks are failed within
	// InstanceTTL of its last heartbeat.
	InstanceTTL time.Duration
	// Logger receives the failing of dead gateways' tasks and heartbeat
	// trouble; nil means slog.Default().
	Logger *slog.Logger
}

// heartbeat is the value of a gateway's instance key.
type heartbeat struct {
	Identity string    `json:"identity"`
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
}

// cancelRequest and cancelReply travel on [CancelSubject].
type cancelRequest struct {
	ID string `json:"id"`
}

type cancelReply struct {
	Running bool   `json:"running"`
	Error   string `json:"error,omitempty"`
}

// Fleet is what one gateway of a fleet does besides sharing the [KV]
// store: it heartbeats its instance key (instance.<instance> in the
// bucket), fails the working tasks of gateways whose heartbeat stopped,
// takes cancels for the calls it runs on [CancelSubject], and sends
// cancels to the others ([Canceller]). It is safe for concurrent use.
// The caller owns the connection and the store, and closes them after
// [Fleet.Stop].
type Fleet struct {
	nc  *nats.Conn
	kv  *KV
	cfg FleetConfig
	log *slog.Logger

	started time.Time

	mu sync.Mutex
	// sub, stop and done are set by Start and guarded by mu; beatErr is
	// the last heartbeat's error.
	sub     *nats.Subscription
	stop    context.CancelFunc
	done    chan struct{}
	beatErr error
}

// NewFleet returns the fleet membership of this gateway; it does nothing
// until [Fleet.Start].
func NewFleet(nc *nats.Conn, kv *KV, cfg FleetConfig) (*Fleet, error) {
	if cfg.InstanceTTL <= 0 {
		cfg.InstanceTTL = DefaultInstanceTTL
	}
	if !validKeyToken(cfg.Identity) || !validKeyToken(cfg.Instance) {
		return nil, fmt.Errorf("%w: a fleet needs an identity and an instance name fit for a subject, got %q and %q", ErrInvalidConfig, cfg.Identity, cfg.Instance)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Fleet{nc: nc, kv: kv, cfg: cfg, log: cfg.Logger, started: time.Now()}, nil
}

// InstanceTTL returns the heartbeat timeout in force.
func (f *Fleet) InstanceTTL() time.Duration { return f.cfg.InstanceTTL }

func instanceKey(instance string) string { return instancePrefix + instance }

// Start writes the first heartbeat, listens for cancels of m's calls, and
// keeps heartbeating and failing dead gateways' tasks until [Fleet.Stop].
func (f *Fleet) Start(ctx context.Context, m *Manager) error {
	if err := f.firstBeat(ctx); err != nil {
		return err
	}
	subject := CancelSubject(f.cfg.Identity, f.cfg.Instance)
	sub, err := f.nc.Subscribe(subject, func(msg *nats.Msg) { go f.serveCancel(m, msg) })
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	if err := f.nc.FlushTimeout(f.cfg.InstanceTTL / 3); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	f.mu.Lock()
	f.sub, f.stop, f.done = sub, stop, done
	f.mu.Unlock()
	go f.loop(loopCtx, done)
	return nil
}

// Stop ends the heartbeats and the cancel subscription, and deletes this
// gateway's instance key so that the others need not wait out its ttl
// (its tasks were already ended by its own shutdown). It is idempotent.
func (f *Fleet) Stop() {
	f.mu.Lock()
	running := f.stop != nil
	f.mu.Unlock()
	if !running {
		return
	}
	f.Silence()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.kv.kv.Delete(ctx, instanceKey(f.cfg.Instance))
}

// Ready reports whether this gateway can reach the bucket: the last
// heartbeat went through and the bucket answers now. /readyz uses it, so
// that a balancer drains a gateway that lost the bucket.
func (f *Fleet) Ready() error {
	f.mu.Lock()
	err := f.beatErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return f.kv.Ready(ctx)
}

// firstBeatRetry is how often the first heartbeat is tried again while
// its bucket's stream has no responder yet.
const firstBeatRetry = 100 * time.Millisecond

// firstBeat writes the first heartbeat. On a cluster, a bucket another
// gateway of the fleet has just created can have no responder for a
// moment on this gateway's server, until the stream's interest reaches it:
// such a heartbeat is tried again for up to a third of the instance ttl,
// the time one heartbeat may take; any other failure ends the start at
// once.
func (f *Fleet) firstBeat(ctx context.Context) error {
	until := time.Now().Add(f.cfg.InstanceTTL / 3)
	for {
		err := f.beat(ctx)
		if err == nil || !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Now().Add(firstBeatRetry).After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(firstBeatRetry):
		}
	}
}

func (f *Fleet) beat(ctx context.Context) error {
	b, _ := json.Marshal(heartbeat{Identity: f.cfg.Identity, Instance: f.cfg.Instance, Started: f.started})
	ctx, cancel := context.WithTimeout(ctx, f.cfg.InstanceTTL/3)
	defer cancel()
	_, err := f.kv.kv.Put(ctx, instanceKey(f.cfg.Instance), b)
	if err != nil {
		err = fmt.Errorf("%w: heartbeat of %s in bucket %s: %w", ErrUnavailable, f.cfg.Instance, f.kv.cfg.Bucket, err)
	}
	f.mu.Lock()
	f.beatErr = err
	f.mu.Unlock()
	return err
}

func (f *Fleet) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	beat := time.NewTicker(f.cfg.InstanceTTL / 3)
	defer beat.Stop()
	check := time.NewTicker(f.cfg.InstanceTTL / 6)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if err := f.beat(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("gateway heartbeat", "instance", f.cfg.Instance, "error", err)
			}
		case <-check.C:
			if err := f.FailDead(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("checking the fleet's gateways", "instance", f.cfg.Instance, "error", err)
			}
		}
	}
}

// FailDead marks failed every working task whose gateway has stopped
// heartbeating, naming that gateway; the loop runs it every sixth of the
// instance ttl. Every live gateway does it; the store's compare-and-set
// makes the first one win.
func (f *Fleet) FailDead(ctx context.Context) error {
	all, err := f.kv.entries(ctx, taskPrefix+">")
	if err != nil {
		return err
	}
	alive := map[string]bool{f.cfg.Instance: true}
	for _, t := range all {
		if t.Terminal() || t.Instance == "" {
			continue
		}
		live, known := alive[t.Instance]
		if !known {
			if live, err = f.alive(ctx, t.Instance); err != nil {
				return err
			}
			alive[t.Instance] = live
		}
		if live {
			continue
		}
		msg := fmt.Sprintf("the gateway running it (instance %s) stopped: no heartbeat for %s (expose.agent.mcp.fleet.instance_ttl %s); whether its command finished is unknown",
			t.Instance, f.cfg.InstanceTTL*2/3, f.cfg.InstanceTTL)
		if _, changed, err := f.kv.End(ctx, t.Owner, t.ID, Ending{Status: mcp.TaskStatusFailed, Message: msg}); err == nil && changed {
			f.log.Warn("failed the task of a gateway that stopped", "task", t.ID, "tool", t.Tool, "instance", t.Instance)
		}
	}
	return nil
}

// alive reports whether instance heartbeat within two thirds of the ttl.
// The entry's time is the server's, compared with this host's clock: the
// gateways of a fleet are expected to keep their clocks in sync (NTP), to
// well within the ttl.
func (f *Fleet) alive(ctx context.Context, instance string) (bool, error) {
	if !validKeyToken(instance) {
		return false, nil
	}
	e, err := f.kv.kv.Get(ctx, instanceKey(instance))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: reading the heartbeat of %s: %w", ErrUnavailable, instance, err)
	}
	return time.Since(e.Created()) < f.cfg.InstanceTTL*2/3, nil
}

// CancelRemote implements [Canceller]: it asks instance to stop its call
// of task id and waits for its answer, sent once the call has returned.
func (f *Fleet) CancelRemote(ctx context.Context, instance, id string) error {
	if !validKeyToken(instance) {
		return fmt.Errorf("cancelling task %s: bad instance name %q", id, instance)
	}
	b, _ := json.Marshal(cancelRequest{ID: id})
	msg, err := f.nc.RequestWithContext(ctx, CancelSubject(f.cfg.Identity, instance), b)
	if err != nil {
		return fmt.Errorf("cancelling task %s on gateway %s: %w", id, instance, err)
	}
	var rep cancelReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return fmt.Errorf("cancelling task %s on gateway %s: decoding the answer: %w", id, instance, err)
	}
	if rep.Error != "" {
		return fmt.Errorf("cancelling task %s on gateway %s: %s", id, instance, rep.Error)
	}
	return nil
}

// serveCancel stops the call a cancel names and answers once it returned.
func (f *Fleet) serveCancel(m *Manager, msg *nats.Msg) {
	var req cancelRequest
	var rep cancelReply
	if err := json.Unmarshal(msg.Data, &req); err != nil || !validID(req.ID) {
		rep.Error = "want {\"id\": TASK_ID}"
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), CancelWait)
		rep.Running = m.stopLocal(ctx, req.ID, ErrCancelled)
		cancel()
	}
	b, _ := json.Marshal(rep)
	if msg.Reply != "" {
		_ = msg.Respond(b)
	}
}

// Silence stops the heartbeats and the cancel subscription without
// deleting the instance key, as a killed process would leave things;
// tests use it to play a dead gateway.
func (f *Fleet) Silence() {
	f.mu.Lock()
	sub, stop, done := f.sub, f.stop, f.done
	f.sub, f.stop, f.done = nil, nil, nil
	f.mu.Unlock()
	if stop == nil {
		return
	}
	_ = sub.Unsubscribe()
	stop()
	<-done
}
