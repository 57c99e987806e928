package approvalweb

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// Defaults of a [Config].
const (
	// DefaultSessionIdle is how long a session lives without a request:
	// long enough to read a few command lines between two answers, short
	// enough that a forgotten browser tab stops being an approver soon.
	DefaultSessionIdle = 30 * time.Minute
	// DefaultSessionMax is how long a session lives at most, however busy:
	// an approver signs in again at least once a working day, so a stolen
	// cookie or a removed approver does not last.
	DefaultSessionMax = 12 * time.Hour
	// DefaultMaxSessions bounds the session table. Approvers are a handful
	// of people; the bound keeps a flood of sign-ins (a leaked token, a
	// script) from growing the table without end. When it is full the
	// session closest to its end makes room.
	DefaultMaxSessions = 1024
	// MinTokenLength is the shortest approver token accepted: a token is a
	// password nobody types twice a day, so it can be long enough that
	// guessing it over HTTP is hopeless.
	MinTokenLength = 16
)

// Config is what a [Page] serves with. Exactly one of Tokens and OIDC
// says how approvers sign in.
type Config struct {
	// Identity is the agent identity whose requests the page shows and
	// answers; empty means every identity of the fleet.
	Identity string
	// NATS is the gateway's connection: it lists, watches and answers
	// requests, so its NATS user needs the permissions of an operator
	// (approval.AnswersPermission). It stays the caller's, who closes it
	// after [Page.Close].
	NATS *nats.Conn
	// Signer, when set, is the gateway's nkey (approvals.signing_key):
	// the page signs the answers it sends with it, for agents that take
	// only signed answers, which record the signed-in approver "via" the
	// key's holder.
	Signer nkeys.KeyPair
	// Logger receives every answer (approver, id, decision, outcome) and
	// refused sign-ins; nil means slog.Default().
	Logger *slog.Logger

	// Tokens sign approvers in with a token of their own
	// (approvals.approvers, each token_env resolved), for a gateway
	// without OAuth.
	Tokens []Token
	// OIDC signs approvers in at the gateway's authorization server
	// (approvals.web), for a gateway with OAuth.
	OIDC *OIDC

	// SessionIdle, SessionMax and MaxSessions bound sessions; zero means
	// [DefaultSessionIdle], [DefaultSessionMax], [DefaultMaxSessions].
	SessionIdle time.Duration
	SessionMax  time.Duration
	MaxSessions int

	// TrustForwardedProto takes X-Forwarded-Proto: https as proof that
	// the browser reached the page over TLS, which marks the session
	// cookie Secure and makes https://Host the page's own origin. Set it
	// only when a TLS-terminating proxy that sets (or strips) the header
	// sits in front of the gateway; off, only a TLS connection to the
	// gateway itself counts.
	TrustForwardedProto bool
}

// Token is one approver of token sign-in.
type Token struct {
	// Name is who the approver is: what answers and audit records name,
	// and what the four-eyes rule compares with the caller.
	Name string
	// Token is their secret, at least [MinTokenLength] bytes.
	Token string
}

// OIDC is sign-in at an OpenID provider: the authorization code flow with
// PKCE, the page being a confidential client of the provider.
type OIDC struct {
	// Issuer is the provider's issuer URL, as its ID tokens' iss spells it
	// (expose.agent.mcp.auth.issuer); its OpenID discovery document names
	// the endpoints and keys.
	Issuer string
	// ClientID and ClientSecret are the page's client at the provider
	// (approvals.web.client_id, client_secret_env resolved). An empty
	// secret makes the page a public client, relying on PKCE alone.
	ClientID     string
	ClientSecret string
	// RedirectURL is the absolute URL of /approvals/callback as browsers
	// reach it, registered with the provider as the client's redirect URI.
	RedirectURL string
	// Policy decides who may act: the signed-in subject's groups (the
	// policy's claim, read from the ID token, else from the access token
	// issued with it) give roles, and only a role with approve: true may
	// answer. Required: without a policy nobody could.
	Policy *policy.Policy
	// Algorithms are the accepted signature algorithms of ID tokens;
	// empty means those of expose.agent.mcp.auth's default.
	Algorithms []string
	// HTTPClient talks to the provider; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.SessionMax <= 0 {
		c.SessionMax = DefaultSessionMax
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.OIDC != nil {
		o := *c.OIDC
		if o.HTTPClient == nil {
			o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
		}
		c.OIDC = &o
	}
	return c
}

// Validate reports a config [New] refuses, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	if c.NATS == nil {
		return fmt.Errorf("%w: no NATS connection: the page lists and answers requests over the gateway's nats_context", ErrInvalidConfig)
	}
	if c.Identity != "" {
		if err := a2a.CheckIdentity(c.Identity); err != nil {
			return fmt.Errorf("%w: identity: %w", ErrInvalidConfig, err)
		}
	}
	switch {
	case len(c.Tokens) > 0 && c.OIDC != nil:
		return fmt.Errorf("%w: both approvals.approvers and approvals.web: approvers sign in one way, remove one", ErrInvalidConfig)
	case len(c.Tokens) == 0 && c.OIDC == nil:
		return fmt.Errorf("%w: nobody can sign in: add approvals.approvers (without OAuth) or approvals.web (with expose.agent.mcp.auth)", ErrInvalidConfig)
	}
	names := map[string]bool{}
	tokens := map[string]string{}
	for i, t := range c.Tokens {
		switch {
		case t.Name == "":
			return fmt.Errorf("%w: approvals.approvers[%d] has no name", ErrInvalidConfig, i)
		case names[t.Name]:
			return fmt.Errorf("%w: approver %q is listed twice", ErrInvalidConfig, t.Name)
		case len(t.Token) < MinTokenLength:
			return fmt.Errorf("%w: approver %q has a token of %d bytes, fewer than %d: set its token_env variable to a long random secret", ErrInvalidConfig, t.Name, len(t.Token), MinTokenLength)
		}
		if other, dup := tokens[t.Token]; dup {
			return fmt.Errorf("%w: approvers %q and %q share a token, so answers could not say who gave them: give each their own", ErrInvalidConfig, other, t.Name)
		}
		names[t.Name], tokens[t.Token] = true, t.Name
	}
	if o := c.OIDC; o != nil {
		if err := auth.AbsoluteURL(o.Issuer); err != nil {
			return fmt.Errorf("%w: issuer: %w", ErrInvalidConfig, err)
		}
		if err := auth.AbsoluteURL(o.RedirectURL); err != nil {
			return fmt.Errorf("%w: redirect URL: %w", ErrInvalidConfig, err)
		}
		if o.ClientID == "" {
			return fmt.Errorf("%w: approvals.web.client_id is empty", ErrInvalidConfig)
		}
		if o.Policy == nil {
			return fmt.Errorf("%w: signing in at the authorization server needs expose.agent.mcp.policy with a role of approve: true, or nobody may answer", ErrInvalidConfig)
		}
	}
	return nil
}
