package mcpserver

import (
	"errors"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
)

// Errors returned by [New], [Build], [Server.SetTools] and [Server.Serve].
// Each is wrapped with the detail that names what to fix.
var (
	// ErrInvalidConfig is a [Config] that cannot be served.
	ErrInvalidConfig = errors.New("invalid MCP server config")
	// ErrCollision is two tools claiming one name ([call.ErrCollision]).
	ErrCollision = call.ErrCollision
	// ErrListen is an address the server could not bind.
	ErrListen = errors.New("listening for MCP clients")
	// errServing is the listener failing while serving.
	errServing = errors.New("serving MCP")
)

// Errors that deny an approval presented on a retried call. They end up in
// the in-band denial text.
var (
	errApprovalUnknown  = errors.New("the approval is unknown or was already used")
	errApprovalExpired  = errors.New("the approval expired")
	errApprovalMismatch = errors.New("the approval was given for another tool or other arguments")
	errApprovalsFull    = errors.New("too many approvals are pending")
)

// Why a task's call was cancelled, as the task's statusMessage says, and
// the refusal of a task beyond expose.agent.mcp.max_tasks (tasks.ErrFull).
var (
	errTaskCancelled    = tasks.ErrCancelled
	errTaskRequestEnded = errors.New("the request that created it ended before the call was cleared to run")
	errTaskSessionEnded = tasks.ErrSessionEnded
	errTaskStopping     = tasks.ErrStopping
)
