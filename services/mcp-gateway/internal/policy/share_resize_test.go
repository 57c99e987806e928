package policy

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSharesSizeChangeKeepsBound shows a subject whose calls come with two
// share sizes at once (two tokens of one sub whose groups differ) still
// never holds more than the larger share.
func TestSharesSizeChangeKeepsBound(t *testing.T) {
	var s Shares
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for i := range 6 {
		n := 1 + i%2
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		release, err := s.Acquire(ctx, "alice", n)
		cancel()
		switch {
		case err == nil:
			releases = append(releases, release)
		case !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("got %v, want a wait until the deadline", err)
		}
	}
	if got := len(releases); got > 2 {
		t.Errorf("got alice holding %d calls with shares of 1 and 2, want at most 2", got)
	}
}
