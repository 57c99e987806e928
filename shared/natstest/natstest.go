// Package natstest starts an embedded NATS server per test. It is imported
// only from _test.go files, so production binaries never link the server.
package natstest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// readyTimeout bounds how long a server may take to accept clients; on a
// loaded 2-core CI machine startup can take a while, but never this long.
const readyTimeout = 10 * time.Second

// Server is a running embedded server.
type Server struct {
	*server.Server
	opts server.Options
	tb   testing.TB
}

// Start runs a NATS server on 127.0.0.1 and a random port, waits until it
// accepts clients, and shuts it down at the end of the test.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWithOptions(tb, server.Options{})
}

// StartJetStream is [Start] with JetStream enabled, its store in a
// directory of the test's own, for key-value and object stores.
func StartJetStream(tb testing.TB) *Server {
	tb.Helper()
	return StartWithOptions(tb, server.Options{JetStream: true, StoreDir: tb.TempDir()})
}

// StartWithOptions is [Start] with options such as accounts and users.
// Host is forced to loopback; a zero Port picks a random one.
func StartWithOptions(tb testing.TB, opts server.Options) *Server {
	tb.Helper()
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	opts.NoLog = true
	opts.NoSigs = true
	s := &Server{opts: opts, tb: tb}
	s.start()
	// Shut down whichever instance runs at the end: Restart replaces it.
	tb.Cleanup(func() { s.Server.Shutdown() })
	return s
}

// StartFromConfig runs a server from a nats-server configuration text
// (accounts, users, permissions), forced onto loopback.
func StartFromConfig(tb testing.TB, conf string) *Server {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "nats-server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatalf("natstest: writing server config: %v", err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		tb.Fatalf("natstest: parsing server config: %v", err)
	}
	return StartWithOptions(tb, *opts)
}

func (s *Server) start() {
	s.tb.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.tb.Fatalf("natstest: creating server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		s.tb.Fatalf("natstest: server not ready after %s", readyTimeout)
	}
	s.Server = srv
	// Pin the port so Restart comes back on the same address.
	if _, port, err := net.SplitHostPort(srv.Addr().String()); err == nil {
		s.opts.Port, _ = strconv.Atoi(port)
	}
	s.pinListeners(&opts)
}

// URL is the client URL, for nats.Connect and contexts.
func (s *Server) URL() string { return s.ClientURL() }

// Restart shuts the server down and starts it again on the same port, for
// reconnect tests.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
	s.start()
}

// Connect returns a client connection closed at the end of the test.
func (s *Server) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		tb.Fatalf("natstest: connecting to %s: %v", s.URL(), err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// WriteContext writes a nats context named name for this server into
// dir/nats/context (the layout the nats CLI uses under XDG_CONFIG_HOME)
// and returns dir. Extra fields (user, password, creds) are merged in.
func (s *Server) WriteContext(tb testing.TB, dir, name string, extra map[string]string) string {
	tb.Helper()
	ctxDir := filepath.Join(dir, "nats", "context")
	if err := os.MkdirAll(ctxDir, 0o700); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	body := fmt.Sprintf(`{"url":%q`, s.URL())
	for k, v := range extra {
		body += fmt.Sprintf(`,%q:%q`, k, v)
	}
	body += "}"
	if err := os.WriteFile(filepath.Join(ctxDir, name+".json"), []byte(body), 0o600); err != nil {
		tb.Fatalf("natstest: writing context: %v", err)
	}
	return dir
}

// EndpointRequests asks every instance of the micro service named service
// for its stats and returns the requests its endpoint has handled, summed
// over the instances that answer within 200 ms.
func EndpointRequests(tb testing.TB, nc *nats.Conn, service, endpoint string) int {
	tb.Helper()
	subject, err := micro.ControlSubject(micro.StatsVerb, service, "")
	if err != nil {
		tb.Fatal(err)
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		tb.Fatal(err)
	}
	total := 0
	for {
		msg, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			return total
		}
		var stats micro.Stats
		if err := json.Unmarshal(msg.Data, &stats); err != nil {
			tb.Fatalf("natstest: decoding stats: %v", err)
		}
		for _, e := range stats.Endpoints {
			if e.Name == endpoint {
				total += e.NumRequests
			}
		}
	}
}
