package a2a

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// newCardReply builds a CardReply or fails the test.
func newCardReply(tb testing.TB, card AgentCard) *CardReply {
	tb.Helper()
	c, err := NewCardReply(card)
	if err != nil {
		tb.Fatalf("NewCardReply: %v", err)
	}
	return c
}

func TestCardReply(t *testing.T) {
	card := sampleCard()
	c := newCardReply(t, card)
	if got := c.Card(); !reflect.DeepEqual(got, card) {
		t.Errorf("Card: got %s, want %s", dump(got), dump(card))
	}
	replier := Participant{Name: "bob", Instance: "bob-1"}
	senders := []Participant{alice, {Name: "carol"}, {Name: "alice", Instance: "alice-2"}}
	seen := map[string]bool{}
	for _, from := range senders {
		t.Run(from.Name+"/"+from.Instance, func(t *testing.T) {
			req := NewDiscoveryRequest(from, "bob")
			data, err := c.Reply(req, replier)
			if err != nil {
				t.Fatalf("Reply: %v", err)
			}
			var got DiscoveryReply
			if err := Decode(data, &got); err != nil {
				t.Fatalf("Decode: %v\n%s", err, data)
			}
			if !reflect.DeepEqual(got.AgentCard, card) {
				t.Errorf("card: got %s, want %s", dump(got.AgentCard), dump(card))
			}
			if got.ID == req.ID || seen[got.ID] {
				t.Errorf("id: got %q, want a fresh id per reply (request %q)", got.ID, req.ID)
			}
			seen[got.ID] = true
			if got.Request != req.ID || got.Conversation != req.Conversation {
				t.Errorf("request/conversation: got %q/%q, want %q/%q echoed", got.Request, got.Conversation, req.ID, req.Conversation)
			}
			if got.Sender != replier {
				t.Errorf("sender: got %+v, want %+v", got.Sender, replier)
			}
			if got.Recipient == nil || *got.Recipient != from {
				t.Errorf("recipient: got %s, want %+v", dump(got.Recipient), from)
			}
			if got.Sequence != 0 {
				t.Errorf("sequence: got %d, want 0", got.Sequence)
			}
			// The spliced reply is exactly what Encode makes of the same
			// message.
			enc, err := Encode(&got)
			if err != nil {
				t.Fatalf("Encode of the decoded reply: %v", err)
			}
			if !jsonEqual(t, enc, data) {
				t.Errorf("spliced reply: got %s, want %s", data, enc)
			}
		})
	}
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		tb.Fatalf("parsing %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		tb.Fatalf("parsing %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestCardReplyConcurrent(t *testing.T) {
	c := newCardReply(t, sampleCard())
	const workers, each = 8, 50
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards ids and errs
		ids  = map[string]bool{}
		errs []error
	)
	for w := range workers {
		wg.Go(func() {
			from := Participant{Name: fmt.Sprintf("client-%d", w)}
			for range each {
				req := NewDiscoveryRequest(from, "bob")
				data, err := c.Reply(req, bob)
				var got DiscoveryReply
				if err == nil {
					err = Decode(data, &got)
				}
				if err == nil && (got.Request != req.ID || got.Recipient == nil || *got.Recipient != from) {
					err = fmt.Errorf("reply %s answers %q for %s, want %q for %s", got.ID, got.Request, dump(got.Recipient), req.ID, from.Name)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if ids[got.ID] {
					errs = append(errs, fmt.Errorf("reply id %q: got it twice, want it fresh", got.ID))
				}
				ids[got.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if got, want := len(ids), workers*each; got != want {
		t.Errorf("distinct replies: got %d, want %d", got, want)
	}
}

func TestNewCardReplyRefusesInvalidCards(t *testing.T) {
	withTool := func(mod func(*ToolDescriptor)) AgentCard {
		c := sampleCard()
		c.Tools = append([]ToolDescriptor(nil), c.Tools...)
		mod(&c.Tools[1])
		return c
	}
	tests := []struct {
		name    string
		card    AgentCard
		wantErr error
		wantIn  string
	}{
		{name: "tool name with a dot", card: withTool(func(d *ToolDescriptor) { d.Name = "sys.uptime" }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/name': 'sys.uptime' does not match pattern"},
		{name: "tool name empty", card: withTool(func(d *ToolDescriptor) { d.Name = "" }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/name'"},
		{name: "tool name too long", card: withTool(func(d *ToolDescriptor) { d.Name = strings.Repeat("t", 65) }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/name'"},
		{name: "empty description", card: withTool(func(d *ToolDescriptor) { d.Description = "" }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/description': minLength"},
		{name: "input schema not an object", card: withTool(func(d *ToolDescriptor) { d.InputSchema = json.RawMessage(`[]`) }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/input_schema': got array, want object"},
		{name: "input schema missing", card: withTool(func(d *ToolDescriptor) { d.InputSchema = nil }),
			wantErr: ErrInvalidMessage, wantIn: "at '/tools/1/input_schema': got null, want object"},
		{name: "input schema not JSON", card: withTool(func(d *ToolDescriptor) { d.InputSchema = json.RawMessage(`{`) }),
			wantErr: ErrInvalidMessage, wantIn: "marshalling agent card"},
		{name: "input schema with a repeated key", card: withTool(func(d *ToolDescriptor) { d.InputSchema = json.RawMessage(`{"type":"object","type":"string"}`) }),
			wantErr: ErrInvalidMessage, wantIn: `duplicate key "type"`},
		{name: "agent name with a subject wildcard", card: func() AgentCard { c := sampleCard(); c.Name = "bob.>"; return c }(),
			wantErr: ErrInvalidMessage, wantIn: "at '/name'"},
		{name: "empty version", card: func() AgentCard { c := sampleCard(); c.Version = ""; return c }(),
			wantErr: ErrInvalidMessage, wantIn: "at '/version': minLength"},
		{name: "over the message cap", card: func() AgentCard {
			c := sampleCard()
			c.Description = strings.Repeat("d", MaxMessageSize)
			return c
		}(), wantErr: ErrTooLarge, wantIn: fmt.Sprintf("the limit is %d", MaxMessageSize)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCardReply(tt.card)
			if err == nil {
				t.Fatalf("NewCardReply: got a card reply, want an error")
			}
			if c != nil {
				t.Errorf("NewCardReply: got %v with the error, want nil", c)
			}
			assertErr(t, err, tt.wantErr, tt.wantIn)
		})
	}
}

// TestCardReplyJustUnderTheCap checks a card that fits is served, and
// that the cap counts the whole reply, header included.
func TestCardReplyJustUnderTheCap(t *testing.T) {
	card := sampleCard()
	card.Description = ""
	c := newCardReply(t, card)
	data, err := c.Reply(NewDiscoveryRequest(alice, "bob"), bob)
	if err != nil {
		t.Fatal(err)
	}
	// Leave 200 bytes for a reply header longer than this one.
	card.Description = strings.Repeat("d", MaxMessageSize-len(data)-len(`,"description":""`)-200)
	c = newCardReply(t, card)
	data, err = c.Reply(NewDiscoveryRequest(alice, "bob"), bob)
	if err != nil {
		t.Fatalf("Reply: got %v, want a reply under the cap", err)
	}
	if len(data) > MaxMessageSize {
		t.Errorf("reply: got %d bytes, want at most %d", len(data), MaxMessageSize)
	}
	if err := Decode(data, &DiscoveryReply{}); err != nil {
		t.Errorf("Decode: got %v, want a valid reply", err)
	}
}
