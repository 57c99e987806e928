package natstest_test

import (
	"context"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// reachTimeout bounds the wait for a subscription to become reachable
// from another server: interest crosses routes, gateways and leaf nodes
// asynchronously, within milliseconds unless the machine is very busy.
const reachTimeout = 15 * time.Second

// respond answers every request on subject with label, from a connection
// to srv.
func respond(tb testing.TB, srv *natstest.Server, subject, label string) {
	tb.Helper()
	nc := srv.Connect(tb)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(label)) }); err != nil {
		tb.Fatalf("subscribing on %s: %v", srv.Name(), err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// waitReach waits until a request on subject from a client of from is
// answered with want, failing tb after reachTimeout.
func waitReach(tb testing.TB, from *natstest.Server, subject, want string) {
	tb.Helper()
	nc := from.Connect(tb)
	var got string
	fisktest.WaitFor(tb, reachTimeout, "a request from "+from.Name()+" to reach "+want, func() bool {
		m, err := nc.Request(subject, nil, 200*time.Millisecond)
		if err != nil {
			return false
		}
		got = string(m.Data)
		return true
	})
	if got != want {
		tb.Errorf("request on %s from %s: got answer %q, want %q", subject, from.Name(), got, want)
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	s1, s2, s3 := c.Servers[0], c.Servers[1], c.Servers[2]

	t.Run("members", func(t *testing.T) {
		names := map[string]bool{}
		for _, s := range c.Servers {
			names[s.Name()] = true
			if got := s.ClusterName(); got != c.Name {
				t.Errorf("%s cluster name: got %q, want %q", s.Name(), got, c.Name)
			}
			if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") {
				t.Errorf("%s client URL: got %s, want loopback", s.Name(), s.URL())
			}
		}
		if len(names) != 3 {
			t.Errorf("server names: got %v, want 3 distinct", names)
		}
		if got, want := c.URLs(), s1.URL()+","+s2.URL()+","+s3.URL(); got != want {
			t.Errorf("URLs: got %q, want %q", got, want)
		}
	})

	t.Run("a message crosses routes both ways", func(t *testing.T) {
		respond(t, s3, "probe.s3", "s3")
		respond(t, s1, "probe.s1", "s1")
		waitReach(t, s1, "probe.s3", "s3")
		waitReach(t, s3, "probe.s1", "s1")
		waitReach(t, s2, "probe.s1", "s1")
	})

	t.Run("a stopped member comes back on its ports", func(t *testing.T) {
		url := s2.URL()
		s2.Stop()
		if s2.Running() {
			t.Fatalf("%s: running after Stop", s2.Name())
		}
		c.WaitRoutes(t) // the two survivors keep their route
		respond(t, s3, "stopped.s3", "s3")
		waitReach(t, s1, "stopped.s3", "s3")

		s2.Resume()
		if got := s2.URL(); got != url {
			t.Errorf("client URL after Resume: got %s, want %s", got, url)
		}
		c.WaitRoutes(t)
		respond(t, s2, "resumed.s2", "s2")
		waitReach(t, s1, "resumed.s2", "s2")
		waitReach(t, s3, "resumed.s2", "s2")
	})

	t.Run("the first member rejoins after a restart", func(t *testing.T) {
		// It started with no routes of its own; it must now dial the others.
		s1.Restart()
		c.WaitRoutes(t)
		respond(t, s1, "restarted.s1", "s1")
		waitReach(t, s3, "restarted.s1", "s1")
	})
}

func TestStartHubLeaf(t *testing.T) {
	t.Parallel()
	hl := natstest.StartHubLeaf(t)
	respond(t, hl.Hub, "probe.hub", "hub")
	respond(t, hl.Leaf, "probe.leaf", "leaf")
	waitReach(t, hl.Leaf, "probe.hub", "hub")
	waitReach(t, hl.Hub, "probe.leaf", "leaf")

	t.Run("the leaf reconnects to a restarted hub", func(t *testing.T) {
		hl.Hub.Stop()
		hl.Hub.Resume()
		hl.WaitConnected(t)
		respond(t, hl.Hub, "again.hub", "hub")
		waitReach(t, hl.Leaf, "again.hub", "hub")
	})
}

func TestStartSupercluster(t *testing.T) {
	t.Parallel()
	sc := natstest.StartSupercluster(t)
	a1, a2 := sc.A.Servers[0], sc.A.Servers[1]
	b1, b2 := sc.B.Servers[0], sc.B.Servers[1]
	if a1.ClusterName() != "A" || b2.ClusterName() != "B" {
		t.Fatalf("cluster names: got %s and %s, want A and B", a1.ClusterName(), b2.ClusterName())
	}
	respond(t, b2, "probe.b2", "b2")
	respond(t, a2, "probe.a2", "a2")
	waitReach(t, a1, "probe.b2", "b2")
	waitReach(t, b1, "probe.a2", "a2")

	t.Run("a restarted member of A dials B again", func(t *testing.T) {
		a1.Restart()
		sc.WaitGateways(t)
		respond(t, a1, "again.a1", "a1")
		waitReach(t, b2, "again.a1", "a1")
	})
}

func TestWriteURLContext(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 2)
	tests := []struct {
		name  string
		urls  string
		extra map[string]string
		user  string
	}{
		{name: "one server", urls: natstest.URLs(c.Servers[1])},
		{name: "every member", urls: c.URLs()},
		{name: "extra fields", urls: c.URLs(), extra: map[string]string{"user": "alice"}, user: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := natstest.WriteURLContext(t, t.TempDir(), "fleet", tt.urls, tt.extra)
			path := filepath.Join(dir, "nats", "context", "fleet.json")
			nctx, err := natscontext.NewFromFile(path)
			if err != nil {
				t.Fatalf("loading the context: %v", err)
			}
			if got := nctx.ServerURL(); got != tt.urls {
				t.Errorf("url: got %q, want %q", got, tt.urls)
			}
			if got := nctx.User(); got != tt.user {
				t.Errorf("user: got %q, want %q", got, tt.user)
			}
			if tt.extra != nil {
				return // the cluster has no users
			}
			nc, err := natsconn.Connect(natsconn.Options{Context: path, Name: "context probe", Logger: fisktest.Logger(t)})
			if err != nil {
				t.Fatalf("connecting through the context: %v", err)
			}
			defer nc.Close()
			if !strings.Contains(tt.urls, nc.ConnectedUrl()) {
				t.Errorf("connected to %s, want one of %s", nc.ConnectedUrl(), tt.urls)
			}
		})
	}
}

func TestConnectionsNamed(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 2)
	c.Servers[1].Connect(t, nats.Name("probe"))
	c.Servers[1].Connect(t, nats.Name("probe"))
	c.Servers[0].Connect(t, nats.Name("other"))
	tests := []struct {
		server int
		name   string
		want   int
	}{
		{1, "probe", 2},
		{0, "probe", 0},
		{0, "other", 1},
	}
	for _, tt := range tests {
		if got := c.Servers[tt.server].ConnectionsNamed(t, tt.name); got != tt.want {
			t.Errorf("%s connections named %q: got %d, want %d", c.Servers[tt.server].Name(), tt.name, got, tt.want)
		}
	}
	c.Servers[1].Stop()
	if got := c.Servers[1].ConnectionsNamed(t, "probe"); got != 0 {
		t.Errorf("stopped server's connections named probe: got %d, want 0", got)
	}
}

// TestStartJetStreamCluster: a JetStream cluster of three takes a bucket
// with three replicas at once, and a value written through one member is
// read through another.
func TestStartJetStreamCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartJetStreamCluster(t, 3)
	js1, err := jetstream.New(c.Servers[0].Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	// A new replicated stream elects a leader of its own before it takes
	// writes, which on a loaded machine can outlast the client's default
	// five seconds: give both steps time.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	kv, err := js1.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "T", Replicas: 3})
	if err != nil {
		t.Fatalf("creating a bucket of 3 replicas: %v", err)
	}
	fisktest.WaitFor(t, 30*time.Second, "the bucket to take a write", func() bool {
		_, err := kv.PutString(ctx, "k", "v")
		return err == nil
	})
	js3, err := jetstream.New(c.Servers[2].Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	kv3, err := js3.KeyValue(t.Context(), "T")
	if err != nil {
		t.Fatal(err)
	}
	// A bucket's reads may be served by any replica, and one may apply
	// the write a moment after the leader acknowledged it.
	fisktest.WaitFor(t, 30*time.Second, "the value to be read through another member", func() bool {
		e, err := kv3.Get(ctx, "k")
		return err == nil && string(e.Value()) == "v"
	})
}

// TestCountSubjects counts what is published on each subject its
// wildcards match, from the moment it returns, and starts afresh on Take.
func TestCountSubjects(t *testing.T) {
	srv := natstest.Start(t)
	c := natstest.CountSubjects(t, srv.Connect(t), "a.*", "b.>")
	pub := srv.Connect(t)
	for _, s := range []string{"a.x", "a.x", "a.y", "b.c.d", "c.x", "a.x.y"} {
		if err := pub.Publish(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 10*time.Second, "four subjects counted", func() bool { return c.Seen("b.c.d") == 1 && c.Seen("a.y") == 1 })
	want := map[string]int{"a.x": 2, "a.y": 1, "b.c.d": 1}
	if got := c.Take(); !maps.Equal(got, want) {
		t.Errorf("counts: got %v, want %v", got, want)
	}
	if got := c.Take(); len(got) != 0 {
		t.Errorf("counts after Take: got %v, want none", got)
	}
}
