package approval

import "errors"

// Sentinels of the package; every error it returns wraps one of them (or a
// NATS error), so callers test with errors.Is.
var (
	// ErrInvalidConfig is a [Config] or [Options] that cannot be used.
	ErrInvalidConfig = errors.New("invalid approvals config")
	// ErrInvalidRequest is a [Pending] that cannot be put to an operator:
	// a field out of bounds, a malformed digest.
	ErrInvalidRequest = errors.New("invalid approval request")
	// ErrInvalidMessage is a message that is not valid JSON, is too large,
	// or does not match its schema, received or about to be sent.
	ErrInvalidMessage = errors.New("invalid approval message")
	// ErrTooManyPending refuses a request while the broker already waits
	// on [Options.MaxPending] of them.
	ErrTooManyPending = errors.New("too many approval requests pending")
	// ErrClosed is a broker that has been closed.
	ErrClosed = errors.New("approval broker closed")
	// ErrWithdrawn is a request its caller gave up on (its context ended)
	// before anyone answered; it was withdrawn everywhere.
	ErrWithdrawn = errors.New("approval request withdrawn")
	// ErrRefused is an answer the instance that asked refused; the
	// [Reply] says why.
	ErrRefused = errors.New("answer refused")
	// ErrNotFound is a request id no instance lists as pending.
	ErrNotFound = errors.New("no such pending approval request")
	// ErrInstanceGone is an answer sent to an instance that no longer
	// listens: it stopped, and its requests were withdrawn with it.
	ErrInstanceGone = errors.New("the instance that asked is gone")
	// ErrNotPermitted is a subject this connection's NATS user may not
	// publish or subscribe to; the error names the permission to grant.
	ErrNotPermitted = errors.New("not permitted by NATS")
)
