package ops

import (
	"fmt"
	"net/http"
	"strings"
)

// Check is one readiness condition: Ready returns nil when it holds, else
// an error saying what is missing. Ready is called on every probe, from the
// probe's goroutine, so it must be cheap and safe for concurrent use. Its
// message is shown to whoever can reach the probe: it must name no tool,
// argument or credential.
type Check struct {
	Name  string
	Ready func() error
}

// Health answers the two probes an orchestrator sends: /healthz (the
// process serves HTTP) and /readyz (every [Check] holds; the body names the
// ones that do not). It is safe for concurrent use.
type Health struct {
	checks []Check
}

// NewHealth returns the probes for checks, evaluated in order.
func NewHealth(checks ...Check) *Health { return &Health{checks: checks} }

// Paths of the probes.
const (
	LivePath  = "/healthz"
	ReadyPath = "/readyz"
)

// Ready reports nil when every check holds, else one error line per check
// that does not.
func (h *Health) Ready() error {
	var failed []string
	for _, c := range h.checks {
		if err := c.Ready(); err != nil {
			failed = append(failed, c.Name+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not ready: %s", strings.Join(failed, "; "))
	}
	return nil
}

// Handler serves [LivePath] and [ReadyPath] (GET and HEAD only) and 404s
// every other path, so it can be mounted at "/" of a listener of its own.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(LivePath, h.serveLive)
	mux.HandleFunc(ReadyPath, h.serveReady)
	return mux
}

func (h *Health) serveLive(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	probeBody(w, http.StatusOK, "ok\n")
}

func (h *Health) serveReady(w http.ResponseWriter, r *http.Request) {
	if !probeMethod(w, r) {
		return
	}
	var b strings.Builder
	status := http.StatusOK
	for _, c := range h.checks {
		if err := c.Ready(); err != nil {
			status = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "%s: %v\n", c.Name, err)
			continue
		}
		fmt.Fprintf(&b, "%s: ok\n", c.Name)
	}
	if status == http.StatusOK {
		b.WriteString("ready\n")
	} else {
		b.WriteString("not ready\n")
	}
	probeBody(w, status, b.String())
}

// probeMethod answers 405 to anything but GET and HEAD: a probe only reads.
func probeMethod(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed: probes answer GET and HEAD", http.StatusMethodNotAllowed)
	return false
}

func probeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
