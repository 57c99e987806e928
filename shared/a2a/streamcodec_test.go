package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestAppendStreamMessages holds the direct encoding of acks and events to
// json.Marshal's bytes and to the schema, and checks it leaves the forms it
// does not write to the full path.
func TestAppendStreamMessages(t *testing.T) {
	odd := func(m Message) Message { m.header().ID = "id-with-dash"; return m }
	texts := []string{"", "hi\n", "<b>&amp;</b> \"quoted\" \\ back", "tab\tcr\rnul\x00esc\x1b", "bad utf-8 \xff\xfe end", "line\u2028para\u2029", "ünïcødé ✓ 🐟", "cut \xe2\x82"}
	type tc struct {
		name   string
		msg    Message
		direct bool
	}
	tests := []tc{
		{"ack accepted", asReply(&Ack{Accepted: true}), true},
		{"ack refused with a reason", asReply(&Ack{Reason: "unknown tool \"x\" <y>"}), true},
		{"ack with an odd id", odd(asReply(&Ack{Accepted: true})), false},
		{"ack with must_understand", withOptionalHeader(asReply(&Ack{Accepted: true})), false},
		{"status with a phase", asReply(&Event{Block: Block{Content: &StatusBlock{Phase: "running"}}}), true},
		{"status without a phase", asReply(&Event{Block: Block{Content: &StatusBlock{}}}), true},
		{"status with an iteration", asReply(&Event{Block: Block{Content: &StatusBlock{Iteration: 2, Phase: "p"}}}), false},
		{"thinking block", asReply(&Event{Block: Block{Content: &ThinkingBlock{Text: "t"}}}), false},
		{"text with an odd id", odd(asReply(&Event{Block: Block{Content: &TextBlock{Text: "x"}}})), false},
	}
	for _, text := range texts {
		tests = append(tests, tc{"text " + text, asReply(&Event{Block: Block{Content: &TextBlock{Text: text}}}), true})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var ok bool
			switch m := tt.msg.(type) {
			case *Ack:
				got, ok = appendAck(nil, m)
			case *Event:
				got, ok = appendEvent(nil, m)
			}
			if ok != tt.direct {
				t.Fatalf("direct: got %v, want %v", ok, tt.direct)
			}
			enc := checkDirect(t, tt.msg, got, ok)
			// Decode, direct or not, reads what json.Unmarshal reads (an
			// invalid UTF-8 byte went out as U+FFFD and comes back as it).
			back := reflect.New(reflect.TypeOf(tt.msg).Elem()).Interface().(Message)
			if err := Decode(enc, back); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			again, err := Encode(back)
			if err != nil {
				t.Fatalf("re-encoding the decoded message: %v", err)
			}
			want, _ := json.Marshal(back)
			if !bytes.Equal(again, want) {
				t.Errorf("re-encoding the decoded message: got %s, want json.Marshal's %s", again, want)
			}
			if !bytes.Contains(enc, []byte(`\ufffd`)) && !bytes.Equal(again, enc) {
				t.Errorf("the decoded message changed: %s, then %s", enc, again)
			}
		})
	}
}

// checkDirect holds got, a direct encoding of msg when ok, and Encode's
// encoding of msg to json.Marshal's bytes and to the schema, and returns
// Encode's.
func checkDirect(t *testing.T, msg Message, got []byte, ok bool) []byte {
	t.Helper()
	want, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if ok && !bytes.Equal(got, want) {
		t.Errorf("direct: got %s, want json.Marshal's %s", got, want)
	}
	enc, err := Encode(msg)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !bytes.Equal(enc, want) {
		t.Errorf("Encode: got %s, want json.Marshal's %s", enc, want)
	}
	if err := mustValidator().validate(msg.ProtocolID(), mustParse(t, enc)); err != nil {
		t.Errorf("schema: %v", err)
	}
	return enc
}

// TestEncodeStreamTooLarge checks the direct path keeps the size cap.
func TestEncodeStreamTooLarge(t *testing.T) {
	big := make([]byte, MaxMessageSize)
	for i := range big {
		big[i] = 'x'
	}
	_, err := Encode(asReply(&Event{Block: Block{Content: &TextBlock{Text: string(big)}}}))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("got %v, want %v", err, ErrTooLarge)
	}
}

// FuzzStreamDirect holds the direct decoding of acks and events to the
// schema: whatever it accepts, the schema and json.Unmarshal accept too,
// decoding the same message. (What it refuses goes to the schema anyway.)
func FuzzStreamDirect(f *testing.F) {
	addSeeds(f, nil,
		asReply(&Ack{Accepted: true}),
		asReply(&Ack{Reason: "no <such> tool"}),
		asReply(&Event{Block: Block{Content: &TextBlock{Text: "out \xff\n"}}}),
		asReply(&Event{Block: Block{Content: &StatusBlock{Phase: "running"}}}),
		asReply(&Event{Block: Block{Content: &StatusBlock{}}}),
		withOptionalHeader(asReply(&Ack{Accepted: true})),
	)
	addHostileSeeds(f, noPrefix)
	f.Add([]byte(`{"protocol":"` + ProtocolAck + `",` + v1Header + `,"accepted":true}`))
	f.Add([]byte(`{"protocol":"` + ProtocolEvent + `",` + v1Header + `,"block":{"type":"text","text":"x"}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolEvent + `",` + v1Header + `,"block":{"type":"text","Text":"x","text":"y"}}`))
	f.Add([]byte(`{"protocol":"` + ProtocolAck + `",` + v1Header + `,"Accepted":true,"accepted":false}`))
	v := mustValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range []func() Message{func() Message { return &Ack{} }, func() Message { return &Event{} }} {
			doc, err := parse(data)
			if err != nil {
				return
			}
			obj, ok := doc.(map[string]any)
			if !ok {
				return
			}
			fast := newMsg()
			switch m := fast.(type) {
			case *Ack:
				ok = ackDirect(obj, m)
			case *Event:
				ok = eventDirect(obj, m)
			}
			if !ok {
				continue
			}
			full := newMsg()
			if err := decodeAs(data, full, full.ProtocolID(), v.byProtocol[full.ProtocolID()]); err != nil {
				t.Fatalf("the direct path accepted %q as %s, which the schema path refuses: %v", data, full.ProtocolID(), err)
			}
			if !fast.header().Time.Equal(full.header().Time) {
				t.Fatalf("time: got %v, want %v", fast.header().Time, full.header().Time)
			}
			fast.header().Time, full.header().Time = time.Time{}, time.Time{}
			if !reflect.DeepEqual(fast, full) {
				t.Fatalf("the direct path decoded %q as %s, the schema path as %s", data, dump(fast), dump(full))
			}
		}
	})
}
