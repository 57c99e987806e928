package audit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{name: "absent is an empty object", input: "", want: `{}`},
		{name: "whitespace is an empty object", input: " \n\t", want: `{}`},
		{name: "null is an empty object", input: "null", want: `{}`},
		{name: "keys sorted at every level", input: `{"b":1,"a":{"z":true,"y":null}}`, want: `{"a":{"y":null,"z":true},"b":1}`},
		{name: "insignificant space dropped", input: "{ \"a\" : [ 1 , 2 ] }\n", want: `{"a":[1,2]}`},
		{name: "numbers as written", input: `{"a":1.0,"b":1e3,"c":-0,"d":12345678901234567890123,"e":0.1000}`, want: `{"a":1.0,"b":1e3,"c":-0,"d":12345678901234567890123,"e":0.1000}`},
		{name: "unicode kept as UTF-8", input: `{"name":"Grüße, 世界 \u00e9"}`, want: `{"name":"Grüße, 世界 é"}`},
		{name: "no HTML escaping", input: `{"cmd":"a && b <c>"}`, want: `{"cmd":"a && b <c>"}`},
		{name: "escapes normalised", input: `{"a":"\u0041\/"}`, want: `{"a":"A/"}`},
		{name: "last of a repeated key counts", input: `{"a":1,"a":2}`, want: `{"a":2}`},
		{name: "non-object values kept", input: `[3,"x",false]`, want: `[3,"x",false]`},
		{name: "nested null kept", input: `{"a":null}`, want: `{"a":null}`},
		{name: "invalid JSON becomes a string", input: `{"a":`, want: `"{\"a\":"`},
		{name: "trailing data is not one value", input: `{} {}`, want: `"{} {}"`},
		{name: "invalid UTF-8 replaced", input: "{\"a\":\"\xff\"}", want: `{"a":"` + "\uFFFD" + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(audit.Canonical(json.RawMessage(tt.input)))
			if got != tt.want {
				t.Errorf("Canonical(%q): got %s, want %s", tt.input, got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("Canonical(%q): got invalid JSON %s", tt.input, got)
			}
			if again := string(audit.Canonical(json.RawMessage(got))); again != got {
				t.Errorf("Canonical of the canonical form: got %s, want %s", again, got)
			}
		})
	}
}

func TestDigestStable(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{name: "key order", a: `{"a":1,"b":[1,{"c":2,"d":3}]}`, b: `{"b":[1,{"d":3,"c":2}],"a":1}`, same: true},
		{name: "spacing", a: `{"a":1}`, b: " {\n  \"a\" : 1\n} ", same: true},
		{name: "none and empty object", a: ``, b: `{}`, same: true},
		{name: "null and empty object", a: `null`, b: `{}`, same: true},
		{name: "escaped and plain unicode", a: `{"a":"é"}`, b: `{"a":"\u00e9"}`, same: true},
		{name: "numbers as written differ", a: `{"a":1}`, b: `{"a":1.0}`, same: false},
		{name: "array order matters", a: `[1,2]`, b: `[2,1]`, same: false},
		{name: "values differ", a: `{"a":"x"}`, b: `{"a":"y"}`, same: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			da, db := audit.Digest(json.RawMessage(tt.a)), audit.Digest(json.RawMessage(tt.b))
			if got := da == db; got != tt.same {
				t.Errorf("Digest(%q) == Digest(%q): got %t, want %t (%s, %s)", tt.a, tt.b, got, tt.same, da, db)
			}
			if !strings.HasPrefix(da, "sha256:") || len(da) != len("sha256:")+64 {
				t.Errorf("Digest(%q): got %q, want sha256: and 64 hex digits", tt.a, da)
			}
		})
	}
	// The digest of no arguments is the SHA-256 of {}, fixed forever.
	if got, want := audit.Digest(nil), "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"; got != want {
		t.Errorf("Digest(nil): got %s, want %s", got, want)
	}
}

// TestCanonicalHostile feeds input a caller could send to make the audit
// trail fail: it must give a clear result, quickly, without panicking.
func TestCanonicalHostile(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name      string
		input     string
		wantValid bool // the canonical form is the input re-encoded, not a string of its bytes
	}{
		{name: "nesting within encoding/json's limit", input: deep(5000), wantValid: true},
		{name: "nesting beyond encoding/json's limit", input: deep(20000), wantValid: false},
		{name: "unclosed nesting", input: strings.Repeat("[", 100000), wantValid: false},
		{name: "a megabyte string", input: `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, wantValid: true},
		{name: "many keys", input: "{" + strings.Repeat(`"k":1,`, 50000) + `"z":0}`, wantValid: true},
		{name: "a lone number", input: `1e999999`, wantValid: true},
		{name: "binary", input: "\x00\x01\xfe\xff", wantValid: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := audit.Canonical(json.RawMessage(tt.input))
			if !json.Valid(got) {
				t.Fatalf("Canonical: got invalid JSON (%d bytes)", len(got))
			}
			isString := got[0] == '"'
			if isString == tt.wantValid {
				t.Errorf("Canonical: got a string of the bytes %t, want %t", isString, !tt.wantValid)
			}
			if a, b := audit.Digest(json.RawMessage(tt.input)), audit.Digest(json.RawMessage(tt.input)); a != b {
				t.Errorf("Digest twice: got %s and %s, want equal", a, b)
			}
		})
	}
}

func ExampleCanonical() {
	fmt.Println(string(audit.Canonical(json.RawMessage(`{ "b": 2, "a": {"y": 1.50, "x": "é"} }`))))
	fmt.Println(string(audit.Canonical(nil)))
	// Output:
	// {"a":{"x":"é","y":1.50},"b":2}
	// {}
}

func ExampleDigest() {
	a := audit.Digest(json.RawMessage(`{"count":1,"name":"x"}`))
	b := audit.Digest(json.RawMessage(`{"name": "x", "count": 1}`))
	fmt.Println(a == b)
	fmt.Println(audit.Digest(nil))
	// Output:
	// true
	// sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
}

// TestDigestMatchesApproval checks the contract with operator approvals:
// an approval request digests the same canonical form, so a request and
// the call's audit record name one digest.
func TestDigestMatchesApproval(t *testing.T) {
	for _, in := range []string{``, `{}`, `{"env":"prod","replicas":3}`, `{ "replicas": 3, "env": "prod" }`} {
		if got, want := approval.Digest(audit.Canonical(json.RawMessage(in))), audit.Digest(json.RawMessage(in)); got != want {
			t.Errorf("approval.Digest(Canonical(%q)): got %s, want %s", in, got, want)
		}
	}
}
