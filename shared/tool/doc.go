// Package tool is the tool model both servers serve: the [Tool] interface,
// its exposure posture, whether it is gated behind approval, and the
// [Outcome] of a call.
//
// Every rule that more than one server or package needs lives here once: the
// MCP tool name pattern ([ValidName]), the serving defaults
// ([DefaultMaxConcurrent], [DefaultTimeout]), the gate ([Gated]) and which
// tools a surface serves ([DropReason], [Select]). A server that needs a
// rule imports it rather than restating it.
package tool
