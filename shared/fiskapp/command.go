package fiskapp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/choria-io/fisk"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Command is one leaf command of a fisk application, served as a
// [tool.Tool]. It is immutable after [Load] and safe for concurrent use.
type Command struct {
	model       *fisk.CmdModel
	path        []string
	name        string
	title       string
	description string
	modelDesc   string
	tags        []string
	schema      json.RawMessage
	confirm     tool.Confirmation
	// hidden names the command's hidden flags and arguments. fisk leaves
	// them out of the schema but ArgsFromJSON would still render them, so
	// Argv refuses them: a caller may pass only what was advertised.
	hidden []string
	binary string
	run    *runner
}

var (
	_ tool.Tool         = (*Command)(nil)
	_ tool.CommandLiner = (*Command)(nil)
)

// emptyObjectSchema is the input schema of a command whose model carries
// no schema (an application built with a fisk older than the schemas).
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

func newCommand(l leaf, name string, opts Options, r *runner) (*Command, error) {
	m, cmdPath := l.cmd, l.path
	schema := m.RestrictedSchema
	if schema == nil {
		schema = m.Schema
	}
	raw := emptyObjectSchema
	if schema != nil {
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("%w: encoding the input schema of %s: %w", ErrIntrospect, name, err)
		}
		raw = b
	}

	description := strings.TrimSpace(m.Help)
	if long := strings.TrimSpace(m.HelpLong); long != "" {
		if description != "" {
			description += "\n\n"
		}
		description += long
	}

	tags := slices.Clone(l.tags)
	confirm := tool.ConfirmNone
	if tool.Gated(tags, opts.ConfirmTags) {
		confirm = tool.ConfirmRequired
	}

	var hidden []string
	if m.FlagGroupModel != nil {
		for _, f := range m.Flags {
			if f.Hidden {
				hidden = append(hidden, f.Name)
			}
		}
	}
	if m.ArgGroupModel != nil {
		for _, a := range m.Args {
			if a.Hidden {
				hidden = append(hidden, a.Name)
			}
		}
	}

	return &Command{
		model:       m,
		path:        slices.Clone(cmdPath),
		name:        name,
		title:       strings.Join(cmdPath, " "),
		description: description,
		modelDesc:   tool.ModelDescription(description, tags),
		tags:        tags,
		schema:      raw,
		confirm:     confirm,
		hidden:      hidden,
		binary:      opts.Path,
		run:         r,
	}, nil
}

// Name is the command path joined with "_" (for example
// cluster_node_status).
func (c *Command) Name() string { return c.name }

// Title is the command path joined with spaces, as a user would type it.
func (c *Command) Title() string { return c.title }

// Description is the command's help, then its long help after a blank line
// when it has one.
func (c *Command) Description() string { return c.description }

// ModelDescription is the description with a trailing "Tags: a, b" line,
// what both servers register with.
func (c *Command) ModelDescription() string { return c.modelDesc }

// Tags returns a copy of the command's effective tags: its own, or when it
// has none, those of its nearest tagged parent command.
func (c *Command) Tags() []string { return slices.Clone(c.tags) }

// InputSchema is the command's restricted JSON Schema, encoded once at
// [Load]. Callers share it and must not modify it.
func (c *Command) InputSchema() json.RawMessage { return c.schema }

// Confirmation is [tool.ConfirmRequired] when the command carries ai:confirm
// or one of the operator's confirm tags, else [tool.ConfirmNone].
func (c *Command) Confirmation() tool.Confirmation { return c.confirm }

// Exposure is MCP and A2A: a command that survived selection may be served
// on either surface; operator settings narrow it further.
func (c *Command) Exposure() tool.Exposure { return tool.ExposeMCP | tool.ExposeA2A }

// Path returns a copy of the command path (for example
// ["cluster", "node", "status"]).
func (c *Command) Path() []string { return slices.Clone(c.path) }

// Model is the command's fisk model. Callers must not modify it.
func (c *Command) Model() *fisk.CmdModel { return c.model }

// Argv returns the full argv for input: the application binary, the command
// path, then what fisk's own [fisk.CmdModel.ArgsFromJSON] renders (flags,
// "--", positionals). Absent, empty or null input is the empty object.
// Input that is not a JSON object, or that names a property the command does
// not advertise, is an error wrapping [ErrInvalidInput].
func (c *Command) Argv(input json.RawMessage) ([]string, error) {
	obj, err := tool.ObjectInput(input)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidInput, c.name, err)
	}
	if len(c.hidden) > 0 && obj != nil {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(obj, &props); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidInput, c.name, err)
		}
		for _, h := range c.hidden {
			if _, ok := props[h]; ok {
				return nil, fmt.Errorf("%w: %s: unknown property %q", ErrInvalidInput, c.name, h)
			}
		}
	}
	tail, err := c.model.ArgsFromJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidInput, c.name, err)
	}
	argv := make([]string, 0, 1+len(c.path)+len(tail))
	argv = append(argv, c.binary)
	argv = append(argv, c.path...)
	return append(argv, tail...), nil
}

// CommandLine returns the argv for input as one shell-quoted line: what an
// approval form shows and what logs and [tool.CommandResult] record.
func (c *Command) CommandLine(input json.RawMessage) (string, error) {
	argv, err := c.Argv(input)
	if err != nil {
		return "", err
	}
	return shellJoin(argv), nil
}

// ReturnsCommandResult is true: a call that runs answers with the
// command's [tool.CommandResult] ([tool.ResultPromiser]).
func (c *Command) ReturnsCommandResult() bool { return true }

// Call runs the command for req.Input. Bad input is an in-band error
// outcome; a non-zero exit is a successful outcome carrying the exit code.
// A returned error means the command could not run to completion: it could
// not be started ([ErrStart]) or ctx ended first ([ErrInterrupted], also
// wrapping ctx.Err()), in which case its whole process group was killed.
// Call does not ask for approval: the server consults [Command.Confirmation]
// before calling.
func (c *Command) Call(ctx context.Context, req tool.Request) (tool.Outcome, error) {
	argv, err := c.Argv(req.Input)
	if err != nil {
		return tool.Failure(err.Error()), nil
	}
	res, err := c.run.run(ctx, argv, req.Output)
	if err != nil {
		return tool.Outcome{}, fmt.Errorf("running %s: %w", c.name, err)
	}
	res.Command = shellJoin(argv)
	return tool.Outcome{Result: res}, nil
}
