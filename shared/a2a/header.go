package a2a

import (
	"encoding/json"
	"strconv"
	"time"
)

// headerOnly reads obj, a parsed message of protocol want that should
// carry header fields and nothing else, into h, and reports whether it
// could. It is the hot path of discovery, whose request is nothing but a
// header and whose reply, once its card is known (see cardCache), needs
// only its header checked: the schema validator and a second parse by
// encoding/json cost several times more than the round trip's own work.
//
// It accepts a strict subset of what the header schema and json.Unmarshal
// together accept: the forms fiskfleet and Fisk AI's v1 agents send
// (ASCII message ids, RFC 3339 times, plain integer sequences). Whatever
// it does not accept, it leaves to the full path, which accepts or refuses
// it with the schema's own error, so it can never widen what is accepted
// nor change an error message. FuzzHeaderOnly holds it to that.
func headerOnly(obj map[string]any, want string, h *Header) bool {
	if len(obj) > len(headerFields) {
		return false
	}
	var got Header
	seen := 0
	for key, v := range obj {
		var ok bool
		switch key {
		case "protocol":
			got.Protocol, ok = v.(string)
			ok = ok && got.Protocol == want
		case "id":
			got.ID, ok = messageID(v)
		case "request":
			got.Request, ok = messageID(v)
		case "conversation":
			got.Conversation, ok = messageID(v)
		case "parent":
			got.Parent, ok = messageID(v)
		case "sequence":
			got.Sequence, ok = sequence(v)
		case "time":
			got.Time, ok = timestamp(v)
		case "sender":
			got.Sender, ok = participant(v)
		case "recipient":
			var p Participant
			if p, ok = participant(v); ok {
				got.Recipient = &p
			}
		case "must_understand":
			got.MustUnderstand, ok = v.(bool)
		}
		if !ok {
			return false
		}
		if required[key] {
			seen++
		}
	}
	if seen != len(required) {
		return false
	}
	*h = got
	return true
}

// headerFields are the header's keys; required those the schema requires.
var (
	headerFields = []string{"protocol", "id", "request", "conversation", "parent", "sequence", "time", "sender", "recipient", "must_understand"}
	required     = map[string]bool{"protocol": true, "id": true, "request": true, "conversation": true, "sequence": true, "time": true, "sender": true}
)

// messageID accepts 1 to 128 printable ASCII characters other than space:
// every such string matches the schema's messageID, which admits any
// non-whitespace.
func messageID(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || len(s) == 0 || len(s) > 128 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return "", false
		}
	}
	return s, true
}

// sequence accepts a plain non-negative integer that fits a uint64.
func sequence(v any) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok || len(n) == 0 || len(n) > 1 && n[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return 0, false
		}
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	return u, err == nil
}

// timestamp accepts YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM) with an
// upper-case T and Z, a real date, and hours, minutes and seconds in range
// (no leap second, which Go cannot hold), parsed as encoding/json parses
// a time.Time.
func timestamp(v any) (time.Time, bool) {
	s, ok := v.(string)
	if !ok || len(s) < len("2006-01-02T15:04:05Z") || len(s) > 64 {
		return time.Time{}, false
	}
	digits := func(from, to int) bool {
		for i := from; i < to; i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if !digits(0, 4) || s[4] != '-' || !digits(5, 7) || s[7] != '-' || !digits(8, 10) || s[10] != 'T' ||
		!digits(11, 13) || s[13] != ':' || !digits(14, 16) || s[16] != ':' || !digits(17, 19) {
		return time.Time{}, false
	}
	i := 19
	if s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start || i-start > 9 {
			return time.Time{}, false
		}
	}
	switch zone := s[i:]; {
	case zone == "Z":
	case len(zone) == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' && digits(i+1, i+3) && digits(i+4, i+6):
		if zone[1:3] > "23" || zone[4:6] > "59" {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	if s[11:13] > "23" || s[14:16] > "59" || s[17:19] > "59" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// participant accepts {name, instance?} with identities for both.
func participant(v any) (Participant, bool) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) == 0 || len(obj) > 2 {
		return Participant{}, false
	}
	var p Participant
	for key, v := range obj {
		s, ok := v.(string)
		if !ok || CheckIdentity(s) != nil {
			return Participant{}, false
		}
		switch key {
		case "name":
			p.Name = s
		case "instance":
			p.Instance = s
		default:
			return Participant{}, false
		}
	}
	return p, p.Name != ""
}

// appendDiscoveryRequest appends the encoding of req, byte for byte what
// json.Marshal makes of it, and reports whether it could (see
// [appendHeader]); any other request is left to [Encode]'s full path.
// TestAppendDiscoveryRequest holds it to json.Marshal and the schema.
func appendDiscoveryRequest(b []byte, req *DiscoveryRequest) ([]byte, bool) {
	if req.Protocol != ProtocolDiscoveryRequest {
		return nil, false
	}
	b, ok := appendHeader(b, &req.Header)
	return append(b, '}'), ok
}

// appendHeader appends h's fields as json.Marshal writes them, from the
// opening brace to the last field, and reports whether it could: when
// every string is one that encodes as itself (identities, and ids of
// letters and digits as [newID] mints them) and no optional field past
// the recipient is set, the result is valid by construction and needs
// neither a marshal nor a validation. The marshal it saves is most of the
// work of answering discovery and of asking for it.
func appendHeader(b []byte, h *Header) ([]byte, bool) {
	if h.Parent != "" || h.MustUnderstand ||
		!plainID(h.ID) || !plainID(h.Request) || !plainID(h.Conversation) ||
		!plainParticipant(h.Sender) || h.Recipient != nil && !plainParticipant(*h.Recipient) ||
		h.Time.Year() < 0 || h.Time.Year() > 9999 {
		return nil, false
	}
	b = append(b, `{"protocol":"`...)
	b = append(b, h.Protocol...)
	b = append(b, `","id":"`...)
	b = append(b, h.ID...)
	b = append(b, `","request":"`...)
	b = append(b, h.Request...)
	b = append(b, `","conversation":"`...)
	b = append(b, h.Conversation...)
	b = append(b, `","sequence":`...)
	b = strconv.AppendUint(b, h.Sequence, 10)
	b = append(b, `,"time":"`...)
	b = h.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","sender":`...)
	b = appendParticipant(b, h.Sender)
	if h.Recipient != nil {
		b = append(b, `,"recipient":`...)
		b = appendParticipant(b, *h.Recipient)
	}
	return b, true
}

// plainID reports whether id is a message id of letters and digits only,
// which JSON encodes as itself.
func plainID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// plainParticipant reports whether p's names are identities, which JSON
// encodes as themselves.
func plainParticipant(p Participant) bool {
	return CheckIdentity(p.Name) == nil && (p.Instance == "" || CheckIdentity(p.Instance) == nil)
}

func appendParticipant(b []byte, p Participant) []byte {
	b = append(b, `{"name":"`...)
	b = append(b, p.Name...)
	if p.Instance != "" {
		b = append(b, `","instance":"`...)
		b = append(b, p.Instance...)
	}
	return append(b, `"}`...)
}
