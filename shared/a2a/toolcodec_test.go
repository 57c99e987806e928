package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestAppendToolMessages holds the direct encoding of tool requests and
// replies to json.Marshal's bytes and to the schema, and checks it leaves
// the forms it does not write to the full path.
func TestAppendToolMessages(t *testing.T) {
	odd := func(m Message) Message { m.header().ID = "id-with-dash"; return m }
	texts := []string{"", "hi\n", "<b>&amp;</b> \"quoted\" \\ back", "tab\tcr\rnul\x00esc\x1b", "bad utf-8 \xff\xfe end", "line\u2028para\u2029", "ünïcødé ✓ 🐟", "cut \xe2\x82"}
	type tc struct {
		name   string
		msg    Message
		direct bool
	}
	req := func(input string) *ToolRequest {
		var raw json.RawMessage
		if input != "" {
			raw = json.RawMessage(input)
		}
		return NewToolRequest(alice, "bob", "disk_usage", raw)
	}
	tests := []tc{
		{"request without input", req(""), true},
		{"request with an empty object", req(`{}`), true},
		{"request with nested input", req(`{"path":"/var","depth":2,"n":{"a":[1,2.5e3,{"b":null}],"t":true}}`), true},
		{"request with spaced input", req(" {\n \"path\" : \"/var\" ,\t\"x\":[ 1 , 2 ] }\n"), true},
		{"request with escapes in input", req(`{"s":"tab\t \"q\" \u00e9 \\ é"}`), true},
		{"request with < in input", req(`{"s":"<b>"}`), false},
		{"request with & in input", req(`{"s":"a&b"}`), false},
		{"request with a line separator in input", req("{\"s\":\"a\u2028b\"}"), false},
		{"request with an odd id", odd(req(`{}`)), false},
		{"request with must_understand", withOptionalHeader(req(`{}`)), false},
		{"reply, empty", asReply(&ToolReply{}), true},
		{"reply, error", asReply(&ToolReply{IsError: true, Output: "unknown tool \"x\" <y>"}), true},
		{"reply, exec", asReply(&ToolReply{Output: "out\n", Exec: &Exec{Command: "app x --y 'z'"}}), true},
		{"reply, exec failed and cut", asReply(&ToolReply{Output: "o", Exec: &Exec{Command: "app", ExitCode: -2, Truncated: true}}), true},
		{"reply, exit 137", asReply(&ToolReply{Exec: &Exec{Command: "app", ExitCode: 137}}), true},
		{"reply with an odd id", odd(asReply(&ToolReply{Output: "x"})), false},
		{"reply with must_understand", withOptionalHeader(asReply(&ToolReply{})), false},
	}
	for _, text := range texts {
		tests = append(tests, tc{"reply output " + text, asReply(&ToolReply{Output: text, Exec: &Exec{Command: text}}), true})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var ok bool
			switch m := tt.msg.(type) {
			case *ToolRequest:
				got, ok = appendToolRequest(nil, m)
			case *ToolReply:
				got, ok = appendToolReply(nil, m)
			}
			if ok != tt.direct {
				t.Fatalf("direct: got %v, want %v", ok, tt.direct)
			}
			enc := checkDirect(t, tt.msg, got, ok)
			back := reflect.New(reflect.TypeOf(tt.msg).Elem()).Interface().(Message)
			if err := Decode(enc, back); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			full := reflect.New(reflect.TypeOf(tt.msg).Elem()).Interface().(Message)
			if err := decodeAs(enc, full, full.ProtocolID(), mustValidator().byProtocol[full.ProtocolID()]); err != nil {
				t.Fatalf("full path: %v", err)
			}
			sameMessage(t, enc, back, full)
		})
	}
}

// TestEncodeToolRefusesWhatThePeerWould checks the direct path leaves
// requests the schema refuses to the full path, which refuses them: a
// name outside the pattern, input that is not an object or repeats a key.
func TestEncodeToolRefusesWhatThePeerWould(t *testing.T) {
	for name, m := range map[string]*ToolRequest{
		"name with a dot": NewToolRequest(alice, "bob", "a.b", nil),
		"empty name":      NewToolRequest(alice, "bob", "", nil),
		"name too long":   NewToolRequest(alice, "bob", strings.Repeat("n", 65), nil),
		"array input":     NewToolRequest(alice, "bob", "x", json.RawMessage(`[1]`)),
		"null input": func() *ToolRequest {
			m := NewToolRequest(alice, "bob", "x", nil)
			m.Input = json.RawMessage(`null`)
			return m
		}(),
		"repeated key":     NewToolRequest(alice, "bob", "x", json.RawMessage(`{"a":1,"a":2}`)),
		"nested repeat":    NewToolRequest(alice, "bob", "x", json.RawMessage(`{"a":{"b":1,"b":2}}`)),
		"not JSON":         NewToolRequest(alice, "bob", "x", json.RawMessage(`{"a":`)),
		"trailing garbage": NewToolRequest(alice, "bob", "x", json.RawMessage(`{} {}`)),
		"string input":     NewToolRequest(alice, "bob", "x", json.RawMessage(`"s"`)),
		"wrong protocol id": func() *ToolRequest {
			m := NewToolRequest(alice, "bob", "x", nil)
			m.Protocol = ProtocolToolReply
			return m
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if b, ok := appendToolRequest(nil, m); ok {
				t.Fatalf("direct path wrote %s, want it left to the full path", b)
			}
			if b, err := Encode(m); err == nil {
				t.Fatalf("Encode wrote %s, want an error", b)
			}
		})
	}
}

// TestEncodeToolTooLarge checks the direct path keeps the size cap.
func TestEncodeToolTooLarge(t *testing.T) {
	_, err := Encode(asReply(&ToolReply{Output: strings.Repeat("x", MaxMessageSize)}))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("reply: got %v, want %v", err, ErrTooLarge)
	}
	big := `{"s":"` + strings.Repeat("x", MaxMessageSize) + `"}`
	_, err = Encode(NewToolRequest(alice, "bob", "x", json.RawMessage(big)))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("request: got %v, want %v", err, ErrTooLarge)
	}
}

// TestDecodeToolKeepsInputBytes checks a directly decoded request hands on
// its input exactly as it arrived, as json.RawMessage does on the full
// path, so a digest of the arguments is the same either way.
func TestDecodeToolKeepsInputBytes(t *testing.T) {
	input := "{ \"b\" : 1 ,\n\"a\":[ 2 ] }"
	data := []byte(`{"protocol":"` + ProtocolToolRequest + `",` + v1Header + `,"input":` + input + `,"name":"x"}`)
	var m ToolRequest
	if err := Decode(data, &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Input) != input {
		t.Errorf("input: got %q, want %q", m.Input, input)
	}
	data[bytes.Index(data, []byte(`"b"`))+1] = 'c'
	if string(m.Input) != input {
		t.Errorf("input shares the message's buffer: got %q after the buffer changed", m.Input)
	}
}

// sameMessage fails t unless a and b, decodings of data, are one message.
func sameMessage(t *testing.T, data []byte, a, b Message) {
	t.Helper()
	if !a.header().Time.Equal(b.header().Time) {
		t.Fatalf("time: got %v, want %v", a.header().Time, b.header().Time)
	}
	a.header().Time, b.header().Time = time.Time{}, time.Time{}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the direct path decoded %q as %s, the schema path as %s", data, dump(a), dump(b))
	}
}

// FuzzToolDirect holds the direct decoding of tool requests and replies to
// the schema: whatever it accepts, the schema and json.Unmarshal accept
// too, decoding the same message. (What it refuses goes to the schema
// anyway.)
func FuzzToolDirect(f *testing.F) {
	addSeeds(f, nil,
		NewToolRequest(alice, "bob", "uptime", nil),
		NewToolRequest(alice, "bob", "disk_usage", json.RawMessage(`{"path":"/var","n":{"a":[1,{"b":null}]}}`)),
		asReply(&ToolReply{}),
		asReply(&ToolReply{IsError: true, Output: "denied"}),
		asReply(&ToolReply{Output: "out \xff\n", Exec: &Exec{Command: "app x", ExitCode: -2, Truncated: true}}),
		withOptionalHeader(asReply(&ToolReply{})),
	)
	addHostileSeeds(f, noPrefix)
	f.Add([]byte(`{"protocol":"` + ProtocolToolReply + `",` + v1Header + `,"output":"x","exec":{"command":"c","exit_code":1.0}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolReply + `",` + v1Header + `,"exec":{"command":"c","exit_code":-0}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolReply + `",` + v1Header + `,"Output":"x","output":"y"}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolReply + `",` + v1Header + `,"exec":{"command":"c","exit_code":99999999999999999999}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolRequest + `",` + v1Header + `,"name":"x","input":{"a":1},"Input":{"b":2}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolRequest + `",` + v1Header + `,"name":"x","input":null}`))
	f.Add([]byte(`{"protocol":"` + ProtocolToolRequest + `",` + v1Header + `,"name":"x","input":{"x":{"input":1}}}`))
	v := mustValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range []func() Message{func() Message { return &ToolRequest{} }, func() Message { return &ToolReply{} }} {
			fast := newMsg()
			if !decodeDirect(data, fast) {
				continue
			}
			full := newMsg()
			if err := decodeAs(data, full, full.ProtocolID(), v.byProtocol[full.ProtocolID()]); err != nil {
				t.Fatalf("the direct path accepted %q as %s, which the schema path refuses: %v", data, full.ProtocolID(), err)
			}
			sameMessage(t, data, fast, full)
		}
	})
}
