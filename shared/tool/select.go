package tool

import (
	"encoding/json"
	"strings"
)

// CommandLiner is a tool that runs one command and can show the exact line
// it would run for an input: what an approval request names, and what an
// audit record keeps for a call that did not run to its end. Its error
// tells input the command refuses from other failures. Servers look for it
// with a type assertion; *fiskapp.Command is one.
type CommandLiner interface {
	CommandLine(input json.RawMessage) (string, error)
}

// DropReason returns why t cannot be served on surface ([ExposeMCP] or
// [ExposeA2A]), or "" when nothing about t itself stops it. Both servers
// drop such a tool and show the reason in `info` and the startup log, so
// the rules and their wording live here, in the order they are checked:
//
//   - t does not allow surface: exposure is the ceiling every other rule
//     sits under, so it is named first;
//   - t cannot say whether it is gated: refused rather than served
//     ungated, since an absent gate must not pass for no gate;
//   - its name breaks [ValidName];
//   - its model description is empty ([ReasonEmptyDescription]).
//
// A server's own rules and name collisions come after these ([Select]).
func DropReason(t Tool, surface Exposure) string {
	switch {
	case !t.Exposure().Allows(surface):
		return "not exposed over " + strings.ToUpper(surface.String()) + " (posture " + t.Exposure().String() + ")"
	case t.Confirmation() == ConfirmUnknown:
		return "cannot say whether it is gated; refused rather than served ungated"
	case !ValidName(t.Name()):
		return "invalid name: must match " + NamePattern()
	case t.ModelDescription() == "":
		return ReasonEmptyDescription
	}
	return ""
}

// ReasonNameTaken is why [Select] drops a tool whose name an earlier tool
// in the list already holds: tools are addressed by name alone, so only
// one of them can be served, and the first claim wins.
const ReasonNameTaken = "name already served by an earlier tool"

// Select splits tools into the served set, in their order, and the dropped
// ones with their reasons. A tool is dropped for the first of: a
// [DropReason] on surface; the reason extra returns, when extra is not nil
// and returns one; a name an earlier served tool holds ([ReasonNameTaken]).
//
// extra is a server's own rule, such as the agent's refusal of gated tools
// nobody can approve. It is asked only about tools that pass every shared
// rule, so a tool that is broken in itself is reported for that first:
// fixing the server's configuration would not get it served. A tool
// dropped for any reason claims no name.
func Select(tools []Tool, surface Exposure, extra func(Tool) string) (served []Tool, dropped []Dropped) {
	taken := make(map[string]bool, len(tools))
	for _, t := range tools {
		name := t.Name()
		reason := DropReason(t, surface)
		if reason == "" && extra != nil {
			reason = extra(t)
		}
		if reason == "" && taken[name] {
			reason = ReasonNameTaken
		}
		if reason != "" {
			dropped = append(dropped, Dropped{Name: name, Reason: reason})
			continue
		}
		taken[name] = true
		served = append(served, t)
	}
	return served, dropped
}
