package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// storeKind builds one kind of store keeping at most max tasks.
type storeKind struct {
	name string
	open func(tb testing.TB, max int, now Clock) Store
}

func openKV(tb testing.TB, max int, now Clock) Store {
	tb.Helper()
	js, err := jetstream.New(natstest.StartJetStream(tb).Connect(tb))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := NewKV(tb.Context(), js, KVConfig{Max: max, Now: now})
	if err != nil {
		tb.Fatalf("opening the KV store: %v", err)
	}
	return s
}

var storeKinds = []storeKind{
	{"memory", func(_ testing.TB, max int, now Clock) Store { return NewMemory(max, now) }},
	{"kv", openKV},
}

// create reserves and creates a working task of owner.
func create(tb testing.TB, s Store, owner string, ttl time.Duration) Task {
	tb.Helper()
	r, err := s.Reserve(tb.Context())
	if err != nil {
		tb.Fatalf("reserving: %v", err)
	}
	t, err := s.Create(tb.Context(), Task{ID: NewID(), Owner: owner, Tool: "echo", Instance: "gw1", TTL: ttl, Status: mcp.TaskStatusWorking}, r)
	if err != nil {
		tb.Fatalf("creating: %v", err)
	}
	return t
}

func done(text string) Ending {
	return Ending{Status: mcp.TaskStatusCompleted, Result: mcp.NewToolResultText(text)}
}

// TestStoreContract: both stores bind tasks to their owner, end a task
// once, wake a waiter, list oldest first, drop an owner's tasks, forget a
// finished task once its ttl has passed, and keep at most max tasks,
// dropping the one that finished first and refusing when all run.
func TestStoreContract(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			t.Run("owner", func(t *testing.T) {
				s := k.open(t, 10, nil)
				task := create(t, s, "caller:alice", time.Minute)
				if _, err := s.Get(t.Context(), "caller:alice", task.ID); err != nil {
					t.Fatalf("the owner's get: %v", err)
				}
				for _, bad := range []struct{ owner, id string }{
					{"caller:bob", task.ID},
					{"session:x", task.ID},
					{"caller:alice", NewID()},
					{"caller:alice", "task-../../etc"},
					{"caller:alice", strings.Repeat("x", 100_000)},
				} {
					if _, err := s.Get(t.Context(), bad.owner, bad.id); !errors.Is(err, ErrNotFound) {
						t.Errorf("get %.20s of %s: got %v, want ErrNotFound", bad.id, bad.owner, err)
					}
					if _, _, err := s.End(t.Context(), bad.owner, bad.id, done("x")); !errors.Is(err, ErrNotFound) {
						t.Errorf("end %.20s of %s: got %v, want ErrNotFound", bad.id, bad.owner, err)
					}
				}
				if list, err := s.List(t.Context(), "caller:bob"); err != nil || len(list) != 0 {
					t.Errorf("another owner's list: got %v, %v, want none", list, err)
				}
			})
			t.Run("end once", func(t *testing.T) {
				s := k.open(t, 10, nil)
				task := create(t, s, "o", time.Minute)
				waited := make(chan Task, 1)
				go func() {
					w, err := s.Wait(t.Context(), "o", task.ID)
					if err != nil {
						t.Errorf("wait: %v", err)
					}
					waited <- w
				}()
				got, changed, err := s.End(t.Context(), "o", task.ID, done("first"))
				if err != nil || !changed || got.Status != mcp.TaskStatusCompleted {
					t.Fatalf("first end: got %v %v %v, want completed", got.Status, changed, err)
				}
				got, changed, err = s.End(t.Context(), "o", task.ID, Ending{Status: mcp.TaskStatusCancelled, Message: "late"})
				if err != nil || changed || got.Status != mcp.TaskStatusCompleted {
					t.Errorf("second end: got %v %v %v, want completed unchanged", got.Status, changed, err)
				}
				select {
				case w := <-waited:
					if w.Result == nil || ResultText(w.Result) != "first" {
						t.Errorf("waited: got %+v, want the first result", w.Result)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the waiter was not woken within 10s")
				}
				read, err := s.Get(t.Context(), "o", task.ID)
				if err != nil || read.Result == nil || ResultText(read.Result) != "first" {
					t.Errorf("get after end: got %+v, %v, want the first result", read, err)
				}
			})
			t.Run("update", func(t *testing.T) {
				s := k.open(t, 10, nil)
				task := create(t, s, "o", time.Minute)
				got, changed, err := s.Update(t.Context(), "o", task.ID, mcp.TaskStatusInputRequired, "awaiting operator approval (id a1)")
				if err != nil || !changed || got.Status != mcp.TaskStatusInputRequired || got.Message != "awaiting operator approval (id a1)" {
					t.Fatalf("update: got %v %q %v %v, want input_required with the message", got.Status, got.Message, changed, err)
				}
				if read, err := s.Get(t.Context(), "o", task.ID); err != nil || read.Status != mcp.TaskStatusInputRequired {
					t.Errorf("get after update: got %v, %v, want input_required", read.Status, err)
				}
				if _, _, err := s.Update(t.Context(), "other", task.ID, mcp.TaskStatusWorking, ""); !errors.Is(err, ErrNotFound) {
					t.Errorf("another owner's update: got %v, want ErrNotFound", err)
				}
				if _, changed, _ := s.Update(t.Context(), "o", task.ID, mcp.TaskStatusCompleted, ""); changed {
					t.Error("update to a terminal status changed the task, want it left to End")
				}
				if _, _, err := s.End(t.Context(), "o", task.ID, done("x")); err != nil {
					t.Fatal(err)
				}
				got, changed, err = s.Update(t.Context(), "o", task.ID, mcp.TaskStatusWorking, "late")
				if err != nil || changed || got.Status != mcp.TaskStatusCompleted || got.Result == nil && k.name == "memory" {
					t.Errorf("update after end: got %v %v %v, want completed unchanged", got.Status, changed, err)
				}
			})
			t.Run("list and drop", func(t *testing.T) {
				s := k.open(t, 10, nil)
				a := create(t, s, "session:1", time.Minute)
				b := create(t, s, "session:1", time.Minute)
				other := create(t, s, "session:2", time.Minute)
				if _, _, err := s.End(t.Context(), "session:1", a.ID, done("a")); err != nil {
					t.Fatal(err)
				}
				list, err := s.List(t.Context(), "session:1")
				if err != nil || len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
					t.Fatalf("list: got %v, %v, want %s then %s", list, err, a.ID, b.ID)
				}
				working, err := s.Drop(t.Context(), "session:1", Ending{Status: mcp.TaskStatusCancelled, Message: ErrSessionEnded.Error()})
				if err != nil || len(working) != 1 || working[0].ID != b.ID || working[0].Status != mcp.TaskStatusCancelled {
					t.Errorf("drop: got %v, %v, want %s cancelled", working, err, b.ID)
				}
				if n, _ := s.Count(t.Context()); n != 1 {
					t.Errorf("count after drop: got %d, want 1 (the other session's)", n)
				}
				if _, err := s.Get(t.Context(), "session:2", other.ID); err != nil {
					t.Errorf("the other session's task after the drop: %v", err)
				}
			})
			t.Run("ttl", func(t *testing.T) {
				clock := newFakeClock()
				s := k.open(t, 10, clock.Now)
				task := create(t, s, "o", time.Minute)
				if _, _, err := s.End(t.Context(), "o", task.ID, done("x")); err != nil {
					t.Fatal(err)
				}
				clock.Advance(59 * time.Second)
				if _, err := s.Get(t.Context(), "o", task.ID); err != nil {
					t.Errorf("before its ttl: %v, want kept", err)
				}
				clock.Advance(time.Second)
				if err := s.Sweep(t.Context()); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Get(t.Context(), "o", task.ID); !errors.Is(err, ErrNotFound) {
					t.Errorf("after its ttl: got %v, want ErrNotFound", err)
				}
				if n, _ := s.Count(t.Context()); n != 0 {
					t.Errorf("count after the sweep: got %d, want 0", n)
				}
			})
			t.Run("max", func(t *testing.T) {
				clock := newFakeClock()
				s := k.open(t, 2, clock.Now)
				first := create(t, s, "o", time.Hour)
				second := create(t, s, "o", time.Hour)
				for _, id := range []string{first.ID, second.ID} {
					clock.Advance(time.Second)
					if _, _, err := s.End(t.Context(), "o", id, done(id)); err != nil {
						t.Fatal(err)
					}
				}
				third := create(t, s, "o", time.Hour)
				if _, err := s.Get(t.Context(), "o", first.ID); !errors.Is(err, ErrNotFound) {
					t.Errorf("the task that finished first, beyond max: got %v, want dropped", err)
				}
				if _, err := s.Get(t.Context(), "o", second.ID); err != nil {
					t.Errorf("the newer finished task: %v, want kept", err)
				}
				create(t, s, "o", time.Hour) // drops second
				_, err := s.Reserve(t.Context())
				if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "expose.agent.mcp.max_tasks") {
					t.Errorf("reserving with all running: got %v, want ErrFull naming expose.agent.mcp.max_tasks", err)
				}
				if _, _, err := s.End(t.Context(), "o", third.ID, done("3")); err != nil {
					t.Fatal(err)
				}
				r, err := s.Reserve(t.Context())
				if err != nil {
					t.Fatalf("reserving once one finished: %v", err)
				}
				r.Release()
				r.Release()
				r2, err := s.Reserve(t.Context())
				if err != nil {
					t.Fatalf("reserving after a release: %v", err)
				}
				r2.Release()
			})
		})
	}
}

// TestKVLargeResult: a result larger than a key-value entry may hold goes
// to the object store, is read back whole through another connection, and
// goes with its task.
func TestKVLargeResult(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	open := func() *KV {
		js, err := jetstream.New(srv.Connect(t))
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewKV(t.Context(), js, KVConfig{Max: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB, beyond max_payload
	task := create(t, a, "o", time.Minute)
	if _, _, err := a.End(t.Context(), "o", task.ID, done(big)); err != nil {
		t.Fatalf("ending with a 3 MiB result: %v", err)
	}
	got, err := b.Get(t.Context(), "o", task.ID)
	if err != nil || got.Result == nil || ResultText(got.Result) != big {
		t.Fatalf("reading it through another store: got %d bytes, %v, want %d", len(ResultText(got.Result)), err, len(big))
	}
	obj, err := b.objects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.GetInfo(t.Context(), task.ID); err != nil {
		t.Errorf("the result object: %v, want it stored", err)
	}
	if _, err := b.Drop(t.Context(), "o", Ending{Status: mcp.TaskStatusCancelled}); err != nil {
		t.Fatal(err)
	}
	if _, err := obj.GetInfo(t.Context(), task.ID); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the result object after its task was dropped: got %v, want ErrObjectNotFound", err)
	}
}

// TestKVBucket: the bucket is created with the replicas asked on a
// JetStream cluster, and a second store opens the same one.
func TestKVBucket(t *testing.T) {
	t.Parallel()
	c := natstest.StartJetStreamCluster(t, 3)
	js, err := jetstream.New(c.Servers[0].Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	// A new replicated stream elects its own leader first, which on a
	// loaded machine can outlast the client's default five seconds.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := NewKV(ctx, js, KVConfig{Bucket: "FLEET_T", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Bucket().Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if si := st.(*jetstream.KeyValueBucketStatus).StreamInfo(); si.Config.Replicas != 3 {
		t.Errorf("replicas: got %d, want 3", si.Config.Replicas)
	}
	js3, err := jetstream.New(c.Servers[2].Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewKV(ctx, js3, KVConfig{Bucket: "FLEET_T", Replicas: 3}); err != nil {
		t.Errorf("opening the existing bucket through another member: %v", err)
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("ready: %v", err)
	}
	// A bucket made elsewhere without per-key ttls is refused by name.
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "PLAIN"}); err != nil {
		t.Fatal(err)
	}
	_, err = NewKV(t.Context(), js, KVConfig{Bucket: "PLAIN"})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "PLAIN") || !strings.Contains(err.Error(), "expose.agent.mcp.fleet.bucket") {
		t.Errorf("a bucket without per-key ttls: got %v, want ErrInvalidConfig naming it and expose.agent.mcp.fleet.bucket", err)
	}
}

// TestKVEndRace: two gateways ending one task at once (a cancel on one, the
// call's result on the other) leave exactly one winner, and the stored
// task is the winner's.
func TestKVEndRace(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	var stores []*KV
	for range 2 {
		js, err := jetstream.New(srv.Connect(t))
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewKV(t.Context(), js, KVConfig{Max: 64})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	for i := range 20 {
		task := create(t, stores[0], "o", time.Minute)
		endings := []Ending{
			{Status: mcp.TaskStatusCancelled, Message: ErrCancelled.Error()},
			done(fmt.Sprint("result ", i)),
		}
		var wg sync.WaitGroup
		won := make([]bool, 2)
		for j := range 2 {
			wg.Go(func() {
				_, changed, err := stores[j].End(t.Context(), "o", task.ID, endings[j])
				if err != nil {
					t.Errorf("ending through store %d: %v", j, err)
				}
				won[j] = changed
			})
		}
		wg.Wait()
		if won[0] == won[1] {
			t.Fatalf("round %d: got winners %v, want exactly one", i, won)
		}
		got, err := stores[1].Get(t.Context(), "o", task.ID)
		w := 0
		if won[1] {
			w = 1
		}
		if err != nil || got.Status != endings[w].Status {
			t.Errorf("round %d: stored %v (%v), want the winner's %v", i, got.Status, err, endings[w].Status)
		}
	}
}
