package policy

import (
	"context"
	"sync"
)

// Shares bounds the calls each caller runs at once to its grant's
// [Grant.Share], so one caller flooding the gateway cannot take every one
// of its slots while another caller waits. A caller's share is counted by
// its subject, over all its sessions and tasks. It is safe for concurrent
// use; the zero value is ready.
//
// A share is taken before the gateway's own slot and held until the call
// ends: a caller over its share waits on its own queue without holding a
// gateway slot.
type Shares struct {
	mu sync.Mutex
	// held maps a subject to its share in use; an entry goes when its
	// last call ends, so the map only holds callers with calls running or
	// waiting. Guarded by mu.
	held map[string]*share
}

type share struct {
	slots chan struct{}
	refs  int // calls holding or waiting for a slot; guarded by Shares.mu
}

// Acquire takes one of subject's n slots, waiting until one is free or
// ctx ends. It returns the function that gives the slot back, or ctx's
// error. n of 0 or less means no share: Acquire returns at once.
func (s *Shares) Acquire(ctx context.Context, subject string, n int) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]*share{}
	}
	sh := s.held[subject]
	if sh == nil || cap(sh.slots) != n {
		// A caller whose roles changed (a new token) starts a share of
		// the new size; calls on the old one finish on it.
		sh = &share{slots: make(chan struct{}, n)}
		s.held[subject] = sh
	}
	sh.refs++
	s.mu.Unlock()

	done := func() {
		s.mu.Lock()
		sh.refs--
		if sh.refs == 0 && s.held[subject] == sh {
			delete(s.held, subject)
		}
		s.mu.Unlock()
	}
	select {
	case sh.slots <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-sh.slots
				done()
			})
		}, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// InUse returns the slots subject holds now.
func (s *Shares) InUse(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.held[subject]; sh != nil {
		return len(sh.slots)
	}
	return 0
}
