package a2a

import (
	"encoding/json"
	"testing"
	"time"
)

func TestStampRequest(t *testing.T) {
	tests := []struct {
		name string
		// build returns a message stamped as a request from alice to bob.
		build func() Message
		to    *Participant
	}{
		{
			name:  "NewDiscoveryRequest",
			build: func() Message { return NewDiscoveryRequest(alice, "bob") },
			to:    &Participant{Name: "bob"},
		},
		{
			name:  "NewToolRequest",
			build: func() Message { return NewToolRequest(alice, "bob", "uptime", nil) },
			to:    &Participant{Name: "bob"},
		},
		{
			name: "stampRequest task request",
			build: func() Message {
				m := &Request{Prompt: "p"}
				stampRequest(m, alice, &Participant{Name: "bob", Instance: "bob-2"})
				return m
			},
			to: &Participant{Name: "bob", Instance: "bob-2"},
		},
		{
			name: "stampRequest without recipient",
			build: func() Message {
				m := &Cancel{}
				stampRequest(m, alice, nil)
				return m
			},
		},
		{
			name: "stampRequest overwrites a stale header",
			build: func() Message {
				m := &ToolRequest{Name: "uptime", Header: Header{
					Protocol: ProtocolDiscoveryReply, ID: "old", Request: "older", Conversation: "oldest",
					Sequence: 7, Sender: bob, Recipient: &Participant{Name: "mallory"},
				}}
				stampRequest(m, alice, &Participant{Name: "bob"})
				return m
			},
			to: &Participant{Name: "bob"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			m := tt.build()
			after := time.Now()
			h := m.header()
			if h.ID == "" {
				t.Fatal("id: got empty, want a fresh id")
			}
			if h.ID == "old" {
				t.Errorf("id: got the stale id %q, want a fresh one", h.ID)
			}
			if h.Request != h.ID {
				t.Errorf("request: got %q, want the id %q", h.Request, h.ID)
			}
			if h.Conversation != h.ID {
				t.Errorf("conversation: got %q, want the id %q", h.Conversation, h.ID)
			}
			if h.Sequence != 0 {
				t.Errorf("sequence: got %d, want 0", h.Sequence)
			}
			if got, want := h.Protocol, m.ProtocolID(); got != want {
				t.Errorf("protocol: got %q, want %q", got, want)
			}
			if h.Sender != alice {
				t.Errorf("sender: got %+v, want %+v", h.Sender, alice)
			}
			switch {
			case tt.to == nil && h.Recipient != nil:
				t.Errorf("recipient: got %+v, want none", *h.Recipient)
			case tt.to != nil && (h.Recipient == nil || *h.Recipient != *tt.to):
				t.Errorf("recipient: got %s, want %+v", dump(h.Recipient), *tt.to)
			}
			if h.Time.Before(before.Add(-time.Second)) || h.Time.After(after.Add(time.Second)) {
				t.Errorf("time: got %v, want between %v and %v", h.Time, before, after)
			}
			if h.Time.Location() != time.UTC {
				t.Errorf("time zone: got %v, want UTC", h.Time.Location())
			}
			if _, err := Encode(m); err != nil {
				t.Errorf("Encode: got %v, want a valid stamped message", err)
			}
		})
	}
}

func TestStampReply(t *testing.T) {
	replier := Participant{Name: "bob", Instance: "bob-7"}
	// A request later in a conversation: its id differs from the request
	// and conversation it belongs to, and its sequence is not 0.
	later := &ToolRequest{Name: "uptime", Header: Header{
		Protocol: ProtocolToolRequest, ID: "msg-3", Request: "req-1", Conversation: "conv-0",
		Sequence: 3, Time: time.Now().UTC(), Sender: alice, Recipient: &Participant{Name: "mallory"},
	}}
	tests := []struct {
		name  string
		req   Message
		reply Message
	}{
		{name: "discovery", req: NewDiscoveryRequest(alice, "bob"), reply: &DiscoveryReply{AgentCard: sampleCard()}},
		{name: "tool", req: NewToolRequest(alice, "bob", "uptime", nil), reply: &ToolReply{}},
		{name: "ack to a task request", req: asRequest(&Request{Prompt: "p"}), reply: &Ack{Accepted: true}},
		{name: "stale reply header", req: NewToolRequest(alice, "bob", "uptime", nil), reply: &ToolReply{Header: Header{
			ID: "stale", Parent: "stale-parent", Sequence: 9, Protocol: ProtocolAck,
		}}},
		{name: "later in a conversation", req: later, reply: &ToolReply{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qh := tt.req.header()
			reqBefore := *qh
			StampReply(tt.reply, tt.req, replier)
			rh := tt.reply.header()
			if rh.ID == "" || rh.ID == qh.ID || rh.ID == "stale" {
				t.Errorf("id: got %q, want a fresh id (request id %q)", rh.ID, qh.ID)
			}
			if rh.Request != qh.Request {
				t.Errorf("request: got %q, want %q echoed", rh.Request, qh.Request)
			}
			if rh.Conversation != qh.Conversation {
				t.Errorf("conversation: got %q, want %q echoed", rh.Conversation, qh.Conversation)
			}
			if rh.Sequence != 0 {
				t.Errorf("sequence: got %d, want 0", rh.Sequence)
			}
			if rh.Parent != "" {
				t.Errorf("parent: got %q, want none", rh.Parent)
			}
			if got, want := rh.Protocol, tt.reply.ProtocolID(); got != want {
				t.Errorf("protocol: got %q, want %q", got, want)
			}
			if rh.Sender != replier {
				t.Errorf("sender: got %+v, want the replier %+v", rh.Sender, replier)
			}
			if rh.Recipient == nil || *rh.Recipient != qh.Sender {
				t.Errorf("recipient: got %s, want the request's sender %+v", dump(rh.Recipient), qh.Sender)
			}
			// The recipient is a copy: changing it must not reach the request.
			rh.Recipient.Name = "changed"
			if qh.Sender != reqBefore.Sender {
				t.Errorf("request sender: got %+v after changing the reply, want %+v", qh.Sender, reqBefore.Sender)
			}
			rh.Recipient.Name = reqBefore.Sender.Name
			if qh.ID != reqBefore.ID || qh.Request != reqBefore.Request || qh.Sequence != reqBefore.Sequence {
				t.Errorf("request header: got %+v, want it unchanged %+v", *qh, reqBefore)
			}
			if _, err := Encode(tt.reply); err != nil {
				t.Errorf("Encode: got %v, want a valid stamped reply", err)
			}
		})
	}
}

func TestStampedIDsAreUnique(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, 2*n)
	req := NewDiscoveryRequest(alice, "bob")
	for range n {
		for _, id := range []string{NewDiscoveryRequest(alice, "bob").ID, replyID(req)} {
			if seen[id] {
				t.Fatalf("id %q: got it twice, want every stamp to mint a fresh id", id)
			}
			seen[id] = true
		}
	}
}

func replyID(req Message) string {
	r := &DiscoveryReply{}
	StampReply(r, req, bob)
	return r.ID
}

func TestNewToolRequestInput(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		// want is the Input the request carries; nil means it is omitted.
		want []byte
	}{
		{name: "nil", input: nil, want: nil},
		{name: "empty", input: []byte{}, want: nil},
		{name: "whitespace", input: []byte(" \n\t"), want: nil},
		{name: "null", input: []byte("null"), want: nil},
		{name: "padded null", input: []byte(" null "), want: nil},
		{name: "null with newlines", input: []byte("\n\tnull\r\n"), want: nil},
		{name: "empty object", input: []byte("{}"), want: []byte("{}")},
		{name: "object", input: []byte(`{"path":"/"}`), want: []byte(`{"path":"/"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewToolRequest(alice, "bob", "disk_usage", tt.input)
			if string(m.Input) != string(tt.want) || (m.Input == nil) != (tt.want == nil) {
				t.Errorf("Input: got %q, want %q", m.Input, tt.want)
			}
			data := mustEncode(t, m)
			_, has := asMap(t, data)["input"]
			if has != (tt.want != nil) {
				t.Errorf("encoded input present: got %v, want %v (%s)", has, tt.want != nil, data)
			}
			var got ToolRequest
			if err := Decode(data, &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if string(got.Input) != string(tt.want) {
				t.Errorf("decoded Input: got %q, want %q", got.Input, tt.want)
			}
		})
	}
}

// TestToolRequestRawNullRefused shows why the client drops null: the
// schema says an input is an object, so a null sent on the wire fails.
func TestToolRequestRawNullRefused(t *testing.T) {
	m := NewToolRequest(alice, "bob", "uptime", nil)
	m.Input = json.RawMessage("null")
	_, err := Encode(m)
	assertErr(t, err, ErrInvalidMessage, "at '/input': got null, want object")
}
