package procs_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/procs"
)

// TestGrowStack shows GrowStack grows a goroutine's stack once, to 8 KiB:
// n goroutines that called it and stay hold at least a doubling of the
// runtime's starting stack (2 KiB; more in a race build) more each than n
// that did not, and not much more than 8 KiB each in all.
func TestGrowStack(t *testing.T) {
	const n = 512
	// stacks returns how much more stack memory is in use while n
	// goroutines, growing theirs or not, are parked.
	stacks := func(grow bool) int64 {
		var ready sync.WaitGroup
		stop := make(chan struct{})
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.StackInuse
		var done sync.WaitGroup
		for range n {
			ready.Add(1)
			done.Go(func() {
				if grow {
					procs.GrowStack()
				}
				ready.Done()
				<-stop
			})
		}
		ready.Wait()
		runtime.ReadMemStats(&ms)
		close(stop)
		done.Wait()
		return int64(ms.StackInuse) - int64(before)
	}
	plain := stacks(false)
	grown := stacks(true)
	per := (grown - plain) / n
	t.Logf("stack in use: %d bytes for %d parked goroutines, %d after GrowStack: %d more each", plain, n, grown, per)
	if per < 2<<10 || grown/n > 10<<10 {
		t.Errorf("GrowStack: each goroutine holds %d bytes of stack, %d more than without it; want 8 KiB, at least a doubling more", grown/n, per)
	}
}
