package a2a

import (
	"encoding/json"
	"time"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// Protocol ids, one per message kind; each has a schema of its own.
const (
	ProtocolDiscoveryRequest = schemas.ProtocolPrefix + "discovery.request"
	ProtocolDiscoveryReply   = schemas.ProtocolPrefix + "discovery.reply"
	ProtocolToolRequest      = schemas.ProtocolPrefix + "tool.request"
	ProtocolToolReply        = schemas.ProtocolPrefix + "tool.reply"
	ProtocolRequest          = schemas.ProtocolPrefix + "request"
	ProtocolEvent            = schemas.ProtocolPrefix + "event"
	ProtocolResult           = schemas.ProtocolPrefix + "result"
	ProtocolError            = schemas.ProtocolPrefix + "error"
	ProtocolCancel           = schemas.ProtocolPrefix + "cancel"
	ProtocolAck              = schemas.ProtocolPrefix + "ack"
)

// Participant names one end of an exchange: an identity and, optionally,
// the instance serving it. Both match [IdentityPattern].
type Participant struct {
	Name     string `json:"name"`
	Instance string `json:"instance,omitempty"`
}

// Header is embedded in every message so its fields marshal at the top
// level.
type Header struct {
	Protocol     string `json:"protocol"`
	ID           string `json:"id"`
	Request      string `json:"request"`
	Conversation string `json:"conversation"`
	// Parent is reserved for multi-hop correlation and not set today.
	Parent   string      `json:"parent,omitempty"`
	Sequence uint64      `json:"sequence"`
	Time     time.Time   `json:"time"`
	Sender   Participant `json:"sender"`
	// Recipient is the intended receiver, a label only: replies go to the
	// transport's inbox whatever it says.
	Recipient *Participant `json:"recipient,omitempty"`
	// MustUnderstand, when true, asks a receiver that does not understand
	// Protocol to fail closed rather than make what it can of the message.
	// It is a boolean in v1. Every receiver here already fails closed on a
	// protocol id it does not know (see [Decode]), so it changes nothing
	// on receive; nothing here sets it.
	MustUnderstand bool `json:"must_understand,omitempty"`
}

// Message is implemented by every message type. The unexported method
// keeps the set closed to this package's ten kinds.
type Message interface {
	// ProtocolID is the protocol id of the message's kind, whatever its
	// Header.Protocol currently holds.
	ProtocolID() string
	header() *Header
}

func (h *Header) header() *Header { return h }

// DiscoveryRequest asks an agent for its card.
type DiscoveryRequest struct {
	Header
}

// DiscoveryReply carries an agent's card.
type DiscoveryReply struct {
	Header
	AgentCard
}

// AgentCard says who an agent is and which tools it serves. The serving
// agent computes it once at start, so what it advertises cannot drift from
// what it dispatches.
type AgentCard struct {
	Name        string           `json:"name"`
	Version     string           `json:"version"`
	Description string           `json:"description,omitempty"`
	Protocols   []string         `json:"protocols"`
	Tools       []ToolDescriptor `json:"tools"`
}

// ToolDescriptor describes one served tool.
type ToolDescriptor struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolRequest calls one tool. Input, when present, is a JSON object; the
// client drops a null input and the server treats absence as {}.
type ToolRequest struct {
	Header
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ToolReply is a tool call's outcome. IsError marks an in-band failure
// (unknown tool, bad input, denial, timeout); a command that ran carries
// Exec, and its non-zero exit is not an error.
//
// Fisk AI's own v1 agents omit output when it is empty (and exit_code when
// it is 0); both are optional in v1, so a reply without them decodes to
// the zero values, which mean exactly that. Output is always sent: every
// v1 receiver accepts it, and an explicit "" reads the same to all of them.
type ToolReply struct {
	Header
	IsError bool   `json:"is_error,omitempty"`
	Output  string `json:"output"`
	Exec    *Exec  `json:"exec,omitempty"`
}

// Exec describes the command a tool call ran. ExitCode is always sent,
// also when 0, though v1 agents omit a 0 and absence decodes as 0.
type Exec struct {
	Command   string `json:"command"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"truncated,omitempty"`
}

// StopReason says why a task ended.
type StopReason string

// Stop reasons.
const (
	StopEndTurn         StopReason = "end_turn"
	StopMaxTokens       StopReason = "max_tokens"
	StopRefusal         StopReason = "refusal"
	StopCanceled        StopReason = "canceled"
	StopError           StopReason = "error"
	StopBudgetExhausted StopReason = "budget_exhausted"
	StopSuspended       StopReason = "suspended"
	StopMaxIterations   StopReason = "max_iterations"
)

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens,omitempty"`
	OutputTokens int64 `json:"output_tokens,omitempty"`
}

// Budget bounds a delegated task. A request may only lower the receiver's
// own limits. CallTimeout is a Go duration string.
type Budget struct {
	MaxTokens     int64  `json:"max_tokens,omitempty"`
	MaxIterations int64  `json:"max_iterations,omitempty"`
	CallTimeout   string `json:"call_timeout,omitempty"`
}

// Request delegates a task. The task flow is defined and validated but no
// transport path carries it yet.
type Request struct {
	Header
	Prompt    string   `json:"prompt"`
	Context   string   `json:"context,omitempty"`
	ToolHints []string `json:"tool_hints,omitempty"`
	Budget    *Budget  `json:"budget,omitempty"`
	Stream    bool     `json:"stream,omitempty"`
}

// Event streams one block of a task.
type Event struct {
	Header
	Block Block `json:"block"`
}

// Result ends a task.
type Result struct {
	Header
	StopReason StopReason `json:"stop_reason"`
	Text       string     `json:"text,omitempty"`
	Usage      *Usage     `json:"usage,omitempty"`
}

// ErrorMessage ends a task with a failure.
type ErrorMessage struct {
	Header
	Error      string     `json:"error"`
	Code       string     `json:"code,omitempty"`
	StopReason StopReason `json:"stop_reason,omitempty"`
}

// Cancel asks for a task to stop.
type Cancel struct {
	Header
	Reason string `json:"reason,omitempty"`
}

// Ack accepts or refuses a task.
type Ack struct {
	Header
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
}

func (*DiscoveryRequest) ProtocolID() string { return ProtocolDiscoveryRequest }
func (*DiscoveryReply) ProtocolID() string   { return ProtocolDiscoveryReply }
func (*ToolRequest) ProtocolID() string      { return ProtocolToolRequest }
func (*ToolReply) ProtocolID() string        { return ProtocolToolReply }
func (*Request) ProtocolID() string          { return ProtocolRequest }
func (*Event) ProtocolID() string            { return ProtocolEvent }
func (*Result) ProtocolID() string           { return ProtocolResult }
func (*ErrorMessage) ProtocolID() string     { return ProtocolError }
func (*Cancel) ProtocolID() string           { return ProtocolCancel }
func (*Ack) ProtocolID() string              { return ProtocolAck }
