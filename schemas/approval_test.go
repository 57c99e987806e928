package schemas

import (
	"encoding/json"
	"io/fs"
	"strconv"
	"testing"
)

// TestApprovalSchemasShape checks every approval schema is a draft 2020-12
// document whose $id matches its path, and that every object it defines is
// closed: no unknown key is accepted anywhere.
func TestApprovalSchemasShape(t *testing.T) {
	for _, kind := range append([]string{"common"}, ApprovalKinds...) {
		t.Run(kind, func(t *testing.T) {
			b, err := fs.ReadFile(FS(), "approval/"+kind+".json")
			if err != nil {
				t.Fatal(err)
			}
			var s map[string]any
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("parsing: %v", err)
			}
			if got, want := s["$id"], ApprovalBaseURL+kind+".json"; got != want {
				t.Errorf("$id: got %v, want %v", got, want)
			}
			if got := s["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema: got %v, want draft 2020-12", got)
			}
			for path, o := range objects("", s) {
				if got := o["additionalProperties"]; got != false {
					t.Errorf("%s additionalProperties: got %v, want false", path, got)
				}
			}
		})
	}
}

// objects returns every schema of type object in s, by JSON pointer.
func objects(path string, s any) map[string]map[string]any {
	found := map[string]map[string]any{}
	switch v := s.(type) {
	case map[string]any:
		if v["type"] == "object" {
			found[path] = v
		}
		for k, sub := range v {
			for p, o := range objects(path+"/"+k, sub) {
				found[p] = o
			}
		}
	case []any:
		for i, sub := range v {
			for p, o := range objects(path+"/"+strconv.Itoa(i), sub) {
				found[p] = o
			}
		}
	}
	return found
}

func TestEveryApprovalFileIsKnown(t *testing.T) {
	entries, err := fs.ReadDir(FS(), "approval")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(entries), len(ApprovalKinds)+1; got != want {
		t.Errorf("approval schema files: got %d, want %d (one per kind plus common.json)", got, want)
	}
}
