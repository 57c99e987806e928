package a2a

import (
	"bytes"
	"time"

	"github.com/nats-io/nuid"
)

// newID mints a message id. nuid is fast, safe for concurrent use, and
// unique enough for correlation; ids are labels, not secrets.
func newID() string { return nuid.Next() }

// stampRequest frames m as the first message of a new exchange: one fresh
// id becomes the message id, the request id and the conversation id, the
// sequence is 0, and the sender is named.
func stampRequest(m Message, from Participant, to *Participant) {
	h := m.header()
	id := newID()
	h.Protocol = m.ProtocolID()
	h.ID = id
	h.Request = id
	h.Conversation = id
	h.Sequence = 0
	h.Time = time.Now().UTC()
	h.Sender = from
	h.Recipient = to
}

// stampReply frames reply as the answer to req: a fresh id, the request and
// conversation echoed, sender and recipient swapped. from names the replier
// (the request's recipient label is never trusted for that).
func stampReply(reply, req Message, from Participant) {
	rh, qh := reply.header(), req.header()
	rh.Protocol = reply.ProtocolID()
	rh.ID = newID()
	rh.Request = qh.Request
	rh.Conversation = qh.Conversation
	rh.Parent = ""
	rh.Sequence = 0
	rh.Time = time.Now().UTC()
	rh.Sender = from
	to := qh.Sender
	rh.Recipient = &to
}

// NewDiscoveryRequest returns a stamped discovery request from from to the
// agent named to.
func NewDiscoveryRequest(from Participant, to string) *DiscoveryRequest {
	m := &DiscoveryRequest{}
	stampRequest(m, from, &Participant{Name: to})
	return m
}

// NewToolRequest returns a stamped call of tool name on the agent named to.
// A null or empty input is dropped: the server treats absence as {}.
func NewToolRequest(from Participant, to, name string, input []byte) *ToolRequest {
	m := &ToolRequest{Name: name}
	if !isNull(input) {
		m.Input = input
	}
	stampRequest(m, from, &Participant{Name: to})
	return m
}

// StampReply frames reply as the answer to req sent by from. It is how a
// serving agent answers; see stampReply.
func StampReply(reply, req Message, from Participant) { stampReply(reply, req, from) }

// isNull reports whether raw JSON is absent or the literal null.
func isNull(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
