package policy

import (
	"context"
	"sync"
)

// Shares bounds the calls each caller runs at once to its grant's
// [Grant.Share], so one caller flooding the gateway cannot take every one
// of its slots while another caller waits. A caller's share is counted by
// its subject, over all its sessions, tokens and tasks: a caller whose
// tokens carry different roles (and so different shares) never runs more
// at once than the largest of them. It is safe for concurrent use; the
// zero value is ready.
//
// A share is taken before the gateway's own slot and held until the call
// ends: a caller over its share waits on its own queue without holding a
// gateway slot.
type Shares struct {
	mu sync.Mutex
	// held maps a subject to its calls running and waiting; an entry
	// goes when its last call ends, so the map only holds callers with
	// calls running or waiting. Guarded by mu.
	held map[string]*share
}

// share is one subject's count; guarded by Shares.mu.
type share struct {
	running int
	// waiting are the calls queued, first come first served; each is
	// admitted when running drops below its own limit.
	waiting []*waiter
}

type waiter struct {
	limit int
	ready chan struct{} // closed when admitted
}

// Acquire takes one of subject's n slots, waiting until fewer than n of
// its calls run or ctx ends. It returns the function that gives the slot
// back (safe to call more than once), or ctx's error. n of 0 or less
// means no share: Acquire returns at once.
func (s *Shares) Acquire(ctx context.Context, subject string, n int) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]*share{}
	}
	sh := s.held[subject]
	if sh == nil {
		sh = &share{}
		s.held[subject] = sh
	}
	if sh.running < n && len(sh.waiting) == 0 {
		sh.running++
		s.mu.Unlock()
		return s.releaser(subject, sh), nil
	}
	w := &waiter{limit: n, ready: make(chan struct{})}
	sh.waiting = append(sh.waiting, w)
	s.mu.Unlock()

	select {
	case <-w.ready:
		return s.releaser(subject, sh), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready:
		// Admitted as ctx ended: give the slot straight back.
		s.leave(subject, sh)
	default:
		for i, o := range sh.waiting {
			if o == w {
				sh.waiting = append(sh.waiting[:i], sh.waiting[i+1:]...)
				break
			}
		}
		s.admit(sh)
		s.forget(subject, sh)
	}
	return nil, ctx.Err()
}

func (s *Shares) releaser(subject string, sh *share) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.leave(subject, sh)
		})
	}
}

// leave ends one running call of sh and admits whoever may run now.
// s.mu is held.
func (s *Shares) leave(subject string, sh *share) {
	sh.running--
	s.admit(sh)
	s.forget(subject, sh)
}

// admit starts the waiting calls, in order, while the first one's limit
// allows it. s.mu is held.
func (s *Shares) admit(sh *share) {
	for len(sh.waiting) > 0 && sh.running < sh.waiting[0].limit {
		w := sh.waiting[0]
		sh.waiting = sh.waiting[1:]
		sh.running++
		close(w.ready)
	}
}

// forget drops sh once nothing runs or waits on it. s.mu is held.
func (s *Shares) forget(subject string, sh *share) {
	if sh.running == 0 && len(sh.waiting) == 0 && s.held[subject] == sh {
		delete(s.held, subject)
	}
}

// InUse returns the slots subject holds now.
func (s *Shares) InUse(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.held[subject]; sh != nil {
		return sh.running
	}
	return 0
}
