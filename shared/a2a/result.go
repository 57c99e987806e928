package a2a

import (
	"github.com/fiskfleet/fiskfleet/schemas"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// ProtocolCommandResult is the protocol id an agent lists in its card's
// protocols when every tool on the card runs one command: a call that ran
// is answered with a tool.reply whose exec is set (the command line, its
// exit code, whether the output was cut) and whose output is the
// command's output, what [ToolReply.CommandResult] reads as a
// [tool.CommandResult]; an in-band failure (is_error) carries no exec. A
// gateway importing the agent's tools then declares the result's output
// schema for them before the first call, as it does for its own
// commands. Like [ProtocolCallCancel] it names a promise, not a message
// kind, so the card stays what v1 receivers accept (the tool descriptor
// is closed to new keys); an agent that does not list it (Fisk AI's own
// v1 agents) promises nothing and its tools declare no output schema.
const ProtocolCommandResult = schemas.ProtocolPrefix + "tool.command-result"

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
