// Package auth makes the gateway an OAuth 2.1 protected resource, as the
// MCP authorization specification describes, and establishes the
// [Caller] of every request to /mcp.
//
// A [Verifier] accepts the access tokens of one authorization server (the
// issuer): JWTs signed with one of the configured asymmetric algorithms by
// a key of the issuer's key set (JWKS), for the gateway's audience, not
// expired, carrying a subject and every required scope.
// [Verifier.Middleware] answers everything else with 401 (or 403 for a
// missing scope) and a WWW-Authenticate challenge that points the client at
// the RFC 9728 protected resource metadata ([Verifier.MetadataHandler]),
// from where an MCP client finds the issuer and starts its OAuth flow.
// [Static] is the older shared-token check, producing the one caller
// [StaticSubject].
//
// # Why golang-jwt and keyfunc
//
// No JWT is parsed here: github.com/golang-jwt/jwt/v5 parses and checks
// tokens, and github.com/MicahParks/keyfunc/v3 (over
// github.com/MicahParks/jwkset) supplies the keys. They were chosen
// because keyfunc caches the key set and refetches it, rate limited, when
// a token names an unknown kid, so the issuer can rotate keys without a
// gateway restart and a flood of made-up kids cannot turn into a flood of
// requests to the issuer; because golang-jwt takes an explicit allowlist of
// signing methods, so none and HMAC (whose secret an attacker could
// replace with the public key) are refused before any key is looked up;
// and because both are small, widely used and maintained.
//
// # Discovery
//
// The issuer's metadata is fetched here (a JSON GET, no JWT involved):
// OpenID discovery ({issuer}/.well-known/openid-configuration) first,
// then RFC 8414 (/.well-known/oauth-authorization-server with the issuer's
// path inserted). Its issuer must equal the configured one exactly; its
// jwks_uri names the keys unless expose.agent.mcp.auth.jwks_url does.
//
// [NewVerifier] needs no network: discovery runs in the background and is
// retried with backoff (1 s doubling to 30 s, and at once, at most once a
// second, while requests arrive), so a gateway whose issuer is down still
// starts, answers 401 until the keys are known, and recovers without a
// restart. Once known, the key set is refetched every 15 minutes and on
// an unknown kid; a failed refetch keeps the cached keys, so tokens signed
// by them keep working while the issuer is down.
//
// # No token passthrough
//
// The token never leaves the HTTP layer: it is not put in the request's
// context nor logged, and the Authorization header is removed from the
// request before the next handler sees it, so nothing downstream can
// forward it.
package auth
