package knowledge

import "errors"

// Errors returned by [New], [Index.Tools] and the readers behind the tools.
// Every returned error wraps one of these with its cause.
var (
	// ErrNoDirectory is a knowledge directory that is unset, missing or not
	// a directory.
	ErrNoDirectory = errors.New("knowledge directory unavailable")
	// ErrUnknownTool is a tool name that is not one of [ToolNames].
	ErrUnknownTool = errors.New("unknown knowledge tool")
)
