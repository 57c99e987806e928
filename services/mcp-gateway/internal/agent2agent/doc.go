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
// a task, and runs through the MCP server's one call path
// ([mcpserver.Server.Invoke]): the same policy, argument checks, gate,
// per-role shares, slots, tool_timeout, metrics, traces and audit record
// (surface agent2agent) as a tools/call, never a copy of them.
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
package agent2agent
