package server

import (
	"errors"
	"fmt"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// registerMetrics tells the metrics the served set (the only tool labels
// a call can carry) and registers the slot gauges: calls in flight are the
// slots taken, since a slot is taken before a worker starts.
func (s *Server) registerMetrics() {
	m := s.cfg.Metrics
	if m == nil {
		return
	}
	names := make([]string, len(s.served))
	for i, t := range s.served {
		names[i] = t.Name()
	}
	m.SetTools(names)
	m.Slots(ops.SurfaceA2A, func() int { return len(s.sem) }, func() int { return cap(s.sem) - len(s.sem) })
}

// rejectReason classifies why a message could not be decoded.
func rejectReason(err error) string {
	switch {
	case errors.Is(err, a2a.ErrTooLarge):
		return ops.RejectOversize
	case errors.Is(err, a2a.ErrUnexpectedProtocol), errors.Is(err, a2a.ErrUnknownProtocol):
		return ops.RejectProtocol
	}
	return ops.RejectSchema
}

// Ready reports nil while the service is registered with NATS and not
// stopping: what the agent's readiness probe checks besides the
// connection itself.
func (s *Server) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return errors.New("stopping")
	case s.svc == nil:
		return fmt.Errorf("service %s not registered yet", s.cfg.Identity)
	}
	return nil
}
