package mcpserver

import (
	"errors"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
)

// Errors returned by [New], [Build], and [Server.SetTools].
// Each is wrapped with the detail that names what to fix.
var (
	// ErrInvalidConfig is a [Config] that cannot be served.
	ErrInvalidConfig = errors.New("invalid MCP server config")
	// ErrCollision is two tools claiming one name ([call.ErrCollision]).
	ErrCollision = call.ErrCollision
)

// Errors that deny an approval presented on a retried call. They end up in
// the in-band denial text.
var (
	errApprovalUnknown  = errors.New("the approval is unknown or was already used")
	errApprovalExpired  = errors.New("the approval expired")
	errApprovalMismatch = errors.New("the approval was given for another tool or other arguments")
	errApprovalsFull    = errors.New("too many approvals are pending")
)

// errTaskRequestEnded is why a task's call was cancelled when the request
// that made it went away first, as the task's statusMessage says.
var errTaskRequestEnded = errors.New("the request that created it ended before the call was cleared to run")
