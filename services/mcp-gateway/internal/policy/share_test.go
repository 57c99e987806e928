package policy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tracked returns how many subjects Shares keeps an entry for.
func tracked(s *Shares) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// waiters returns the calls holding or waiting for one of subject's slots.
func waiters(s *Shares, subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.held[subject]; sh != nil {
		return sh.running + len(sh.waiting)
	}
	return 0
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("got no %s within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSharesNoLimit(t *testing.T) {
	var s Shares
	for _, n := range []int{0, -1} {
		release, err := s.Acquire(t.Context(), "alice", n)
		if err != nil || release == nil {
			t.Fatalf("got %v, want an immediate release for n %d", err, n)
		}
		release()
		release()
	}
	if got := s.InUse("alice"); got != 0 {
		t.Errorf("got %d in use, want 0: an unlimited caller takes no share", got)
	}
	if got := tracked(&s); got != 0 {
		t.Errorf("got %d subjects tracked, want 0", got)
	}
}

func TestSharesBound(t *testing.T) {
	tests := []struct {
		name       string
		n          int
		goroutines int
	}{
		{name: "share of one", n: 1, goroutines: 50},
		{name: "share of three", n: 3, goroutines: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Shares
			var running, most atomic.Int32
			var wg sync.WaitGroup
			for range tt.goroutines {
				wg.Go(func() {
					release, err := s.Acquire(t.Context(), "alice", tt.n)
					if err != nil {
						t.Errorf("acquiring: %v", err)
						return
					}
					r := running.Add(1)
					for {
						m := most.Load()
						if r <= m || most.CompareAndSwap(m, r) {
							break
						}
					}
					if in := s.InUse("alice"); in > tt.n {
						t.Errorf("got %d in use, want at most %d", in, tt.n)
					}
					runtime.Gosched()
					running.Add(-1)
					release()
				})
			}
			wg.Wait()
			if got := int(most.Load()); got > tt.n || got < 1 {
				t.Errorf("got at most %d running at once, want 1 to %d", got, tt.n)
			}
			if got := s.InUse("alice"); got != 0 {
				t.Errorf("got %d in use after every release, want 0", got)
			}
			if got := tracked(&s); got != 0 {
				t.Errorf("got %d subjects tracked after every release, want 0", got)
			}
		})
	}
}

func TestSharesOtherSubjectNotBlocked(t *testing.T) {
	var s Shares
	held, err := s.Acquire(t.Context(), "alice", 1)
	if err != nil {
		t.Fatalf("acquiring alice's slot: %v", err)
	}
	defer held()

	// alice is at her share: another call of hers waits ...
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(ctx, "alice", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want alice's second call to wait until its deadline", err)
	}
	// ... while bob's runs at once.
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	release, err := s.Acquire(ctx, "bob", 1)
	if err != nil {
		t.Fatalf("got %v, want bob's call not to wait for alice", err)
	}
	if got := s.InUse("bob"); got != 1 {
		t.Errorf("got bob %d in use, want 1", got)
	}
	release()
	if got := s.InUse("bob"); got != 0 {
		t.Errorf("got bob %d in use after the release, want 0", got)
	}
	if got := s.InUse("alice"); got != 1 {
		t.Errorf("got alice %d in use, want 1", got)
	}
}

func TestSharesCancel(t *testing.T) {
	t.Run("waiting call canceled", func(t *testing.T) {
		var s Shares
		held, err := s.Acquire(t.Context(), "alice", 1)
		if err != nil {
			t.Fatalf("acquiring: %v", err)
		}
		const waiting = 10
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, waiting)
		for range waiting {
			go func() {
				release, err := s.Acquire(ctx, "alice", 1)
				if err == nil {
					release()
				}
				errs <- err
			}()
		}
		waitFor(t, fmt.Sprintf("%d waiting calls", waiting), func() bool { return waiters(&s, "alice") == waiting+1 })
		cancel()
		for range waiting {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
		}
		if got := waiters(&s, "alice"); got != 1 {
			t.Errorf("got %d calls on alice's share after the cancel, want the 1 holding it", got)
		}
		if got := s.InUse("alice"); got != 1 {
			t.Errorf("got %d in use, want 1", got)
		}
		held()
		if got := s.InUse("alice"); got != 0 {
			t.Errorf("got %d in use, want 0", got)
		}
		if got := tracked(&s); got != 0 {
			t.Errorf("got %d subjects tracked, want 0: canceled waiters must leak nothing", got)
		}
	})
	t.Run("canceled before waiting", func(t *testing.T) {
		var s Shares
		held, err := s.Acquire(t.Context(), "alice", 1)
		if err != nil {
			t.Fatalf("acquiring: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		release, err := s.Acquire(ctx, "alice", 1)
		if !errors.Is(err, context.Canceled) || release != nil {
			t.Fatalf("got %v and a release %t, want context.Canceled and none", err, release != nil)
		}
		held()
		if got, n := s.InUse("alice"), tracked(&s); got != 0 || n != 0 {
			t.Errorf("got %d in use and %d subjects tracked, want 0 and 0", got, n)
		}
	})
}

func TestSharesReleaseIdempotent(t *testing.T) {
	var s Shares
	r1, err := s.Acquire(t.Context(), "alice", 2)
	if err != nil {
		t.Fatalf("acquiring: %v", err)
	}
	r2, err := s.Acquire(t.Context(), "alice", 2)
	if err != nil {
		t.Fatalf("acquiring: %v", err)
	}
	r1()
	r1()
	r1()
	if got := s.InUse("alice"); got != 1 {
		t.Fatalf("got %d in use after releasing one of two thrice, want 1", got)
	}
	r3, err := s.Acquire(t.Context(), "alice", 2)
	if err != nil {
		t.Fatalf("acquiring the freed slot: %v", err)
	}
	// Both slots are held again (r2, r3): a repeated release must not
	// have made room for a third.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(ctx, "alice", 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a third call to wait", err)
	}
	r2()
	r3()
	r2()
	if got, n := s.InUse("alice"), tracked(&s); got != 0 || n != 0 {
		t.Errorf("got %d in use and %d subjects tracked, want 0 and 0", got, n)
	}
}

// TestSharesEntryOutlivesItsFirstCall shows the entry of a subject stays
// while any of its calls runs: a release of one call must not drop the
// share another still holds, or a third call would get a fresh share.
func TestSharesEntryOutlivesItsFirstCall(t *testing.T) {
	var s Shares
	r1, err := s.Acquire(t.Context(), "alice", 1)
	if err != nil {
		t.Fatalf("acquiring: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan func(), 1)
	go func() {
		r, err := s.Acquire(ctx, "alice", 1)
		if err != nil {
			t.Errorf("acquiring: %v", err)
		}
		got <- r
	}()
	waitFor(t, "a waiting call", func() bool { return waiters(&s, "alice") == 2 })
	r1()
	r2 := <-got
	cancel()
	if in := s.InUse("alice"); in != 1 {
		t.Errorf("got %d in use, want 1 for the handed-over slot", in)
	}
	short, stop := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer stop()
	if _, err := s.Acquire(short, "alice", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a new call to wait for the held slot", err)
	}
	r2()
	if in, n := s.InUse("alice"), tracked(&s); in != 0 || n != 0 {
		t.Errorf("got %d in use and %d subjects tracked, want 0 and 0", in, n)
	}
}
