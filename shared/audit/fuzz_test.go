package audit_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// FuzzCanonical checks that Canonical never panics, always returns valid
// JSON that is its own canonical form, and that an object's digest does
// not depend on the order its keys were written in.
func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `{"b":1,"a":2}`, `{"a":{"c":[1,2,{"e":1,"d":2}],"b":"x"}}`,
		`[1,2,3]`, `"s"`, `1.50`, `{"a":`, `{"\u00e9":"é","<":"&"}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		c := audit.Canonical(input)
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q): got invalid JSON %q", input, c)
		}
		if again := audit.Canonical(c); !bytes.Equal(again, c) {
			t.Fatalf("Canonical(%q) is not its own canonical form: got %q, then %q", input, c, again)
		}
		var obj map[string]json.RawMessage
		if !json.Valid(input) || json.Unmarshal(input, &obj) != nil || obj == nil || hasRepeatedKey(input) {
			return
		}
		// The same object with its top-level keys written in reverse.
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		var rev bytes.Buffer
		rev.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				rev.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			rev.Write(kb)
			rev.WriteByte(':')
			rev.Write(obj[k])
		}
		rev.WriteByte('}')
		if a, b := audit.Digest(input), audit.Digest(rev.Bytes()); a != b {
			t.Fatalf("Digest(%q) = %s, Digest(%q) = %s: want equal", input, a, rev.Bytes(), b)
		}
	})
}

// hasRepeatedKey reports whether the top-level object of data repeats a
// key, whose last value wins: reordering would change which.
func hasRepeatedKey(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := tok.(string)
		if seen[k] {
			return true
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}
