// Package mcpserver is the MCP surface of the gateway: the gateway's tools
// registered on one mcp-go server, their calls handed to the call core
// (package call) and its verdicts answered as MCP results, over streamable
// HTTP at /mcp.
//
// # Registration
//
// [Server.SetTools] replaces one source of tools in the core's registry
// and registers what it serves with mcp-go, each tool's definition built
// once ([definition]: the model description, the title, the behavioural
// hints the impact tags imply, the command result's output schema), and
// makes mcp-go announce notifications/tools/list_changed when what
// clients see changed. Every tool kind shares one handler,
// [Server.CallTool], which builds the core's request from the MCP request
// and maps the verdict back.
//
// # Approval
//
// A gated call asks the human on the other end through a form with one
// required boolean (the core's Asker, [formAsker]). Clients of the
// session-based protocol revisions are asked with a server-initiated
// elicitation/create request, bounded by the approval timeout. Clients of
// the 2026-07-28 revision get an input_required result carrying the same
// form and an opaque requestState: a single-use random nonce the server
// keeps (in memory, or in the fleet's bucket, [Config.ApprovalBucket]),
// keyed to the tool name and the digest of the canonical arguments and
// expiring with the approval timeout. The retried call must present the
// nonce with the same tool and arguments, or it is denied.
//
// # Transport
//
// Requests reach mcp-go through the gateway's router ([mcphttp.Router]),
// which decodes each message once and answers what mcp-go v1.2.1 cannot
// answer safely or fast: the session rules, dropping the answer to a
// cancelled request, MCP tasks, tools/list from the kept lists (package
// toolslist) and a plain tools/call, through the same handler
// ([Server.CallTool]) and with the same bytes. mcp-go's DNS-rebinding
// protection stays on.
//
// The server does not listen: the gateway mounts [Server.MCPHandler]
// behind its one edge (package httpedge: origin, CORS, body cap, probes,
// the caller check), beside its other surfaces, and closes the server
// ([Server.Close]) once it has stopped serving.
//
// # Progress and resources
//
// A call that asked for progress hears its command's output as
// notifications/progress while it runs, and an operator approval it waits
// for as it goes on. With [Config.Resources], the knowledge index's
// documents are MCP resources, and knowledge_search results link to them.
package mcpserver
