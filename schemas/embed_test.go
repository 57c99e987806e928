package schemas

import (
	"encoding/json"
	"io/fs"
	"testing"
)

// TestMessageSchemasShape checks every message schema follows the rules the
// codec relies on: the header by $ref, its protocol pinned by const, and
// unknown keys rejected by unevaluatedProperties.
func TestMessageSchemasShape(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			var s map[string]any
			b, err := fs.ReadFile(FS(), "v1/"+kind+".json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("parsing: %v", err)
			}
			if got, want := s["$id"], BaseURL+kind+".json"; got != want {
				t.Errorf("$id: got %v, want %v", got, want)
			}
			if got := s["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema: got %v, want draft 2020-12", got)
			}
			if got := s["unevaluatedProperties"]; got != false {
				t.Errorf("unevaluatedProperties: got %v, want false", got)
			}
			allOf, _ := s["allOf"].([]any)
			if len(allOf) != 1 || allOf[0].(map[string]any)["$ref"] != "common.json#/$defs/header" {
				t.Errorf("allOf: got %v, want the header $ref", s["allOf"])
			}
			props, _ := s["properties"].(map[string]any)
			proto, _ := props["protocol"].(map[string]any)
			if got, want := proto["const"], ProtocolPrefix+kind; got != want {
				t.Errorf("protocol const: got %v, want %v", got, want)
			}
		})
	}
}

func TestEveryFileIsKnown(t *testing.T) {
	entries, err := fs.ReadDir(FS(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(entries), len(Kinds)+1; got != want {
		t.Errorf("schema files: got %d, want %d (one per kind plus common.json)", got, want)
	}
}

// TestAuditRecordSchemaShape checks the audit record schema is a closed
// draft 2020-12 object whose $id matches its path, and that every nested
// object is closed too.
func TestAuditRecordSchemaShape(t *testing.T) {
	b, err := fs.ReadFile(FS(), AuditRecordPath)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("parsing: %v", err)
	}
	if got, want := s["$id"], AuditRecordURL; got != want {
		t.Errorf("$id: got %v, want %v", got, want)
	}
	if got := s["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema: got %v, want draft 2020-12", got)
	}
	objects := map[string]any{"record": s}
	defs, _ := s["$defs"].(map[string]any)
	for name, d := range defs {
		if m, _ := d.(map[string]any); m["type"] == "object" {
			objects[name] = m
		}
	}
	if got, want := len(objects), 4; got != want {
		t.Errorf("objects: got %d, want %d (record, caller, gate, outcome)", got, want)
	}
	for name, o := range objects {
		if got := o.(map[string]any)["additionalProperties"]; got != false {
			t.Errorf("%s additionalProperties: got %v, want false", name, got)
		}
	}
}

func TestAuditDirectoryHoldsOnlyTheRecord(t *testing.T) {
	entries, err := fs.ReadDir(FS(), "audit")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(entries), 1; got != want {
		t.Errorf("audit schema files: got %d, want %d (record.json)", got, want)
	}
}
