package a2a

import "encoding/json"

// The messages a streamed call adds to a unary one, an ack and output
// events, are encoded by the agent and decoded by the caller several times
// per call. Both ends take them the way discovery takes its headers (see
// [headerOnly] and [appendHeader]): the forms fiskfleet sends are written
// and read directly, valid by construction, and every other form goes the
// full way through the schema, which accepts or refuses it with its own
// error. The full way costs some 100 µs per message; this path a few.

// appendAck appends the encoding of m, byte for byte what json.Marshal
// makes of it, and reports whether it could.
func appendAck(b []byte, m *Ack) ([]byte, bool) {
	if m.Protocol != ProtocolAck {
		return nil, false
	}
	b, ok := appendHeader(b, &m.Header)
	if !ok {
		return nil, false
	}
	if m.Accepted {
		b = append(b, `,"accepted":true`...)
	} else {
		b = append(b, `,"accepted":false`...)
	}
	if m.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, m.Reason)
	}
	return append(b, '}'), true
}

// appendEvent appends the encoding of m, byte for byte what json.Marshal
// makes of it, and reports whether it could: for a text block, and for a
// status block that carries a phase at most.
func appendEvent(b []byte, m *Event) ([]byte, bool) {
	if m.Protocol != ProtocolEvent {
		return nil, false
	}
	switch c := m.Block.Content.(type) {
	case *TextBlock:
		if c == nil {
			return nil, false
		}
		b, ok := appendHeader(b, &m.Header)
		if !ok {
			return nil, false
		}
		b = append(b, `,"block":{"type":"text","text":`...)
		b = appendString(b, c.Text)
		return append(b, `}}`...), true
	case *StatusBlock:
		if c == nil || c.Iteration != 0 || c.Usage != nil {
			return nil, false
		}
		b, ok := appendHeader(b, &m.Header)
		if !ok {
			return nil, false
		}
		b = append(b, `,"block":{"type":"status"`...)
		if c.Phase != "" {
			b = append(b, `,"phase":`...)
			b = appendString(b, c.Phase)
		}
		return append(b, `}}`...), true
	}
	return nil, false
}

// appendString appends s as json.Marshal writes a string (escaped, HTML
// characters included, invalid UTF-8 replaced), which no schema of a free
// text field refuses.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// ackDirect reads obj, a parsed ack, into m when it has the form
// fiskfleet sends: the header, accepted, and a reason at most.
func ackDirect(obj map[string]any, m *Ack) bool {
	accepted, ok := obj["accepted"].(bool)
	if !ok {
		return false
	}
	var reason string
	if v, present := obj["reason"]; present {
		if reason, ok = v.(string); !ok {
			return false
		}
	}
	delete(obj, "accepted")
	delete(obj, "reason")
	var h Header
	if !headerOnly(obj, ProtocolAck, &h) {
		return false
	}
	*m = Ack{Header: h, Accepted: accepted, Reason: reason}
	return true
}

// eventDirect reads obj, a parsed event, into m when it has the form
// fiskfleet sends: the header and a text block, or a status block with a
// phase at most.
func eventDirect(obj map[string]any, m *Event) bool {
	block, ok := obj["block"].(map[string]any)
	if !ok {
		return false
	}
	var content BlockContent
	switch typ, _ := block["type"].(string); {
	case typ == "text" && len(block) == 2:
		text, ok := block["text"].(string)
		if !ok {
			return false
		}
		content = &TextBlock{Text: text}
	case typ == "status" && len(block) == 1:
		content = &StatusBlock{}
	case typ == "status" && len(block) == 2:
		phase, ok := block["phase"].(string)
		if !ok {
			return false
		}
		content = &StatusBlock{Phase: phase}
	default:
		return false
	}
	delete(obj, "block")
	var h Header
	if !headerOnly(obj, ProtocolEvent, &h) {
		return false
	}
	*m = Event{Header: h, Block: Block{Content: content}}
	return true
}
