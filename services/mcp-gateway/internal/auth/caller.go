package auth

import "context"

// Caller is who sent a request to /mcp, as the token check established it.
// It never holds the token itself: the token stays in the HTTP layer and is
// neither forwarded nor logged (no token passthrough).
type Caller struct {
	// Subject is the token's sub claim; a gateway with a static token or
	// none names its one caller [StaticSubject].
	Subject string
	// ClientID is the OAuth client the token was issued to (azp or
	// client_id), when the token says.
	ClientID string
	// Groups are the values of the policy claim (expose.agent.mcp.policy
	// .claim), a string or list of strings in the token.
	Groups []string
	// Scopes are the token's scopes (scope or scp).
	Scopes []string
	// Roles are the policy roles the caller matched, sorted; empty when
	// no policy is configured.
	Roles []string
	// Static marks the one caller of a gateway without OAuth (see
	// [StaticSubject]). Only the static check sets it, so no token can
	// claim it by its sub.
	Static bool
}

// StaticSubject is the subject of the one caller of a gateway without
// OAuth: whoever holds the shared token, or anyone reaching the port when
// there is none.
const StaticSubject = "static-token"

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries, or nil.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}
