package approvalweb

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// basePath is where the page lives; the gateway mounts [Page.Handler] at
// basePath and basePath + "/".
const basePath = "/approvals"

// maxFormBytes caps a POST body: a form holds an id, a digest, a CSRF
// token and a reason.
const maxFormBytes = 64 << 10

// Page is the gateway's /approvals page. Make it with [New], serve
// [Page.Handler], and [Page.Close] it before closing the NATS connection.
// It is safe for concurrent use.
type Page struct {
	cfg    Config
	log    *slog.Logger
	tokens []tokenEntry

	sessions *sessions
	board    *board
	oidc     *oidcClient // nil with token sign-in

	ctx       context.Context
	cancel    context.CancelFunc
	watchDone chan struct{}
	closeOnce sync.Once
	handler   http.Handler
}

// New checks cfg and starts watching the fleet's approval requests on
// cfg.NATS, so the page lists them the moment a browser opens it. With
// OIDC it also starts discovering the issuer's keys in the background
// (no network is needed for New to succeed). The caller must call
// [Page.Close].
func New(cfg Config) (*Page, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Page{
		cfg:       cfg,
		log:       cfg.Logger,
		sessions:  newSessions(cfg.SessionIdle, cfg.SessionMax, cfg.MaxSessions),
		board:     newBoard(),
		watchDone: make(chan struct{}),
	}
	for _, t := range cfg.Tokens {
		p.tokens = append(p.tokens, tokenEntry{name: t.Name, digest: sha256.Sum256([]byte(t.Token))})
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if o := cfg.OIDC; o != nil {
		v, err := auth.NewVerifier(p.ctx, auth.Config{
			Auth:       config.Auth{Issuer: o.Issuer, Audience: o.ClientID, Algorithms: o.Algorithms},
			Resource:   o.RedirectURL,
			Claim:      o.Policy.Claim(),
			HTTPClient: o.HTTPClient,
			Logger:     cfg.Logger,
		})
		if err != nil {
			p.cancel()
			return nil, fmt.Errorf("%w: verifying ID tokens: %w", ErrInvalidConfig, err)
		}
		p.oidc = newOIDCClient(*o, v)
	}
	p.handler = p.routes()
	go p.watch(p.ctx)
	return p, nil
}

// Close stops watching requests, ends open event streams and, with OIDC,
// the key set's refetching. It is idempotent; the NATS connection stays
// the caller's.
func (p *Page) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		<-p.watchDone
		if p.oidc != nil {
			p.oidc.verifier.Close()
		}
	})
	return nil
}

// Handler serves the page under /approvals: mount it at "/approvals" and
// "/approvals/", behind the gateway's Origin and Host checks and beside
// /mcp's token check, not behind it (the page signs its users in itself).
//
//	GET  /approvals              the pending requests, or the sign-in page
//	POST /approvals/signin       token sign-in
//	GET  /approvals/signin       OIDC sign-in: off to the authorization server
//	GET  /approvals/callback     OIDC: back from the authorization server
//	POST /approvals/signout      end the session
//	POST /approvals/answer       approve or deny one request
//	GET  /approvals/pending.json the pending requests as JSON
//	GET  /approvals/events       the same as a server-sent event stream
//
// Every response carries a strict Content-Security-Policy, forbids
// framing and caching, and sends the Referer to its own origin only. A
// POST needs its own origin in Origin (or, without Origin, in Referer),
// and, once signed in, the session's CSRF token.
func (p *Page) Handler() http.Handler { return p.handler }

func (p *Page) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+basePath, p.serveIndex)
	mux.HandleFunc("GET "+basePath+"/{$}", p.serveIndex)
	mux.HandleFunc("POST "+basePath+"/signin", p.sameOrigin(p.serveTokenSignIn))
	mux.HandleFunc("GET "+basePath+"/signin", p.serveOIDCSignIn)
	mux.HandleFunc("GET "+basePath+"/callback", p.serveCallback)
	mux.HandleFunc("POST "+basePath+"/signout", p.sameOrigin(p.serveSignOut))
	mux.HandleFunc("POST "+basePath+"/answer", p.sameOrigin(p.serveAnswer))
	mux.HandleFunc("GET "+basePath+"/pending.json", p.servePendingJSON)
	mux.HandleFunc("GET "+basePath+"/events", p.serveEvents)
	return securityHeaders(mux)
}

// nonceKey carries the response's CSP nonce to the templates.
type nonceKey struct{}

// securityHeaders sets the headers every response of the page carries,
// with a fresh CSP nonce per response: only the page's own inline script
// and style run, nothing loads from elsewhere, forms post only to the
// page, and no site may frame it (clickjacking an Approve button).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nonce := randomToken()
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'nonce-"+nonce+"'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce)))
	})
}

// session returns the request's live session and its id.
func (p *Page) session(r *http.Request, takeFlash bool) (session, string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, "", false
	}
	s, ok := p.sessions.lookup(c.Value, time.Now(), takeFlash)
	return s, c.Value, ok
}

// secure reports whether the browser reached the page over TLS: a TLS
// connection, or, when [Config.TrustForwardedProto] says so, a proxy's
// X-Forwarded-Proto: https.
func (p *Page) secure(r *http.Request) bool {
	return r.TLS != nil || p.cfg.TrustForwardedProto && r.Header.Get("X-Forwarded-Proto") == "https"
}

// setCookie sets a cookie of the page: HttpOnly (no script reads it),
// Path=/approvals and Secure over TLS. maxAge 0 leaves Max-Age out, so the
// cookie ends with the browser; -1 deletes it.
func (p *Page) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int, sameSite http.SameSite) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: basePath, MaxAge: maxAge, HttpOnly: true, Secure: p.secure(r), SameSite: sameSite})
}

// ownOrigin is the origin the browser sees the page at: the scheme r
// arrived with and its Host.
func (p *Page) ownOrigin(r *http.Request) string {
	scheme := "http"
	if p.secure(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
