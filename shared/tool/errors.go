package tool

import "errors"

// Errors returned by [NewFunc].
var (
	// ErrNoPosture is a built-in spec that declares no exposure: built-ins
	// are default-deny and must say where they may be served.
	ErrNoPosture = errors.New("tool declares no exposure posture")
	// ErrRemoteGated is a remote tool spec that is also gated: the serving
	// agent decides about its own tools, so a local gate would disagree.
	ErrRemoteGated = errors.New("remote tool cannot be gated")
	// ErrInvalidSpec is a spec missing a name, description or function.
	ErrInvalidSpec = errors.New("invalid tool spec")
)
