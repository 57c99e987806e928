// Package mcphttp holds what the gateway answers over streamable HTTP
// beside mcp-go (v1.2.1) rather than through it: the mechanics of the
// transport that the library does not have, or has in a shape a gateway
// cannot serve safely or fast. It depends on no server; the router that
// uses these pieces lives with the MCP server (mcpserver's route), where
// mcp-go's objects are.
//
// Each piece exists for a stated reason, and each can go once mcp-go
// learns what it does: a test that starts passing without the piece says
// the library has caught up. The inventory, with what would retire each:
//
//   - [Sessions]: mcp-go's stateful session manager keeps every
//     terminated id for ever, knows nothing of idle time or a cap, and
//     does not bind a session to the caller that opened it. Retire when
//     its SessionIdManager expires idle sessions, caps live ones (503
//     beyond), and refuses another caller's token on a session (404).
//   - [Cancellations] and [CancelWriter]: mcp-go cancels a request's
//     handler on notifications/cancelled but still writes its answer,
//     which the specification says should not be sent; the writer also
//     puts a task's CreateTaskResult in place of the handler's stand-in.
//     Retire when mcp-go drops the answer to a cancelled request and
//     serves tasks as the gateway does (see mcpserver's task.go for the
//     five defects of its tasks).
//   - [ToolsList]: mcp-go builds and encodes tools/list per request, which
//     with a fleet's hundreds of tools costs milliseconds and most of a
//     megabyte of garbage per request; here each grant's list is encoded
//     once per change of the tool set, with cursors valid for one list.
//     Retire when mcp-go caches encoded lists per tool filter result.
//   - [CallMessage], [CallParams], [EncodeResponse] and [AppendResult]:
//     the plain tools/call path decodes a call once and writes the bytes
//     mcp-go would write, without its per-request session, notification
//     goroutine and repeated decoding (about a transport round trip per
//     call in the benchmark). They reproduce mcp-go's decoder quirks
//     ([NumbersFit], params named twice) and its encoder byte for byte,
//     which the differential tests and fuzzers in mcpserver hold them to.
//     Retire when mcp-go's own tools/call path decodes once and spawns no
//     goroutine for a call that asks for no progress.
//   - [RPCAnswer] and its writers: the JSON-RPC answers the gateway writes
//     itself (task methods, rate refusals), with mcp-go's error type.
//     They go with the last of the pieces above.
package mcphttp
