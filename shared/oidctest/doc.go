// Package oidctest runs a real OpenID provider in-process, on 127.0.0.1,
// for tests of the gateway as an OAuth 2.1 protected resource.
//
// The provider is zitadel's op package (github.com/zitadel/oidc/v3/pkg/op),
// a certified OpenID provider library, behind a small front mux that adds
// what op leaves to its host or does not do:
//
//   - an automatic login (no UI): the authorization request's login_hint
//     names the user, else the first of [Config.Users] logs in;
//   - RFC 7591 dynamic client registration at /register, advertised as
//     registration_endpoint in the discovery document, as MCP clients
//     expect;
//   - the RFC 8707 resource parameter: an access token's aud is the
//     resource the authorization (or client credentials) request named;
//   - RFC 8414 metadata at /.well-known/oauth-authorization-server (with
//     the issuer path inserted), the same document as OpenID discovery.
//
// Access tokens are JWTs signed with RS256 and carry sub, scope, azp,
// client_id and the user's groups. Tests also mint tokens directly with
// [Provider.Mint] and [Provider.MintWith] (any claims, any header, the
// provider's key or another [Key]), rotate the signing key with
// [Provider.RotateKey], and take the provider off the network with
// [Provider.Stop] and back with [Provider.Start].
//
// Only _test.go files import this package (.ci/check-deps enforces it), so
// no binary links zitadel.
package oidctest
