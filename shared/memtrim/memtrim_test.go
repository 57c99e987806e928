package memtrim

import (
	"context"
	"io"
	"log/slog"
	"runtime/metrics"
	"testing"
	"time"
)

// sink keeps the test's allocations from being optimised away.
var sink [][]byte

// allocate allocates n bytes of garbage in 4 KiB pieces.
func allocate(n int) {
	for range n / 4096 {
		sink = append(sink, make([]byte, 4096))
	}
	sink = nil
}

// driven starts a Trimmer whose periods the test ends, and returns end,
// which ends one period and returns once Run has handled it, and trims,
// the number of trims so far.
func driven(t *testing.T) (end func(), trims func() int) {
	t.Helper()
	ticks := make(chan time.Time)
	handled := make(chan struct{})
	trimmed := 0
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	tr := Trimmer{
		// Free runs on Run's goroutine, before handled: end's receive
		// orders it before trims reads the count.
		Free:    func() { trimmed++ },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		ticks:   ticks,
		handled: func() { handled <- struct{}{} },
	}
	go func() {
		defer close(done)
		tr.Run(ctx)
	}()
	<-handled // Run has read its starting point
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	end = func() {
		t.Helper()
		for _, step := range []func() bool{
			func() bool {
				select {
				case ticks <- time.Now():
					return true
				case <-time.After(10 * time.Second):
					return false
				}
			},
			func() bool {
				select {
				case <-handled:
					return true
				case <-time.After(10 * time.Second):
					return false
				}
			},
		} {
			if !step() {
				t.Fatal("Run does not handle the end of a period")
			}
		}
	}
	return end, func() int { return trimmed }
}

// repeat is n periods of allocating each bytes.
func repeat(n, each int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = each
	}
	return s
}

func TestTrimmer(t *testing.T) {
	const (
		burst  = 2 << 20   // above DefaultChurn in one period
		busy   = 256 << 10 // above DefaultQuiet
		small  = 512 << 10 // busy, below DefaultChurn
		trickl = 48 << 10  // quiet, adding up to DefaultChurn after 22 periods
	)
	tests := []struct {
		name string
		// periods is what the test allocates in each period, in bytes.
		periods []int
		want    int
	}{
		{"idle", repeat(5, 0), 0},
		{"burst then quiet trims once", append([]int{burst}, repeat(5, 0)...), 1},
		{"busy does not trim", repeat(8, busy), 0},
		{"busy then quiet trims once", append(repeat(6, busy), 0, 0, 0), 1},
		{"a burst below the churn does not trim", append([]int{small}, repeat(4, 0)...), 0},
		{"each burst trims once", []int{burst, 0, 0, burst, 0, 0}, 2},
		{"a trickle trims once its churn adds up", repeat(30, trickl), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end, trims := driven(t)
			for _, n := range tt.periods {
				allocate(n)
				end()
			}
			if got := trims(); got != tt.want {
				t.Errorf("got %d trims, want %d", got, tt.want)
			}
		})
	}
}

// released reads how much of the heap is returned to the operating
// system.
func released() uint64 {
	s := []metrics.Sample{{Name: releasedMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTrimmerReleases runs the default Free: after a burst of garbage, a
// trim returns memory to the operating system.
func TestTrimmerReleases(t *testing.T) {
	ticks := make(chan time.Time)
	handled := make(chan struct{})
	tr := Trimmer{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ticks: ticks, handled: func() { handled <- struct{}{} }}
	go tr.Run(t.Context())
	<-handled
	end := func() {
		ticks <- time.Now()
		<-handled
	}
	end()
	allocate(16 << 20)
	end()
	before := released()
	end()
	after := released()
	if after <= before {
		t.Errorf("heap released: got %d bytes after the trim, %d before, want more", after, before)
	}
}
