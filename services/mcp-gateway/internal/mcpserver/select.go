package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// SourceLocal is the source of this gateway's own tools: the application's
// commands, then the built-ins. It is registered before every other source,
// so a remote tool can never take a name a local tool holds. Tools of any
// other source are another agent's: they get no local input-schema check,
// since the serving agent decides what it accepts.
const SourceLocal = "local"

// commandLiner is a tool that runs one command and can show the exact line
// it would run for an input, what an approval form names. *fiskapp.Command
// is one.
type commandLiner interface {
	CommandLine(input json.RawMessage) (string, error)
}

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
// its reason: tools that cannot say whether they are gated (refused rather
// than served ungated), tools that do not declare MCP exposure, invalid
// names, and a second tool claiming a name an earlier one holds (the first
// claim wins). Order matters: put commands before built-ins.
func Select(tools []tool.Tool) (served []tool.Tool, dropped []tool.Dropped) {
	claims := make(map[string]claim, len(tools))
	for _, t := range tools {
		if reason, _ := consider(claims, SourceLocal, t); reason != "" {
			dropped = append(dropped, tool.Dropped{Name: t.Name(), Reason: reason})
			continue
		}
		served = append(served, t)
	}
	return served, dropped
}

// claim is the tool holding a name, and the source it came from.
type claim struct {
	source string
	tool   tool.Tool
}

// consider decides whether t, from source, is served given the names
// claimed so far, recording its claim when it is. It returns the reason it
// is dropped ("" when served) and, for a collision, a message naming both
// claimants.
func consider(claims map[string]claim, source string, t tool.Tool) (reason, collision string) {
	name := t.Name()
	switch {
	case t.Confirmation() == tool.ConfirmUnknown:
		return "cannot say whether it is gated; refused rather than served ungated", ""
	case !t.Exposure().Allows(tool.ExposeMCP):
		return "not exposed over MCP (posture " + t.Exposure().String() + ")", ""
	case !tool.ValidName(name):
		return "invalid name: must match " + tool.NamePattern(), ""
	case t.ModelDescription() == "":
		return tool.ReasonEmptyDescription, ""
	}
	if first, taken := claims[name]; taken {
		return "name already claimed by " + describe(first.source, first.tool),
			fmt.Sprintf("%q is claimed by %s and by %s; the first claim wins, so rename, exclude or drop one of them",
				name, describe(first.source, first.tool), describe(source, t))
	}
	claims[name] = claim{source: source, tool: t}
	return "", ""
}

// describe names a claimant for collision messages: a command by its path
// as a user types it, any other tool by its name.
func describe(source string, t tool.Tool) string {
	s := fmt.Sprintf("in-process tool %q", t.Name())
	if _, ok := t.(commandLiner); ok {
		s = fmt.Sprintf("command %q", t.Title())
	}
	if source != SourceLocal {
		s += " from " + source
	}
	return s
}

// entry is one registered tool with everything a call needs, computed once
// per registration. Entries are immutable: a call keeps the entry it
// started with even if the tools are replaced meanwhile.
type entry struct {
	tool   tool.Tool
	source string
	gated  bool
	// liner is set for command tools: what the approval form shows.
	liner commandLiner
	// schema checks the input of local tools; nil means no local check
	// (remote tools, or a schema that does not compile).
	schema *jsonschema.Schema
	// def is what tools/list shows.
	def mcp.Tool
	// headerParams is set when def binds a parameter to a header, whose
	// calls mcp-go answers (callfast.go).
	headerParams bool
}

// newEntry builds the registration of t. prev is the entry t had in the
// previous registration, if any, so an unchanged tool's schema is not
// compiled again.
func newEntry(source string, t tool.Tool, prev *entry) (*entry, error) {
	e := &entry{
		tool:   t,
		source: source,
		gated:  t.Confirmation() == tool.ConfirmRequired,
		def:    definition(t),
	}
	e.headerParams = hasHeaderParams(&e.def)
	if l, ok := t.(commandLiner); ok {
		e.liner = l
	}
	if e.liner != nil || tool.ReturnsCommandResult(t) {
		// A local command, or a remote tool whose agent's card promises
		// the command result: the same schema either way.
		e.def.RawOutputSchema = commandResultSchema
	}
	if source != SourceLocal {
		return e, nil
	}
	if prev != nil && prev.tool == t {
		e.schema = prev.schema
		return e, nil
	}
	sch, err := compileSchema(t.Name(), t.InputSchema())
	if err != nil {
		return e, err
	}
	e.schema = sch
	return e, nil
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

// compileSchema compiles a tool's input schema once, so each call only
// validates.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decoding the input schema of %s: %w", name, err)
	}
	url := "mem:///tools/" + name + ".json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("loading the input schema of %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling the input schema of %s: %w", name, err)
	}
	return sch, nil
}

// validate checks input (an object, or empty for none) against the entry's
// schema and returns what is wrong as one line, or "".
func (e *entry) validate(input json.RawMessage) string {
	if e.schema == nil {
		return ""
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return err.Error()
	}
	err = e.schema.Validate(v)
	if err == nil {
		return ""
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var parts []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, u.Error))
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*verr.BasicOutput())
	if len(parts) == 0 {
		return verr.Error()
	}
	return strings.Join(parts, "; ")
}
