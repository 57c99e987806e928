package approvalweb

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
)

// Limits of a sign-in at the authorization server.
const (
	// loginCookie binds a sign-in under way to the browser that started
	// it, so a callback URL passed to someone else signs nobody in. It is
	// SameSite=Lax, not Strict: the callback is a navigation from the
	// authorization server's site, on which a Strict cookie is not sent.
	loginCookie = "fiskfleet_approvals_login"
	// loginTTL is how long a sign-in may take at the authorization server.
	loginTTL = 10 * time.Minute
	// maxLogins bounds the sign-ins under way; the oldest makes room.
	maxLogins = 256
	// maxProviderBytes caps the provider's token responses.
	maxProviderBytes = 1 << 20
	// keysWait is how long a sign-in waits for the issuer's keys, which
	// the verifier fetches in the background from the page's start: a
	// sign-in in the first moments should wait, not fail.
	keysWait = 5 * time.Second
)

// oidcClient is the page as a client of the OpenID provider. It is safe
// for concurrent use.
type oidcClient struct {
	cfg OIDC
	// verifier checks ID tokens (and access tokens issued with them) for
	// the client id: signature by the issuer's keys, iss, aud, exp.
	verifier *auth.Verifier

	// mu guards meta and logins.
	mu     sync.Mutex
	meta   *auth.IssuerMetadata
	logins map[string]*login // by state
}

// login is one sign-in under way: the state names it, the nonce must come
// back in the ID token, the PKCE verifier goes with the code, and the
// binding is the digest of the login cookie's value.
type login struct {
	nonce    string
	verifier string
	binding  [32]byte
	created  time.Time
}

func newOIDCClient(cfg OIDC, v *auth.Verifier) *oidcClient {
	return &oidcClient{cfg: cfg, verifier: v, logins: map[string]*login{}}
}

// metadata returns the issuer's endpoints, discovered once as the
// verifier discovers its keys; a failure is not kept, so the next sign-in
// tries again.
func (o *oidcClient) metadata(ctx context.Context) (auth.IssuerMetadata, error) {
	o.mu.Lock()
	m := o.meta
	o.mu.Unlock()
	if m != nil {
		return *m, nil
	}
	meta, u, err := auth.DiscoverIssuer(ctx, o.cfg.HTTPClient, o.cfg.Issuer)
	if err != nil {
		return meta, err
	}
	if auth.AbsoluteURL(meta.AuthorizationEndpoint) != nil || auth.AbsoluteURL(meta.TokenEndpoint) != nil {
		return auth.IssuerMetadata{}, fmt.Errorf("%w: %s lacks an absolute authorization_endpoint or token_endpoint", auth.ErrDiscovery, u)
	}
	o.mu.Lock()
	o.meta = &meta
	o.mu.Unlock()
	return meta, nil
}

// start records a new sign-in and returns its state and the login
// cookie's value.
func (o *oidcClient) start(now time.Time) (state, cookie string, l *login) {
	state, cookie = randomToken(), randomToken()
	l = &login{nonce: randomToken(), verifier: randomToken(), binding: sha256.Sum256([]byte(cookie)), created: now}
	o.mu.Lock()
	defer o.mu.Unlock()
	makeRoom(o.logins, maxLogins, now, func(x *login) time.Time { return x.created.Add(loginTTL) })
	o.logins[state] = l
	return state, cookie, l
}

// finish takes the sign-in state names, once, if the browser holds its
// login cookie and it is not too old.
func (o *oidcClient) finish(state, cookie string, now time.Time) (*login, error) {
	o.mu.Lock()
	l, ok := o.logins[state]
	delete(o.logins, state)
	o.mu.Unlock()
	if !ok || state == "" {
		return nil, errors.New("no sign-in under way has this state: it was used, has expired, or was never started here")
	}
	b := sha256.Sum256([]byte(cookie))
	if subtle.ConstantTimeCompare(b[:], l.binding[:]) != 1 {
		return nil, errors.New("the sign-in was started in another browser")
	}
	if now.Sub(l.created) > loginTTL {
		return nil, fmt.Errorf("the sign-in took longer than %s", loginTTL)
	}
	return l, nil
}

// authorizeURL is where the browser goes to sign in: the authorization
// code flow with PKCE (S256), state and nonce.
func (o *oidcClient) authorizeURL(meta auth.IssuerMetadata, state string, l *login, loginHint string) string {
	u, _ := url.Parse(meta.AuthorizationEndpoint) // metadata checked it is an absolute URL
	sum := sha256.Sum256([]byte(l.verifier))
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", o.cfg.ClientID)
	q.Set("redirect_uri", o.cfg.RedirectURL)
	q.Set("scope", "openid")
	q.Set("state", state)
	q.Set("nonce", l.nonce)
	q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
	q.Set("code_challenge_method", "S256")
	if loginHint != "" {
		q.Set("login_hint", loginHint)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// tokenResponse is the token endpoint's answer.
type tokenResponse struct {
	IDToken     string `json:"id_token"`
	AccessToken string `json:"access_token"`
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// redeem trades the code for tokens at the token endpoint,
// authenticating the page with client_secret_basic (or, without a
// secret, as a public client) and proving the sign-in with the PKCE
// verifier.
func (o *oidcClient) redeem(ctx context.Context, meta auth.IssuerMetadata, code string, l *login) (tokenResponse, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {o.cfg.RedirectURL},
		"code_verifier": {l.verifier},
	}
	if o.cfg.ClientSecret == "" {
		form.Set("client_id", o.cfg.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, meta.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return tokenResponse{}, fmt.Errorf("redeeming the code: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if o.cfg.ClientSecret != "" {
		// RFC 6749 section 2.3.1: both are form-encoded before basic auth.
		req.SetBasicAuth(url.QueryEscape(o.cfg.ClientID), url.QueryEscape(o.cfg.ClientSecret))
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		return tokenResponse{}, fmt.Errorf("redeeming the code: %w", err)
	}
	defer resp.Body.Close()
	var tr tokenResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProviderBytes)).Decode(&tr); err != nil {
		return tokenResponse{}, fmt.Errorf("redeeming the code: the token endpoint answered %s: %w", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		return tokenResponse{}, fmt.Errorf("redeeming the code: the token endpoint answered %s: %s %s", resp.Status, tr.Error, tr.Description)
	}
	if tr.IDToken == "" {
		return tokenResponse{}, errors.New("redeeming the code: the token endpoint sent no id_token (is openid among the client's scopes?)")
	}
	return tr, nil
}

// keysReady waits up to [keysWait] for the verifier to know the issuer's
// keys. Each Verify while they are unknown brings the next discovery
// attempt forward (at most one a second), so waiting costs no more than
// the issuer's answer.
func (o *oidcClient) keysReady(ctx context.Context) error {
	deadline := time.Now().Add(keysWait)
	for !o.verifier.Ready() {
		_, _ = o.verifier.Verify(ctx, "not-a-token")
		if time.Now().After(deadline) {
			return fmt.Errorf("the keys of %s are not known yet: is it reachable from the gateway?", o.cfg.Issuer)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// identify verifies the ID token (signature by the issuer's keys, iss,
// aud = the client id, exp, and the nonce of this sign-in) and returns
// the caller it names, with the groups of the policy's claim. An ID token
// without that claim takes it from the access token issued with it, when
// that is a JWT of the same issuer for the same client and subject: many
// providers put groups in access tokens only.
func (o *oidcClient) identify(ctx context.Context, tr tokenResponse, l *login) (*auth.Caller, error) {
	if err := o.keysReady(ctx); err != nil {
		return nil, fmt.Errorf("verifying the ID token: %w", err)
	}
	c, err := o.verifier.Verify(ctx, tr.IDToken)
	if err != nil {
		return nil, fmt.Errorf("verifying the ID token: %w", err)
	}
	claims := jwt.MapClaims{}
	// The signature verified just above: this reads the same bytes.
	if _, _, err := jwt.NewParser().ParseUnverified(tr.IDToken, claims); err != nil {
		return nil, fmt.Errorf("reading the ID token: %w", err)
	}
	nonce, _ := claims["nonce"].(string)
	if subtle.ConstantTimeCompare([]byte(nonce), []byte(l.nonce)) != 1 {
		return nil, errors.New("verifying the ID token: its nonce is not this sign-in's")
	}
	if azp, ok := claims["azp"].(string); ok && azp != o.cfg.ClientID {
		return nil, fmt.Errorf("verifying the ID token: it was issued to client %q (azp)", azp)
	}
	if auth.ClaimAt(claims, o.cfg.Policy.Claim()) == nil && tr.AccessToken != "" {
		if at, err := o.verifier.Verify(ctx, tr.AccessToken); err == nil && at.Subject == c.Subject {
			c.Groups = at.Groups
		}
	}
	c.Scopes, c.ClientID = nil, o.cfg.ClientID
	return c, nil
}

// serveOIDCSignIn sends the browser to the authorization server.
func (p *Page) serveOIDCSignIn(w http.ResponseWriter, r *http.Request) {
	if p.oidc == nil {
		p.renderSignIn(w, r, http.StatusMethodNotAllowed, "", false)
		return
	}
	meta, err := p.oidc.metadata(r.Context())
	if err == nil {
		// Sent off only when the answer can be checked on return.
		err = p.oidc.keysReady(r.Context())
	}
	if err != nil {
		p.log.Warn("cannot sign approvers in", "error", err)
		p.render(w, r, http.StatusBadGateway, messageView{Title: "Sign-in unavailable", Message: "The authorization server cannot be reached: " + err.Error(), Bad: true})
		return
	}
	state, cookie, l := p.oidc.start(time.Now())
	p.setCookie(w, r, loginCookie, cookie, int(loginTTL/time.Second), http.SameSiteLaxMode)
	http.Redirect(w, r, p.oidc.authorizeURL(meta, state, l, r.URL.Query().Get("login_hint")), http.StatusFound)
}

// serveCallback finishes a sign-in: state, login cookie, code, ID token,
// roles; then a session. The answer is a page that moves on to the list
// by itself rather than a redirect: the callback is a navigation from the
// authorization server's site, and a browser would not send the new
// SameSite=Strict cookie along a redirect chain that started there.
func (p *Page) serveCallback(w http.ResponseWriter, r *http.Request) {
	if p.oidc == nil {
		p.render(w, r, http.StatusNotFound, messageView{Title: "Not found", Message: "Approvers sign in with a token here.", Bad: true})
		return
	}
	p.setCookie(w, r, loginCookie, "", -1, http.SameSiteLaxMode)
	q := r.URL.Query()
	var cookie string
	if c, err := r.Cookie(loginCookie); err == nil {
		cookie = c.Value
	}
	fail := func(status int, err error) {
		p.log.Warn("refusing an approver sign-in", "error", err)
		p.renderSignIn(w, r, status, "Sign-in failed: "+err.Error(), true)
	}
	l, err := p.oidc.finish(q.Get("state"), cookie, time.Now())
	if err != nil {
		fail(http.StatusBadRequest, err)
		return
	}
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, fmt.Errorf("the authorization server said %s: %s", e, q.Get("error_description")))
		return
	}
	meta, err := p.oidc.metadata(r.Context())
	if err != nil {
		fail(http.StatusBadGateway, err)
		return
	}
	tr, err := p.oidc.redeem(r.Context(), meta, q.Get("code"), l)
	if err != nil {
		fail(http.StatusBadGateway, err)
		return
	}
	c, err := p.oidc.identify(r.Context(), tr, l)
	if err != nil {
		fail(http.StatusUnauthorized, err)
		return
	}
	pol := p.oidc.cfg.Policy
	if err := pol.Authorize(c); err != nil {
		c.Roles = nil
	}
	approver := len(c.Roles) > 0 && pol.For(c).Approve
	id := p.sessions.create(&session{name: c.Subject, roles: c.Roles, approver: approver}, time.Now())
	p.setCookie(w, r, sessionCookie, id, 0, http.SameSiteStrictMode)
	p.log.Info("signed in at the authorization server", "subject", c.Subject, "roles", c.Roles, "approver", approver)
	p.render(w, r, http.StatusOK, signedInView{Who: c.Subject})
}
