package call

import (
	"slices"
	"sync"
	"testing"
)

// TestTrail checks the trail runs every function once, in order, drains
// what is queued on close, and runs a function itself when its queue is
// full or closed rather than dropping it.
func TestTrail(t *testing.T) {
	tr := newTrail()
	block := make(chan struct{})
	var (
		mu  sync.Mutex
		ran []int
	)
	record := func(i int) func() {
		return func() {
			mu.Lock()
			ran = append(ran, i)
			mu.Unlock()
		}
	}
	// The worker holds the first function until block closes, so the
	// queue fills behind it; the next function then runs here.
	started := make(chan struct{})
	tr.after(func() { close(started); <-block })
	<-started
	for i := range trailQueue {
		tr.after(record(i))
	}
	tr.after(record(-1))
	mu.Lock()
	inline := slices.Contains(ran, -1)
	mu.Unlock()
	if !inline {
		t.Fatal("a function after a full queue did not run at once in the caller")
	}
	close(block)
	tr.close()
	mu.Lock()
	got := slices.DeleteFunc(slices.Clone(ran), func(i int) bool { return i < 0 })
	mu.Unlock()
	want := make([]int, 0, trailQueue)
	for i := range trailQueue {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("queued functions ran as %v, want each once in order", got)
	}
	done := false
	tr.after(func() { done = true })
	if !done {
		t.Error("after close, a function did not run in the caller")
	}
	tr.close() // idempotent
}
