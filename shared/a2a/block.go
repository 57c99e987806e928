package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Block is one piece of a streamed task: exactly one of the six block
// types. Its JSON "type" discriminator is derived from the Go type of
// Content when marshalled, so the two can never disagree. A Block with no
// Content fails to marshal ([ErrEmptyBlock]) rather than encode as null; an
// unrecognised type fails to unmarshal ([ErrUnknownBlock]).
type Block struct {
	Content BlockContent
}

// BlockContent is implemented by the six block types.
type BlockContent interface {
	// BlockType is the block's "type" discriminator.
	BlockType() string
}

// ThinkingBlock is a model's reasoning. Signature is carried for display and
// audit only: a provider-specific signature is never replayed into a model
// across the agent boundary.
type ThinkingBlock struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
	Provider  string `json:"provider,omitempty"`
}

// TextBlock is model text.
type TextBlock struct {
	Text string `json:"text"`
}

// ToolCallBlock is a tool call a task makes.
type ToolCallBlock struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// ToolResultBlock is the outcome of a [ToolCallBlock].
type ToolResultBlock struct {
	CallID  string `json:"call_id"`
	IsError bool   `json:"is_error,omitempty"`
	Output  string `json:"output,omitempty"`
	Exec    *Exec  `json:"exec,omitempty"`
}

// AgentCallBlock is a task delegated to another agent.
type AgentCallBlock struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Task string `json:"task"`
}

// StatusBlock reports a task's progress.
type StatusBlock struct {
	Iteration int64  `json:"iteration,omitempty"`
	Phase     string `json:"phase,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`
}

func (*ThinkingBlock) BlockType() string   { return "thinking" }
func (*TextBlock) BlockType() string       { return "text" }
func (*ToolCallBlock) BlockType() string   { return "tool_call" }
func (*ToolResultBlock) BlockType() string { return "tool_result" }
func (*AgentCallBlock) BlockType() string  { return "agent_call" }
func (*StatusBlock) BlockType() string     { return "status" }

// newBlockContent returns an empty content value for a discriminator.
func newBlockContent(typ string) (BlockContent, bool) {
	switch typ {
	case "thinking":
		return &ThinkingBlock{}, true
	case "text":
		return &TextBlock{}, true
	case "tool_call":
		return &ToolCallBlock{}, true
	case "tool_result":
		return &ToolResultBlock{}, true
	case "agent_call":
		return &AgentCallBlock{}, true
	case "status":
		return &StatusBlock{}, true
	}
	return nil, false
}

// MarshalJSON writes the content's fields with "type" first.
func (b Block) MarshalJSON() ([]byte, error) {
	if b.Content == nil {
		return nil, ErrEmptyBlock
	}
	body, err := json.Marshal(b.Content)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s block: %w", b.Content.BlockType(), err)
	}
	if bytes.Equal(body, []byte("null")) {
		return nil, ErrEmptyBlock
	}
	var out bytes.Buffer
	out.Grow(len(body) + 24)
	out.WriteString(`{"type":`)
	typ, _ := json.Marshal(b.Content.BlockType()) // a string always marshals
	out.Write(typ)
	if len(body) > 2 {
		out.WriteByte(',')
		out.Write(body[1:])
	} else {
		out.WriteByte('}')
	}
	return out.Bytes(), nil
}

// UnmarshalJSON reads the discriminator and decodes into the matching type.
func (b *Block) UnmarshalJSON(data []byte) error {
	var probe struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("decoding block: %w", err)
	}
	if probe.Type == nil {
		return fmt.Errorf("%w: block has no type", ErrUnknownBlock)
	}
	content, ok := newBlockContent(*probe.Type)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownBlock, *probe.Type)
	}
	// The discriminator is not a field of the content types; decode the
	// rest with a map-free pass by ignoring it.
	if err := json.Unmarshal(data, content); err != nil {
		return fmt.Errorf("decoding %s block: %w", *probe.Type, err)
	}
	b.Content = content
	return nil
}
