package a2a

import (
	"bytes"
	"slices"
	"sync"
)

// maxCardCacheBytes bounds the card bodies one [Client] keeps: a gateway
// importing a handful of agents keeps them all, and a client discovering
// thousands of identities keeps what fits instead of growing without
// bound. A card larger than this is never kept.
const maxCardCacheBytes = 4 << 20

// cardCache spares a client the cost that dominates a discovery round trip:
// validating and decoding the same card on every reply. An agent's card is
// computed once at its start, so successive replies differ only in their
// header; a [CardReply] sends them as the header's fields followed by the
// card's, byte for byte the same each time.
//
// For each agent it keeps the card of the last reply it validated in
// full, with the bytes that card encodes to. A later reply that ends with
// exactly those bytes is checked in two parts: the part before them must
// be one JSON object of header fields only (parsed, duplicates refused,
// validated against the header schema closed to other keys), and the card
// is the one already validated. Header and card keys are disjoint, and the
// header part parsing as a complete object proves the card's bytes begin
// at a member boundary, so this accepts exactly the replies [Decode]
// accepts. Any other reply (a changed card, another encoder's key order, a
// malformed header) takes the full path and, if valid, replaces the entry.
//
// It is safe for concurrent use; entries are immutable once stored.
type cardCache struct {
	mu sync.Mutex
	// byAgent and size are guarded by mu; size is the sum of the kept
	// bodies' lengths.
	byAgent map[string]*CardReply
	size    int
}

// decode decodes raw, the reply of identity to a discovery request.
func (c *cardCache) decode(identity string, raw []byte) (*DiscoveryReply, error) {
	if known := c.get(identity); known != nil {
		if reply, ok := known.match(raw); ok {
			return reply, nil
		}
	}
	reply := &DiscoveryReply{}
	if err := Decode(raw, reply); err != nil {
		return nil, err
	}
	c.remember(identity, reply.AgentCard, raw)
	return reply, nil
}

func (c *cardCache) get(identity string) *CardReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byAgent[identity]
}

// forget drops what is kept of identity.
func (c *cardCache) forget(identity string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.byAgent[identity]; old != nil {
		c.size -= len(old.body)
		delete(c.byAgent, identity)
	}
}

// remember keeps card, just validated as part of raw, when raw ends with
// the bytes the card encodes to: only then can the next reply take the
// short path. A peer that lays its replies out otherwise costs nothing
// more than a marshal.
func (c *cardCache) remember(identity string, card AgentCard, raw []byte) {
	if len(raw) > maxCardCacheBytes {
		return
	}
	body, err := marshalCardBody(card)
	if err != nil || !bytes.HasSuffix(raw, body) {
		return
	}
	// NewCardReply validates a full reply built from body, so what match
	// compares against is known valid whatever produced raw.
	known, err := NewCardReply(card)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byAgent == nil {
		c.byAgent = map[string]*CardReply{}
	}
	if old := c.byAgent[identity]; old != nil {
		c.size -= len(old.body)
		delete(c.byAgent, identity)
	}
	for name, e := range c.byAgent {
		if c.size+len(known.body) <= maxCardCacheBytes {
			break
		}
		c.size -= len(e.body)
		delete(c.byAgent, name)
	}
	c.byAgent[identity] = known
	c.size += len(known.body)
}

// match decodes raw with the short path when it ends with the card's
// bytes, reporting false when it does not or its header part is not a
// valid discovery reply header.
func (cr *CardReply) match(raw []byte) (*DiscoveryReply, bool) {
	if len(raw) > MaxMessageSize || !bytes.HasSuffix(raw, cr.body) {
		return nil, false
	}
	head := bytes.TrimRight(raw[:len(raw)-len(cr.body)], " \t\r\n")
	if len(head) < 2 || head[len(head)-1] != ',' {
		return nil, false
	}
	doc := make([]byte, len(head))
	copy(doc, head)
	doc[len(doc)-1] = '}'
	reply := &DiscoveryReply{AgentCard: cr.card}
	if err := decodeHeader(doc, &reply.Header, ProtocolDiscoveryReply, mustValidator().header); err != nil {
		return nil, false
	}
	// The caller may append to or reorder its tools; the kept card stays
	// as it was validated.
	reply.Tools = slices.Clone(cr.card.Tools)
	reply.Protocols = slices.Clone(cr.card.Protocols)
	return reply, true
}
