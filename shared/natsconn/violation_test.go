package natsconn_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// violation is the error nats.go hands the async error handler for a
// server's -ERR 'text': it trims the quotes and wraps
// nats.ErrPermissionViolation.
func violation(text string) error {
	return fmt.Errorf("%w: %s", nats.ErrPermissionViolation, text)
}

func TestPublishViolation(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		subject string
		ok      bool
	}{
		{"as the server words it", violation(`Permissions Violation for Publish to "choria.fisk-ai.stream.secret"`), "choria.fisk-ai.stream.secret", true},
		{"lower case", violation(`permissions violation for publish to "choria.fisk-ai.tool.secret"`), "choria.fisk-ai.tool.secret", true},
		{"escaped in the quotes", violation(`Permissions Violation for Publish to "a.\"b\".c"`), `a."b".c`, true},
		{"unicode escape", violation(`Permissions Violation for Publish to "caf\u00e9.x"`), "café.x", true},
		{"single quotes", violation(`Permissions Violation for Publish to 'choria.fisk-ai.control.demo.i1'`), "choria.fisk-ai.control.demo.i1", true},
		{"bare", violation(`Permissions Violation for Publish to choria.fisk-ai.tool.secret`), "choria.fisk-ai.tool.secret", true},
		{"bare with more after it", violation(`Permissions Violation for Publish to foo.bar (sid 3)`), "foo.bar", true},
		{"unterminated quote", violation(`Permissions Violation for Publish to "foo.bar`), "foo.bar", true},
		{"surrounding space", violation(`  Permissions Violation for Publish to   "foo"  `), "foo", true},
		{"wrapped again", fmt.Errorf("handler: %w", violation(`Permissions Violation for Publish to "foo"`)), "foo", true},
		{"no subject", violation(`Permissions Violation for Publish to`), "", false},
		{"empty quotes", violation(`Permissions Violation for Publish to ""`), "", false},
		{"a subscription", violation(`Permissions Violation for Subscription to "foo"`), "", false},
		{"a reply subject", violation(`Permissions Violation for Publish with Reply of "$GR.x"`), "", false},
		{"not a permissions violation", errors.New(`Permissions Violation for Publish to "foo"`), "", false},
		{"another error", nats.ErrSlowConsumer, "", false},
		{"nil", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, ok := natsconn.PublishViolation(tt.err)
			if subject != tt.subject || ok != tt.ok {
				t.Errorf("PublishViolation(%v): got %q, %v, want %q, %v", tt.err, subject, ok, tt.subject, tt.ok)
			}
		})
	}
}

// refusedCollector gathers the subjects a listener hears of.
type refusedCollector struct {
	mu       sync.Mutex
	subjects []string
}

func (c *refusedCollector) add(subject string, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		subject = "wrong error: " + err.Error()
	}
	c.mu.Lock()
	c.subjects = append(c.subjects, subject)
	c.mu.Unlock()
}

func (c *refusedCollector) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.subjects...)
}

const limitedConf = `
authorization {
  users = [
    { user: "limited", password: "pw", permissions { publish: ["allowed.>"], subscribe: ["_INBOX.>", "allowed.>"] } }
  ]
}`

// TestOnPublishViolation runs a server that refuses user limited every
// publish but allowed.>: listeners on a connection hear the subject of
// each refused publish and nothing else, the connection's own error
// handler still gets every error, and a stopped listener hears no more.
func TestOnPublishViolation(t *testing.T) {
	srv := natstest.StartFromConfig(t, limitedConf)
	var (
		mu   sync.Mutex
		prev []error
	)
	nc := srv.Connect(t, nats.UserInfo("limited", "pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		prev = append(prev, err)
		mu.Unlock()
	}))
	var first, second refusedCollector
	stopFirst := natsconn.OnPublishViolation(nc, first.add)
	natsconn.OnPublishViolation(nc, second.add)

	publish := func(subject string) {
		t.Helper()
		if err := nc.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	publish("allowed.one")
	publish("denied.one")
	// A refused subscription is a violation, but not of a publish.
	if _, err := nc.Subscribe("denied.sub", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	publish("denied.two")
	fisktest.WaitFor(t, 5*time.Second, "both refusals", func() bool { return len(second.get()) == 2 })
	if got := first.get(); len(got) != 2 || got[0] != "denied.one" || got[1] != "denied.two" {
		t.Errorf("first listener: got %q, want [denied.one denied.two]", got)
	}
	if got := second.get(); got[0] != "denied.one" || got[1] != "denied.two" {
		t.Errorf("second listener: got %q, want [denied.one denied.two]", got)
	}
	fisktest.WaitFor(t, 5*time.Second, "the connection's own handler to get all three violations", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(prev) == 3
	})

	stopFirst()
	publish("denied.three")
	fisktest.WaitFor(t, 5*time.Second, "the third refusal", func() bool { return len(second.get()) == 3 })
	if got := second.get(); got[2] != "denied.three" {
		t.Errorf("second listener: got %q, want denied.three last", got)
	}
	if got := first.get(); len(got) != 2 {
		t.Errorf("stopped listener: got %q, want nothing after stop", got)
	}
}

// TestConnectLogsPublishViolations: a connection made by Connect keeps
// logging every async error once a listener chains onto its handler.
func TestConnectLogsPublishViolations(t *testing.T) {
	srv := natstest.StartFromConfig(t, limitedConf)
	dir := srv.WriteContext(t, t.TempDir(), "limited", map[string]string{"user": "limited", "password": "pw"})
	t.Setenv("XDG_CONFIG_HOME", dir)
	var logs fisktest.Buffer
	nc, err := natsconn.Connect(natsconn.Options{Context: "limited", Name: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var heard refusedCollector
	natsconn.OnPublishViolation(nc, heard.add)
	if err := nc.Publish("denied.x", nil); err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 5*time.Second, "the refusal to be heard and logged", func() bool {
		return len(heard.get()) == 1 && strings.Contains(logs.String(), "Permissions Violation for Publish to") && strings.Contains(logs.String(), "context=limited")
	})
	if got := heard.get(); got[0] != "denied.x" {
		t.Errorf("listener: got %q, want [denied.x]", got)
	}
}
