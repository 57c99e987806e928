package a2a

import (
	"encoding/json"
	"fmt"
)

// CardReply answers discovery with a card encoded and validated once: per
// reply only the stamped header is marshalled and spliced in front of it,
// so discovery does no work that does not depend on the request. It is safe
// for concurrent use.
type CardReply struct {
	card AgentCard
	// body is the card's JSON object without its opening brace.
	body []byte
}

// NewCardReply encodes card once and validates a full reply carrying it,
// so every reply it makes is schema-valid.
func NewCardReply(card AgentCard) (*CardReply, error) {
	body, err := marshalCardBody(card)
	if err != nil {
		return nil, err
	}
	c := &CardReply{card: card, body: body}
	// Validate one spliced reply in full; Reply then only stamps headers.
	probe := NewDiscoveryRequest(Participant{Name: card.Name}, card.Name)
	data, err := c.Reply(probe, Participant{Name: card.Name})
	if err != nil {
		return nil, err
	}
	if err := Decode(data, &DiscoveryReply{}); err != nil {
		return nil, fmt.Errorf("validating agent card: %w", err)
	}
	return c, nil
}

// Card returns the card. Callers must not modify it.
func (c *CardReply) Card() AgentCard { return c.card }

// Reply returns the encoded discovery reply to req, sent by from.
func (c *CardReply) Reply(req *DiscoveryRequest, from Participant) ([]byte, error) {
	reply := &DiscoveryReply{}
	stampReply(reply, req, from)
	out := make([]byte, 0, 512+len(c.body))
	out, ok := appendHeader(out, &reply.Header)
	if !ok {
		head, err := json.Marshal(&reply.Header)
		if err != nil {
			return nil, fmt.Errorf("marshalling reply header: %w", err)
		}
		out = append(out[:0], head[:len(head)-1]...)
	}
	out = append(out, ',')
	out = append(out, c.body...)
	if len(out) > MaxMessageSize {
		return nil, fmt.Errorf("%w: discovery reply is %d bytes, the limit is %d", ErrTooLarge, len(out), MaxMessageSize)
	}
	return out, nil
}

// marshalCardBody returns the card's JSON object without its opening brace:
// what a reply carries after its header's fields.
func marshalCardBody(card AgentCard) ([]byte, error) {
	body, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("%w: marshalling agent card: %w", ErrInvalidMessage, err)
	}
	return body[1:], nil
}
