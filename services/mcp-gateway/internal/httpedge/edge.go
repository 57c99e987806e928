// Package httpedge is the gateway's HTTP front door, shared by every
// surface it serves (MCP at /mcp, Agent2Agent, the approvals page, the
// OAuth metadata): the probes, the loopback Host and Origin checks with
// CORS for allowed pages, the caller check and the body cap, applied in
// one order to every route, and the serving loop that shuts them down
// within a budget.
package httpedge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// Config configures an [Edge]. Every zero value but Authenticate's and
// AuthToken's has a default; those two being unset leaves the gateway
// open to anyone who reaches it, which only loopback makes safe.
type Config struct {
	// AuthToken, when set, is the bearer token every authenticated route
	// requires. It is ignored when Authenticate is set.
	AuthToken string
	// Authenticate, when set, checks the caller of every authenticated
	// route (the OAuth verifier's middleware: expose.agent.mcp.auth): a
	// request it refuses never reaches the handler; one it accepts
	// carries its [auth.Caller], which Authorize has seen. Nil means the
	// static check of AuthToken, whose one caller is [auth.StaticSubject].
	Authenticate func(next http.Handler, authorize func(*auth.Caller) error) http.Handler
	// Authorize gives an authenticated caller its roles, or refuses it
	// (the policy's); nil accepts every caller.
	Authorize func(*auth.Caller) error
	// MaxBodyBytes caps one request body (413 beyond it); 0 means
	// [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// ReadTimeout bounds the time from a request's first byte to the end
	// of its body (408 beyond it) on the server [Serve] runs; 0 means
	// [DefaultReadTimeout].
	ReadTimeout time.Duration
	// AllowedOrigins are the browser origins allowed besides the
	// gateway's own loopback address (expose.agent.mcp.allowed_origins).
	AllowedOrigins []string
	// Checks are the readiness conditions /readyz answers for, besides
	// the tool set being built: 503 naming every one that fails.
	Checks []ops.Check
}

// Defaults for the zero values of [Config].
const (
	// DefaultMaxBodyBytes caps one request body. A tools/call carries a
	// few hundred bytes of arguments; the cap only stops a client from
	// making the server buffer arbitrary amounts of memory.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultReadTimeout bounds how long a request, headers and body, may
	// take to arrive: the largest body a client may send
	// (DefaultMaxBodyBytes) crosses any working network in far less, and
	// a client that stops sending its body, or dribbles it, would
	// otherwise hold a connection and its goroutine for as long as it
	// likes.
	DefaultReadTimeout = 30 * time.Second
)

// Edge is the gateway's one HTTP front door: every route passes the same
// checks in the same order, whatever surface serves it. From the outside
// in: the probes /healthz and /readyz beside everything (an orchestrator
// carries no token or Origin); the loopback Host and Origin check (so a
// web page learns nothing, not even whether a token is needed); then, for
// authenticated routes, the caller check (so an unauthenticated body is
// never read) and the body cap.
type Edge struct {
	cfg  Config
	mux  *http.ServeMux
	auth func(next http.Handler, authorize func(*auth.Caller) error) http.Handler
}

// New builds an edge with no routes.
func New(cfg Config) *Edge {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Authorize == nil {
		cfg.Authorize = func(*auth.Caller) error { return nil }
	}
	e := &Edge{cfg: cfg, mux: http.NewServeMux(), auth: cfg.Authenticate}
	if e.auth == nil {
		e.auth = func(next http.Handler, authorize func(*auth.Caller) error) http.Handler {
			return auth.Static(next, cfg.AuthToken, authorize)
		}
	}
	return e
}

// ReadTimeout is the read timeout [Serve] is to apply, as configured.
func (e *Edge) ReadTimeout() time.Duration { return e.cfg.ReadTimeout }

// Open serves h at pattern ([http.ServeMux]) to anyone, as the protected
// resource metadata is, behind the Origin check only.
func (e *Edge) Open(pattern string, h http.Handler) { e.mux.Handle(pattern, h) }

// Authenticated serves h at pattern behind the caller check and the body
// cap; h finds the [auth.Caller] in the request's context.
func (e *Edge) Authenticated(pattern string, h http.Handler) {
	e.mux.Handle(pattern, e.auth(limitBody(h, e.cfg.MaxBodyBytes, e.cfg.ReadTimeout), e.cfg.Authorize))
}

// Handler is the edge with every route mounted so far.
func (e *Edge) Handler() http.Handler {
	return probes(checkOrigin(e.mux, e.cfg.AllowedOrigins), e.cfg.Checks)
}

// probes serves /healthz and /readyz in front of next, outside its
// Origin, bearer and session rules: an orchestrator's probe carries no
// token, Origin or session, and the answers name no tool, argument or
// credential, only which check fails. Every other path goes to next.
func probes(next http.Handler, extra []ops.Check) http.Handler {
	checks := append([]ops.Check{{Name: "tools", Ready: func() error { return nil }}}, extra...)
	health := ops.NewHealth(checks...).Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == ops.LivePath || r.URL.Path == ops.ReadyPath {
			health.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin answers 403 to a request whose Origin header is present and
// not allowed, as the MCP transport requires: a browser sends Origin with
// every cross-site request, so this is what stops a page the user visits
// from calling tools through the user's own gateway, token or not.
// Non-browser clients send no Origin and pass. Allowed are the operator's
// allowed origins (exact, as browsers write them) and the gateway's own
// address on loopback: http://127.0.0.1, localhost or [::1] with the port
// the request arrived on.
//
// It also refuses, first, a request on a loopback connection whose Host is
// not a loopback name (DNS rebinding). mcp-go's handler checks that too,
// but only after the session rules in front of it would have answered.
func checkOrigin(next http.Handler, allowed []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := localLoopback(r); ok && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("forbidden: Host %q is not this machine's; the gateway listens on loopback", r.Host), http.StatusForbidden)
			return
		}
		origin, present := r.Header["Origin"]
		if present && len(origin) == 1 && slices.Contains(allowed, origin[0]) {
			// A page of an allowed origin is another origin: the browser
			// lets it read the answers only with CORS headers, and asks
			// first (a preflight, carrying no token) for what it sends.
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin[0])
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", corsExposed)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
				h.Set("Access-Control-Allow-Headers", allowHeaders(r.Header.Values("Access-Control-Request-Headers")))
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !present || len(origin) == 1 && ownOrigin(r, origin[0]) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, fmt.Sprintf("forbidden: Origin %q is not allowed; add it to expose.agent.mcp.allowed_origins to serve that page", strings.Join(origin, ", ")), http.StatusForbidden)
	})
}

// The headers a browser page of an allowed origin may send and read: what
// the streamable HTTP transport (both eras: 2026-07-28 sends Mcp-Method
// and Mcp-Name on every POST, and an Mcp-Param-NAME per header-bound
// argument), the authorization flow and Agent2Agent clients use.
const (
	corsAllowed = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version, " +
		mcp.HeaderMethod + ", " + mcp.HeaderName + ", A2A-Version, A2A-Extensions"
	corsExposed = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
)

// allowHeaders is the preflight's Access-Control-Allow-Headers: the fixed
// list, and each Mcp-Param-NAME header the page asked for, since their
// names are the tools' own and a list cannot hold them in advance (a "*"
// would not cover Authorization). A requested name that is not a header
// token is left out; the browser then refuses the request, as it should.
func allowHeaders(requested []string) string {
	var b strings.Builder
	b.WriteString(corsAllowed)
	for _, line := range requested {
		for name := range strings.SplitSeq(line, ",") {
			name = strings.TrimSpace(name)
			if len(name) > len(mcp.HeaderParamPrefix) && strings.EqualFold(name[:len(mcp.HeaderParamPrefix)], mcp.HeaderParamPrefix) && headerToken(name) {
				b.WriteString(", ")
				b.WriteString(name)
			}
		}
	}
	return b.String()
}

// headerToken reports whether name is a field name of the characters
// header names use in practice.
func headerToken(name string) bool {
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return len(name) <= 128
}

// ownOrigin reports whether origin is the gateway's own address: a
// loopback host with the port of the loopback connection r came in on.
func ownOrigin(r *http.Request, origin string) bool {
	port, ok := localLoopback(r)
	if !ok {
		return false
	}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if origin == "http://"+h+":"+port {
			return true
		}
	}
	return false
}

// localLoopback returns the local port of r's connection when that
// connection is on a loopback address.
func localLoopback(r *http.Request) (port string, ok bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "", false
	}
	host, port, err := net.SplitHostPort(local.String())
	if err != nil || !config.IsLoopback(host) {
		return "", false
	}
	return port, true
}

// loopbackHost reports whether a Host header names this machine on
// loopback: localhost or a loopback IP, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return config.IsLoopback(host)
}

// limitBody answers 413 for a POST body over max bytes. mcp-go reads the
// whole body before it looks at it, so without the cap a client could make
// it buffer any amount; reading it here also lets the answer be a plain 413
// rather than a JSON-RPC parse error, and a body that has not arrived
// within the server's read timeout (readTimeout, see [Serve])
// a 408 that says so.
func limitBody(next http.Handler, max int64, readTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			tooLarge(w, max)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		if err != nil {
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				tooLarge(w, max)
			case errors.Is(err, os.ErrDeadlineExceeded):
				http.Error(w, fmt.Sprintf("request timeout: the request did not arrive in full within %s", readTimeout), http.StatusRequestTimeout)
			default:
				http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, max int64) {
	http.Error(w, fmt.Sprintf("request body larger than %d bytes", max), http.StatusRequestEntityTooLarge)
}
