package fisktest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStartScript runs a script through an interpreter (sh here, node
// for the browser scripts), hands its environment on, reads its JSON
// event lines in order and skips every other line.
func TestStartScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "events.sh")
	body := `echo 'not an event'
echo '{"event":"ready","who":"'"$WHO"'"}'
echo '{"no":"event"}'
echo '{"event":"seen","id":"r1","command":"app x"}'
`
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s := StartScript(t, "/bin/sh", script, map[string]string{"WHO": "alice"}, time.Minute)
	if ev := s.Next(t, "ready"); ev.Who != "alice" {
		t.Errorf("ready: got %+v, want who alice from the environment", ev)
	}
	if ev := s.Next(t, "seen"); ev.ID != "r1" || ev.Command != "app x" {
		t.Errorf("seen: got %+v, want id r1 and command app x", ev)
	}
	s.Wait(t)
}
