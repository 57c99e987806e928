package mcpserver

import (
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// registerMetrics registers the slot gauges of the MCP surface: calls in
// flight (approval and slot waits included) and free execution slots.
func (s *Server) registerMetrics() {
	s.cfg.Metrics.Slots(ops.SurfaceMCP,
		func() int { return int(s.inFlight.Load()) },
		func() int { return cap(s.sem) - len(s.sem) })
}

// observe counts a finished call from the record its log line is made
// of. The tool label is the name the call was registered under, which
// [ops.Metrics] also checks against the served set; the surface is remote
// for a tool of any source but the local one. A call answered with an
// approval request (2026-07-28 clients) has not finished: the retried call
// is counted.
func (s *Server) observe(rec *record, d time.Duration) {
	if s.cfg.Metrics == nil || rec.outcome == outcomeRequested {
		return
	}
	surface := ops.SurfaceMCP
	if e := (*s.entries.Load())[rec.tool]; e != nil && e.source != SourceLocal {
		surface = ops.SurfaceRemote
	}
	if rec.surface == audit.SurfaceAgent2Agent {
		surface = ops.SurfaceAgent2Agent
	}
	s.cfg.Metrics.Call(rec.tool, surface, metricOutcome(rec), d)
}

// metricOutcome maps a call's logged outcome onto the metrics' fixed list.
func metricOutcome(rec *record) string {
	switch rec.outcome {
	case outcomeOK:
		if rec.exitCode != nil && *rec.exitCode != 0 {
			return ops.OutcomeExitNonzero
		}
		return ops.OutcomeOK
	case outcomeDenied, outcomeRefused:
		return ops.OutcomeDenied
	case outcomeBusy:
		return ops.OutcomeBusy
	case outcomeTimeout:
		return ops.OutcomeTimeout
	case outcomeCanceled:
		return ops.OutcomeCanceled
	}
	return ops.OutcomeError
}

// answerOf names a human's answer to an approval form for the metrics:
// run is whether [Server.decide] let the call go on.
func answerOf(answer *mcp.ElicitationResult, run bool) string {
	switch {
	case run:
		return ops.AnswerAccepted
	case answer == nil:
		return ops.AnswerError
	case answer.Action == mcp.ElicitationResponseActionDecline:
		return ops.AnswerDeclined
	case answer.Action == mcp.ElicitationResponseActionCancel:
		return ops.AnswerCanceled
	case answer.Action == mcp.ElicitationResponseActionAccept:
		// Accepted the form but did not say yes: a "no", or a malformed
		// answer, which denies like one.
		return ops.AnswerDeclined
	}
	return ops.AnswerError
}

// probes serves /healthz and /readyz in front of next, outside its
// Origin, bearer and session rules: an orchestrator's probe carries no
// token, Origin or session, and the answers name no tool, argument or
// credential, only which check fails. Every other path goes to next.
func (s *Server) probes(next http.Handler) http.Handler {
	checks := append([]ops.Check{{Name: "tools", Ready: func() error { return nil }}}, s.cfg.Checks...)
	health := ops.NewHealth(checks...).Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ops.LivePath || r.URL.Path == ops.ReadyPath {
			health.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
