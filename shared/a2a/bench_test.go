package a2a

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchInput is a typical tool call's input.
var benchInput = []byte(`{"path":"/var/lib/containers","depth":3,"human":true,"exclude":["*.tmp","cache"],"sort":"size"}`)

// benchCard returns a card of n tools, each with a ~200-character
// description and a 10-property input schema, the size a large fisk
// application exposes.
func benchCard(tb testing.TB, n int) AgentCard {
	tb.Helper()
	card := AgentCard{
		Name:        "ops-agent",
		Version:     "2.4.1",
		Description: "Operations agent for the build fleet",
		Protocols:   []string{ProtocolDiscoveryRequest, ProtocolToolRequest},
		Tools:       make([]ToolDescriptor, n),
	}
	for i := range n {
		props := map[string]any{}
		required := []string{}
		for p := range 10 {
			name := fmt.Sprintf("option_%d", p)
			prop := map[string]any{"description": fmt.Sprintf("Sets option %d of the command; see the command's help for the accepted values.", p)}
			switch p % 4 {
			case 0:
				prop["type"] = "string"
				required = append(required, name)
			case 1:
				prop["type"] = "integer"
				prop["minimum"] = 0
			case 2:
				prop["type"] = "boolean"
			case 3:
				prop["type"] = "string"
				prop["enum"] = []string{"json", "yaml", "text"}
			}
			props[name] = prop
		}
		schema, err := json.Marshal(map[string]any{
			"type": "object", "properties": props, "required": required, "additionalProperties": false,
		})
		if err != nil {
			tb.Fatal(err)
		}
		desc := fmt.Sprintf("Runs 'app group%d command%d': ", i/10, i) +
			strings.Repeat("inspects the selected resources and reports what it finds. ", 3)
		card.Tools[i] = ToolDescriptor{
			Name:        fmt.Sprintf("group%d_command%d", i/10, i),
			Description: desc[:200],
			InputSchema: schema,
		}
	}
	return card
}

func BenchmarkEncodeToolRequest(b *testing.B) {
	m := NewToolRequest(alice, "bob", "disk_usage", benchInput)
	b.SetBytes(int64(len(mustEncode(b, m))))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeToolRequest(b *testing.B) {
	data := mustEncode(b, NewToolRequest(alice, "bob", "disk_usage", benchInput))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var m ToolRequest
		if err := Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDiscoveryReply250(b *testing.B) {
	m := asReply(&DiscoveryReply{AgentCard: benchCard(b, 250)})
	b.SetBytes(int64(len(mustEncode(b, m))))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDiscoveryReply250(b *testing.B) {
	data := mustEncode(b, asReply(&DiscoveryReply{AgentCard: benchCard(b, 250)}))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var m DiscoveryReply
		if err := Decode(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCardReply250 is the serving side of discovery: one stamped
// reply per request, the card encoded once beforehand.
func BenchmarkCardReply250(b *testing.B) {
	c := newCardReply(b, benchCard(b, 250))
	req := NewDiscoveryRequest(alice, "ops-agent")
	data, err := c.Reply(req, bob)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Reply(req, bob); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStampOnly is header population alone, for scale against the
// codec benchmarks.
func BenchmarkStampOnly(b *testing.B) {
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewToolRequest(alice, "bob", "disk_usage", benchInput)
		}
	})
	b.Run("reply", func(b *testing.B) {
		req := NewToolRequest(alice, "bob", "disk_usage", benchInput)
		b.ReportAllocs()
		for b.Loop() {
			StampReply(&ToolReply{}, req, bob)
		}
	})
}

func BenchmarkDecodeDiscoveryRequest(b *testing.B) {
	data := mustEncode(b, NewDiscoveryRequest(alice, "bob"))
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(data, &DiscoveryRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDiscoveryRequest(b *testing.B) {
	m := NewDiscoveryRequest(alice, "bob")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCardCacheMatch(b *testing.B) {
	cr := sampleCardReply(b)
	data, _ := cardReplyBytes(b, cr)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := cr.match(data); !ok {
			b.Fatal("no match")
		}
	}
}

// benchStreamMessages are the messages a streamed call adds to a unary
// one: the ack and an output event, stamped as the agent stamps them.
func benchStreamMessages() (*Ack, *Event) {
	req := NewToolRequest(alice, "bob", "disk_usage", benchInput)
	self := Participant{Name: "bob", Instance: "bob-1"}
	ack := &Ack{Accepted: true}
	StampReply(ack, req, self)
	ack.Sequence = 1
	ev := &Event{Block: Block{Content: &TextBlock{Text: "12G\t/var/lib/containers/storage <ok> & \"done\"\n"}}}
	StampReply(ev, req, self)
	ev.Sequence = 2
	return ack, ev
}

func BenchmarkEncodeStreamAckEvent(b *testing.B) {
	ack, ev := benchStreamMessages()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(ack); err != nil {
			b.Fatal(err)
		}
		if _, err := Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeStreamAckEvent(b *testing.B) {
	ack, ev := benchStreamMessages()
	ackData, evData := mustEncode(b, ack), mustEncode(b, ev)
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(ackData, &Ack{}); err != nil {
			b.Fatal(err)
		}
		if err := Decode(evData, &Event{}); err != nil {
			b.Fatal(err)
		}
	}
}
