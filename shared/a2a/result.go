package a2a

import "github.com/fiskfleet/fiskfleet/shared/tool"

// CommandResult rebuilds the [tool.CommandResult] a command reply carries,
// so a remote command's result is the same JSON a local one gives. It
// returns false for a reply that ran no command (an in-band error or an
// in-process tool's output).
func (r *ToolReply) CommandResult() (tool.CommandResult, bool) {
	if r.Exec == nil || r.IsError {
		return tool.CommandResult{}, false
	}
	return tool.CommandResult{
		Command:   r.Exec.Command,
		ExitCode:  r.Exec.ExitCode,
		Output:    r.Output,
		Truncated: r.Exec.Truncated,
	}, true
}
