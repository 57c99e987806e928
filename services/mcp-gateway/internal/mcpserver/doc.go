// Package mcpserver is the MCP mode of the gateway: it registers tools of
// every kind on one mcp-go server, gates the ones that need approval behind
// MCP elicitation, bounds every call, and serves the lot over streamable
// HTTP at /mcp on an http.Server of its own.
//
// # Registration
//
// Every tool kind goes through one list and one handler. Tools arrive in
// sources ([SourceLocal] first, then the others by name); within the local
// source the caller puts the application's commands before the built-ins.
// The first tool to claim a name keeps it, so a built-in can never shadow a
// command and strip its gate. [New] refuses a collision outright; [Build]
// skips the loser with a warning, as a backstop for callers that bypass
// [New]. Tools that cannot say whether they are gated, that do not declare
// MCP exposure or whose name is not a valid tool name are dropped, each with
// a reason ([Select]). [Server.SetTools] replaces one source while serving
// and makes mcp-go announce notifications/tools/list_changed when what
// clients see changed.
//
// tools/list is not built per request: the list each grant sees, in each
// protocol era, is encoded once per change of the tool set and served as
// kept bytes, paged at [Config.ToolsPageSize] with cursors that are valid
// for one list only (see toolslist.go).
//
// # Calls
//
// A call is checked (the input must be a JSON object matching a local
// tool's input schema), then gated (only tools that answer
// [tool.ConfirmRequired]), then waits for a slot of the shared semaphore,
// then runs under the per-call timeout. The approval wait comes before the
// slot and outside the timeout, so a human deliberating holds no execution
// slot. Every failure is an in-band result with isError set; a handler never
// answers with a protocol error. The one exception is not ours to make:
// mcp-go looks a tool name up before any handler runs and answers a name it
// does not know with JSON-RPC -32602, as the MCP specification prescribes,
// and offers no hook to turn that into a result.
//
// A 2026-07-28 call of an ungated tool that asks for no progress, task or
// retry needs nothing of mcp-go's per-request machinery (a session, a
// notification forwarder): the gateway answers it itself, through the
// same handler and with the bytes mcp-go would write (see callfast.go).
// A finished call's log line and audit record are written after its
// answer has gone (see trail.go).
//
// # Approval
//
// The gate asks the human on the other end through a form with one required
// boolean. Clients of the session-based protocol revisions are asked with a
// server-initiated elicitation/create request, bounded by the approval
// timeout. Clients of the 2026-07-28 revision get an input_required result
// carrying the same form and an opaque requestState: a single-use random
// nonce the server keeps, keyed to the tool name and the digest of the
// canonical arguments and expiring with the approval timeout. The retried
// call must present the nonce with the same tool and arguments, or it is
// denied. The gate is a courtesy, not an enforcement boundary: under
// confirm_over_mcp auto a client that cannot elicit runs gated tools
// ungated, and ai:deny is the only reliable exclusion.
//
// # Tasks
//
// Clients of the session-based revisions may run a call as an MCP task
// (2025-11-25). The gateway serves tasks itself, with mcp-go's types (see
// task.go for why not with mcp-go's machinery): the call is checked and
// approved on its own request, then runs on detached from it through the
// same path as any call, and tasks/get, tasks/result, tasks/cancel and
// tasks/list answer for the requesting caller only (the authenticated
// subject; without authentication, the session). tasks/cancel cancels
// the call's context, killing its process group. Finished tasks are kept
// for a bounded time and number ([Config.TaskRetention],
// [Config.MaxTasks]). Where they are kept is package tasks' concern
// ([Config.TaskStore]): in memory, or in the JetStream bucket a fleet of
// gateways shares, where a task outlives its gateway and any gateway
// answers for it, cancels reaching the one running the call
// ([Config.TaskCanceller]).
//
// # Access
//
// mcp-go's DNS-rebinding protection stays on: a request arriving on a
// loopback connection must carry a loopback Host header, and a foreign
// Origin is refused (pages of the allowed origins get CORS headers). Every
// request to /mcp passes the authentication layer first
// ([Config.Authenticate]: the OAuth verifier of internal/auth, else the
// static token check), which puts the [auth.Caller] in its context and
// has the policy ([Config.Policy]) give it roles or refuse it with 403.
// Request bodies are capped.
//
// The call path asks "may this caller run this tool" in one place,
// [Server.admit], before the arguments are even read: a tool outside the
// caller's grant is refused in-band naming the policy, hidden from its
// tools/list, and never run or approved. A caller whose role has a share of
// the slots waits for it ([policy.Shares]) before taking a gateway slot.
// Sessions of the session-based eras belong to the caller that opened
// them: another caller's token on one gets 404.
//
// # Audit and operator approvals
//
// Every answered tools/call leaves one record on the audit trail
// ([Config.Audit], shared/audit): the caller, the arguments or their
// digest, the command line, the gate's decision and the outcome. With
// [Config.Approvals], a gated call of a client that cannot elicit waits,
// before any slot, for an operator's answer over NATS (shared/approval).
package mcpserver
