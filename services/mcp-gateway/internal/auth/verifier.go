package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// Limits of talking to the issuer.
const (
	// DefaultRefreshUnknownKIDEvery is how often at most an unknown kid
	// makes the verifier refetch the key set: quick enough for a rotation
	// to be picked up by the next request that needs it, slow enough that
	// tokens with made-up kids cannot make the gateway hammer the issuer.
	DefaultRefreshUnknownKIDEvery = 10 * time.Second
	// keyRefreshInterval refetches the key set on a schedule too, so a key
	// the issuer withdrew stops being accepted within this time.
	keyRefreshInterval = 15 * time.Minute
	// fetchTimeout bounds one request to the issuer; it is also the
	// default client's timeout.
	fetchTimeout = 10 * time.Second
	// Discovery retries: the first after retryMin, doubling to retryMax;
	// requests arriving meanwhile bring the next attempt forward, but
	// never to less than retryMin after the previous one.
	retryMin = time.Second
	retryMax = 30 * time.Second
	// maxMetadataBytes caps the issuer's metadata document.
	maxMetadataBytes = 1 << 20
)

// Config is what a [Verifier] checks tokens against.
type Config struct {
	// Auth is expose.agent.mcp.auth as parsed, defaults filled. Zero
	// Leeway and empty Algorithms still mean the config defaults.
	Auth config.Auth
	// Resource is the canonical URL of /mcp as clients reach it
	// (Auth.Resource, else the listen URL; the caller decides). It is
	// the audience when Auth.Audience is empty, and what the protected
	// resource metadata describes. Required.
	Resource string
	// Claim names the token claim holding the caller's groups (the
	// policy's claim); empty means [config.DefaultPolicyClaim].
	Claim string
	// HTTPClient fetches the issuer's metadata and keys; nil means a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives refusals and discovery trouble; nil means
	// slog.Default().
	Logger *slog.Logger
	// RefreshUnknownKIDEvery is the least time between two key set
	// refetches caused by an unknown kid; zero means
	// [DefaultRefreshUnknownKIDEvery]. Tests lower it.
	RefreshUnknownKIDEvery time.Duration
}

func (c Config) withDefaults() Config {
	c.Auth.Algorithms = slices.Clone(c.Auth.Algorithms)
	if len(c.Auth.Algorithms) == 0 {
		c.Auth.Algorithms = slices.Clone(config.DefaultAuthAlgorithms)
	}
	if c.Auth.Leeway.Duration == 0 {
		c.Auth.Leeway.Duration = config.DefaultAuthLeeway
	}
	if c.Auth.Audience == "" {
		c.Auth.Audience = c.Resource
	}
	if c.Claim == "" {
		c.Claim = config.DefaultPolicyClaim
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RefreshUnknownKIDEvery <= 0 {
		c.RefreshUnknownKIDEvery = DefaultRefreshUnknownKIDEvery
	}
	return c
}

func (c Config) validate() error {
	if err := AbsoluteURL(c.Auth.Issuer); err != nil {
		return fmt.Errorf("%w: issuer: %w", ErrInvalidConfig, err)
	}
	if err := AbsoluteURL(c.Resource); err != nil {
		return fmt.Errorf("%w: resource: %w", ErrInvalidConfig, err)
	}
	if c.Auth.JWKSURL != "" {
		if err := AbsoluteURL(c.Auth.JWKSURL); err != nil {
			return fmt.Errorf("%w: jwks_url: %w", ErrInvalidConfig, err)
		}
	}
	for _, a := range c.Auth.Algorithms {
		if !slices.Contains(config.AuthAlgorithms, a) {
			return fmt.Errorf("%w: algorithm %q is not one of %s (none and HMAC never are)", ErrInvalidConfig, a, strings.Join(config.AuthAlgorithms, ", "))
		}
	}
	if c.Auth.Leeway.Duration < 0 {
		return fmt.Errorf("%w: leeway %s is negative", ErrInvalidConfig, c.Auth.Leeway.Duration)
	}
	return nil
}

// AbsoluteURL refuses anything but an http or https URL with a host and
// no fragment: what an issuer, a key set, a resource or a redirect URL
// must be.
func AbsoluteURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute http(s) URL without fragment", s)
	}
	return nil
}

// Verifier checks access tokens of one issuer. It is safe for concurrent
// use. It owns a background goroutine (discovery, then the key set's
// scheduled refetch) until [Verifier.Close].
type Verifier struct {
	cfg         Config
	log         *slog.Logger
	parser      *jwt.Parser
	metadataURL string

	// limiter allows one key set refetch per RefreshUnknownKIDEvery for
	// unknown kids; see [Verifier.lookupKey].
	limiter *rate.Limiter
	keys    atomic.Pointer[keySource] // nil until discovery succeeded
	nudge   chan struct{}
	// verified are the tokens that passed, so a session's repeated token
	// is not checked again on every request (verified.go).
	verified verified

	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// keySource is the issuer's key set, cached.
type keySource struct {
	jwksURL string
	kf      keyfunc.Keyfunc
	// cache is the key set as last fetched; reading it never fetches.
	cache jwkset.Storage
}

// NewVerifier checks cfg and starts discovering the issuer in the
// background; it needs no network to succeed (see the package doc). The
// caller must call [Verifier.Close]. ctx bounds the verifier's life as
// Close does.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	metadataURL, err := metadataURL(cfg.Resource)
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrInvalidConfig, err)
	}
	v := &Verifier{
		cfg: cfg,
		log: cfg.Logger,
		parser: jwt.NewParser(
			jwt.WithValidMethods(cfg.Auth.Algorithms),
			jwt.WithIssuer(cfg.Auth.Issuer),
			jwt.WithAudience(cfg.Auth.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Auth.Leeway.Duration),
		),
		metadataURL: metadataURL,
		limiter:     rate.NewLimiter(rate.Every(cfg.RefreshUnknownKIDEvery), 1),
		nudge:       make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	v.ctx, v.cancel = context.WithCancel(ctx)
	go v.discoverLoop()
	return v, nil
}

// Close stops discovery and the key set's refetching. It is idempotent.
func (v *Verifier) Close() {
	v.closeOnce.Do(func() {
		v.cancel()
		<-v.done
	})
}

// Ready reports whether the issuer's keys are known, so tokens can be
// accepted.
func (v *Verifier) Ready() bool { return v.keys.Load() != nil }

// discoverLoop discovers the issuer until it succeeds or the verifier
// closes.
func (v *Verifier) discoverLoop() {
	defer close(v.done)
	backoff := retryMin
	for {
		last := time.Now()
		ks, err := v.discover(v.ctx)
		if err == nil {
			v.keys.Store(ks)
			v.verified.clear()
			v.log.Info("issuer discovered", "issuer", v.cfg.Auth.Issuer, "jwks_uri", ks.jwksURL)
			return
		}
		if v.ctx.Err() != nil {
			return
		}
		v.log.Warn("discovering the issuer failed; tokens are refused until it succeeds", "issuer", v.cfg.Auth.Issuer, "error", err, "retry_in", backoff)
		timer := time.NewTimer(backoff)
		select {
		case <-v.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-v.nudge:
			timer.Stop()
			if wait := time.Until(last.Add(retryMin)); wait > 0 {
				select {
				case <-v.ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		backoff = min(2*backoff, retryMax)
	}
}

// discover finds the key set URL and fetches the key set into a cache
// that refetches it on schedule and on unknown kids. An attempt whose
// first fetch of the key set fails (or finds no key) fails as a whole and
// leaves nothing running, so being discovered means having keys.
func (v *Verifier) discover(ctx context.Context) (_ *keySource, err error) {
	jwksURL := v.cfg.Auth.JWKSURL
	if jwksURL == "" {
		if jwksURL, err = v.fetchJWKSURL(ctx); err != nil {
			return nil, err
		}
	}
	// The cache's refresh goroutine lives as long as this context: the
	// verifier's, unless this attempt fails.
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	// NewStorageFromHTTP returns the first fetch's failure; the handler
	// sees only the scheduled refetches'.
	cache := jwkset.NewMemoryStorage()
	store, err := jwkset.NewStorageFromHTTP(jwksURL, jwkset.HTTPClientStorageOptions{
		Client:          v.cfg.HTTPClient,
		Ctx:             ctx,
		HTTPTimeout:     fetchTimeout,
		RefreshInterval: keyRefreshInterval,
		RefreshErrorHandler: func(_ context.Context, err error) {
			v.log.Warn("fetching the issuer's key set failed; the cached keys stay in use", "jwks_uri", jwksURL, "error", err)
		},
		Storage: cache,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: fetching the key set %s: %w", ErrDiscovery, jwksURL, err)
	}
	if all, err := cache.KeyReadAll(ctx); err != nil || len(all) == 0 {
		return nil, fmt.Errorf("%w: the key set %s holds no usable key", ErrDiscovery, jwksURL)
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: map[string]jwkset.Storage{jwksURL: store},
		// A request that got past [Verifier.lookupKey]'s gate waits at
		// most this for the library's own limiter, which runs at the
		// same rate, and the refetch shares the bound.
		RateLimitWaitMax:  fetchTimeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(v.cfg.RefreshUnknownKIDEvery), 1),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: key set %s: %w", ErrDiscovery, jwksURL, err)
	}
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: client})
	if err != nil {
		return nil, fmt.Errorf("%w: key set %s: %w", ErrDiscovery, jwksURL, err)
	}
	return &keySource{jwksURL: jwksURL, kf: kf, cache: cache}, nil
}

// Verify checks token and returns the caller it establishes. Every error
// wraps one of the token sentinels of errors.go and says which check
// failed; with [ErrScope] the token is otherwise valid and the caller is
// returned too, so the refusal can say who it was. The token is not kept.
func (v *Verifier) Verify(ctx context.Context, token string) (*Caller, error) {
	c, _, err := v.verify(ctx, token)
	if err != nil && !errors.Is(err, ErrScope) {
		return nil, err
	}
	return c, err
}

// verify is [Verifier.Verify] that also returns the subject of a token
// whose signature verified, for the refusal's log line.
func (v *Verifier) verify(ctx context.Context, token string) (c *Caller, sub string, err error) {
	if token == "" {
		return nil, "", ErrNoToken
	}
	ks := v.keys.Load()
	if ks == nil {
		select {
		case v.nudge <- struct{}{}:
		default:
		}
		return nil, "", fmt.Errorf("%w: issuer %s has not been discovered", ErrUnavailable, v.cfg.Auth.Issuer)
	}
	now := time.Now()
	if c, ok := v.verified.lookup(token, now); ok {
		return c, c.Subject, nil
	}
	var keyErr error
	claims := jwt.MapClaims{}
	parsed, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		key, err := v.lookupKey(ctx, ks, t)
		keyErr = err
		return key, err
	})
	if err != nil {
		if errors.Is(err, jwt.ErrTokenInvalidClaims) {
			// The signature verified: the subject is the issuer's word.
			sub, _ = claims["sub"].(string)
		}
		return nil, sub, v.classify(parsed, claims, keyErr, err)
	}
	if typ, ok := parsed.Header["typ"]; ok {
		s, _ := typ.(string)
		switch strings.ToLower(s) {
		case "at+jwt", "application/at+jwt", "jwt":
		default:
			return nil, "", fmt.Errorf("%w: typ %q is not at+jwt or JWT", ErrTokenType, s)
		}
	}
	sub, _ = claims["sub"].(string)
	if sub == "" {
		return nil, "", fmt.Errorf("%w: sub is missing or not a string", ErrSubject)
	}
	c = &Caller{
		Subject:  sub,
		ClientID: clientID(claims),
		Groups:   v.groups(ctx, claims),
		Scopes:   scopes(claims),
	}
	missing := slices.DeleteFunc(slices.Clone(v.cfg.Auth.Scopes), func(s string) bool { return slices.Contains(c.Scopes, s) })
	if len(missing) > 0 {
		return c, sub, fmt.Errorf("%w: token lacks %s", ErrScope, strings.Join(missing, " "))
	}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		v.verified.store(token, c, exp.Time, now)
	}
	return c, sub, nil
}

// lookupKey finds the key for t by its kid. An unknown kid makes keyfunc
// refetch the key set, but only when v.limiter allows one right now:
// other requests with unknown kids fail at once instead of queueing for
// the library's limiter, so a flood of made-up kids costs the issuer one
// request per RefreshUnknownKIDEvery and the gateway no waiting.
func (v *Verifier) lookupKey(ctx context.Context, ks *keySource, t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid != "" {
		if _, err := ks.cache.KeyRead(ctx, kid); errors.Is(err, jwkset.ErrKeyNotFound) {
			if !v.limiter.Allow() {
				return nil, fmt.Errorf("%w: kid %q (the key set was refetched less than %s ago)", ErrUnknownKey, kid, v.cfg.RefreshUnknownKIDEvery)
			}
			// A new key is how a rotation shows: the refetch below may
			// also withdraw keys, so tokens checked with the old set are
			// checked again.
			defer v.verified.clear()
		}
	}
	key, err := ks.kf.KeyfuncCtx(ctx)(t)
	switch {
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	return key, nil
}

// classify turns golang-jwt's error into one wrapping a token sentinel.
func (v *Verifier) classify(t *jwt.Token, claims jwt.MapClaims, keyErr, err error) error {
	if t == nil || errors.Is(err, jwt.ErrTokenMalformed) {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if alg, _ := t.Header["alg"].(string); !slices.Contains(v.cfg.Auth.Algorithms, alg) {
		return fmt.Errorf("%w: alg %q is not one of %s", ErrAlgorithm, alg, strings.Join(v.cfg.Auth.Algorithms, ", "))
	}
	if keyErr != nil {
		return keyErr
	}
	has := func(name string) bool { _, ok := claims[name]; return ok }
	var s error
	switch {
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		s = ErrSignature
	case errors.Is(err, jwt.ErrTokenExpired), !has("exp"):
		s = ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		s = ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), !has("iss"):
		s = ErrIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience), !has("aud"):
		s = ErrAudience
	default:
		s = ErrMalformed
	}
	return fmt.Errorf("%w: %w", s, err)
}

// clientID is azp, else client_id.
func clientID(claims jwt.MapClaims) string {
	if s, ok := claims["azp"].(string); ok && s != "" {
		return s
	}
	s, _ := claims["client_id"].(string)
	return s
}

// scopes are the union of scope (space-separated, RFC 9068) and scp (a
// list or a string, as some issuers write it), in order, without repeats.
func scopes(claims jwt.MapClaims) []string {
	var out []string
	add := func(s string) {
		for _, f := range strings.Fields(s) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	for _, name := range []string{"scope", "scp"} {
		switch val := claims[name].(type) {
		case string:
			add(val)
		case []any:
			for _, e := range val {
				if s, ok := e.(string); ok {
					add(s)
				}
			}
		}
	}
	return out
}

// ClaimAt returns the claim name names: a top-level claim of that exact
// name (namespaced claims such as "https://example.com/roles" hold dots),
// else the value at its dotted path through nested objects, as providers
// nest roles (Keycloak's realm_access.roles and
// resource_access.CLIENT.roles). Nil when there is neither.
func ClaimAt(claims jwt.MapClaims, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = map[string]any(claims)
	for seg := range strings.SplitSeq(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[seg]
	}
	return cur
}

// groups reads the policy claim: a string or a list of strings. Anything
// else is ignored (logged at debug), as are non-string list elements: the
// policy only ever narrows, so an unreadable claim gives no role.
func (v *Verifier) groups(ctx context.Context, claims jwt.MapClaims) []string {
	switch val := ClaimAt(claims, v.cfg.Claim).(type) {
	case nil:
		return nil
	case string:
		return []string{val}
	case []any:
		out := make([]string, 0, len(val))
		for _, e := range val {
			if s, ok := e.(string); ok {
				out = append(out, s)
			} else {
				v.log.DebugContext(ctx, "ignoring a non-string value of the policy claim", "claim", v.cfg.Claim, "type", fmt.Sprintf("%T", e))
			}
		}
		return out
	default:
		v.log.DebugContext(ctx, "ignoring the policy claim: not a string or list of strings", "claim", v.cfg.Claim, "type", fmt.Sprintf("%T", val))
		return nil
	}
}
