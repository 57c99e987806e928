package approval

import (
	"fmt"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// DefaultTimeout is how long a request waits for an operator when
// [Config.Timeout] is zero: long enough for someone watching to read the
// command line and decide, short enough that a caller nobody attends to
// learns it was denied within minutes instead of holding on for good.
const DefaultTimeout = 2 * time.Minute

// Config is an identity's operator approvals, as the approvals key of
// agent.yaml holds them. The zero value is off, which leaves every service
// as it was.
type Config struct {
	// Operator turns operator approvals on: a gated tool is served to
	// callers that cannot be asked themselves, and waits for an operator
	// over NATS. The [Broker] does not read it; the services do, to decide
	// whether to start one.
	Operator bool
	// Timeout is how long a request waits for an answer before it is
	// denied; zero means [DefaultTimeout].
	Timeout time.Duration
	// SelfApproval lets an approver answer a request whose caller is
	// themselves. Off (the default) is the four-eyes rule: somebody other
	// than the caller must approve.
	SelfApproval bool
	// Signers, when set, are the approvers by public user nkey: only
	// answers signed with one of these keys are taken, and the approver
	// is the key's name (approvals.approvers[].nkey).
	Signers map[string]Signer
}

// Signer is one listed key's holder: its name, and whether the key signs
// for others (Delegate), such as the gateway for the people its
// /approvals page signed in; the approver is then the name the answer
// gives, recorded with the key's ("sub via web"), since the key vouches
// for that name.
type Signer = config.ApproverKey

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// Validate reports a config that cannot be used, wrapping
// [ErrInvalidConfig] and naming the agent.yaml key to fix.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("%w: approvals.timeout is %s: set a positive duration such as 2m, or leave it out for %s", ErrInvalidConfig, c.Timeout, DefaultTimeout)
	}
	return nil
}
