package a2a_test

import (
	"encoding/json"
	"io/fs"
	"testing"

	"github.com/fiskfleet/fiskfleet/schemas"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestPatternsMatchSchema keeps the Go rules and the schema's in step:
// each is stated twice, once for each side of the wire.
func TestPatternsMatchSchema(t *testing.T) {
	raw, err := fs.ReadFile(schemas.FS(), "v1/common.json")
	if err != nil {
		t.Fatalf("reading common.json: %v", err)
	}
	var common struct {
		Defs map[string]struct {
			Pattern string `json:"pattern"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &common); err != nil {
		t.Fatalf("parsing common.json: %v", err)
	}
	tests := []struct {
		name string
		def  string
		want string
	}{
		{name: "identity", def: "identity", want: a2a.IdentityPattern},
		{name: "tool name", def: "toolName", want: tool.NamePattern()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := common.Defs[tt.def].Pattern; got != tt.want {
				t.Errorf("common.json %s pattern: got %q, want %q", tt.def, got, tt.want)
			}
		})
	}
}
