package a2a

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// A tool call is one request and one reply, each encoded once and decoded
// once on every call. Both are taken the way the stream messages are (see
// streamcodec.go): the forms fiskfleet sends are written directly, valid by
// construction, and read directly, accepting only what the schema accepts;
// every other form goes the full way through the schema, which accepts or
// refuses it with its own error. What arrives from the network is still
// checked field by field against the schema's rules before anything is
// used; only the generic schema walk, most of a message's cost, is
// skipped. FuzzDecodeToolRequest and FuzzDecodeToolReply hold both ways to
// the full path.

// appendToolRequest appends the encoding of m, byte for byte what
// json.Marshal makes of it, and reports whether it could: for a name the
// schema accepts (one that encodes as itself) and an input that is absent
// or a JSON object with no repeated key and nothing json.Marshal would
// escape differently from json.Compact.
func appendToolRequest(b []byte, m *ToolRequest) ([]byte, bool) {
	if m.Protocol != ProtocolToolRequest || !ValidIdentity(m.Name) {
		return nil, false
	}
	if len(m.Input) > 0 && !plainInput(m.Input) {
		return nil, false
	}
	b, ok := appendHeader(b, &m.Header)
	if !ok {
		return nil, false
	}
	b = append(b, `,"name":"`...)
	b = append(b, m.Name...)
	b = append(b, '"')
	if len(m.Input) > 0 {
		b = append(b, `,"input":`...)
		var buf bytes.Buffer
		if err := json.Compact(&buf, m.Input); err != nil {
			return nil, false
		}
		b = append(b, buf.Bytes()...)
	}
	return append(b, '}'), true
}

// plainInput reports whether raw is a JSON object repeating no key whose
// compact form is what json.Marshal writes for it: json.Marshal also
// escapes <, > and & and the line and paragraph separators inside strings,
// which json.Compact leaves alone, so input holding any of them takes the
// full path.
func plainInput(raw json.RawMessage) bool {
	if bytes.ContainsAny(raw, "<>&") || bytes.Contains(raw, []byte("\u2028")) || bytes.Contains(raw, []byte("\u2029")) {
		return false
	}
	doc, err := parse(raw)
	if err != nil {
		return false
	}
	_, ok := doc.(map[string]any)
	return ok
}

// appendToolReply appends the encoding of m, byte for byte what
// json.Marshal makes of it, and reports whether it could (see
// [appendHeader]); output and command are free text, which no schema
// refuses.
func appendToolReply(b []byte, m *ToolReply) ([]byte, bool) {
	if m.Protocol != ProtocolToolReply {
		return nil, false
	}
	b, ok := appendHeader(b, &m.Header)
	if !ok {
		return nil, false
	}
	if m.IsError {
		b = append(b, `,"is_error":true`...)
	}
	b = append(b, `,"output":`...)
	b = appendString(b, m.Output)
	if e := m.Exec; e != nil {
		b = append(b, `,"exec":{"command":`...)
		b = appendString(b, e.Command)
		b = append(b, `,"exit_code":`...)
		b = strconv.AppendInt(b, int64(e.ExitCode), 10)
		if e.Truncated {
			b = append(b, `,"truncated":true`...)
		}
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// toolRequestDirect reads obj, a parsed tool request whose top-level
// input member was raw in the document, into m when every field is one
// the schema accepts: a tool name of the schema's pattern, an input that
// is an object, and a header [headerOnly] accepts.
func toolRequestDirect(obj map[string]any, raw []byte, m *ToolRequest) bool {
	name, ok := obj["name"].(string)
	if !ok || !ValidIdentity(name) {
		return false
	}
	var input json.RawMessage
	if v, present := obj["input"]; present {
		if _, ok := v.(map[string]any); !ok {
			return false
		}
		input = bytes.Clone(raw)
	}
	delete(obj, "name")
	delete(obj, "input")
	var h Header
	if !headerOnly(obj, ProtocolToolRequest, &h) {
		return false
	}
	*m = ToolRequest{Header: h, Name: name, Input: input}
	return true
}

// toolReplyDirect reads obj, a parsed tool reply, into m when every field
// is one the schema accepts and encoding/json would read alike: a boolean
// is_error, a string output, an exec of a string command, a plain integer
// exit code that fits an int and a boolean truncated, and a header
// [headerOnly] accepts.
func toolReplyDirect(obj map[string]any, m *ToolReply) bool {
	var reply ToolReply
	if v, present := obj["is_error"]; present {
		b, ok := v.(bool)
		if !ok {
			return false
		}
		reply.IsError = b
	}
	if v, present := obj["output"]; present {
		s, ok := v.(string)
		if !ok {
			return false
		}
		reply.Output = s
	}
	if v, present := obj["exec"]; present {
		e, ok := execDirect(v)
		if !ok {
			return false
		}
		reply.Exec = e
	}
	delete(obj, "is_error")
	delete(obj, "output")
	delete(obj, "exec")
	if !headerOnly(obj, ProtocolToolReply, &reply.Header) {
		return false
	}
	*m = reply
	return true
}

// execDirect reads an exec object of the schema's three fields, command
// required.
func execDirect(v any) (*Exec, bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	var e Exec
	for key, v := range obj {
		switch key {
		case "command":
			e.Command, ok = v.(string)
		case "exit_code":
			e.ExitCode, ok = plainInt(v)
		case "truncated":
			e.Truncated, ok = v.(bool)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	if _, ok := obj["command"]; !ok {
		return nil, false
	}
	return &e, true
}

// plainInt accepts an integer written without fraction or exponent that
// fits an int: what the schema's integer and encoding/json's int both
// take. 1.0, which the schema counts as an integer and encoding/json
// refuses for an int, is left to the full path.
func plainInt(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
	return int(i), err == nil && string(n) == strconv.FormatInt(i, 10)
}
