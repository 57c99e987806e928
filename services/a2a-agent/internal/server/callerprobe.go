package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
)

// A caller-probe subject (natsbus.CallerProbeHeader) is a subject of the
// caller's own account. A caller in another account, calling through a
// service import, names one that no probe from the agents' account
// reaches: there, no responders says nothing of the caller, and taken at
// its word it would cancel every call of that caller longer than a
// heartbeat. So an agent learns whether its probes reach a subject at the
// start of the first call that names it, when the caller is surely there,
// waiting for that very call; a call naming a subject found unreachable is
// not watched at all, and one whose subject has not been found reachable
// yet is never cancelled.

// reachTimeout bounds the first probe of a subject. An answer and a
// timeout both show that someone subscribes there (the server answers no
// responders at once otherwise), so it need not wait for a busy caller.
const reachTimeout = time.Second

// maxReach bounds probeReach. A subject lives as long as its caller's
// connection and an agent has few callers; past the bound the agent
// starts over, at the cost of one more first probe per caller.
const maxReach = 1024

// reachState is what an agent knows of a caller-probe subject.
type reachState uint8

const (
	reachUnknown reachState = iota
	// reachPending: its first probe is on its way.
	reachPending
	reachYes
	reachNo
)

// probeReach is what an agent has learned of the caller-probe subjects it
// was given. Its zero value is ready.
type probeReach struct {
	mu    sync.Mutex
	state map[string]reachState // guarded by mu
}

func (p *probeReach) get(subject string) reachState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state[subject]
}

// claim reports whether its caller is to send subject's first probe: only
// the first call to find it unknown does.
func (p *probeReach) claim(subject string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state[subject] != reachUnknown {
		return false
	}
	if p.state == nil || len(p.state) >= maxReach {
		p.state = make(map[string]reachState)
	}
	p.state[subject] = reachPending
	return true
}

func (p *probeReach) set(subject string, st reachState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.state[subject]; ok {
		p.state[subject] = st
	}
}

// learnReach sends subject's first probe and records what it shows.
func (s *Server) learnReach(r *natsbus.Request, req *a2a.ToolRequest, subject string) {
	err := r.ProbeCaller(subject, reachTimeout)
	if errors.Is(err, natsbus.ErrCallerGone) {
		s.reach.set(subject, reachNo)
		s.log.Info("caller probes do not reach the caller's subject from this account: its calls are not watched", "agent", s.cfg.Identity, "caller", req.Sender.Name, "probe", subject)
		return
	}
	s.reach.set(subject, reachYes)
}

// watchCaller probes the caller of a unary call on probe, the subject it
// named (see natsbus.CallerProbeHeader), once per heartbeat interval while
// the call runs, and cancels the call with errCallerGone once no one
// subscribes there any more: only for a subject its probes have reached
// (see probeReach). A call shorter than the interval sends no probe but,
// for a subject the agent has not seen, the first. It returns the function
// that ends the watch; a probe already sent runs to its answer or its
// timeout.
func (s *Server) watchCaller(r *natsbus.Request, req *a2a.ToolRequest, probe string, cancel context.CancelCauseFunc) (stop func()) {
	switch s.reach.get(probe) {
	case reachNo:
		return func() {}
	case reachUnknown:
		if s.reach.claim(probe) {
			go s.learnReach(r, req, probe)
		}
	}
	var (
		mu      sync.Mutex // guards timer and stopped
		timer   *time.Timer
		stopped bool
	)
	check := func() {
		err := r.ProbeCaller(probe, a2a.HeartbeatInterval)
		switch st := s.reach.get(probe); {
		case errors.Is(err, natsbus.ErrCallerGone) && st == reachYes:
			s.log.Info("caller gone: cancelling its call", "agent", s.cfg.Identity, "tool", req.Name, "caller", req.Sender.Name, "probe", probe)
			cancel(errCallerGone)
			return
		case st == reachNo:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer.Reset(a2a.HeartbeatInterval)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(a2a.HeartbeatInterval, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}
