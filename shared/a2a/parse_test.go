package a2a

import (
	"strings"
	"testing"
)

// TestParseMatchesEncodingJSON holds parse to encoding/json on the corners
// of the grammar: what it accepts, and the tree it builds (see checkParse).
func TestParseMatchesEncodingJSON(t *testing.T) {
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	tests := []struct {
		name   string
		data   string
		wantOK bool
	}{
		{name: "empty object", data: `{}`, wantOK: true},
		{name: "empty array", data: `[]`, wantOK: true},
		{name: "whitespace around and inside", data: " \t\r\n{ \"a\" :\n[ 1 , true ,null,false ] }\n ", wantOK: true},
		{name: "top-level scalars", data: `"x"`, wantOK: true},
		{name: "numbers", data: `[0,-0,1,-12,3.25,1e5,1E+2,-1.0e-3,12345678901234567890123,0.0]`, wantOK: true},
		{name: "escapes", data: `["\"\\\/\b\f\n\r\t","\u00e9\u0041","\ud83d\ude00","caf\u00E9"]`, wantOK: true},
		{name: "lone surrogates read as U+FFFD", data: `["\ud800","\udc00x","\ud800\u0041"]`, wantOK: true},
		{name: "raw non-ASCII", data: "[\"é\",\"\u2028\",\"😀\",\"\x7f\"]", wantOK: true},
		{name: "invalid UTF-8 read as U+FFFD", data: "[\"\xff\",\"a\xc0\x80b\",\"\xed\xa0\x80\",\"\xe2\x82\"]", wantOK: true},
		{name: "invalid UTF-8 beside an escape", data: "[\"\xff\\n\"]", wantOK: true},
		{name: "empty and escaped member names", data: `{"":1,"\u0000":2,"a\"b":3}`, wantOK: true},
		{name: "nested at the depth limit", data: nested(maxDepth), wantOK: true},

		{name: "empty input", data: ``},
		{name: "only whitespace", data: " \n"},
		{name: "byte order mark", data: "\ufeff{}"},
		{name: "two values", data: `{} {}`},
		{name: "trailing garbage", data: `{}x`},
		{name: "trailing comma in an object", data: `{"a":1,}`},
		{name: "trailing comma in an array", data: `[1,]`},
		{name: "leading comma", data: `[,1]`},
		{name: "missing colon", data: `{"a" 1}`},
		{name: "missing value", data: `{"a":}`},
		{name: "unquoted name", data: `{a:1}`},
		{name: "single quotes", data: `{'a':1}`},
		{name: "unclosed object", data: `{"a":1`},
		{name: "unclosed array", data: `[1`},
		{name: "unclosed string", data: `"abc`},
		{name: "extra closer", data: `[1]]`},
		{name: "mismatched closer", data: `[1}`},
		{name: "raw control character in a string", data: "[\"a\tb\"]"},
		{name: "raw NUL in a string", data: "[\"a\x00b\"]"},
		{name: "unknown escape", data: `["\x41"]`},
		{name: "short unicode escape", data: `["\u12"]`},
		{name: "non-hex unicode escape", data: `["\u12g4"]`},
		{name: "escape at the end", data: `["\`},
		{name: "leading zero", data: `[01]`},
		{name: "bare minus", data: `[-]`},
		{name: "plus sign", data: `[+1]`},
		{name: "no integer part", data: `[.5]`},
		{name: "no fraction digits", data: `[1.]`},
		{name: "no exponent digits", data: `[1e]`},
		{name: "signed exponent without digits", data: `[1e+]`},
		{name: "hexadecimal", data: `[0x10]`},
		{name: "NaN", data: `[NaN]`},
		{name: "misspelled literal", data: `[tru]`},
		{name: "literal in another case", data: `[True]`},
		{name: "literal running on", data: `[nullx]`},
		{name: "one past the depth limit", data: nested(maxDepth + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkParse(t, []byte(tt.data))
			if _, err := parse([]byte(tt.data)); (err == nil) != tt.wantOK {
				t.Errorf("parse(%q): got %v, want success %v", tt.data, err, tt.wantOK)
			}
		})
	}
}

// FuzzParse holds parse to encoding/json on arbitrary bytes (see
// checkParse); the message targets reach it only through message-shaped
// inputs.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[1,-2.5e3,true,false,null],"b":{"c":"d"}}`, `{"a":1,"a":2}`,
		`["\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800"]`, "[\"\xff\xfe\"]", `[01]`, `{"a":1,}`,
		`{"n\u0061me":1,"name":2}`, " [ ] ", `"x"`, `-0.0E-0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}
