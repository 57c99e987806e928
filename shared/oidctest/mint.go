package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is an RS256 signing key with its key id (kid).
type Key struct {
	// ID is the kid tokens signed with the key carry in their header.
	ID   string
	priv *rsa.PrivateKey
}

// NewKey makes a fresh 2048-bit RSA key under a random kid. A key the
// provider does not publish signs tokens a verifier must refuse (unknown
// kid); see [Key.Renamed] for a wrong key under a known kid.
func NewKey(tb testing.TB) *Key {
	tb.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("oidctest: generating an RSA key: %v", err)
	}
	return &Key{ID: randomID(), priv: priv}
}

// Renamed is the same private key under kid id: signed with the provider's
// kid but another key, a token has a bad signature.
func (k *Key) Renamed(id string) *Key { return &Key{ID: id, priv: k.priv} }

// Public is the key's public half, as the key set publishes it.
func (k *Key) Public() crypto.PublicKey { return k.priv.Public() }

// Claims are valid access token claims for the first user: issued by the
// provider for audience aud with the given scopes, to client "test-client",
// five minutes to live. Tests change or delete entries to make bad tokens.
func (p *Provider) Claims(aud string, scopes ...string) map[string]any {
	u := p.cfg.Users[0]
	now := time.Now()
	c := map[string]any{
		"iss":       p.issuer,
		"sub":       u.Subject,
		"aud":       aud,
		"exp":       now.Add(5 * time.Minute).Unix(),
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"jti":       randomID(),
		"client_id": "test-client",
		"azp":       "test-client",
	}
	if len(scopes) > 0 {
		c["scope"] = strings.Join(scopes, " ")
	}
	if u.Groups != nil {
		c[p.cfg.GroupsClaim] = u.Groups
	}
	return c
}

// Mint signs claims with the provider's current key, as an RFC 9068
// access token (typ at+jwt).
func (p *Provider) Mint(claims map[string]any) string {
	p.tb.Helper()
	return p.MintWith(p.Key(), nil, claims)
}

// MintWith signs claims with key using RS256. Header entries are added to
// (or, when nil, removed from) the JOSE header, which starts as
// {alg: RS256, kid: key.ID, typ: at+jwt}; alg and kid cannot be changed
// this way (use another [Key] or golang-jwt for alg none and HMAC).
func (p *Provider) MintWith(key *Key, header map[string]any, claims map[string]any) string {
	p.tb.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	for k, v := range header {
		if v == nil {
			delete(opts.ExtraHeaders, jose.HeaderKey(k))
			continue
		}
		opts.WithHeader(jose.HeaderKey(k), v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: jose.RS256,
		Key:       jose.JSONWebKey{Key: key.priv, KeyID: key.ID},
	}, opts)
	if err != nil {
		p.tb.Fatalf("oidctest: making a signer: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		p.tb.Fatalf("oidctest: encoding claims: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		p.tb.Fatalf("oidctest: signing: %v", err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		p.tb.Fatalf("oidctest: serializing: %v", err)
	}
	return token
}
