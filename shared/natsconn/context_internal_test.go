package natsconn

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestLoadWithNothingSelected is the nats CLI's behaviour with no
// context selected: the default local server, no credentials.
func TestLoadWithNothingSelected(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	for _, selected := range []string{"", "\n"} {
		if selected != "" {
			if err := os.MkdirAll(filepath.Join(home, "nats"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "nats", "context.txt"), []byte(selected), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c, err := load("")
		if err != nil {
			t.Fatalf("selected %q: %v", selected, err)
		}
		if got := c.ServerURL(); got != nats.DefaultURL {
			t.Errorf("selected %q: server %q, want %q", selected, got, nats.DefaultURL)
		}
		opts, err := c.NATSOptions()
		if err != nil || len(opts) != 0 {
			t.Errorf("selected %q: options %d, %v; want none", selected, len(opts), err)
		}
	}
}

// TestExpandPath expands ~ and variables in path fields, as the nats CLI
// does, and leaves other paths alone.
func TestExpandPath(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	t.Setenv("FLEET_DIR", "/srv/fleet")
	for in, want := range map[string]string{
		"~/creds/a.creds":    home + "/creds/a.creds",
		"$FLEET_DIR/a.creds": "/srv/fleet/a.creds",
		"/etc/nats/a.creds":  "/etc/nats/a.creds",
		"":                   "",
	} {
		if got := expandPath(in); got != want {
			t.Errorf("expandPath(%q) = %q, want %q", in, got, want)
		}
	}
}
