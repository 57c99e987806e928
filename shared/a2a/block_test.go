package a2a

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestBlockTypeDerivedFromGoType(t *testing.T) {
	tests := []struct {
		name    string
		content BlockContent
		want    string
	}{
		{name: "thinking", content: &ThinkingBlock{Text: "t"}, want: "thinking"},
		{name: "text", content: &TextBlock{Text: "t"}, want: "text"},
		{name: "tool call", content: &ToolCallBlock{ID: "c", Name: "n"}, want: "tool_call"},
		{name: "tool result", content: &ToolResultBlock{CallID: "c"}, want: "tool_result"},
		{name: "agent call", content: &AgentCallBlock{ID: "c", Name: "n", Task: "t"}, want: "agent_call"},
		{name: "status", content: &StatusBlock{}, want: "status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.content.BlockType(); got != tt.want {
				t.Errorf("BlockType: got %q, want %q", got, tt.want)
			}
			raw, err := json.Marshal(Block{Content: tt.content})
			if err != nil {
				t.Fatalf("marshalling: %v", err)
			}
			if prefix := `{"type":"` + tt.want + `"`; !strings.HasPrefix(string(raw), prefix) {
				t.Errorf("block JSON: got %s, want it to start with %s", raw, prefix)
			}
			// The discriminator maps back to the same Go type.
			content, ok := newBlockContent(tt.want)
			if !ok {
				t.Fatalf("newBlockContent(%q): got none, want a content type", tt.want)
			}
			if got := content.BlockType(); got != tt.want {
				t.Errorf("newBlockContent(%q).BlockType: got %q, want %q", tt.want, got, tt.want)
			}
		})
	}
}

// TestBlockTypeCannotBeForged checks a content type cannot smuggle its own
// discriminator: the JSON carries exactly one "type", the derived one.
func TestBlockTypeCannotBeForged(t *testing.T) {
	raw, err := json.Marshal(Block{Content: &TextBlock{Text: `"type":"status"`}})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if got := fields["type"]; got != "text" {
		t.Errorf("type: got %v, want text", got)
	}
	if got := strings.Count(string(raw), `"type":`); got != 1 {
		t.Errorf(`"type" keys: got %d in %s, want 1`, got, raw)
	}
}

func TestEmptyBlock(t *testing.T) {
	tests := []struct {
		name  string
		block Block
	}{
		{name: "nil content", block: Block{}},
		{name: "typed nil content", block: Block{Content: (*TextBlock)(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.block.MarshalJSON(); !errors.Is(err, ErrEmptyBlock) {
				t.Errorf("MarshalJSON: got %v, want %v", err, ErrEmptyBlock)
			}
			if _, err := json.Marshal(tt.block); !errors.Is(err, ErrEmptyBlock) {
				t.Errorf("json.Marshal: got %v, want %v", err, ErrEmptyBlock)
			}
			ev := asReply(&Event{Block: tt.block})
			data, err := Encode(ev)
			if !errors.Is(err, ErrEmptyBlock) {
				t.Errorf("Encode event: got %v, want %v", err, ErrEmptyBlock)
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("Encode event: got %v, want it to wrap %v too", err, ErrInvalidMessage)
			}
			if data != nil {
				t.Errorf("Encode event: got %s, want no bytes", data)
			}
		})
	}
}

func TestBlockUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr error // nil: any error will do, as encoding/json's own
		wantIn  string
	}{
		{name: "unknown type", data: `{"type":"image","url":"x"}`, wantErr: ErrUnknownBlock, wantIn: `"image"`},
		{name: "empty type", data: `{"type":"","text":"x"}`, wantErr: ErrUnknownBlock, wantIn: `""`},
		{name: "type in another case", data: `{"type":"Text","text":"x"}`, wantErr: ErrUnknownBlock, wantIn: `"Text"`},
		{name: "missing type", data: `{"text":"x"}`, wantErr: ErrUnknownBlock, wantIn: "no type"},
		{name: "empty object", data: `{}`, wantErr: ErrUnknownBlock, wantIn: "no type"},
		{name: "null type", data: `{"type":null,"text":"x"}`, wantErr: ErrUnknownBlock, wantIn: "no type"},
		{name: "numeric type", data: `{"type":1}`, wantIn: "decoding block"},
		{name: "array", data: `[]`, wantIn: "decoding block"},
		{name: "string", data: `"text"`, wantIn: "decoding block"},
		{name: "field of the wrong type", data: `{"type":"text","text":1}`, wantIn: "decoding text block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Block
			err := json.Unmarshal([]byte(tt.data), &b)
			if err == nil {
				t.Fatalf("Unmarshal(%s): got a %s block, want an error", tt.data, dump(b))
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Unmarshal(%s): got %v, want %v", tt.data, err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Unmarshal(%s): got %q, want it to contain %q", tt.data, err, tt.wantIn)
			}
			if b.Content != nil {
				t.Errorf("content after a failed unmarshal: got %s, want none", dump(b.Content))
			}
		})
	}
}
