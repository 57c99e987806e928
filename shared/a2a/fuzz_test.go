package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decodeSentinels are the errors Decode may return; every failure wraps
// one, so a caller can always tell why a message was refused.
var decodeSentinels = []error{ErrTooLarge, ErrInvalidMessage, ErrUnexpectedProtocol, ErrUnknownProtocol}

// checkDecode is the property every fuzz target holds: Decode never
// panics, every refusal wraps a sentinel, and whatever it accepts Encode
// accepts too and decodes again to an equal message whose encoding is the
// same (encoding is a fixed point after one round).
func checkDecode[M Message](t *testing.T, data []byte, newMsg func() M) {
	t.Helper()
	checkParse(t, data)
	m := newMsg()
	if err := Decode(data, m); err != nil {
		for _, s := range decodeSentinels {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("Decode(%q): got %v, want an error wrapping one of %v", data, err, decodeSentinels)
	}
	enc, err := Encode(m)
	if err != nil {
		t.Fatalf("Decode(%q) accepted %s, but Encode refuses it: %v", data, dump(m), err)
	}
	again := newMsg()
	if err := Decode(enc, again); err != nil {
		t.Fatalf("Decode of the re-encoding %s: %v", enc, err)
	}
	enc2, err := Encode(again)
	if err != nil {
		t.Fatalf("Encode of the second decoding %s: %v", dump(again), err)
	}
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding: got %s, want %s", enc2, enc)
	}
	if got, want := again.header().Time, m.header().Time; !got.Equal(want) {
		t.Fatalf("time: got %v, want %v", got, want)
	}
	canonicalise(t, m)
	canonicalise(t, again)
	if !reflect.DeepEqual(again, m) {
		t.Fatalf("second decoding: got %s, want %s", dump(again), dump(m))
	}
}

// checkParse holds parse to encoding/json: it accepts exactly the valid
// JSON that repeats no key within an object, refuses a repeat naming the
// first one, and builds the tree jsonschema.UnmarshalJSON builds.
func checkParse(t *testing.T, data []byte) {
	t.Helper()
	got, err := parse(data)
	if !json.Valid(data) {
		if err == nil {
			t.Fatalf("parse(%q): got %#v, want an error for invalid JSON", data, got)
		}
		return
	}
	if name, dup := referenceDuplicateKey(data); dup {
		var de *duplicateKeyError
		if !errors.As(err, &de) || de.name != name {
			t.Fatalf("parse(%q): got %v, want duplicate key %q", data, err, name)
		}
		return
	}
	if err != nil {
		t.Fatalf("parse(%q): got %v, want success", data, err)
	}
	want, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("reference UnmarshalJSON(%q): %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parse(%q): got %#v, want %#v", data, got, want)
	}
}

// referenceDuplicateKey is a slow, obviously correct duplicate-key check
// built on encoding/json's tokenizer: it returns the first name repeated
// within one object of data, which must be valid JSON.
func referenceDuplicateKey(data []byte) (string, bool) {
	type container struct {
		object  bool
		wantKey bool
		names   map[string]bool
	}
	var stack []*container
	// valueDone marks the end of a value in the enclosing object.
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if len(stack) > 0 {
					stack[len(stack)-1].wantKey = false
				}
				stack = append(stack, &container{object: v == '{', wantKey: v == '{', names: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if top := len(stack) - 1; top >= 0 && stack[top].object && stack[top].wantKey {
				if stack[top].names[v] {
					return v, true
				}
				stack[top].names[v] = true
				stack[top].wantKey = false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// canonicalise removes the differences a round trip may legitimately
// make: raw JSON is compacted, and the
// time is compared separately by Equal.
func canonicalise(tb testing.TB, m Message) {
	tb.Helper()
	h := m.header()
	h.Time = time.Time{}
	raw := func(r json.RawMessage) json.RawMessage {
		if r == nil {
			return nil
		}
		b, err := json.Marshal(r)
		if err != nil {
			tb.Fatalf("compacting %q: %v", r, err)
		}
		return b
	}
	switch v := m.(type) {
	case *ToolRequest:
		v.Input = raw(v.Input)
	case *DiscoveryReply:
		for i := range v.Tools {
			v.Tools[i].InputSchema = raw(v.Tools[i].InputSchema)
		}
	case *Request:
		if len(v.ToolHints) == 0 {
			v.ToolHints = nil
		}
	case *Event:
		if c, ok := v.Block.Content.(*ToolCallBlock); ok {
			c.Input = raw(c.Input)
		}
	}
}

// addSeeds adds every message and its variants to the corpus: the
// encoding, an indented copy, one with the time in another zone, and each
// hostile input of the decode tests.
func addSeeds(f *testing.F, prefix []byte, msgs ...Message) {
	f.Helper()
	add := func(b []byte) { f.Add(append(append([]byte(nil), prefix...), b...)) }
	for _, m := range msgs {
		data := mustEncode(f, m)
		add(data)
		var indented bytes.Buffer
		if err := json.Indent(&indented, data, "", "  "); err != nil {
			f.Fatal(err)
		}
		add(indented.Bytes())
		h := m.header()
		zoned := strings.Replace(string(data), `"time":"`+h.Time.Format(time.RFC3339Nano)+`"`,
			`"time":"`+h.Time.In(time.FixedZone("", 5*3600+1800)).Format(time.RFC3339)+`"`, 1)
		add([]byte(zoned))
		add([]byte(strings.Replace(string(data), `"sender":{"name":"`, `"sender":{"n\u0061me":"\u0061`, 1)))
	}
}

// addHostileSeeds adds the hostile inputs of the decode tests, the i-th
// after prefix(i).
func addHostileSeeds(f *testing.F, prefix func(i int) []byte) {
	f.Helper()
	inputs := [][]byte{}
	for _, tt := range hostileInputs(f) {
		inputs = append(inputs, tt.data)
	}
	for _, s := range []string{"", "{}", "null", "[]", `"x"`, "0", `{"protocol":"` + ProtocolToolRequest + `"}`} {
		inputs = append(inputs, []byte(s))
	}
	for i, in := range inputs {
		f.Add(append(prefix(i), in...))
	}
}

// noPrefix is the prefix of a target that reads the whole input.
func noPrefix(int) []byte { return nil }

func FuzzDecodeDiscoveryRequest(f *testing.F) {
	addSeeds(f, nil,
		NewDiscoveryRequest(alice, "bob"),
		withOptionalHeader(NewDiscoveryRequest(bob, "alice")),
		func() Message { m := &DiscoveryRequest{}; stampRequest(m, bob, nil); return m }(),
	)
	addHostileSeeds(f, noPrefix)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, func() *DiscoveryRequest { return &DiscoveryRequest{} })
	})
}

func FuzzDecodeDiscoveryReply(f *testing.F) {
	addSeeds(f, nil,
		asReply(&DiscoveryReply{AgentCard: sampleCard()}),
		asReply(&DiscoveryReply{AgentCard: AgentCard{Name: "b", Version: "0", Protocols: []string{}, Tools: []ToolDescriptor{}}}),
	)
	addHostileSeeds(f, noPrefix)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, func() *DiscoveryReply { return &DiscoveryReply{} })
	})
}

func FuzzDecodeToolRequest(f *testing.F) {
	addSeeds(f, nil,
		NewToolRequest(alice, "bob", "uptime", nil),
		NewToolRequest(alice, "bob", "disk_usage", []byte(`{"path":"/var","depth":2,"nested":{"a":[1,2,{"b":null}]},"s":"\u003c\u2028"}`)),
		withOptionalHeader(NewToolRequest(bob, "alice", "x", []byte(`{}`))),
	)
	addHostileSeeds(f, noPrefix)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, func() *ToolRequest { return &ToolRequest{} })
	})
}

func FuzzDecodeToolReply(f *testing.F) {
	addSeeds(f, nil,
		asReply(&ToolReply{}),
		asReply(&ToolReply{IsError: true, Output: "denied"}),
		asReply(&ToolReply{Output: "out\n\ttab \"q\" é", Exec: &Exec{Command: "app x", ExitCode: -2, Truncated: true}}),
	)
	addHostileSeeds(f, noPrefix)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, func() *ToolReply { return &ToolReply{} })
	})
}

// taskKinds are the six task-flow messages FuzzDecodeTask covers; the
// first input byte picks one.
var taskKinds = []func() Message{
	func() Message { return &Request{} },
	func() Message { return &Event{} },
	func() Message { return &Result{} },
	func() Message { return &ErrorMessage{} },
	func() Message { return &Cancel{} },
	func() Message { return &Ack{} },
}

func FuzzDecodeTask(f *testing.F) {
	samples := [][]Message{
		{
			asRequest(&Request{Prompt: "p"}),
			withOptionalHeader(asRequest(&Request{Prompt: "p", Context: "c", ToolHints: []string{"a"}, Budget: &Budget{MaxTokens: 1, MaxIterations: 2, CallTimeout: "1.5s"}, Stream: true})),
		},
		{
			asReply(&Event{Block: Block{Content: &ThinkingBlock{Text: "t", Signature: "s", Provider: "p"}}}),
			asReply(&Event{Block: Block{Content: &TextBlock{Text: "t"}}}),
			asReply(&Event{Block: Block{Content: &ToolCallBlock{ID: "c", Name: "n", Input: json.RawMessage(`{"a":1}`)}}}),
			asReply(&Event{Block: Block{Content: &ToolResultBlock{CallID: "c", IsError: true, Output: "o", Exec: &Exec{Command: "x", ExitCode: 1}}}}),
			asReply(&Event{Block: Block{Content: &AgentCallBlock{ID: "c", Name: "carol", Task: "t"}}}),
			asReply(&Event{Block: Block{Content: &StatusBlock{Iteration: 1, Phase: "p", Usage: &Usage{InputTokens: 1}}}}),
		},
		{asReply(&Result{StopReason: StopEndTurn}), asReply(&Result{StopReason: StopRefusal, Text: "t", Usage: &Usage{OutputTokens: 3}})},
		{asReply(&ErrorMessage{Error: "e"}), asReply(&ErrorMessage{Error: "e", Code: "500", StopReason: StopError})},
		{asRequest(&Cancel{}), asRequest(&Cancel{Reason: "r"})},
		{asReply(&Ack{}), asReply(&Ack{Accepted: true, Reason: "r"})},
	}
	for i, msgs := range samples {
		addSeeds(f, []byte{byte(i)}, msgs...)
	}
	// The hostile inputs are spread over the six kinds.
	addHostileSeeds(f, func(i int) []byte { return []byte{byte(i % len(taskKinds))} })
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		kind := taskKinds[int(data[0])%len(taskKinds)]
		checkDecode(t, data[1:], kind)
	})
}

// TestFuzzTaskKindsCoverTheTaskFlow checks FuzzDecodeTask reaches all six
// task-flow kinds.
func TestFuzzTaskKindsCoverTheTaskFlow(t *testing.T) {
	want := []string{ProtocolRequest, ProtocolEvent, ProtocolResult, ProtocolError, ProtocolCancel, ProtocolAck}
	if len(taskKinds) != len(want) {
		t.Fatalf("task kinds: got %d, want %d", len(taskKinds), len(want))
	}
	for i, k := range taskKinds {
		if got := k().ProtocolID(); got != want[i] {
			t.Errorf("task kind %d: got %s, want %s", i, got, want[i])
		}
	}
}
