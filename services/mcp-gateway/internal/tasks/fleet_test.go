package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// gateway is one member of a test fleet: its connection, store, manager
// and fleet membership.
type gateway struct {
	nc    *nats.Conn
	store *KV
	m     *Manager
	fleet *Fleet
}

func startGateway(tb testing.TB, srv *natstest.Server, instance string, ttl time.Duration) *gateway {
	tb.Helper()
	nc := srv.Connect(tb)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := NewKV(tb.Context(), js, KVConfig{Max: 16})
	if err != nil {
		tb.Fatal(err)
	}
	f, err := NewFleet(nc, store, FleetConfig{Identity: "demo", Instance: instance, InstanceTTL: ttl})
	if err != nil {
		tb.Fatal(err)
	}
	m := NewManager(store, ManagerConfig{Instance: instance, Canceller: f})
	if err := f.Start(tb.Context(), m); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		m.Close(time.Second)
		f.Stop()
	})
	return &gateway{nc: nc, store: store, m: m, fleet: f}
}

// run starts a task of owner on g whose call runs until cancelled, and
// returns it with a channel that yields the call's cancel cause.
func (g *gateway) run(tb testing.TB, owner string) (Task, <-chan error) {
	tb.Helper()
	r, err := g.m.Reserve(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	run, err := g.m.StartTask(tb.Context(), Task{Owner: owner, Session: "s1", Tool: "spawn", TTL: time.Minute}, r, cancel)
	if err != nil {
		tb.Fatal(err)
	}
	cause := make(chan error, 1)
	go func() {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // the process group dying
		cause <- context.Cause(ctx)
		run.Finish(mcp.NewToolResultText("killed"), context.Cause(ctx))
	}()
	return run.Task(), cause
}

// TestFleetCancelReachesRunningGateway: tasks/cancel on another gateway
// cancels the task at once, stops the call on the gateway running it,
// and returns once that call has returned.
func TestFleetCancelReachesRunningGateway(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	a := startGateway(t, srv, "gwa", 3*time.Second)
	b := startGateway(t, srv, "gwb", 3*time.Second)
	task, cause := a.run(t, "caller:alice")

	if _, err := b.m.Cancel(t.Context(), "caller:bob", task.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another caller's cancel through b: got %v, want ErrNotFound", err)
	}
	got, err := b.m.Cancel(t.Context(), "caller:alice", task.ID)
	if err != nil || got.Status != mcp.TaskStatusCancelled {
		t.Fatalf("cancel through b: got %v, %v, want cancelled", got.Status, err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, ErrCancelled) {
			t.Errorf("the call's cancel cause on a: got %v, want %v", c, ErrCancelled)
		}
	default:
		t.Fatal("cancel through b returned before a's call was stopped")
	}
	if _, err := b.m.Cancel(t.Context(), "caller:alice", task.ID); !errors.Is(err, ErrFinished) {
		t.Errorf("a second cancel: got %v, want ErrFinished", err)
	}
	// The call's own end, recorded after the cancel, does not undo it.
	fin, err := a.m.Wait(t.Context(), "caller:alice", task.ID)
	if err != nil || fin.Status != mcp.TaskStatusCancelled || fin.Message != ErrCancelled.Error() {
		t.Errorf("the task after its call returned: got %v %q, %v, want cancelled %q", fin.Status, fin.Message, err, ErrCancelled)
	}
}

// TestFleetFailsDeadGatewaysTasks: when a gateway stops heartbeating (its
// connection cut, as kill -9 would), another marks its working tasks
// failed, naming it, within the instance ttl; a gateway that stopped
// cleanly leaves no instance key behind.
func TestFleetFailsDeadGatewaysTasks(t *testing.T) {
	t.Parallel()
	const ttl = 1500 * time.Millisecond
	srv := natstest.StartJetStream(t)
	a := startGateway(t, srv, "gwdead", ttl)
	b := startGateway(t, srv, "gwlive", ttl)
	task, _ := a.run(t, "caller:alice")
	time.Sleep(ttl / 2) // b sees a alive for a while
	if got, _ := b.m.Get(t.Context(), "caller:alice", task.ID); got.Status != mcp.TaskStatusWorking {
		t.Fatalf("while a heartbeats: got %v, want working", got.Status)
	}
	// a dies: no more heartbeats, no clean stop.
	a.fleet.Silence()
	a.nc.Close()
	died := time.Now()

	ctx, cancel := context.WithTimeout(t.Context(), 3*ttl)
	defer cancel()
	got, err := b.m.Wait(ctx, "caller:alice", task.ID)
	if err != nil {
		t.Fatalf("waiting for the dead gateway's task to end: %v", err)
	}
	if took := time.Since(died); took > ttl {
		t.Errorf("failed after %s, want within the instance ttl %s", took, ttl)
	}
	if got.Status != mcp.TaskStatusFailed || !strings.Contains(got.Message, "gwdead") || !strings.Contains(got.Message, "instance_ttl") {
		t.Errorf("the dead gateway's task: got %v %q, want failed naming gwdead and instance_ttl", got.Status, got.Message)
	}

	b.fleet.Stop()
	if _, err := b.store.kv.Get(t.Context(), instanceKey("gwlive")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the instance key of a gateway stopped cleanly: got %v, want gone", err)
	}
}

// TestFleetReady: a gateway is ready while it reaches the bucket, and not
// while its server is down.
func TestFleetReady(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	g := startGateway(t, srv, "gwready", 3*time.Second)
	if err := g.fleet.Ready(); err != nil {
		t.Fatalf("ready with the bucket reachable: %v", err)
	}
	srv.Stop()
	if err := g.fleet.Ready(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ready with the server down: got %v, want ErrUnavailable", err)
	}
	srv.Resume()
	fisktest.WaitFor(t, 15*time.Second, "ready again after the server came back", func() bool { return g.fleet.Ready() == nil })
}

// TestFleetFirstBeatWaitsForStream: a gateway starting while its bucket's
// stream has no responder yet (on a cluster, one another gateway has just
// created) tries its first heartbeat again until the stream answers, and
// gives up with ErrUnavailable after a third of its instance ttl when it
// never does.
func TestFleetFirstBeatWaitsForStream(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewKV(t.Context(), js, KVConfig{Max: 16})
	if err != nil {
		t.Fatal(err)
	}
	bucket := store.cfg.Bucket
	start := func(instance string) error {
		f, err := NewFleet(nc, store, FleetConfig{Identity: "demo", Instance: instance, InstanceTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		m := NewManager(store, ManagerConfig{Instance: instance, Canceller: f})
		t.Cleanup(func() {
			m.Close(time.Second)
			f.Stop()
		})
		return f.Start(t.Context(), m)
	}

	if err := js.DeleteKeyValue(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := start("gwnever"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("start without the stream: got %v, want ErrUnavailable with no response from stream", err)
	}
	if took := time.Since(began); took < 800*time.Millisecond {
		t.Errorf("start without the stream gave up after %s, want it to try for about a second", took)
	}

	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := OpenBucket(context.Background(), js, bucket, 1); err != nil {
			t.Errorf("recreating the bucket: %v", err)
		}
	}()
	if err := start("gwlate"); err != nil {
		t.Fatalf("start while the stream comes back: %v", err)
	}
}

// TestOpenBucketOutlastsTheRequestTimeout opens the bucket while its
// server is away for longer than jetstream's 5 s request timeout, as a
// replicated bucket's creation on a busy or restarting cluster can take:
// without a deadline of the caller's, OpenBucket waits for it (up to
// openTimeout) rather than failing the gateway's start after 5 s.
func TestOpenBucketOutlastsTheRequestTimeout(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	nc := srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	// Asked once the client knows the server is gone, the request waits
	// in the reconnect buffer rather than on a dead socket.
	fisktest.WaitFor(t, 10*time.Second, "the client to see the server gone", func() bool { return !nc.IsConnected() })
	opened := make(chan error, 1)
	go func() {
		_, err := OpenBucket(context.Background(), js, "slow_start", 1)
		opened <- err
	}()
	time.Sleep(6 * time.Second)
	srv.Resume()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("opening the bucket across a 6 s outage: %v", err)
		}
	case <-time.After(openTimeout):
		t.Fatal("opening the bucket did not end after the server came back")
	}
	if _, err := js.KeyValue(t.Context(), "slow_start"); err != nil {
		t.Errorf("the bucket after the outage: %v", err)
	}
}
