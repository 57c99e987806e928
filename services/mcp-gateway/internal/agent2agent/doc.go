// Package agent2agent serves the gateway's tools to clients of the
// Agent2Agent protocol (the Linux Foundation's A2A, version 1.0, over
// HTTP with the JSON-RPC binding): agent cards, SendMessage,
// SendStreamingMessage, GetTask, CancelTask, SubscribeToTask and
// GetExtendedAgentCard. "A2A" elsewhere in this repository is
// fiskfleet's own protocol over NATS; this package speaks the HTTP one.
//
// # Calls
//
// There is no model here to read text: a message is one tool call, a
// DataPart {"tool": NAME, "arguments": {...}}. A message naming no tool,
// or a tool the caller cannot see (unknown and hidden answer alike), is
// answered in-band with a Message saying how to call. Every call becomes
// a task, and runs through the gateway's one call core (package call,
// [Config.Invoke]): the same policy, argument checks, gate, per-role
// shares, slots, tool_timeout, metrics, traces and audit record (surface
// agent2agent) as a tools/call, never a copy of them. The package depends
// on the call core and the task manager, not on the MCP surface; the
// result a task keeps is the MCP surface's mapping of the verdict, since
// package tasks stores MCP results.
//
// A finished task's artifact holds the command's result envelope
// (command, exit_code, output, truncated) as a DataPart and its output
// as a TextPart. A non-zero exit is a completed task, as on every other
// surface; a call refused before it ran (denied, gated with nobody to
// ask, outside the caller's policy) is rejected; a timeout, a failed
// start or a transport failure is failed, its status message naming the
// cause.
//
// # Gated tools
//
// No Agent2Agent client can answer an approval form, so a gated tool
// waits for an operator (approvals.operator): the task is
// input-required, its status message naming the approval id, until an
// operator approves (it then runs) or denies or the approval expires
// (it is rejected). Without operator approvals a gated tool is refused,
// unless confirm_over_mcp is never, the operator's explicit choice.
//
// # Tasks
//
// Tasks live in the MCP server's task store (package tasks: memory, or
// the JetStream bucket of a gateway fleet), owned by the authenticated
// caller and apart from its MCP tasks, so that another caller's task is
// "not found" and, in a fleet, any gateway answers GetTask and
// CancelTask. A cancel, or the drop of the stream that started the call,
// cancels the call's context: a local command's process group is killed,
// a remote tool's stream gets the A2A cancel. Output travels live only
// from the gateway running the call: a SubscribeToTask on another one
// hears the task's state and its final artifact.
//
// # Why not a2a-go's server
//
// The protocol server a2a-go v2.4.0 ships (a2asrv, with a2acompat/a2av0
// for 0.3) was tried in place of this package's own JSON-RPC, SSE and 0.3
// handling, over the call core and a task-store adapter. It carries the
// bindings, but not what the gateway holds: its errors have a fixed HTTP
// status and code table, so a rate refusal cannot be a 429 with
// Retry-After and -32029; it stops an execution and cancels its agent
// once a task is input-required, where a gated call must keep waiting for
// its operator; it sees only the executions running in its own process,
// so a finished task, one waiting for an operator or one on another
// gateway of a fleet cannot be cancelled or followed through it; and it
// deep-copies the task with encoding/gob several times per event, which
// made a blocking call 0.3 to 0.5 ms slower, beyond this surface's
// budget. A layer of our own around it came to more code than this
// package, so the hand-written server stays until a2a-go lets a server
// set an error's status and code, update a task from outside an
// execution, and copy tasks cheaply. a2av0's two-version card also names
// the 1.0 member of each security scheme wrongly (openIdConnect for
// openIdConnectSecurityScheme), which a2a-go's own 1.0 parser rejects.
package agent2agent
