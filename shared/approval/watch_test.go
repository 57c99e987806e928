package approval

import (
	"slices"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestWatch starts watchers after requests are pending: they see those
// first, then what happens next, for their identity or the fleet.
func TestWatch(t *testing.T) {
	ns := natstest.Start(t)
	tp := newTap(t, ns)
	demo := newBroker(t, ns.Connect(t), Options{Identity: "demo", Instance: "i1"})
	other := newBroker(t, ns.Connect(t), Options{Identity: "other", Instance: "o1"})
	before := start(t, t.Context(), demo, deployCall())
	elsewhere := start(t, t.Context(), other, deployCall())

	onDemo := watch(t, ns.Connect(t), "demo", tp)
	onFleet := watch(t, ns.Connect(t), "", tp)
	after := start(t, t.Context(), demo, deployCall())
	if _, err := Answer(t.Context(), ns.Connect(t), before.req, true, Approver{Name: "alice"}, ""); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		got  *events
		id   string
		want []EventType
	}{
		{"identity: pending before, then decided", onDemo, before.req.ID, []EventType{EventRequested, EventDecided}},
		{"identity: requested after", onDemo, after.req.ID, []EventType{EventRequested}},
		{"identity: another identity's unseen", onDemo, elsewhere.req.ID, nil},
		{"fleet: pending before, then decided", onFleet, before.req.ID, []EventType{EventRequested, EventDecided}},
		{"fleet: another identity's", onFleet, elsewhere.req.ID, []EventType{EventRequested}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.want) > 0 {
				fisktest.WaitFor(t, 10*time.Second, "the events of "+tt.id, func() bool { return len(tt.got.of(tt.id)) >= len(tt.want) })
			}
			if got := tt.got.of(tt.id); !slices.Equal(got, tt.want) {
				t.Errorf("events: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWatcherAnnouncesOnce delivers a request twice, as the list and its
// own event both may: it is announced once, and its end is delivered.
func TestWatcherAnnouncesOnce(t *testing.T) {
	req := Request{ID: "r1", Expires: time.Now().Add(time.Minute)}
	var (
		w   watcher
		got []EventType
	)
	fn := func(ev Event) { got = append(got, ev.Type) }
	w.deliver(Event{Type: EventRequested, ID: "r1", Request: &req}, fn)
	w.deliver(Event{Type: EventRequested, ID: "r1", Request: &req}, fn)
	w.deliver(Event{Type: EventDecided, ID: "r1"}, fn)
	w.deliver(Event{Type: EventRequested, ID: "r2"}, fn) // no request: skipped
	if want := []EventType{EventRequested, EventDecided}; !slices.Equal(got, want) {
		t.Errorf("delivered: got %v, want %v", got, want)
	}
}
