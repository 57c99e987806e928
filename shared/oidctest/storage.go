package oidctest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

var (
	errNotFound    = errors.New("not found")
	errUnknownUser = errors.New("login_hint names no user of the provider")
)

// storage is the provider's op.Storage, all in memory: clients, pending
// authorization requests and their codes. Tokens are JWTs and are not
// stored, so nothing can be revoked.
type storage struct {
	p *Provider

	// mu guards clients, requests and codes.
	mu       sync.Mutex
	clients  map[string]*client
	requests map[string]*authRequest
	codes    map[string]string // code -> request id
}

func newStorage(p *Provider) *storage {
	return &storage{
		p:        p,
		clients:  make(map[string]*client),
		requests: make(map[string]*authRequest),
		codes:    make(map[string]string),
	}
}

// resourceKey carries the RFC 8707 resource parameters of a request to
// the storage methods op calls while serving it.
type resourceKey struct{}

// withParams adapts a request's parameters for op, which reads r.Form:
// the RFC 8707 resource parameters go into the context (op ignores them,
// and its storage only sees the context); an authorization request gets
// scope "openid" when it names none (op refuses an empty scope, and an
// MCP client asks for none when the resource advertises none), and loses
// offline_access (the provider issues no refresh tokens).
func withParams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if res := r.Form["resource"]; len(res) > 0 {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
		}
		if strings.HasSuffix(r.URL.Path, "/authorize") {
			scopes := slices.DeleteFunc(strings.Fields(r.Form.Get("scope")), func(s string) bool { return s == oidc.ScopeOfflineAccess })
			if len(scopes) == 0 {
				scopes = []string{oidc.ScopeOpenID}
			}
			r.Form.Set("scope", strings.Join(scopes, " "))
		}
		next.ServeHTTP(w, r)
	})
}

// audience is what a token for a request in ctx is for: the resources the
// request named, else the configured audience, else nothing (op then uses
// the client id).
func (s *storage) audience(ctx context.Context) []string {
	if res, ok := ctx.Value(resourceKey{}).([]string); ok {
		return res
	}
	if s.p.cfg.Audience != "" {
		return []string{s.p.cfg.Audience}
	}
	return nil
}

// login logs in the user the request's login_hint names.
func (s *storage) login(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return fmt.Errorf("authorization request %q: %w", id, errNotFound)
	}
	u, ok := s.p.user(req.LoginHint)
	if !ok {
		return fmt.Errorf("%w: %q", errUnknownUser, req.LoginHint)
	}
	req.subject, req.authTime, req.done = u.Subject, time.Now(), true
	return nil
}

func (s *storage) CreateAuthRequest(ctx context.Context, in *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	req := &authRequest{AuthRequest: *in, id: randomID(), audience: s.audience(ctx)}
	if in.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: in.CodeChallenge, Method: in.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return nil, fmt.Errorf("authorization request %q: %w", id, errNotFound)
	}
	return req, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[s.codes[code]]
	if !ok {
		return nil, fmt.Errorf("code: %w", errNotFound)
	}
	return req, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return randomID(), time.Now().Add(s.p.cfg.TokenLifetime), nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("oidctest issues no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{s.p.Key()}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet publishes the current key only: a rotated-out key is gone at once.
func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.p.Key()}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, fmt.Errorf("client %q: %w", id, errNotFound)
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	_, err := s.ClientCredentials(ctx, id, secret)
	return err
}

// SetUserinfoFromScopes names the user in the ID token: OpenID Connect
// requires its sub, and zitadel copies this over the token's.
func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, _ []string) error {
	info.Subject = userID
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, _, subject, clientID string) error {
	resp.Subject, resp.ClientID = subject, clientID
	return nil
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	return s.privateClaims(userID, clientID, scopes), nil
}

// GetPrivateClaimsFromRequest puts scope, azp and the user's groups and
// claims in access tokens; op itself sets only the registered claims.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, scopes []string) (map[string]any, error) {
	var clientID string
	if c, ok := req.(interface{ GetClientID() string }); ok {
		clientID = c.GetClientID()
	}
	return s.privateClaims(req.GetSubject(), clientID, scopes), nil
}

func (s *storage) privateClaims(subject, clientID string, scopes []string) map[string]any {
	claims := make(map[string]any)
	if u, ok := s.p.user(subject); ok && subject != "" {
		for k, v := range u.Claims {
			claims[k] = v
		}
		if u.Groups != nil {
			claims[s.p.cfg.GroupsClaim] = u.Groups
		}
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	if clientID != "" {
		claims["azp"] = clientID
	}
	return claims
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, fmt.Errorf("client keys: %w", errNotFound)
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

// ClientCredentials authenticates a confidential client.
func (s *storage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok || c.secret == "" || c.secret != secret {
		return nil, fmt.Errorf("client %q: wrong id or secret", id)
	}
	return c, nil
}

// ClientCredentialsTokenRequest makes the token request of a client acting
// for itself: its subject is the client id.
func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &clientRequest{clientID: id, scopes: scopes, audience: s.audience(ctx)}, nil
}

// authRequest is one authorization request, pending until login.
type authRequest struct {
	oidc.AuthRequest
	id        string
	audience  []string
	challenge *oidc.CodeChallenge
	subject   string
	authTime  time.Time
	done      bool
}

func (r *authRequest) GetID() string                         { return r.id }
func (r *authRequest) GetACR() string                        { return "" }
func (r *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (r *authRequest) GetAudience() []string                 { return r.audience }
func (r *authRequest) GetAuthTime() time.Time                { return r.authTime }
func (r *authRequest) GetClientID() string                   { return r.ClientID }
func (r *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return r.challenge }
func (r *authRequest) GetNonce() string                      { return r.Nonce }
func (r *authRequest) GetRedirectURI() string                { return r.RedirectURI }
func (r *authRequest) GetResponseType() oidc.ResponseType    { return r.ResponseType }
func (r *authRequest) GetResponseMode() oidc.ResponseMode    { return r.ResponseMode }
func (r *authRequest) GetScopes() []string                   { return r.Scopes }
func (r *authRequest) GetState() string                      { return r.State }
func (r *authRequest) GetSubject() string                    { return r.subject }
func (r *authRequest) Done() bool                            { return r.done }

// clientRequest is a client credentials token request.
type clientRequest struct {
	clientID string
	scopes   []string
	audience []string
}

func (r *clientRequest) GetSubject() string    { return r.clientID }
func (r *clientRequest) GetClientID() string   { return r.clientID }
func (r *clientRequest) GetAudience() []string { return r.audience }
func (r *clientRequest) GetScopes() []string   { return r.scopes }

// signingKey and publicKey adapt a [Key] to op.
type signingKey struct{ k *Key }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.k.priv }
func (k signingKey) ID() string                                  { return k.k.ID }

type publicKey struct{ k *Key }

func (k publicKey) ID() string                         { return k.k.ID }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.k.Public() }
