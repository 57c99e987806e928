package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// FuncSpec describes an in-process tool (a built-in or an imported remote
// tool) for [NewFunc].
type FuncSpec struct {
	Name        string
	Title       string
	Description string
	Tags        []string
	// InputSchema defaults to an empty object schema.
	InputSchema json.RawMessage
	// Exposure must be declared; [ExposeNone] is refused so a tool cannot
	// arrive at "served nowhere" (or anywhere) by forgetting.
	Exposure Exposure
	// Confirmation must be declared; [ConfirmUnknown] is refused.
	Confirmation Confirmation
	// Remote marks a tool whose authority is another agent; it cannot be
	// gated.
	Remote bool
	// CommandResult promises that every call that runs answers with an
	// [Outcome] carrying a [CommandResult] ([ResultPromiser]): a remote
	// tool of an agent whose card says so. Call must keep the promise.
	CommandResult bool
	// Call runs the tool.
	Call func(ctx context.Context, req Request) (Outcome, error)
}

// emptyObjectSchema is the input schema of a tool that takes no arguments.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// NewFunc builds a [Tool] from spec, refusing a spec without a declared
// posture or confirmation answer, and a remote spec that is gated.
func NewFunc(spec FuncSpec) (Tool, error) {
	switch {
	case spec.Name == "" || spec.Call == nil:
		return nil, fmt.Errorf("%w: name and call function are required", ErrInvalidSpec)
	case !ValidName(spec.Name):
		return nil, fmt.Errorf("%w: name %q does not match %s", ErrInvalidSpec, spec.Name, NamePattern())
	case spec.Exposure == ExposeNone:
		return nil, fmt.Errorf("%w: %s", ErrNoPosture, spec.Name)
	case spec.Confirmation == ConfirmUnknown:
		return nil, fmt.Errorf("%w: %s does not say whether it is gated", ErrInvalidSpec, spec.Name)
	case spec.Remote && spec.Confirmation == ConfirmRequired:
		return nil, fmt.Errorf("%w: %s", ErrRemoteGated, spec.Name)
	}
	if len(spec.InputSchema) == 0 {
		spec.InputSchema = emptyObjectSchema
	}
	if spec.Title == "" {
		spec.Title = spec.Name
	}
	spec.Tags = slices.Clone(spec.Tags)
	return &funcTool{spec: spec, modelDesc: ModelDescription(spec.Description, spec.Tags)}, nil
}

type funcTool struct {
	spec      FuncSpec
	modelDesc string
}

func (f *funcTool) Name() string                 { return f.spec.Name }
func (f *funcTool) Title() string                { return f.spec.Title }
func (f *funcTool) Description() string          { return f.spec.Description }
func (f *funcTool) ModelDescription() string     { return f.modelDesc }
func (f *funcTool) Tags() []string               { return f.spec.Tags }
func (f *funcTool) InputSchema() json.RawMessage { return f.spec.InputSchema }
func (f *funcTool) Confirmation() Confirmation   { return f.spec.Confirmation }
func (f *funcTool) Exposure() Exposure           { return f.spec.Exposure }
func (f *funcTool) ReturnsCommandResult() bool   { return f.spec.CommandResult }

func (f *funcTool) Call(ctx context.Context, req Request) (Outcome, error) {
	req.Prompter = PrompterOrDeny(req.Prompter)
	return f.spec.Call(ctx, req)
}
