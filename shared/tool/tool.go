package tool

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// Serving defaults shared by the MCP gateway and the A2A agent. An external
// caller has no iteration budget the way an agent loop does, so an ungated
// path could otherwise spawn unbounded concurrent commands.
const (
	// DefaultMaxConcurrent is how many calls a server runs at once when the
	// operator sets no max_concurrent_tools.
	DefaultMaxConcurrent = 2
	// DefaultTimeout bounds one call's run time when the operator sets no
	// tool_timeout.
	DefaultTimeout = 30 * time.Second
)

// Tags with a meaning to fiskfleet itself.
const (
	// TagDeny makes a command unreachable from every surface. It is the only
	// reliable exclusion; the approval gate is a courtesy.
	TagDeny = "ai:deny"
	// TagConfirm gates a command behind an explicit approval.
	TagConfirm = "ai:confirm"
	// TagReadOnly marks a command that changes nothing.
	TagReadOnly = "impact:ro"
	// TagReadWrite marks a command that may change state.
	TagReadWrite = "impact:rw"
)

// namePattern is the MCP tool name rule; A2A uses the same so a tool served
// on one surface can be imported onto the other. [ValidName] checks it
// without a compiled regexp: the bounded repetition compiles to a program
// of some 60 KB, held by every process from start to end for one check of
// each name.
const namePattern = `^[a-zA-Z0-9_-]{1,64}$`

// ReasonEmptyDescription is why every server drops a tool whose model
// description is empty (a command with no help and no tags): a model has
// nothing to decide on, so serving it only adds noise, and both surfaces
// must agree on what they serve.
const ReasonEmptyDescription = "empty description: a model has nothing to decide on"

// ValidName reports whether name can be served as a tool name.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// NamePattern returns the tool name pattern as text, for error messages.
func NamePattern() string { return namePattern }

// Exposure is the set of surfaces a tool may ever be served on. It is the
// ceiling: operator allowlists can only narrow it. The zero value is
// [ExposeNone], so a tool that says nothing is served nowhere.
type Exposure uint8

// Exposure surfaces.
const (
	ExposeNone Exposure = 0
	ExposeMCP  Exposure = 1 << iota
	ExposeA2A
)

// Allows reports whether e includes every surface in s.
func (e Exposure) Allows(s Exposure) bool { return s != ExposeNone && e&s == s }

// String names the surfaces, for logs and the info listing.
func (e Exposure) String() string {
	switch e {
	case ExposeNone:
		return "none"
	case ExposeMCP:
		return "mcp"
	case ExposeA2A:
		return "a2a"
	case ExposeMCP | ExposeA2A:
		return "mcp,a2a"
	}
	return "invalid"
}

// Confirmation answers "is this tool gated behind approval?". The zero
// value, [ConfirmUnknown], is a tool that cannot say; every server refuses
// such a tool rather than serve it ungated, because an absent gate must not
// be indistinguishable from not needing one.
type Confirmation uint8

// Confirmation answers.
const (
	ConfirmUnknown Confirmation = iota
	ConfirmNone
	ConfirmRequired
)

// String names the answer for logs.
func (c Confirmation) String() string {
	switch c {
	case ConfirmNone:
		return "ungated"
	case ConfirmRequired:
		return "gated"
	}
	return "unknown"
}

// Tool is one callable capability. Implementations must be safe for
// concurrent use: servers call them from many goroutines.
type Tool interface {
	// Name is the tool's name in the flat namespace clients address.
	Name() string
	// Description is the plain description: help text without tags.
	Description() string
	// ModelDescription is what a model reads: the description followed by
	// a trailing "Tags: a, b" line when the tool has tags.
	ModelDescription() string
	// Tags are the tool's tags (for example impact:ro).
	Tags() []string
	// Title is a human-readable title, such as the command path with spaces.
	Title() string
	// InputSchema is the JSON Schema of the call's input object.
	InputSchema() json.RawMessage
	// Confirmation says whether calls must be approved first.
	Confirmation() Confirmation
	// Exposure is the ceiling of surfaces the tool may be served on.
	Exposure() Exposure
	// Call runs the tool. A failure of the tool itself (a non-zero exit, a
	// denial, bad arguments) is an [Outcome] with IsError or a
	// [CommandResult]; a returned error means the call could not be made
	// (timeout, cancellation, spawn failure) and servers report it in-band.
	Call(ctx context.Context, req Request) (Outcome, error)
}

// Request is one call's input.
type Request struct {
	// Input is the call's arguments: a JSON object, or empty/null for none.
	Input json.RawMessage
	// Prompter asks a human, when a tool needs to. Nil denies everything.
	Prompter Prompter
	// Output, when set, receives a command's output while it runs: stdout
	// and stderr interleaved, in order, exactly the bytes the result's
	// Output will hold (nothing past the output cap). Writes come from one
	// goroutine, in pieces as the command produces them (a piece may end
	// inside a UTF-8 character); an error or a slow writer never affects
	// the command. Tools that run no command ignore it.
	Output io.Writer
	// Remote tunes a call of another agent's tool; other tools ignore it.
	Remote Remote
}

// Remote is what a call of another agent's tool takes from its caller,
// beside the input: how the call travels, and over which connection.
type Remote struct {
	// Streamed makes the call take the streamed path even when it wants
	// no output while it runs. The gateway sets it for calls that outlive
	// their requests (MCP tasks, Agent2Agent tasks): a stream is what
	// lets the agent find its caller gone (the gateway that ran it
	// stopped) and stop the command, where a unary call runs on to the
	// agent's tool_timeout.
	Streamed bool
	// Via, when set, is the connection the call is made over instead of
	// the importer's own (a remotetools.Caller): the gateway passes the
	// NATS connection of the caller's policy role, so that the fleet's
	// own subject permissions decide what the role reaches. It is typed
	// loosely because package tool knows no transport.
	Via any
}

// Prompter asks a human a yes/no question. Implementations fail closed:
// anything but an explicit yes is false.
type Prompter interface {
	Confirm(ctx context.Context, question string) (bool, error)
}

// DenyAll is the [Prompter] for paths where nobody can be asked: every
// question is answered no.
type DenyAll struct{}

// Confirm answers no.
func (DenyAll) Confirm(context.Context, string) (bool, error) { return false, nil }

// PrompterOrDeny returns p, or [DenyAll] when p is nil.
func PrompterOrDeny(p Prompter) Prompter {
	if p == nil {
		return DenyAll{}
	}
	return p
}

// CommandResult is the outcome of running a command. Its JSON is the same
// whether the command ran locally or on a remote agent.
type CommandResult struct {
	Command   string `json:"command"`
	ExitCode  int    `json:"exit_code"`
	Output    string `json:"output"`
	Truncated bool   `json:"truncated"`
}

// ResultPromiser is a tool that promises the shape of its answers: when
// ReturnsCommandResult is true, every call of it that runs answers with a
// [CommandResult] (an in-band failure, IsError, carries none). Servers
// declare the result's schema for such tools only, so a client can rely
// on the envelope before the first call.
type ResultPromiser interface {
	ReturnsCommandResult() bool
}

// ReturnsCommandResult reports whether t promises a [CommandResult] for
// every call that runs ([ResultPromiser]). A tool that says nothing
// promises nothing.
func ReturnsCommandResult(t Tool) bool {
	p, ok := t.(ResultPromiser)
	return ok && p.ReturnsCommandResult()
}

// Outcome is what a call produced: a [CommandResult] for command tools, or
// verbatim JSON for in-process tools. IsError marks an in-band failure whose
// text is in Message (a denial, bad input); a command that exits non-zero is
// not an error, its exit code is in Result.
type Outcome struct {
	Result  *CommandResult
	JSON    json.RawMessage
	IsError bool
	Message string
}

// Failure returns an in-band error outcome.
func Failure(message string) Outcome { return Outcome{IsError: true, Message: message} }

// Text renders the outcome as the text a client receives: the
// CommandResult JSON, the verbatim JSON, or the error message.
func (o Outcome) Text() string {
	switch {
	case o.IsError:
		return o.Message
	case o.Result != nil:
		b, _ := json.Marshal(o.Result) // a struct of strings, ints and bools always marshals
		return string(b)
	default:
		return string(o.JSON)
	}
}
