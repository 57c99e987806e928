package natstest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// loopback is the only address the topologies listen on: clients, routes,
// gateways and leaf nodes alike.
const loopback = "127.0.0.1"

// TopologyTimeout bounds the wait for routes, gateways and leaf node
// connections to come up. Servers connect to each other within
// milliseconds on loopback; a server that restarts waits out its peers'
// reconnect delay (a second for leaf nodes and gateways), and a loaded
// two-core machine stretches all of it, but never this far.
const TopologyTimeout = 30 * time.Second

// Cluster is a NATS cluster of embedded servers joined by routes: a client
// of any member reaches the subscribers of every member, and a queue group
// spreads its messages over the members' subscribers.
type Cluster struct {
	// Name is the cluster name every member carries (and, in a
	// [Supercluster], its gateway name). Members are named Name-1, Name-2, …
	Name string
	// Servers are the members in start order. Each routes to every other,
	// so any member, stopped with [Server.Stop] or restarted, rejoins the
	// mesh on the same ports.
	Servers []*Server
}

// StartCluster starts a cluster of n servers on loopback and random ports,
// each with routes to all the others, and returns once every member has a
// route to every other one ([Cluster.WaitRoutes]). The servers are shut
// down at the end of the test.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return startCluster(tb, "C", n, nil)
}

// StartJetStreamCluster is [StartCluster] with JetStream enabled on every
// member, each storing in a directory of the test's own, and returns once
// the members have elected a JetStream meta leader, so that a bucket with
// up to n replicas can be created at once. The members start together, on
// ports picked beforehand: a clustered JetStream server does not accept
// clients until it has met its peers, so they cannot start one by one.
func StartJetStreamCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("natstest: a cluster needs at least one server, got %d", n)
	}
	c := &Cluster{Name: "JS"}
	ports := freePorts(tb, 2*n)
	for i := range n {
		c.Servers = append(c.Servers, &Server{tb: tb, opts: server.Options{
			ServerName: fmt.Sprintf("%s-%d", c.Name, i+1),
			Host:       loopback,
			Port:       ports[2*i],
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: c.Name, Host: loopback, Port: ports[2*i+1]},
			JetStream:  true,
			StoreDir:   tb.TempDir(),
		}})
	}
	for i, s := range c.Servers {
		s.opts.Routes = routeURLs(c.Servers, i)
	}
	live := make([]server.Options, n)
	for i, s := range c.Servers {
		live[i] = s.opts
		srv, err := server.NewServer(&live[i])
		if err != nil {
			tb.Fatalf("natstest: creating server %s: %v", s.opts.ServerName, err)
		}
		s.Server = srv
		tb.Cleanup(func() { s.Server.Shutdown() })
		go srv.Start()
	}
	for i, s := range c.Servers {
		if !s.ReadyForConnections(TopologyTimeout) {
			tb.Fatalf("natstest: server %s not ready after %s", s.opts.ServerName, TopologyTimeout)
		}
		s.pinListeners(&live[i])
	}
	c.WaitRoutes(tb)
	c.WaitJetStream(tb)
	return c
}

// freePorts returns n loopback ports free at the time of asking.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var (
		out []int
		lns []net.Listener
	)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
		if err != nil {
			tb.Fatalf("natstest: picking a port: %v", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

// WaitJetStream waits until a running member is the JetStream meta
// leader, every running member has JetStream on, and the leader counts as
// many members online as are running, failing tb after [TopologyTimeout].
func (c *Cluster) WaitJetStream(tb testing.TB) {
	tb.Helper()
	waitTopology(tb, func() bool {
		running, online := 0, -1
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			running++
			if !s.JetStreamEnabled() {
				return false
			}
			if s.JetStreamIsLeader() {
				// The peers the leader places streams on: online, with
				// JetStream, and with statistics received. A leader is
				// elected before it has heard from every member, and a
				// stream of as many replicas as members created then is
				// refused ("no suitable peers for placement").
				online = len(s.JetStreamClusterPeers())
			}
		}
		// At least: a member just stopped may still count as online.
		return online >= running
	}, func() string { return "a JetStream meta leader among " + c.Name + " with every running member online" })
}

// startCluster starts n members of the cluster name; configure, when set,
// adds to each member's options before it starts (a gateway).
func startCluster(tb testing.TB, name string, n int, configure func(*server.Options)) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("natstest: a cluster needs at least one server, got %d", n)
	}
	c := &Cluster{Name: name}
	for i := range n {
		opts := server.Options{
			ServerName: fmt.Sprintf("%s-%d", name, i+1),
			Cluster:    server.ClusterOpts{Name: name, Host: loopback, Port: server.RANDOM_PORT},
			// The members started so far; the rest gossip their way in.
			Routes: routeURLs(c.Servers, -1),
		}
		if configure != nil {
			configure(&opts)
		}
		c.Servers = append(c.Servers, StartWithOptions(tb, opts))
	}
	// From now on every member knows every other by its pinned route
	// port, so a restarted member (the first one included, which started
	// with none) reconnects to all of them by itself.
	for i, s := range c.Servers {
		s.opts.Routes = routeURLs(c.Servers, i)
	}
	c.WaitRoutes(tb)
	return c
}

// routeURLs lists the route URLs of servers, leaving out the one at skip.
func routeURLs(servers []*Server, skip int) []*url.URL {
	var out []*url.URL
	for i, s := range servers {
		if i != skip {
			out = append(out, &url.URL{Scheme: "nats-route", Host: net.JoinHostPort(loopback, strconv.Itoa(s.opts.Cluster.Port))})
		}
	}
	return out
}

// WaitRoutes waits until every running member has a route to every other
// running member, failing tb after [TopologyTimeout]. Call it after
// starting the cluster or bringing a member back, before relying on
// messages crossing routes. Stopped members are left out.
func (c *Cluster) WaitRoutes(tb testing.TB) {
	tb.Helper()
	var missing string
	cond := func() bool {
		missing = ""
		running := map[string]bool{}
		for _, s := range c.Servers {
			if s.Running() {
				running[s.Name()] = true
			}
		}
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			peers := routedPeers(tb, s)
			for name := range running {
				if name != s.Name() && !peers[name] {
					missing = fmt.Sprintf("%s has no route to %s", s.Name(), name)
					return false
				}
			}
		}
		return true
	}
	waitTopology(tb, cond, func() string { return "cluster " + c.Name + " routes: " + missing })
}

// routedPeers returns the names of the servers s has a route to. A pair of
// servers may hold several route connections (a pool), so it counts names,
// not connections.
func routedPeers(tb testing.TB, s *Server) map[string]bool {
	tb.Helper()
	rz, err := s.Routez(&server.RoutezOptions{})
	if err != nil {
		tb.Fatalf("natstest: routes of %s: %v", s.Name(), err)
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteName] = true
	}
	return peers
}

// waitTopology polls cond until it holds, failing tb after
// [TopologyTimeout] with what() naming the missing link.
func waitTopology(tb testing.TB, cond func() bool, what func() string) {
	tb.Helper()
	deadline := time.Now().Add(TopologyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: timed out after %s waiting for %s", TopologyTimeout, what())
		}
		<-tick.C
	}
}

// URLs returns the members' client URLs as one comma-separated list, the
// way operators write a cluster into a context's url.
func (c *Cluster) URLs() string { return URLs(c.Servers...) }

// Connect returns a client connection to the cluster (any member, chosen
// by the client), closed at the end of the test. It reconnects to a
// surviving member without limit, so a test can stop members under it.
func (c *Cluster) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	return connectURLs(tb, c.URLs(), opts...)
}

func connectURLs(tb testing.TB, urls string, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		tb.Fatalf("natstest: connecting to %s: %v", urls, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// URLs returns the client URLs of servers as one comma-separated list
// ("nats://127.0.0.1:p1,nats://127.0.0.1:p2"), in the given order: a
// context's url, or nats.Connect's.
func URLs(servers ...*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// WriteURLContext writes a nats context named name whose url is urls (one
// URL or a comma-separated list, see [URLs]) into dir/nats/context, the
// layout the nats CLI uses under XDG_CONFIG_HOME, and returns dir. Extra
// fields (user, password, creds) are merged in.
func WriteURLContext(tb testing.TB, dir, name, urls string, extra map[string]string) string {
	tb.Helper()
	ctxDir := filepath.Join(dir, "nats", "context")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	fields := map[string]string{}
	for k, v := range extra {
		fields[k] = v
	}
	fields["url"] = urls
	body, err := json.Marshal(fields)
	if err != nil {
		tb.Fatalf("natstest: encoding context %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, name+".json"), body, 0o600); err != nil {
		tb.Fatalf("natstest: writing context %s: %v", name, err)
	}
	return dir
}

// Stop shuts the server down and waits until it is gone, as an outage
// would: its clients, routes, gateways and leaf nodes are cut. It keeps
// the server's ports and peers, so [Server.Resume] brings it back as it
// was. Stopping a stopped server does nothing. Stop, Resume and Restart
// replace the running instance, so they must not run while another
// goroutine uses the Server.
func (s *Server) Stop() {
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Resume starts a stopped server again on the same client, route, gateway
// and leaf node ports, with the same routes, gateways and leaf node
// remotes, and waits until it accepts clients. Its peers reconnect to it
// in the background: wait for them ([Cluster.WaitRoutes],
// [HubLeaf.WaitConnected], [Supercluster.WaitGateways]) before relying on
// them.
func (s *Server) Resume() {
	s.tb.Helper()
	s.start()
}

// pinListeners records the ports the cluster, gateway and leaf node
// listeners got, so the server comes back on them after a restart. live
// holds the options the running instance was given: the server writes the
// leaf node port it resolved there (it has no accessor), under the lock
// that ReadyForConnections also takes.
func (s *Server) pinListeners(live *server.Options) {
	if a := s.ClusterAddr(); a != nil {
		s.opts.Cluster.Port = a.Port
	}
	if a := s.GatewayAddr(); a != nil {
		s.opts.Gateway.Port = a.Port
	}
	if s.opts.LeafNode.Port != 0 && live.LeafNode.Port > 0 {
		s.opts.LeafNode.Port = live.LeafNode.Port
	}
}

// ConnectionsNamed returns how many client connections of the server carry
// name (nats.Name): where a test finds out which server a process
// connected to, since fiskfleet names its connections ("a2a-agent demo").
func (s *Server) ConnectionsNamed(tb testing.TB, name string) int {
	tb.Helper()
	if !s.Running() {
		return 0
	}
	cz, err := s.Connz(&server.ConnzOptions{Limit: 10000})
	if err != nil {
		tb.Fatalf("natstest: connections of %s: %v", s.Name(), err)
	}
	n := 0
	for _, c := range cz.Conns {
		if c.Name == name {
			n++
		}
	}
	return n
}

// HubLeaf is a hub server with a leaf node server connected to it: each
// side's clients reach the other side's subscribers through the leaf node
// connection.
type HubLeaf struct {
	// Hub accepts leaf node connections on a loopback port of its own.
	Hub *Server
	// Leaf connects to the hub as a leaf node and reconnects to it after
	// either side restarts.
	Leaf *Server
}

// StartHubLeaf starts a hub with a leaf node listener and a leaf server
// connected to it, both on loopback and random ports, and returns once the
// leaf node connection is up on both sides. Both are shut down at the end
// of the test.
func StartHubLeaf(tb testing.TB) *HubLeaf {
	tb.Helper()
	hub := StartWithOptions(tb, server.Options{
		ServerName: "hub",
		LeafNode:   server.LeafNodeOpts{Host: loopback, Port: server.RANDOM_PORT},
	})
	remote := &url.URL{Scheme: "nats-leaf", Host: net.JoinHostPort(loopback, strconv.Itoa(hub.opts.LeafNode.Port))}
	leaf := StartWithOptions(tb, server.Options{
		ServerName: "leaf",
		LeafNode:   server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}},
	})
	hl := &HubLeaf{Hub: hub, Leaf: leaf}
	hl.WaitConnected(tb)
	return hl
}

// WaitConnected waits until the hub and the leaf both see the leaf node
// connection, failing tb after [TopologyTimeout].
func (hl *HubLeaf) WaitConnected(tb testing.TB) {
	tb.Helper()
	waitTopology(tb, func() bool {
		return hl.Hub.Running() && hl.Leaf.Running() && hl.Hub.NumLeafNodes() == 1 && hl.Leaf.NumLeafNodes() == 1
	}, func() string {
		return fmt.Sprintf("the leaf node connection (hub sees %d, leaf sees %d)", hl.Hub.NumLeafNodes(), hl.Leaf.NumLeafNodes())
	})
}

// Supercluster is two clusters, A and B, joined by gateways: a client of
// either reaches subscribers in both, and a queue group is served in the
// publisher's own cluster while it has members there.
type Supercluster struct {
	// A and B are the two clusters; their names are also their gateway
	// names.
	A, B *Cluster
}

// superclusterSize is the number of servers in each cluster of a
// [Supercluster]: two is the smallest cluster that still has routes.
const superclusterSize = 2

// StartSupercluster starts clusters A and B of two servers each, joined
// by gateways, all on loopback and random ports, and returns once every
// server has its routes and its gateway connection to the other cluster
// ([Supercluster.WaitGateways]). The servers are shut
// down at the end of the test.
func StartSupercluster(tb testing.TB) *Supercluster {
	tb.Helper()
	gateway := func(name string, remotes ...*server.RemoteGatewayOpts) func(*server.Options) {
		return func(o *server.Options) {
			o.Gateway = server.GatewayOpts{Name: name, Host: loopback, Port: server.RANDOM_PORT, Gateways: remotes}
		}
	}
	a := startCluster(tb, "A", superclusterSize, gateway("A"))
	b := startCluster(tb, "B", superclusterSize, gateway("B", &server.RemoteGatewayOpts{Name: "A", URLs: gatewayURLs(a)}))
	// A found B when B dialled in; name it too, so that a member of A
	// restarted later dials B by itself.
	for _, s := range a.Servers {
		s.opts.Gateway.Gateways = []*server.RemoteGatewayOpts{{Name: "B", URLs: gatewayURLs(b)}}
	}
	sc := &Supercluster{A: a, B: b}
	sc.WaitGateways(tb)
	return sc
}

func gatewayURLs(c *Cluster) []*url.URL {
	out := make([]*url.URL, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = &url.URL{Scheme: "nats", Host: net.JoinHostPort(loopback, strconv.Itoa(s.opts.Gateway.Port))}
	}
	return out
}

// WaitGateways waits until both clusters have their routes and every
// running server has its outbound gateway connection to the other cluster,
// failing tb after [TopologyTimeout]. Each server dials one server of the
// other cluster, so every server of both clusters having one means both
// directions are up; a given server may have no inbound connection.
func (sc *Supercluster) WaitGateways(tb testing.TB) {
	tb.Helper()
	sc.A.WaitRoutes(tb)
	sc.B.WaitRoutes(tb)
	var missing string
	linked := func(c *Cluster, other string) bool {
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			gz, err := s.Gatewayz(&server.GatewayzOptions{})
			if err != nil {
				tb.Fatalf("natstest: gateways of %s: %v", s.Name(), err)
			}
			if _, ok := gz.OutboundGateways[other]; !ok {
				missing = s.Name() + " has no outbound gateway to " + other
				return false
			}
		}
		return true
	}
	waitTopology(tb, func() bool { return linked(sc.A, sc.B.Name) && linked(sc.B, sc.A.Name) },
		func() string { return "the gateways: " + missing })
}
