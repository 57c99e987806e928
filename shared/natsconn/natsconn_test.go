package natsconn_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

func TestConnectByNameAndByFile(t *testing.T) {
	srv := natstest.StartFromConfig(t, `
authorization {
  users = [ { user: "agent", password: "s3cret" } ]
}`)
	dir := srv.WriteContext(t, t.TempDir(), "fleet", map[string]string{"user": "agent", "password": "s3cret"})
	t.Setenv("XDG_CONFIG_HOME", dir)

	tests := []struct {
		name, context string
	}{
		{"by name", "fleet"},
		{"by file", filepath.Join(dir, "nats", "context", "fleet.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := natsconn.Connect(natsconn.Options{Context: tt.context, Name: "a2a-agent demo"})
			if err != nil {
				t.Fatalf("connecting: %v", err)
			}
			defer nc.Close()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := nc.Opts.Name; got != "a2a-agent demo" {
				t.Errorf("connection name: got %q, want %q", got, "a2a-agent demo")
			}
			if got := nc.Opts.MaxReconnect; got != -1 {
				t.Errorf("max reconnects: got %d, want -1 (unlimited)", got)
			}
		})
	}
}

func TestConnectErrors(t *testing.T) {
	srv := natstest.StartFromConfig(t, `
authorization {
  users = [ { user: "agent", password: "s3cret" } ]
}`)
	dir := srv.WriteContext(t, t.TempDir(), "wrongpass", map[string]string{"user": "agent", "password": "nope"})
	t.Setenv("XDG_CONFIG_HOME", dir)

	_, err := natsconn.Connect(natsconn.Options{Context: "missing"})
	if !errors.Is(err, natsconn.ErrContext) || !strings.Contains(err.Error(), "nats_context") {
		t.Errorf("missing context: got %v, want ErrContext naming nats_context", err)
	}
	_, err = natsconn.Connect(natsconn.Options{Context: "wrongpass"})
	if err == nil || !strings.Contains(err.Error(), "wrongpass") {
		t.Errorf("bad credentials: got %v, want an error naming the context", err)
	}
}

func TestReconnectIsLogged(t *testing.T) {
	srv := natstest.Start(t)
	dir := srv.WriteContext(t, t.TempDir(), "fleet", nil)
	t.Setenv("XDG_CONFIG_HOME", dir)
	var logs fisktest.Buffer
	nc, err := natsconn.Connect(natsconn.Options{Context: "fleet", Name: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	srv.Restart()
	fisktest.WaitFor(t, 10*time.Second, "reconnect", func() bool { return nc.IsConnected() && nc.Stats().Reconnects > 0 })
	fisktest.WaitFor(t, 10*time.Second, "log lines", func() bool {
		return strings.Contains(logs.String(), "nats disconnected") && strings.Contains(logs.String(), "nats reconnected")
	})
}

func TestBackoff(t *testing.T) {
	for attempts, want := range map[int]time.Duration{0: 100 * time.Millisecond, 1: 200 * time.Millisecond, 3: 800 * time.Millisecond, 10: 5 * time.Second, 100: 5 * time.Second} {
		got := natsconn.Backoff(attempts)
		if got < want || got > want+want/5 {
			t.Errorf("Backoff(%d): got %s, want %s plus at most 20%% jitter", attempts, got, want)
		}
	}
}

// TestDrainAnswersWhatIsQueued queues requests behind a slow handler and
// drains: every one is answered before Drain returns, where closing after
// nats.go's own Drain would lose those still queued.
func TestDrainAnswersWhatIsQueued(t *testing.T) {
	srv := natstest.Start(t)
	server := srv.Connect(t)
	sub, err := server.Subscribe("work", func(m *nats.Msg) {
		time.Sleep(2 * time.Millisecond)
		_ = m.Respond([]byte("done"))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The subscription must be on the server before another connection
	// sends to it, or the first requests find no responders.
	if err := server.Flush(); err != nil {
		t.Fatal(err)
	}
	caller := srv.Connect(t)
	inbox := nats.NewInbox()
	replies, err := caller.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for range n {
		if err := caller.PublishRequest("work", inbox, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := caller.Flush(); err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 10*time.Second, "requests queued in the client", func() bool {
		msgs, _, _ := sub.Pending()
		return msgs > n/2
	})
	if err := natsconn.Drain(server, 20*time.Second); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if !server.IsClosed() {
		t.Errorf("connection: got open after Drain, want closed")
	}
	for i := range n {
		if _, err := replies.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, n, err)
		}
	}
	if err := natsconn.Drain(server, time.Second); err != nil {
		t.Errorf("Drain of a closed connection: got %v, want nil", err)
	}
}
