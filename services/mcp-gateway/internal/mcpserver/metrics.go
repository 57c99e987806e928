package mcpserver

import (
	"net/http"

	"github.com/fiskfleet/fiskfleet/shared/ops"
)

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
