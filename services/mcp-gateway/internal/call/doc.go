// Package call is the gateway's protocol-neutral call path: every surface
// (MCP over streamable HTTP, Agent2Agent) hands a call to one [Core] and
// maps the [Verdict] it gets back onto its own protocol, so the policy,
// the gate, the limits and the audit are written once and hold alike
// wherever a call comes in.
//
// # Registration
//
// Tools arrive in sources ([SourceLocal] first, then the others by name);
// within the local source the caller puts the application's commands
// before the built-ins. The first tool to claim a name keeps it, so a
// built-in can never shadow a command and strip its gate. A strict core
// refuses a collision outright; a lenient one drops the loser. Tools that
// cannot say whether they are gated, that do not declare MCP exposure, or
// whose name is not a valid tool name are dropped, each with a reason
// ([Select], [tool.DropReason]); a surface may add a rule of its own
// ([Config.Refuse]).
//
// # Calls
//
// [Core.Call] takes a [Request] (the tool, the arguments as sent, the
// caller, the surface, and the callbacks a surface needs) through these
// steps, each of which may end the call with its verdict:
//
//  1. admit: the caller's policy grants the tool, and a remote tool's
//     agent takes the caller's role's NATS context; a refused caller
//     learns nothing of the tool, not even whether its arguments are good;
//  2. the input is a JSON object matching a local tool's input schema;
//  3. the gate, for tools that answer [tool.ConfirmRequired] only: the
//     request's [Asker] asks the human at the caller's end, an operator
//     decides over NATS when nobody there can be asked
//     ([Config.Approvals]), or the call is refused naming the key to set;
//  4. cleared: the request's Cleared callback (a task answers its client);
//  5. the caller's own share of the slots, then one of the gateway's;
//  6. the run, under the per-call timeout ([Config.Timeout]).
//
// The approval wait comes before the slots and outside the timeout, so a
// human deliberating holds no execution slot. Every failure is a verdict
// with a message naming what to fix; nothing is a protocol error. A call
// over its caller's rate is refused before it starts, by [Core.Limit],
// which the surfaces call first because they answer that refusal apart
// (MCP's -32029, HTTP 429 with Retry-After); its verdict is recorded
// there, once, and the call never enters the steps above.
//
// The gate is a courtesy, not an enforcement boundary: under
// confirm_over_mcp never, and under auto for an MCP client that cannot
// elicit, gated tools run unasked. ai:deny is the only reliable
// exclusion. A surface without an Asker (another agent) never runs a
// gated tool unasked: an operator approves it, or it is refused.
//
// # What a call leaves behind
//
// Every call that reached the core leaves one log line, one count in the
// metrics, its span and one record on the audit trail ([Config.Audit]:
// the caller, the arguments or their digest, the command line, the gate's
// decision and the outcome). The span is ended at once; the log line and
// the audit record are written after the caller's answer has gone, by a
// bounded queue that never drops one ([trail]). An approval asked of a
// 2026-07-28 client is not a call yet: its retry is the one recorded.
package call
