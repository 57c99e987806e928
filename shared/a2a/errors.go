package a2a

import "errors"

// Errors of the message model, codec and client. Callers test with
// [errors.Is]; every returned error wraps one of these with its cause.
var (
	// ErrInvalidIdentity is an identity or instance that does not match
	// [IdentityPattern].
	ErrInvalidIdentity = errors.New("invalid identity")
	// ErrTooLarge is a message over [MaxMessageSize], rejected before it is
	// parsed.
	ErrTooLarge = errors.New("message too large")
	// ErrInvalidMessage is a message that is not one JSON object valid
	// against its schema: malformed JSON, a repeated key, a schema
	// violation, or a value that does not marshal.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrUnexpectedProtocol is a message whose protocol id is not the one
	// the receiver expected.
	ErrUnexpectedProtocol = errors.New("unexpected protocol")
	// ErrUnknownProtocol is a protocol id with no schema.
	ErrUnknownProtocol = errors.New("unknown protocol")
	// ErrEmptyBlock is a block with no content, refused on marshal.
	ErrEmptyBlock = errors.New("empty block")
	// ErrUnknownBlock is a block whose type is not one of the six.
	ErrUnknownBlock = errors.New("unknown block type")
)

// errSyntax is a body that is not one JSON value. It is returned only
// wrapped in [ErrInvalidMessage].
var errSyntax = errors.New("syntax error")

// Errors of a round trip.
var (
	// ErrAgentUnavailable is an agent that did not answer: no responders on
	// its subject, or no reply before the deadline.
	ErrAgentUnavailable = errors.New("agent unavailable")
	// ErrRejected is a request the agent refused as malformed, mistyped or
	// oversized: a transport error, not an in-band failure.
	ErrRejected = errors.New("request rejected by agent")
	// ErrMismatchedReply is a reply that does not answer the request sent.
	ErrMismatchedReply = errors.New("reply does not match request")
	// ErrNoStreams is a stream request nobody answered: the identity's
	// agents, if it has any, serve unary calls only. It comes wrapped
	// with [ErrAgentUnavailable].
	ErrNoStreams = errors.New("no agent serves streamed calls")
	// ErrPermission is a request the transport refused to carry for the
	// caller's credentials: over NATS, a publish to the agent's subject
	// (or to a stream's control subject) that the connection's user may
	// not make. What was refused never reached the agent.
	ErrPermission = errors.New("permission denied")
)
