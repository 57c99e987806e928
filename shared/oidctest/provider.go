package oidctest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is someone the provider logs in.
type User struct {
	// Subject is the sub claim of the user's tokens, and what a
	// login_hint names to log this user in.
	Subject string
	// Groups is the value of the groups claim ([Config.GroupsClaim]): a
	// string, a []string, or nil for no claim at all.
	Groups any
	// Claims are more claims put in the user's access tokens.
	Claims map[string]any
}

// DefaultUser logs in when [Config.Users] is empty.
var DefaultUser = User{Subject: "alice", Groups: []string{"ops"}}

// Config shapes a [Provider]. The zero value is a provider at the root of
// its address with [DefaultUser] and five-minute tokens.
type Config struct {
	// Users can log in; the first logs in when a request has no
	// login_hint. Empty means [DefaultUser] alone.
	Users []User
	// GroupsClaim names the claim holding a user's groups; empty means
	// "groups", the gateway's default policy claim.
	GroupsClaim string
	// Audience is the aud of tokens whose request named no RFC 8707
	// resource; empty means the client id (zitadel's default).
	Audience string
	// TokenLifetime is how long issued tokens live; zero means five
	// minutes, longer than any test.
	TokenLifetime time.Duration
	// IssuerPath is the path part of the issuer URL, such as
	// "/realms/test", to exercise RFC 8414 path insertion; empty means
	// none.
	IssuerPath string
	// NoOpenIDDiscovery leaves /.well-known/openid-configuration
	// unanswered (404), so only RFC 8414 metadata names the keys.
	NoOpenIDDiscovery bool
}

// Provider is a running OpenID provider on 127.0.0.1. Its methods are
// safe for concurrent use; Start and Stop belong to the test goroutine.
type Provider struct {
	tb      testing.TB
	cfg     Config
	addr    string
	issuer  string
	op      *op.Provider
	store   *storage
	handler http.Handler

	// mu guards key, srv and served.
	mu     sync.Mutex
	key    *Key
	srv    *http.Server
	served chan struct{}

	jwksHits     atomic.Int64
	metadataHits atomic.Int64
}

// Start runs a provider on a free port of 127.0.0.1 until the test ends.
// It fails the test at once when the provider cannot be built.
func Start(tb testing.TB, cfg Config) *Provider {
	tb.Helper()
	if len(cfg.Users) == 0 {
		cfg.Users = []User{DefaultUser}
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.TokenLifetime == 0 {
		cfg.TokenLifetime = 5 * time.Minute
	}
	cfg.IssuerPath = strings.TrimSuffix(cfg.IssuerPath, "/")
	if cfg.IssuerPath != "" && !strings.HasPrefix(cfg.IssuerPath, "/") {
		tb.Fatalf("oidctest: IssuerPath %q must start with /", cfg.IssuerPath)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oidctest: listening on 127.0.0.1: %v", err)
	}
	p := &Provider{
		tb:     tb,
		cfg:    cfg,
		addr:   ln.Addr().String(),
		issuer: "http://" + ln.Addr().String() + cfg.IssuerPath,
		key:    NewKey(tb),
	}
	p.store = newStorage(p)
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		tb.Fatalf("oidctest: reading random bytes: %v", err)
	}
	p.op, err = op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey,
		CodeMethodS256: true,
		AuthMethodPost: true,
		// No offline_access: the provider issues no refresh tokens.
		SupportedScopes: []string{oidc.ScopeOpenID, oidc.ScopeProfile, oidc.ScopeEmail},
	}, p.store, op.StaticIssuer(p.issuer), op.WithAllowInsecure())
	if err != nil {
		ln.Close()
		tb.Fatalf("oidctest: building the provider: %v", err)
	}
	p.handler = p.routes()
	p.serve(ln)
	tb.Cleanup(p.Stop)
	return p
}

// routes is the front mux: the endpoints op leaves to its host, then op.
func (p *Provider) routes() http.Handler {
	base := p.cfg.IssuerPath
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server"+base, p.serveMetadata)
	mux.HandleFunc("GET "+base+"/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if p.cfg.NoOpenIDDiscovery {
			http.NotFound(w, r)
			return
		}
		p.serveMetadata(w, r)
	})
	mux.HandleFunc("POST "+base+"/register", p.register)
	mux.HandleFunc("GET "+base+"/login", p.login)
	var opHandler http.Handler = p.op
	if base != "" {
		opHandler = http.StripPrefix(base, opHandler)
	}
	mux.Handle(base+"/", withParams(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == base+"/keys" {
			p.jwksHits.Add(1)
		}
		opHandler.ServeHTTP(w, r)
	})))
	return mux
}

// serveMetadata answers OpenID discovery and RFC 8414 metadata alike: op's
// discovery document plus registration_endpoint.
func (p *Provider) serveMetadata(w http.ResponseWriter, r *http.Request) {
	p.metadataHits.Add(1)
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/.well-known/openid-configuration", nil)
	p.op.ServeHTTP(rec, req)
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		http.Error(w, "oidctest: decoding op's discovery document: "+err.Error(), http.StatusInternalServerError)
		return
	}
	doc["registration_endpoint"] = p.issuer + "/register"
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc)
}

// login is the automatic login op redirects to: it logs in the user the
// request's login_hint names (else the first user) and sends the browser
// back to op's callback.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if err := p.store.login(id); err != nil {
		if errors.Is(err, errUnknownUser) {
			http.Error(w, "oidctest: "+err.Error(), http.StatusForbidden)
			return
		}
		http.Error(w, "oidctest: "+err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, p.issuer+"/authorize/callback?id="+id, http.StatusFound)
}

// serve starts serving ln; mu must not be held by another goroutine.
func (p *Provider) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           p.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv, p.served = srv, served
}

// Stop takes the provider off the network: its port refuses connections
// and open ones are closed, until [Provider.Start]. It is idempotent and
// also runs when the test ends.
func (p *Provider) Stop() {
	p.mu.Lock()
	srv, served := p.srv, p.served
	p.srv, p.served = nil, nil
	p.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	<-served
}

// Start puts a stopped provider back on its address, with the same keys,
// clients and issuer. It fails the test when the port was taken meanwhile.
func (p *Provider) Start() {
	p.tb.Helper()
	p.mu.Lock()
	running := p.srv != nil
	p.mu.Unlock()
	if running {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.tb.Fatalf("oidctest: listening again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// Issuer is the provider's issuer URL, as its tokens' iss and its
// metadata spell it.
func (p *Provider) Issuer() string { return p.issuer }

// JWKSURL is the URL of the provider's key set, as its metadata names it.
func (p *Provider) JWKSURL() string { return p.issuer + "/keys" }

// JWKSHits counts the requests the key set endpoint has answered.
func (p *Provider) JWKSHits() int64 { return p.jwksHits.Load() }

// MetadataHits counts the requests for the discovery or RFC 8414 document.
func (p *Provider) MetadataHits() int64 { return p.metadataHits.Load() }

// Key is the provider's current signing key.
func (p *Provider) Key() *Key {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key
}

// RotateKey replaces the signing key with a new one under a new kid: the
// key set publishes only the new key from now on, and tokens the provider
// issues are signed with it. It returns the new key.
func (p *Provider) RotateKey() *Key {
	k := NewKey(p.tb)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.key = k
	return k
}

// user returns the user with the given subject; "" names the first.
func (p *Provider) user(subject string) (User, bool) {
	if subject == "" {
		return p.cfg.Users[0], true
	}
	for _, u := range p.cfg.Users {
		if u.Subject == subject {
			return u, true
		}
	}
	return User{}, false
}

// randomID returns 16 random bytes in hex, for ids, codes and secrets.
func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
