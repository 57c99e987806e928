package audit

import "github.com/fiskfleet/fiskfleet/shared/ops"

// Ending is how a tool call ended, as the service that served it says so
// in the call's log line. One value carries every spelling of that end: the
// log string ([Ending.String]), the outcome label of the calls metric
// ([Ending.Metric]), and the audit record's result and error class
// ([Ending.Result], [Ending.Class]), so no service maps one vocabulary onto
// another by hand and the four cannot drift apart.
//
// The constants are every ending the two services produce. Where they spell
// the same event differently, each keeps a constant of its own so that no
// log line, series or record changes: a command that exits non-zero logs
// "exit" on the agent ([EndA2AExit]) and "ok" on the gateway
// ([EndMCPExitNonzero]); refused arguments log "error" on the agent
// ([EndA2AInvalid]) and "invalid" on the gateway ([EndMCPInvalid]); a tool
// that could not start logs "error" and "failed"; an unknown tool logs
// "unknown tool" and "unknown_tool"; and a gated call nobody approved is
// counted as outcome "error" by the agent ([EndA2ADenied]) and "denied" by
// the gateway ([EndMCPDenied]). The endings both spell alike have no
// service in their name.
//
// The zero value is no ending: it logs as "" and is counted and recorded
// as an error, never as a success, so a call whose end was never set
// cannot pass for one that went well.
type Ending uint8

// Endings both services produce.
const (
	// EndOK is a call that ran and succeeded: exit code 0, or an
	// in-process tool's answer.
	EndOK Ending = iota + 1
	// EndTimeout is a call stopped by the tool timeout.
	EndTimeout
	// EndToolError is an in-band failure the tool reported.
	EndToolError
	// EndCallerGone is a call interrupted because its caller went away
	// (on the gateway also a stopping gateway).
	EndCallerGone

	// The A2A agent's own endings.

	// EndA2AExit is a command that ran and exited non-zero.
	EndA2AExit
	// EndA2ACanceled is a call its caller canceled.
	EndA2ACanceled
	// EndA2AInterrupted is a run cut short because the agent stopped.
	EndA2AInterrupted
	// EndA2ARunError is a call that could not be run: its arguments could
	// not become a command line, or the run failed around the command.
	EndA2ARunError
	// EndA2AStartError is a command that could not be started.
	EndA2AStartError
	// EndA2AInvalid is arguments the command refused before anything ran.
	EndA2AInvalid
	// EndA2ADenied is a gated call no operator approved.
	EndA2ADenied
	// EndA2AStopping is a call that got as far as a worker (an approved
	// gated call waiting for a slot) and was refused because the agent
	// is stopping.
	EndA2AStopping
	// EndA2ARefusedStopping is a call refused on arrival because the
	// agent is stopping. Such a call gets no log line and no count, only
	// its record and its span, whose outcome says canceled.
	EndA2ARefusedStopping
	// EndA2AUnknownTool is a request naming no served tool. It is counted
	// as a rejected message, not as a call.
	EndA2AUnknownTool

	// The MCP gateway's own endings.

	// EndMCPExitNonzero is a command that ran and exited non-zero, which
	// the gateway logs as "ok": the call itself succeeded.
	EndMCPExitNonzero
	// EndMCPInvalid is arguments refused before anything ran.
	EndMCPInvalid
	// EndMCPUnknownTool is a name the gateway does not serve.
	EndMCPUnknownTool
	// EndMCPDenied is a gated call the human or an operator did not
	// approve.
	EndMCPDenied
	// EndMCPRefused is a gated call refused because nobody could be asked.
	EndMCPRefused
	// EndMCPApprovalRequested is an answer asking the client for approval:
	// not an end, since the client's retry carrying the answer is the
	// call ([Ending.Final] is false). It is neither counted nor recorded.
	EndMCPApprovalRequested
	// EndMCPCanceledWaiting is a call whose request ended while it waited
	// for a free slot.
	EndMCPCanceledWaiting
	// EndMCPFailed is a call the gateway could not make: the tool could
	// not run, or a step before it failed.
	EndMCPFailed
	// EndMCPRefusedByPolicy is a call the caller's policy does not allow.
	EndMCPRefusedByPolicy
	// EndMCPRefusedRate is a call refused because its caller is over its
	// rate limit.
	EndMCPRefusedRate

	numEndings = iota + 1
)

// spelling is an [Ending] in each vocabulary.
type spelling struct {
	log, metric, result, class string
}

// spellings holds every ending's words; index 0 is the zero value's.
var spellings = [numEndings]spelling{
	0:                       {"", ops.OutcomeError, ResultError, ""},
	EndOK:                   {"ok", ops.OutcomeOK, ResultOK, ""},
	EndTimeout:              {"timeout", ops.OutcomeTimeout, ResultTimeout, "timeout"},
	EndToolError:            {"error", ops.OutcomeError, ResultError, "tool_error"},
	EndCallerGone:           {"canceled", ops.OutcomeCanceled, ResultCanceled, "caller_gone"},
	EndA2AExit:              {"exit", ops.OutcomeExitNonzero, ResultFailed, "exit_nonzero"},
	EndA2ACanceled:          {"canceled", ops.OutcomeCanceled, ResultCanceled, "canceled_by_caller"},
	EndA2AInterrupted:       {"error", ops.OutcomeError, ResultCanceled, "stopping"},
	EndA2ARunError:          {"error", ops.OutcomeError, ResultError, "run_error"},
	EndA2AStartError:        {"error", ops.OutcomeError, ResultError, "start"},
	EndA2AInvalid:           {"error", ops.OutcomeError, ResultInvalid, "invalid_input"},
	EndA2ADenied:            {"denied", ops.OutcomeError, ResultDenied, "approval_denied"},
	EndA2AStopping:          {"error", ops.OutcomeError, ResultRefused, "stopping"},
	EndA2ARefusedStopping:   {"stopping", ops.OutcomeCanceled, ResultRefused, "stopping"},
	EndA2AUnknownTool:       {"unknown tool", ops.OutcomeError, ResultUnknownTool, "unknown_tool"},
	EndMCPExitNonzero:       {"ok", ops.OutcomeExitNonzero, ResultFailed, "exit_nonzero"},
	EndMCPInvalid:           {"invalid", ops.OutcomeError, ResultInvalid, "invalid_input"},
	EndMCPUnknownTool:       {"unknown_tool", ops.OutcomeError, ResultUnknownTool, "unknown_tool"},
	EndMCPDenied:            {"denied", ops.OutcomeDenied, ResultDenied, "approval_denied"},
	EndMCPRefused:           {"refused", ops.OutcomeDenied, ResultRefused, "refused_gated"},
	EndMCPApprovalRequested: {"approval_requested", ops.OutcomeError, ResultError, ""},
	EndMCPCanceledWaiting:   {"canceled_waiting", ops.OutcomeBusy, ResultCanceled, "canceled_waiting"},
	EndMCPFailed:            {"failed", ops.OutcomeError, ResultError, "start"},
	EndMCPRefusedByPolicy:   {"refused_by_policy", ops.OutcomeError, ResultRefused, "refused_by_policy"},
	EndMCPRefusedRate:       {"refused_rate", ops.OutcomeError, ResultRefused, "refused_rate"},
}

func (e Ending) spelling() spelling {
	if int(e) < len(spellings) {
		return spellings[e]
	}
	return spellings[0]
}

// String returns what the call's log line says as its outcome.
func (e Ending) String() string { return e.spelling().log }

// Metric returns the outcome label of the calls metric, one of
// [ops.Metrics]' fixed list.
func (e Ending) Metric() string { return e.spelling().metric }

// Result returns the audit record's result ([Outcome.Result]).
func (e Ending) Result() string { return e.spelling().result }

// Class returns the audit record's error class ([Outcome.ErrorClass]):
// empty for a success, else a short reason shared by both services where
// they mean the same.
func (e Ending) Class() string { return e.spelling().class }

// Final reports whether e ends a call: false only for
// [EndMCPApprovalRequested], whose retry is the call that is counted and
// recorded.
func (e Ending) Final() bool { return e != EndMCPApprovalRequested }
