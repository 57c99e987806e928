package oidctest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// client is a registered OAuth client. Every client is in dev mode, so
// plain-http redirect URIs on any host work, as tests need.
type client struct {
	id           string
	secret       string // "" for a public client
	authMethod   oidc.AuthMethod
	redirectURIs []string
	grantTypes   []oidc.GrantType
	loginURL     string
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirectURIs }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType         { return c.grantTypes }
func (c *client) LoginURL(id string) string            { return c.loginURL + "?id=" + url.QueryEscape(id) }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return true }
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }

func (c *client) AuthMethod() oidc.AuthMethod {
	switch {
	case c.secret == "":
		return oidc.AuthMethodNone
	case c.authMethod != "":
		return c.authMethod
	}
	return oidc.AuthMethodBasic
}

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (p *Provider) addClient(c *client) {
	c.loginURL = p.issuer + "/login"
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.clients[c.id] = c
}

// RegisterClient adds a public client (no secret, PKCE required) for the
// authorization code flow with the given redirect URIs, as dynamic
// registration would, and returns its client id.
func (p *Provider) RegisterClient(redirectURIs ...string) string {
	c := &client{id: randomID(), redirectURIs: redirectURIs, grantTypes: []oidc.GrantType{oidc.GrantTypeCode}}
	p.addClient(c)
	return c.id
}

// AddClient adds a confidential client that may use the client
// credentials grant (HTTP basic or client_secret_post). Its tokens' sub is
// id; a [User] with that subject gives them groups.
func (p *Provider) AddClient(id, secret string) {
	p.addClient(&client{id: id, secret: secret, grantTypes: []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeCode}})
}

// registration is the RFC 7591 client metadata the provider reads and
// answers with.
type registration struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at,omitempty"`
	ClientSecretExpiresAt   *int64   `json:"client_secret_expires_at,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

// register is the RFC 7591 registration endpoint, open to anyone (no
// initial access token). A client asking for token_endpoint_auth_method
// "none" is public; any other gets a secret for client_secret_basic or
// client_secret_post.
func (p *Provider) register(w http.ResponseWriter, r *http.Request) {
	var reg registration
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&reg); err != nil {
		registrationError(w, "invalid_client_metadata", "decoding the request: "+err.Error())
		return
	}
	if len(reg.RedirectURIs) == 0 {
		registrationError(w, "invalid_redirect_uri", "redirect_uris is required")
		return
	}
	for _, u := range reg.RedirectURIs {
		if parsed, err := url.Parse(u); err != nil || !parsed.IsAbs() || parsed.Fragment != "" {
			registrationError(w, "invalid_redirect_uri", "redirect URI "+u+" is not an absolute URI without fragment")
			return
		}
	}
	switch reg.TokenEndpointAuthMethod {
	case "":
		reg.TokenEndpointAuthMethod = string(oidc.AuthMethodBasic)
	case string(oidc.AuthMethodNone), string(oidc.AuthMethodBasic), string(oidc.AuthMethodPost):
	default:
		registrationError(w, "invalid_client_metadata", "token_endpoint_auth_method "+reg.TokenEndpointAuthMethod+" is not supported")
		return
	}
	if len(reg.GrantTypes) == 0 {
		reg.GrantTypes = []string{string(oidc.GrantTypeCode)}
	}
	if len(reg.ResponseTypes) == 0 {
		reg.ResponseTypes = []string{string(oidc.ResponseTypeCode)}
	}
	c := &client{id: randomID(), redirectURIs: reg.RedirectURIs}
	for _, g := range reg.GrantTypes {
		c.grantTypes = append(c.grantTypes, oidc.GrantType(g))
	}
	if !slices.Contains(c.grantTypes, oidc.GrantTypeCode) {
		c.grantTypes = append(c.grantTypes, oidc.GrantTypeCode)
	}
	if reg.TokenEndpointAuthMethod != string(oidc.AuthMethodNone) {
		c.secret, c.authMethod = randomID(), oidc.AuthMethod(reg.TokenEndpointAuthMethod)
		var never int64
		reg.ClientSecret, reg.ClientSecretExpiresAt = c.secret, &never
	}
	p.addClient(c)
	reg.ClientID, reg.ClientIDIssuedAt = c.id, time.Now().Unix()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(reg)
}

func registrationError(w http.ResponseWriter, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}
