package mcpserver

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/mcphttp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// SourceLocal is the source of this gateway's own tools
// ([call.SourceLocal]).
const SourceLocal = call.SourceLocal

// commandResultSchema is the output schema of a command tool, local or
// remote: the [tool.CommandResult] JSON its structured content carries.
var commandResultSchema = json.RawMessage(`{"type":"object",` +
	`"properties":{` +
	`"command":{"type":"string","description":"The command line that ran"},` +
	`"exit_code":{"type":"integer","description":"The command's exit code; non-zero is not a failed call"},` +
	`"output":{"type":"string","description":"stdout and stderr, interleaved, capped"},` +
	`"truncated":{"type":"boolean","description":"Whether output was cut at the cap"}},` +
	`"required":["command","exit_code","output","truncated"]}`)

// Select splits tools into the served set and the dropped ones, each with
// its reason, as the gateway selects them ([call.Select]).
func Select(tools []tool.Tool) (served []tool.Tool, dropped []tool.Dropped) {
	return call.Select(tools)
}

// entry is one served tool as MCP shows it: the core's entry, with its
// definition. Entries are immutable: a call keeps the entry it started
// with even if the tools are replaced meanwhile.
type entry struct {
	*call.Entry
	// def is what tools/list shows.
	def mcp.Tool
	// headerParams is set when def binds a parameter to a header, whose
	// calls mcp-go answers ([Server.FastTool]).
	headerParams bool
}

// newEntry builds the MCP registration of e.
func newEntry(e *call.Entry) *entry {
	me := &entry{Entry: e, def: definition(e.Tool)}
	me.headerParams = mcphttp.HasHeaderParams(&me.def)
	if e.Command() {
		// A local command, or a remote tool whose agent's card promises
		// the command result: the same schema either way.
		me.def.RawOutputSchema = commandResultSchema
	}
	return me
}

// headerAnnotations is the MCP surface's own rule of selection: a tool
// whose input schema binds parameters to headers wrongly is not served.
func headerAnnotations(t tool.Tool) string {
	if err := mcp.ValidateParamHeaderAnnotations(&mcp.Tool{Name: t.Name(), RawInputSchema: t.InputSchema()}); err != nil {
		return "invalid x-mcp-header annotations in its input schema: " + err.Error()
	}
	return ""
}

// definition maps a tool onto what tools/list shows. The description is
// the model description (with its trailing Tags: line); annotations carry a
// readable title and the behavioural hints the impact tags imply. Approval
// is deliberately not an annotation: annotations are hints a client may
// ignore, and expressing the gate as one would imply an enforcement it does
// not have.
func definition(t tool.Tool) mcp.Tool {
	def := mcp.Tool{
		Name:           t.Name(),
		Title:          t.Title(),
		Description:    t.ModelDescription(),
		RawInputSchema: t.InputSchema(),
		Annotations:    annotations(t),
	}
	if len(bytes.TrimSpace(def.RawInputSchema)) == 0 {
		def.RawInputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return def
}

// annotations derives the MCP behavioural hints from a tool's tags:
// impact:ro is read-only and not destructive, impact:rw may destroy. A tool
// with neither says nothing, and clients assume the protocol's defaults.
func annotations(t tool.Tool) mcp.ToolAnnotation {
	a := mcp.ToolAnnotation{Title: t.Title()}
	tags := t.Tags()
	switch {
	case slices.Contains(tags, tool.TagReadOnly):
		a.ReadOnlyHint = mcp.ToBoolPtr(true)
		a.DestructiveHint = mcp.ToBoolPtr(false)
	case slices.Contains(tags, tool.TagReadWrite):
		a.ReadOnlyHint = mcp.ToBoolPtr(false)
		a.DestructiveHint = mcp.ToBoolPtr(true)
	}
	return a
}
