package a2a

import (
	"context"
	"encoding/json"
	"fmt"
)

// Route is which of an agent's two endpoints a request goes to. They ride
// different subjects so NATS permissions can grant discovery without
// execution.
type Route int

// Routes.
const (
	RouteDiscovery Route = iota
	RouteTool
)

// String names the route, as the endpoint is named.
func (r Route) String() string {
	if r == RouteDiscovery {
		return "discovery"
	}
	return "tool"
}

// Transport carries one request to an agent and returns its reply. It
// returns an error wrapping [ErrAgentUnavailable] when nobody answers in
// time, and [ErrRejected] when the agent refused the message.
type Transport interface {
	RoundTrip(ctx context.Context, identity string, route Route, data []byte) ([]byte, error)
}

// Client discovers agents and calls their tools. It stamps, encodes,
// size-caps and validates every request, and validates every reply and
// checks it answers the request sent. It is safe for concurrent use.
type Client struct {
	transport Transport
	self      Participant
	// cards spares Discover re-validating a card it has validated before.
	cards cardCache
}

// NewClient returns a client that sends as self over transport, which the
// caller owns.
func NewClient(transport Transport, self Participant) (*Client, error) {
	if err := CheckIdentity(self.Name); err != nil {
		return nil, fmt.Errorf("client sender: %w", err)
	}
	if self.Instance != "" {
		if err := CheckIdentity(self.Instance); err != nil {
			return nil, fmt.Errorf("client instance: %w", err)
		}
	}
	return &Client{transport: transport, self: self}, nil
}

// Discover asks the agent identity for its card.
func (c *Client) Discover(ctx context.Context, identity string) (*DiscoveryReply, error) {
	if err := CheckIdentity(identity); err != nil {
		return nil, err
	}
	req := NewDiscoveryRequest(c.self, identity)
	raw, err := c.send(ctx, identity, RouteDiscovery, req)
	if err != nil {
		return nil, err
	}
	reply, err := c.cards.decode(identity, raw)
	if err != nil {
		return nil, fmt.Errorf("%s reply from %s: %w", RouteDiscovery, identity, err)
	}
	if err := checkAnswers(identity, RouteDiscovery, req, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// CallTool calls tool name on the agent identity with input, a JSON object;
// a nil or null input is dropped. An in-band failure is a reply with
// IsError, not an error.
func (c *Client) CallTool(ctx context.Context, identity, name string, input json.RawMessage) (*ToolReply, error) {
	if err := CheckIdentity(identity); err != nil {
		return nil, err
	}
	req := NewToolRequest(c.self, identity, name, input)
	reply := &ToolReply{}
	if err := c.roundTrip(ctx, identity, RouteTool, req, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

func (c *Client) roundTrip(ctx context.Context, identity string, route Route, req, reply Message) error {
	raw, err := c.send(ctx, identity, route, req)
	if err != nil {
		return err
	}
	if err := Decode(raw, reply); err != nil {
		return fmt.Errorf("%s reply from %s: %w", route, identity, err)
	}
	return checkAnswers(identity, route, req, reply)
}

// send encodes req and returns the raw reply to it.
func (c *Client) send(ctx context.Context, identity string, route Route, req Message) ([]byte, error) {
	data, err := Encode(req)
	if err != nil {
		return nil, fmt.Errorf("encoding %s request: %w", route, err)
	}
	raw, err := c.transport.RoundTrip(ctx, identity, route, data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", route, identity, err)
	}
	return raw, nil
}

// checkAnswers refuses a reply that does not answer req.
func checkAnswers(identity string, route Route, req, reply Message) error {
	if got, want := reply.header().Request, req.header().ID; got != want {
		return fmt.Errorf("%w: %s reply from %s answers request %q, sent %q", ErrMismatchedReply, route, identity, got, want)
	}
	return nil
}
