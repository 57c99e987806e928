package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// hostileCase is one input Decode must refuse, and how.
type hostileCase struct {
	name    string
	into    func() Message
	data    []byte
	wantErr error
	// wantIn is a substring that names the cause, so a case cannot pass
	// by failing for some other reason.
	wantIn string
}

func intoToolRequest() Message      { return &ToolRequest{} }
func intoToolReply() Message        { return &ToolReply{} }
func intoDiscoveryRequest() Message { return &DiscoveryRequest{} }
func intoDiscoveryReply() Message   { return &DiscoveryReply{} }
func intoRequest() Message          { return &Request{} }
func intoEvent() Message            { return &Event{} }
func intoResult() Message           { return &Result{} }

// hostileInputs builds the table of inputs Decode must refuse.
func hostileInputs(tb testing.TB) []hostileCase {
	tb.Helper()
	toolReq := NewToolRequest(alice, "bob", "disk_usage", []byte(`{"path":"/var"}`))
	toolRep := asReply(&ToolReply{Output: "ok", Exec: &Exec{Command: "app x", ExitCode: 0}})
	discReq := NewDiscoveryRequest(alice, "bob")
	discRep := asReply(&DiscoveryReply{AgentCard: sampleCard()})
	task := asRequest(&Request{Prompt: "p", Budget: &Budget{MaxTokens: 10}})
	event := asReply(&Event{Block: Block{Content: &TextBlock{Text: "x"}}})
	status := asReply(&Event{Block: Block{Content: &StatusBlock{Usage: &Usage{InputTokens: 1}}}})
	result := asReply(&Result{StopReason: StopEndTurn, Usage: &Usage{InputTokens: 1}})

	set := func(m Message, key string, v any) []byte {
		return mutated(tb, m, func(o map[string]any) { o[key] = v })
	}
	setIn := func(m Message, path []string, key string, v any) []byte {
		return mutated(tb, m, func(o map[string]any) { obj(o, path...)[key] = v })
	}
	del := func(m Message, path []string, key string) []byte {
		return mutated(tb, m, func(o map[string]any) { delete(obj(o, path...), key) })
	}

	cases := []hostileCase{
		// Unknown keys, at the top level and in every nested object.
		{name: "unknown top-level key", into: intoToolRequest, data: set(toolReq, "extra", 1),
			wantErr: ErrInvalidMessage, wantIn: "at '/extra': false schema"},
		{name: "top-level key in another case", into: intoToolRequest, data: set(toolReq, "Name", "uptime"),
			wantErr: ErrInvalidMessage, wantIn: "at '/Name': false schema"},
		{name: "unknown key in sender", into: intoToolRequest, data: setIn(toolReq, []string{"sender"}, "role", "admin"),
			wantErr: ErrInvalidMessage, wantIn: "at '/sender': additional properties 'role' not allowed"},
		{name: "unknown key in recipient", into: intoToolRequest, data: setIn(toolReq, []string{"recipient"}, "extra", 1),
			wantErr: ErrInvalidMessage, wantIn: "at '/recipient': additional properties 'extra' not allowed"},
		{name: "unknown key in exec", into: intoToolReply, data: setIn(toolRep, []string{"exec"}, "pid", 12),
			wantErr: ErrInvalidMessage, wantIn: "at '/exec': additional properties 'pid' not allowed"},
		{name: "unknown key in a block", into: intoEvent, data: setIn(event, []string{"block"}, "extra", 1),
			wantErr: ErrInvalidMessage, wantIn: "at '/block': additional properties 'extra' not allowed"},
		{name: "unknown key in a tool descriptor", into: intoDiscoveryReply, data: mutated(tb, discRep, func(o map[string]any) {
			o["tools"].([]any)[0].(map[string]any)["gated"] = true
		}), wantErr: ErrInvalidMessage, wantIn: "at '/tools/0': additional properties 'gated' not allowed"},
		{name: "unknown key in budget", into: intoRequest, data: setIn(task, []string{"budget"}, "max_cost", 5),
			wantErr: ErrInvalidMessage, wantIn: "at '/budget': additional properties 'max_cost' not allowed"},
		{name: "unknown key in usage", into: intoResult, data: setIn(result, []string{"usage"}, "cache_tokens", 5),
			wantErr: ErrInvalidMessage, wantIn: "at '/usage': additional properties 'cache_tokens' not allowed"},
		{name: "unknown key in a status block's usage", into: intoEvent, data: setIn(status, []string{"block", "usage"}, "cache_tokens", 5),
			wantErr: ErrInvalidMessage, wantIn: "additional properties 'cache_tokens' not allowed"},

		// Missing required header fields.
		{name: "missing protocol", into: intoToolRequest, data: del(toolReq, nil, "protocol"),
			wantErr: ErrInvalidMessage, wantIn: "protocol missing"},
		{name: "missing id", into: intoToolRequest, data: del(toolReq, nil, "id"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'id'"},
		{name: "missing request", into: intoToolRequest, data: del(toolReq, nil, "request"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'request'"},
		{name: "missing conversation", into: intoToolRequest, data: del(toolReq, nil, "conversation"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'conversation'"},
		{name: "missing sequence", into: intoToolRequest, data: del(toolReq, nil, "sequence"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'sequence'"},
		{name: "missing time", into: intoToolRequest, data: del(toolReq, nil, "time"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'time'"},
		{name: "missing sender", into: intoToolRequest, data: del(toolReq, nil, "sender"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'sender'"},
		{name: "missing sender.name", into: intoToolRequest, data: del(toolReq, []string{"sender"}, "name"),
			wantErr: ErrInvalidMessage, wantIn: "at '/sender': missing property 'name'"},
		{name: "missing recipient.name", into: intoToolRequest, data: del(toolReq, []string{"recipient"}, "name"),
			wantErr: ErrInvalidMessage, wantIn: "at '/recipient': missing property 'name'"},
		{name: "missing tool name", into: intoToolRequest, data: del(toolReq, nil, "name"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'name'"},
		{name: "missing exec command", into: intoToolReply, data: del(toolRep, []string{"exec"}, "command"),
			wantErr: ErrInvalidMessage, wantIn: "at '/exec': missing property 'command'"},

		// Header values of the wrong shape.
		{name: "empty id", into: intoToolRequest, data: set(toolReq, "id", ""),
			wantErr: ErrInvalidMessage, wantIn: "at '/id': minLength"},
		{name: "id with whitespace", into: intoToolRequest, data: set(toolReq, "id", "a b"),
			wantErr: ErrInvalidMessage, wantIn: "at '/id': 'a b' does not match pattern"},
		{name: "id too long", into: intoToolRequest, data: set(toolReq, "id", strings.Repeat("x", 129)),
			wantErr: ErrInvalidMessage, wantIn: "at '/id': maxLength"},
		{name: "negative sequence", into: intoToolRequest, data: set(toolReq, "sequence", -1),
			wantErr: ErrInvalidMessage, wantIn: "at '/sequence': minimum: got -1, want 0"},
		{name: "fractional sequence", into: intoToolRequest, data: set(toolReq, "sequence", 1.5),
			wantErr: ErrInvalidMessage, wantIn: "at '/sequence': got number, want integer"},
		{name: "string sequence", into: intoToolRequest, data: set(toolReq, "sequence", "0"),
			wantErr: ErrInvalidMessage, wantIn: "at '/sequence': got string, want integer"},
		{name: "time not a timestamp", into: intoToolRequest, data: set(toolReq, "time", "yesterday"),
			wantErr: ErrInvalidMessage, wantIn: "at '/time': 'yesterday' is not valid date-time"},
		{name: "time with a space separator", into: intoToolRequest, data: set(toolReq, "time", "2026-01-02 03:04:05Z"),
			wantErr: ErrInvalidMessage, wantIn: "is not valid date-time"},
		{name: "time without zone", into: intoToolRequest, data: set(toolReq, "time", "2026-01-02T03:04:05"),
			wantErr: ErrInvalidMessage, wantIn: "is not valid date-time"},
		{name: "time with an impossible date", into: intoToolRequest, data: set(toolReq, "time", "2026-02-30T03:04:05Z"),
			wantErr: ErrInvalidMessage, wantIn: "is not valid date-time"},
		{name: "time as a Unix number", into: intoToolRequest, data: set(toolReq, "time", 1767225600),
			wantErr: ErrInvalidMessage, wantIn: "at '/time': got number, want string"},
		{name: "leap second the schema allows but Go cannot hold", into: intoToolRequest, data: set(toolReq, "time", "2016-12-31T23:59:60Z"),
			wantErr: ErrInvalidMessage, wantIn: "decoding " + ProtocolToolRequest},
		{name: "must_understand a list", into: intoToolRequest, data: set(toolReq, "must_understand", []string{"x-trace"}),
			wantErr: ErrInvalidMessage, wantIn: "at '/must_understand': got array, want boolean"},
		{name: "must_understand a string", into: intoToolRequest, data: set(toolReq, "must_understand", "true"),
			wantErr: ErrInvalidMessage, wantIn: "at '/must_understand': got string, want boolean"},
		{name: "null recipient", into: intoToolRequest, data: set(toolReq, "recipient", nil),
			wantErr: ErrInvalidMessage, wantIn: "at '/recipient': got null, want object"},

		// Protocol ids.
		{name: "discovery request body into a tool request", into: intoToolRequest, data: mustEncode(tb, discReq),
			wantErr: ErrUnexpectedProtocol, wantIn: "got " + ProtocolDiscoveryRequest + ", want " + ProtocolToolRequest},
		{name: "tool request body into a discovery request", into: intoDiscoveryRequest, data: mustEncode(tb, toolReq),
			wantErr: ErrUnexpectedProtocol, wantIn: "got " + ProtocolToolRequest + ", want " + ProtocolDiscoveryRequest},
		{name: "tool request body into a tool reply", into: intoToolReply, data: mustEncode(tb, toolReq),
			wantErr: ErrUnexpectedProtocol, wantIn: "got " + ProtocolToolRequest + ", want " + ProtocolToolReply},
		{name: "unknown kind", into: intoToolRequest, data: set(toolReq, "protocol", v1Prefix+"tool.invoke"),
			wantErr: ErrUnknownProtocol, wantIn: `"io.choria.fisk-ai.v1.tool.invoke"`},
		{name: "unknown version", into: intoToolRequest, data: set(toolReq, "protocol", "io.choria.fisk-ai.v2.tool.request"),
			wantErr: ErrUnknownProtocol, wantIn: `"io.choria.fisk-ai.v2.tool.request"`},
		{name: "protocol in another case", into: intoToolRequest, data: set(toolReq, "protocol", strings.ToUpper(ProtocolToolRequest)),
			wantErr: ErrUnknownProtocol, wantIn: "(want " + ProtocolToolRequest + ")"},

		// Tool input: an object when present.
		{name: "input array", into: intoToolRequest, data: set(toolReq, "input", []any{1}),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got array, want object"},
		{name: "input string", into: intoToolRequest, data: set(toolReq, "input", `{"path":"/"}`),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got string, want object"},
		{name: "input number", into: intoToolRequest, data: set(toolReq, "input", 1),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got number, want object"},
		{name: "input null", into: intoToolRequest, data: set(toolReq, "input", nil),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got null, want object"},
		{name: "input boolean", into: intoToolRequest, data: set(toolReq, "input", true),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got boolean, want object"},
		{name: "tool name with a space", into: intoToolRequest, data: set(toolReq, "name", "disk usage"),
			wantErr: ErrInvalidMessage, wantIn: "at '/name': 'disk usage' does not match pattern"},

		// Bodies that are not one JSON object.
		{name: "empty body", into: intoToolRequest, data: []byte(""),
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "truncated JSON", into: intoToolRequest, data: mustEncode(tb, toolReq)[:40],
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "trailing data", into: intoToolRequest, data: append(mustEncode(tb, toolReq), []byte(` {}`)...),
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "two objects", into: intoToolRequest, data: append(mustEncode(tb, toolReq), mustEncode(tb, toolReq)...),
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "single quotes", into: intoToolRequest, data: []byte(`{'protocol':'x'}`),
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "top-level array", into: intoToolRequest, data: []byte(`[` + string(mustEncode(tb, toolReq)) + `]`),
			wantErr: ErrInvalidMessage, wantIn: "not a JSON object"},
		{name: "top-level string", into: intoToolRequest, data: []byte(`"io.choria.fisk-ai.v1.tool.request"`),
			wantErr: ErrInvalidMessage, wantIn: "not a JSON object"},
		{name: "top-level number", into: intoToolRequest, data: []byte(`42`),
			wantErr: ErrInvalidMessage, wantIn: "not a JSON object"},
		{name: "top-level null", into: intoToolRequest, data: []byte(`null`),
			wantErr: ErrInvalidMessage, wantIn: "not a JSON object"},
		{name: "top-level true", into: intoToolRequest, data: []byte(`true`),
			wantErr: ErrInvalidMessage, wantIn: "not a JSON object"},

		// Repeated keys: the schema sees the last, encoding/json would merge.
		{name: "repeated sender smuggling an instance", into: intoDiscoveryRequest,
			// bob names no instance, so encoding/json would keep the first one.
			data:    []byte(`{"sender":{"name":"bob","instance":"x.>"},` + string(mustEncode(tb, NewDiscoveryRequest(bob, "alice")))[1:]),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "sender"`},
		{name: "repeated recipient smuggling an instance", into: intoToolRequest,
			data:    []byte(`{"recipient":{"name":"bob","instance":"*"},` + string(mustEncode(tb, toolReq))[1:]),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "recipient"`},
		{name: "repeated top-level key", into: intoToolRequest, data: spliceBefore(tb, mustEncode(tb, toolReq), `,"name":"uptime"`),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "name"`},
		{name: "repeated key spelled with an escape", into: intoToolRequest, data: spliceBefore(tb, mustEncode(tb, toolReq), `,"n\u0061me":"uptime"`),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "name"`},
		{name: "repeated key in exec", into: intoToolReply,
			data:    []byte(strings.Replace(string(mustEncode(tb, toolRep)), `"exit_code":0`, `"exit_code":0,"exit_code":1`, 1)),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "exit_code"`},
		{name: "repeated key in input", into: intoToolRequest,
			data:    []byte(strings.Replace(string(mustEncode(tb, toolReq)), `{"path":"/var"}`, `{"path":"/var","path":"/etc"}`, 1)),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "path"`},

		// Task flow.
		{name: "event with an unknown block type", into: intoEvent, data: set(event, "block", map[string]any{"type": "image", "url": "x"}),
			wantErr: ErrInvalidMessage, wantIn: "at '/block/type': value must be one of 'thinking'"},
		{name: "event with an empty block", into: intoEvent, data: set(event, "block", map[string]any{}),
			wantErr: ErrInvalidMessage, wantIn: "at '/block': missing property 'type'"},
		{name: "event with a null block", into: intoEvent, data: set(event, "block", nil),
			wantErr: ErrInvalidMessage, wantIn: "at '/block': got null, want object"},
		{name: "event without a block", into: intoEvent, data: del(event, nil, "block"),
			wantErr: ErrInvalidMessage, wantIn: "missing property 'block'"},
		{name: "result with an unknown stop reason", into: intoResult, data: set(result, "stop_reason", "timeout"),
			wantErr: ErrInvalidMessage, wantIn: "at '/stop_reason': value must be one of"},
		{name: "negative usage", into: intoResult, data: setIn(result, []string{"usage"}, "input_tokens", -5),
			wantErr: ErrInvalidMessage, wantIn: "at '/usage/input_tokens': minimum"},
		{name: "budget call_timeout not a duration", into: intoRequest, data: setIn(task, []string{"budget"}, "call_timeout", "5 minutes"),
			wantErr: ErrInvalidMessage, wantIn: "at '/budget/call_timeout': '5 minutes' does not match pattern"},
		{name: "empty prompt", into: intoRequest, data: set(task, "prompt", ""),
			wantErr: ErrInvalidMessage, wantIn: "at '/prompt': minLength"},

		// Tool reply and discovery reply bodies.
		{name: "exit_code a string", into: intoToolReply, data: setIn(toolRep, []string{"exec"}, "exit_code", "0"),
			wantErr: ErrInvalidMessage, wantIn: "at '/exec/exit_code': got string, want integer"},
		{name: "exit_code fractional", into: intoToolReply, data: setIn(toolRep, []string{"exec"}, "exit_code", 1.5),
			wantErr: ErrInvalidMessage, wantIn: "at '/exec/exit_code': got number, want integer"},
		{name: "is_error a string", into: intoToolReply, data: set(toolRep, "is_error", "true"),
			wantErr: ErrInvalidMessage, wantIn: "at '/is_error': got string, want boolean"},
		{name: "discovery tool name invalid", into: intoDiscoveryReply, data: mutated(tb, discRep, func(o map[string]any) {
			o["tools"].([]any)[1].(map[string]any)["name"] = "sys.uptime"
		}), wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/name': 'sys.uptime' does not match pattern"},
		{name: "discovery tool description empty", into: intoDiscoveryReply, data: mutated(tb, discRep, func(o map[string]any) {
			o["tools"].([]any)[0].(map[string]any)["description"] = ""
		}), wantErr: ErrInvalidMessage, wantIn: "at '/tools/0/description': minLength"},
		{name: "discovery tool input_schema not an object", into: intoDiscoveryReply, data: mutated(tb, discRep, func(o map[string]any) {
			o["tools"].([]any)[0].(map[string]any)["input_schema"] = "object"
		}), wantErr: ErrInvalidMessage, wantIn: "at '/tools/0/input_schema': got string, want object"},
		{name: "discovery tools null", into: intoDiscoveryReply, data: set(discRep, "tools", nil),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools': got null, want array"},
		{name: "discovery version empty", into: intoDiscoveryReply, data: set(discRep, "version", ""),
			wantErr: ErrInvalidMessage, wantIn: "at '/version': minLength"},
	}

	// Subject injection: every identity field refuses a name that is not
	// one NATS subject token, or that is empty or too long.
	bad := []string{"a.b", "a*", "a>", ">", "a b", "", strings.Repeat("a", 65), "tab\there", "é"}
	fields := []struct {
		label string
		into  func() Message
		base  Message
		path  []string
		key   string
	}{
		{"sender.name", intoToolRequest, toolReq, []string{"sender"}, "name"},
		{"sender.instance", intoToolRequest, toolReq, []string{"sender"}, "instance"},
		{"recipient.name", intoToolRequest, toolReq, []string{"recipient"}, "name"},
		{"recipient.instance", intoToolRequest, toolReq, []string{"recipient"}, "instance"},
		{"discovery reply name", intoDiscoveryReply, discRep, nil, "name"},
		{"agent_call block name", intoEvent, asReply(&Event{Block: Block{Content: &AgentCallBlock{ID: "c", Name: "carol", Task: "t"}}}), []string{"block"}, "name"},
	}
	for _, f := range fields {
		pointer := "/" + strings.Join(append(append([]string{}, f.path...), f.key), "/")
		for _, v := range bad {
			cases = append(cases, hostileCase{
				name:    fmt.Sprintf("%s %q", f.label, v),
				into:    f.into,
				data:    setIn(f.base, f.path, f.key, v),
				wantErr: ErrInvalidMessage,
				// The validator prints a tab as \t.
				wantIn: fmt.Sprintf("at '%s': '%s' does not match pattern '%s'", pointer, strings.ReplaceAll(v, "\t", `\t`), IdentityPattern),
			})
		}
	}
	return cases
}

// v1Prefix is the v1 protocol id prefix, spelled out so a test
// notices if the prefix ever changes.
const v1Prefix = "io.choria.fisk-ai.v1."

func TestDecodeRefusesHostileInput(t *testing.T) {
	for _, tt := range hostileInputs(t) {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.into()
			err := Decode(tt.data, m)
			if err == nil {
				t.Fatalf("Decode(%s): got %s, want an error", tt.data, dump(m))
			}
			assertErr(t, err, tt.wantErr, tt.wantIn)
		})
	}
}

func TestEncodeValidatesAgainstItsOwnSchema(t *testing.T) {
	tests := []struct {
		name     string
		protocol string
		wantIn   string
	}{
		{name: "another kind", protocol: ProtocolDiscoveryRequest, wantIn: "at '/protocol': value must be '" + ProtocolToolRequest + "'"},
		{name: "tool reply", protocol: ProtocolToolReply, wantIn: "at '/protocol': value must be '" + ProtocolToolRequest + "'"},
		{name: "unknown id", protocol: "io.choria.fisk-ai.v9.tool.request", wantIn: "at '/protocol'"},
		{name: "empty", protocol: "", wantIn: "at '/protocol'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewToolRequest(alice, "bob", "uptime", nil)
			m.Protocol = tt.protocol
			data, err := Encode(m)
			assertErr(t, err, ErrInvalidMessage, tt.wantIn)
			if data != nil {
				t.Errorf("Encode: got %s, want no bytes", data)
			}
		})
	}
}

func TestEncodeRefusesInvalidMessages(t *testing.T) {
	tests := []struct {
		name    string
		msg     Message
		wantErr error
		wantIn  string
	}{
		{name: "input not JSON", msg: NewToolRequest(alice, "bob", "uptime", []byte(`{"path":`)),
			wantErr: ErrInvalidMessage, wantIn: "marshalling " + ProtocolToolRequest},
		{name: "input an array", msg: NewToolRequest(alice, "bob", "uptime", []byte(`[1,2]`)),
			wantErr: ErrInvalidMessage, wantIn: "at '/input': got array, want object"},
		{name: "input with a repeated key", msg: NewToolRequest(alice, "bob", "uptime", []byte(`{"a":1,"a":2}`)),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "a"`},
		{name: "invalid recipient", msg: NewToolRequest(alice, "bob.>", "uptime", nil),
			wantErr: ErrInvalidMessage, wantIn: "at '/recipient/name'"},
		{name: "invalid sender", msg: NewDiscoveryRequest(Participant{Name: "alice", Instance: "a b"}, "bob"),
			wantErr: ErrInvalidMessage, wantIn: "at '/sender/instance'"},
		{name: "unstamped", msg: &Cancel{},
			wantErr: ErrInvalidMessage, wantIn: "at '/protocol'"},
		{name: "discovery reply with nil tools", msg: asReply(&DiscoveryReply{AgentCard: AgentCard{Name: "bob", Version: "1", Protocols: []string{}}}),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools': got null, want array"},
		{name: "tool reply over the cap", msg: asReply(&ToolReply{Output: strings.Repeat("x", MaxMessageSize)}),
			wantErr: ErrTooLarge, wantIn: fmt.Sprintf("the limit is %d", MaxMessageSize)},
		{name: "tool call block input not an object", msg: asReply(&Event{Block: Block{Content: &ToolCallBlock{ID: "c", Name: "n", Input: json.RawMessage(`"x"`)}}}),
			wantErr: ErrInvalidMessage, wantIn: "at '/block/input'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Encode(tt.msg)
			assertErr(t, err, tt.wantErr, tt.wantIn)
			if data != nil {
				t.Errorf("Encode: got %d bytes, want none", len(data))
			}
		})
	}
}

// spyToolRequest is a tool request that records whether it was ever
// unmarshalled, to prove the size cap acts before any parsing.
type spyToolRequest struct {
	ToolRequest
	unmarshalled *bool
}

func (*spyToolRequest) ProtocolID() string { return ProtocolToolRequest }

func (s *spyToolRequest) UnmarshalJSON(data []byte) error {
	*s.unmarshalled = true
	return json.Unmarshal(data, &s.ToolRequest)
}

// paddedToolRequest returns a valid encoded tool request of exactly size
// bytes, its input padded with a long string, and that input.
func paddedToolRequest(tb testing.TB, size int) (data, input []byte) {
	tb.Helper()
	pad := func(n int) []byte { return []byte(`{"pad":"` + strings.Repeat("x", n) + `"}`) }
	// One stamped header throughout: the time's width varies between stamps.
	m := NewToolRequest(alice, "bob", "uptime", pad(0))
	base := len(mustEncode(tb, m))
	if size < base {
		tb.Fatalf("size %d: got less than the %d bytes of an unpadded request", size, base)
	}
	// Encode refuses more than the cap, rightly: encode a request at the
	// cap and pad it further by hand.
	encoded := min(size, MaxMessageSize)
	m.Input = pad(encoded - base)
	data = mustEncode(tb, m)
	if extra := size - encoded; extra > 0 {
		data = []byte(strings.Replace(string(data), `"pad":"`, `"pad":"`+strings.Repeat("x", extra), 1))
	}
	if len(data) != size {
		tb.Fatalf("padded request: got %d bytes, want %d", len(data), size)
	}
	return data, pad(size - base)
}

func TestDecodeSizeCap(t *testing.T) {
	tests := []struct {
		name             string
		size             int
		wantErr          error
		wantUnmarshalled bool
	}{
		{name: "exactly the cap", size: MaxMessageSize, wantUnmarshalled: true},
		{name: "one byte over", size: MaxMessageSize + 1, wantErr: ErrTooLarge},
		{name: "far over", size: 4 * MaxMessageSize, wantErr: ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, input := paddedToolRequest(t, tt.size)
			var unmarshalled bool
			spy := &spyToolRequest{unmarshalled: &unmarshalled}
			err := Decode(data, spy)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode: got %v, want success", err)
				}
				if !bytes.Equal(spy.Input, input) {
					t.Errorf("decoded input: got %d bytes, want the %d-byte padded input", len(spy.Input), len(input))
				}
			} else {
				assertErr(t, err, tt.wantErr, fmt.Sprintf("%d bytes, the limit is %d", tt.size, MaxMessageSize))
			}
			if unmarshalled != tt.wantUnmarshalled {
				t.Errorf("unmarshalled: got %v, want %v", unmarshalled, tt.wantUnmarshalled)
			}
		})
	}
}

// TestSpyIsNotFooledByTheSchema checks the spy's flag is reached only by
// a message that passes every check, so a false flag above means the cap
// acted, not that some other check refused the body first.
func TestSpyIsNotFooledByTheSchema(t *testing.T) {
	var unmarshalled bool
	data := mustEncode(t, NewDiscoveryRequest(alice, "bob"))
	err := Decode(data, &spyToolRequest{unmarshalled: &unmarshalled})
	assertErr(t, err, ErrUnexpectedProtocol, "")
	if unmarshalled {
		t.Errorf("unmarshalled: got true for a refused message, want false")
	}
}

func TestParseRefusesDuplicateKeys(t *testing.T) {
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup {
			b.WriteString(`"k7":0}`)
		} else {
			b.WriteString(`"last":0}`)
		}
		return b.String()
	}
	tests := []struct {
		name    string
		data    string
		wantDup string // "" means the document is accepted
	}{
		{name: "flat", data: `{"a":1,"b":2}`},
		{name: "same key in sibling objects", data: `[{"a":1},{"a":2}]`},
		{name: "same key nested", data: `{"a":{"a":{"a":1}}}`},
		{name: "key after a nested object", data: `{"a":{"b":1},"b":2}`},
		{name: "key after an array of objects", data: `{"a":[{"b":1},{"b":2}],"b":3}`},
		{name: "values look like keys", data: `{"a":"a","b":["a","b"],"c":{"d":"c"}}`},
		{name: "braces and quotes inside strings", data: `{"a":"}{,\"a\":","b\"":1,"b":2}`},
		{name: "backslashes before a closing quote", data: `{"a\\":1,"a":2,"c":"\\\\"}`},
		{name: "empty containers", data: `{"a":{},"b":[],"c":[[]],"d":[{}]}`},
		{name: "many keys", data: many(false)},
		{name: "top level", data: `{"a":1,"b":2,"a":3}`, wantDup: "a"},
		{name: "after a nested object", data: `{"a":{"b":1},"a":2}`, wantDup: "a"},
		{name: "inside an array element", data: `[{"a":1},{"b":1,"b":2}]`, wantDup: "b"},
		{name: "deep", data: `{"x":[{"y":{"z":1,"z":2}}]}`, wantDup: "z"},
		{name: "escaped spelling", data: `{"name":1,"n\u0061me":2}`, wantDup: "name"},
		{name: "escaped quote in both", data: `{"a\"b":1,"a\u0022b":2}`, wantDup: `a"b`},
		{name: "invalid UTF-8 read as U+FFFD", data: "{\"\xff\":1,\"\xfe\":2}", wantDup: "\ufffd"},
		{name: "many keys with a repeat", data: many(true), wantDup: "k7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.data)) && !strings.Contains(tt.name, "UTF-8") {
				t.Fatalf("test input is not JSON: %s", tt.data)
			}
			if ref, dup := referenceDuplicateKey([]byte(tt.data)); ref != tt.wantDup || dup != (tt.wantDup != "") {
				t.Fatalf("reference: got %q %v, want %q (the test case is wrong)", ref, dup, tt.wantDup)
			}
			checkParse(t, []byte(tt.data))
			_, err := parse([]byte(tt.data))
			if tt.wantDup == "" {
				if err != nil {
					t.Errorf("parse(%s): got %v, want nil", tt.data, err)
				}
				return
			}
			var dup *duplicateKeyError
			if !errors.As(err, &dup) || dup.name != tt.wantDup {
				t.Errorf("parse(%s): got %v, want duplicate key %q", tt.data, err, tt.wantDup)
			}
		})
	}
}
