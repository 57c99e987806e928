// Package knowledge serves the documents of one directory to MCP clients
// through two built-in tools: [SearchTool] finds lines and [EnumerateTool]
// lists documents.
//
// Both tools declare MCP exposure only and are never gated: they read text
// the operator placed in the directory and change nothing. No built-in
// declares A2A exposure, because A2A has no allowlist to narrow it with.
//
// Documents are read when a tool is called, not indexed up front: an
// operator who edits or adds a document sees it on the next call without a
// restart, and an idle gateway holds no copy of the directory in memory. A
// knowledge directory is small (a handful of runbooks and notes), so a walk
// per call is cheap beside the exec of a command tool, and the walk is
// bounded by [MaxDocuments] and [MaxDocumentSize].
//
// Only regular text files inside the directory are read. Symbolic links are
// skipped rather than followed: one pointing outside would serve files the
// operator never put there, one pointing inside would list a document twice.
// Files are opened through an [os.Root], so a file swapped for a link
// between the walk and the read still cannot escape the directory.
//
// This package must not import shared/config: config validates the builtins
// allowlist against [ToolNames].
package knowledge
