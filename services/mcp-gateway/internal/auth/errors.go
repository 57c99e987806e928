package auth

import "errors"

// Sentinels of [Verifier.Verify] and [NewVerifier]. Each refusal wraps
// exactly one of the token sentinels; its text is what a 401's
// error_description and body say, so it names the check that failed and
// holds nothing taken from the token.
var (
	// ErrNoToken: the request has no Authorization: Bearer header.
	ErrNoToken = errors.New("no bearer token in the Authorization header")
	// ErrMalformed: the header or the token cannot be read as a JWT.
	ErrMalformed = errors.New("malformed token")
	// ErrAlgorithm: the token's alg is not one of
	// expose.agent.mcp.auth.algorithms (none and HMAC never are).
	ErrAlgorithm = errors.New("signature algorithm not accepted")
	// ErrUnknownKey: the token's kid is not in the issuer's key set, even
	// after a refetch (or a refetch was not allowed yet).
	ErrUnknownKey = errors.New("signing key not in the issuer's key set")
	// ErrSignature: the signature does not verify with the key.
	ErrSignature = errors.New("bad signature")
	// ErrExpired: exp is missing or has passed (beyond the leeway).
	ErrExpired = errors.New("token expired")
	// ErrNotYetValid: nbf or iat lies in the future (beyond the leeway).
	ErrNotYetValid = errors.New("token not valid yet")
	// ErrIssuer: iss is missing or not the configured issuer.
	ErrIssuer = errors.New("wrong issuer")
	// ErrAudience: aud does not contain the gateway's audience.
	ErrAudience = errors.New("wrong audience")
	// ErrTokenType: the typ header says the token is not an access token.
	ErrTokenType = errors.New("not an access token (typ)")
	// ErrSubject: the token has no sub.
	ErrSubject = errors.New("token has no subject")
	// ErrScope: a valid token lacks a required scope (403, not 401).
	ErrScope = errors.New("insufficient scope")
	// ErrUnavailable: the issuer's metadata or keys are not known yet.
	ErrUnavailable = errors.New("issuer keys not available yet")

	// ErrDiscovery: the issuer's metadata could not be fetched or is
	// wrong; discovery is retried.
	ErrDiscovery = errors.New("discovering the issuer")
	// ErrInvalidConfig: [NewVerifier] was given an unusable [Config].
	ErrInvalidConfig = errors.New("invalid auth config")
)

// tokenSentinels are the refusals a request can get, in the order they
// are looked for in an error chain.
var tokenSentinels = []error{
	ErrNoToken, ErrMalformed, ErrAlgorithm, ErrUnknownKey, ErrSignature,
	ErrExpired, ErrNotYetValid, ErrIssuer, ErrAudience, ErrTokenType,
	ErrSubject, ErrScope, ErrUnavailable,
}

// sentinel returns the token sentinel err wraps, or ErrMalformed.
func sentinel(err error) error {
	for _, s := range tokenSentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return ErrMalformed
}
