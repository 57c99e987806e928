package natsconn

import (
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

func hubCount() int {
	hubsMu.Lock()
	defer hubsMu.Unlock()
	return len(hubs)
}

// TestViolationHubsDoNotKeepConnections: a closed connection nothing
// refers to any more loses its listeners' entry, so connections made and
// closed over a process's life do not pile up here.
func TestViolationHubsDoNotKeepConnections(t *testing.T) {
	srv := natstest.Start(t)
	before := hubCount()
	func() {
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		OnPublishViolation(nc, func(string, error) {})
		if got := hubCount(); got != before+1 {
			t.Fatalf("hubs: got %d, want %d with the connection open", got, before+1)
		}
		nc.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for hubCount() != before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := hubCount(); got != before {
		t.Errorf("hubs: got %d, want %d once the closed connection is garbage", got, before)
	}
}
