package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// HeartbeatInterval is a streamed call's heartbeat: the agent sends a
// status event after this long without sending anything else, and three
// intervals of silence mean the other end is gone. v1's ack has no field
// to announce another, so both ends assume this one.
const HeartbeatInterval = 5 * time.Second

// ErrStreamBroken is a streamed call whose messages stopped making sense:
// out of order, answering another request, or of a kind a stream does not
// carry.
var ErrStreamBroken = errors.New("stream broken")

// StreamTransport opens streamed calls. The NATS transport implements it;
// a transport that does not serves only unary calls.
type StreamTransport interface {
	OpenStream(ctx context.Context, identity string, data []byte) (StreamConn, error)
}

// StreamConn is the caller's end of one streamed call.
type StreamConn interface {
	// Next returns the next message, waiting at most wait; nothing in
	// time is an error wrapping [ErrAgentUnavailable].
	Next(ctx context.Context, wait time.Duration) ([]byte, error)
	// Cancel sends an encoded cancel to the instance running the call.
	Cancel(instance string, data []byte) error
	// Close stops listening.
	Close()
}

// Streams reports whether the agent identity serves streamed calls, by its
// card (kept by the client, so asking again is cheap). Fisk AI's own v1
// agents do not.
func (c *Client) Streams(ctx context.Context, identity string) (bool, error) {
	if _, ok := c.transport.(StreamTransport); !ok {
		return false, nil
	}
	// An agent that stops streaming is found out by the stream request
	// itself (see StreamTool).
	return c.lists(ctx, identity, ProtocolEvent)
}

// lists reports whether the card of the agent identity lists protocol:
// from the card last discovered, without a round trip, or by discovering
// it.
func (c *Client) lists(ctx context.Context, identity, protocol string) (bool, error) {
	if known := c.cards.get(identity); known != nil {
		return slices.Contains(known.card.Protocols, protocol), nil
	}
	card, err := c.Discover(ctx, identity)
	if err != nil {
		return false, err
	}
	return slices.Contains(card.Protocols, protocol), nil
}

type statusKey struct{}

// WithStatus returns ctx whose streamed calls ([Client.StreamTool]) hand
// the phase of every status event to fn as it arrives: heartbeats say
// "running", and a gated call waiting for an operator says "awaiting
// operator approval (id …)". fn runs on the stream's goroutine and must
// not block.
func WithStatus(ctx context.Context, fn func(phase string)) context.Context {
	return context.WithValue(ctx, statusKey{}, fn)
}

// StreamTool calls tool name on the agent identity as a streamed call,
// handing each piece of output to onOutput as the agent sends it (the
// pieces add up to the final reply's output), and returns the final reply.
//
// When ctx ends before the reply, StreamTool sends the agent a cancel, and
// then waits (at most three heartbeat intervals) for the final reply, which
// says the call was canceled; it returns that reply with ctx's error. A
// caller that must not wait calls it with a context it never ends and
// abandons it instead: the agent notices within three heartbeats.
//
// An agent that does not serve streams (see [Client.Streams]) gets a unary
// call, and onOutput the whole output once.
func (c *Client) StreamTool(ctx context.Context, identity, name string, input json.RawMessage, onOutput func(string)) (*ToolReply, error) {
	streams, err := c.Streams(ctx, identity)
	if err != nil {
		return nil, err
	}
	if !streams {
		reply, err := c.CallTool(ctx, identity, name, input)
		if err == nil && reply.Output != "" && onOutput != nil {
			onOutput(reply.Output)
		}
		return reply, err
	}
	req := NewToolRequest(c.self, identity, name, input)
	// A cancel is checked by the stream's request id (and the sender's
	// name): an id nobody can guess.
	secretRequestID(req)
	data, err := Encode(req)
	if err != nil {
		return nil, fmt.Errorf("encoding stream request: %w", err)
	}
	conn, err := c.transport.(StreamTransport).OpenStream(ctx, identity, data)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", identity, err)
	}
	defer conn.Close()
	s := &callStream{conn: conn, req: req, identity: identity, onOutput: onOutput}
	s.onStatus, _ = ctx.Value(statusKey{}).(func(string))
	reply, err := s.run(ctx)
	if errors.Is(err, ErrNoStreams) {
		// The card was stale: the agent that answers now serves no
		// streams. Forget the card and call it the unary way.
		c.cards.forget(identity)
		reply, err = c.CallTool(ctx, identity, name, input)
		if err == nil && reply.Output != "" && onOutput != nil {
			onOutput(reply.Output)
		}
	}
	return reply, err
}

// callStream is the state of one streamed call on the caller's side.
type callStream struct {
	conn     StreamConn
	req      *ToolRequest
	identity string
	onOutput func(string)
	// onStatus hears status events' phases ([WithStatus]); may be nil.
	onStatus func(string)
	// instance is the agent instance that acked, once it has.
	instance string
	seq      uint64
}

func (s *callStream) run(ctx context.Context) (*ToolReply, error) {
	// The ack comes once the agent has a slot for the call, which may take
	// a while on a busy agent: wait for it as long as the caller would
	// wait for a unary reply.
	ackWait := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		ackWait = time.Until(d)
	}
	var (
		cancelErr error
		canceled  bool // the cancel is sent
	)
	wait := ackWait
	readCtx := ctx
	for {
		raw, err := s.conn.Next(readCtx, wait)
		if err != nil {
			if cancelErr == nil && ctx.Err() != nil {
				// The caller gave up: tell the agent, then wait for the
				// reply that says it stopped. Without the ack there is
				// no instance to tell yet, but it may be on its way:
				// wait briefly for it, so that the agent hears of the
				// cancel now rather than at its next heartbeat.
				cancelErr = ctx.Err()
				readCtx, wait = context.WithoutCancel(ctx), 3*HeartbeatInterval
				if s.instance == "" {
					wait = ackGrace
					continue
				}
				if err := s.cancel(); err != nil {
					return nil, fmt.Errorf("stream %s: %w; %w", s.identity, cancelErr, err)
				}
				canceled = true
				continue
			}
			if s.instance != "" {
				return nil, fmt.Errorf("stream %s: instance %s: %w", s.identity, s.instance, err)
			}
			if cancelErr != nil {
				return nil, fmt.Errorf("stream %s: %w before the agent took the call", s.identity, cancelErr)
			}
			return nil, fmt.Errorf("stream %s: %w", s.identity, err)
		}
		reply, done, err := s.handle(raw)
		if err != nil {
			return nil, err
		}
		if done {
			return reply, cancelErr
		}
		switch {
		case cancelErr == nil:
			wait = 3 * HeartbeatInterval
		case !canceled && s.instance != "":
			// The ack came after the caller gave up.
			if err := s.cancel(); err != nil {
				return nil, fmt.Errorf("stream %s: %w; %w", s.identity, cancelErr, err)
			}
			canceled, wait = true, 3*HeartbeatInterval
		}
	}
}

// ackGrace is how long a caller that gives up before the ack waits for it,
// to send a cancel rather than leave the agent to find out at its next
// heartbeat: an agent acks as soon as the call has its slot, so this is
// for a busy machine. A call still queued for a slot gets no ack in this
// time, and the agent finds out with its first message.
const ackGrace = time.Second

// handle takes one message, returning the final reply once it comes.
func (s *callStream) handle(raw []byte) (*ToolReply, bool, error) {
	protocol, err := streamProtocol(raw)
	if err != nil {
		return nil, false, fmt.Errorf("stream %s: %w: %w", s.identity, ErrInvalidMessage, err)
	}
	var m Message
	switch protocol {
	case ProtocolAck:
		m = &Ack{}
	case ProtocolEvent:
		m = &Event{}
	case ProtocolToolReply:
		m = &ToolReply{}
	default:
		return nil, false, fmt.Errorf("stream %s: %w: a %q message", s.identity, ErrStreamBroken, protocol)
	}
	if err := Decode(raw, m); err != nil {
		return nil, false, fmt.Errorf("stream %s: %w", s.identity, err)
	}
	h := m.header()
	if h.Request != s.req.ID {
		return nil, false, fmt.Errorf("%w: stream %s: a message answering request %q, sent %q", ErrMismatchedReply, s.identity, h.Request, s.req.ID)
	}
	if h.Sequence <= s.seq {
		return nil, false, fmt.Errorf("stream %s: %w: sequence %d after %d", s.identity, ErrStreamBroken, h.Sequence, s.seq)
	}
	s.seq = h.Sequence
	switch m := m.(type) {
	case *Ack:
		if s.instance != "" {
			return nil, false, fmt.Errorf("stream %s: %w: a second ack", s.identity, ErrStreamBroken)
		}
		if !m.Accepted {
			// The whole answer: the call did not start. In-band, like a
			// unary call's refusal.
			reply := &ToolReply{Header: m.Header, IsError: true, Output: m.Reason}
			reply.Protocol = ProtocolToolReply
			return reply, true, nil
		}
		s.instance = m.Sender.Instance
		if s.instance == "" {
			return nil, false, fmt.Errorf("stream %s: %w: the ack names no instance", s.identity, ErrStreamBroken)
		}
	case *Event:
		if s.instance == "" {
			return nil, false, fmt.Errorf("stream %s: %w: an event before the ack", s.identity, ErrStreamBroken)
		}
		switch b := m.Block.Content.(type) {
		case *TextBlock:
			if s.onOutput != nil {
				s.onOutput(b.Text)
			}
		case *StatusBlock:
			if s.onStatus != nil && b.Phase != "" {
				s.onStatus(b.Phase)
			}
		}
	case *ToolReply:
		return m, true, nil
	}
	return nil, false, nil
}

// streamPrefixes are how the messages of a stream begin as fiskfleet
// writes them, protocol first.
var streamPrefixes = [...]string{
	`{"protocol":"` + ProtocolEvent + `",`,
	`{"protocol":"` + ProtocolAck + `",`,
	`{"protocol":"` + ProtocolToolReply + `",`,
}

// streamProtocol returns the protocol id a stream message names: read off
// its first bytes when it begins as fiskfleet writes it, else from the
// whole message. Either way [Decode] checks the message against it.
func streamProtocol(raw []byte) (string, error) {
	for _, p := range streamPrefixes {
		if len(raw) > len(p) && string(raw[:len(p)]) == p {
			return p[len(`{"protocol":"`) : len(p)-2], nil
		}
	}
	var head struct {
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", err
	}
	return head.Protocol, nil
}

// cancel asks the instance running the call to stop it.
func (s *callStream) cancel() error {
	c := &Cancel{Reason: "canceled by the caller"}
	stampRequest(c, s.req.Sender, &Participant{Name: s.identity, Instance: s.instance})
	c.Request = s.req.ID
	c.Conversation = s.req.Conversation
	data, err := Encode(c)
	if err != nil {
		return fmt.Errorf("encoding cancel: %w", err)
	}
	return s.conn.Cancel(s.instance, data)
}
