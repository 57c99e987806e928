package a2a

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// ProtocolCallCancel is the protocol id an agent lists in its card's
// protocols when it honours a cancel of a unary tool call: a plain
// [Cancel] whose request is the call's request id, sent to every process
// of the identity at once (over NATS, on the identity's shared control
// subject), stops the call in whichever process runs it, which then
// answers the call with a reply that says it was canceled. It names a
// capability, not a message kind of its own: the message is a v1 cancel,
// and an agent that does not list the id (Fisk AI's own v1 agents, older
// fiskfleet agents) is simply never sent one for a unary call.
const ProtocolCallCancel = schemas.ProtocolPrefix + "tool.cancel"

// ApprovalNote ends the card description of a tool whose calls wait for an
// operator's approval (approvals.operator on the serving agent), so a
// calling agent, its model and its human know the call waits. Callers also
// read it: a gateway keeps such calls on the streamed path, whose caller
// the agent watches while it waits and whose status events say it waits.
// It is part of the card's contract: changing it makes older callers treat
// the tool as ungated.
const ApprovalNote = "Needs an operator's approval: the call waits until an operator approves or denies it (a2a-agent approvals), or the approval times out, which denies it."

// CallCanceler is the transport side of a unary call's cancel: it sends an
// encoded cancel to every process of identity. The NATS transport
// implements it.
type CallCanceler interface {
	CancelCall(identity string, data []byte) error
}

// CancelsCalls reports whether the agent identity honours the cancel of a
// unary call ([ProtocolCallCancel]), by its card (kept by the client, so
// asking again is cheap), and the transport can send one.
func (c *Client) CancelsCalls(ctx context.Context, identity string) (bool, error) {
	if _, ok := c.transport.(CallCanceler); !ok {
		return false, nil
	}
	return c.lists(ctx, identity, ProtocolCallCancel)
}

// CallToolCancelable calls tool name on the agent identity as [CallTool]
// does, with one request and one reply, and can stop the call: when ctx
// ends before the reply, it sends the agent a cancel for the call's request
// id and waits at most grace for the reply, which then says the call was
// canceled; it returns whatever reply came with ctx's error. Until ctx
// ends it costs nothing beyond the request and the reply.
//
// Only an agent that honours the cancel ([Client.CancelsCalls]) stops; any
// other agent runs the call on to its own timeout, so a caller that must be
// able to stop a call asks first and streams otherwise ([Client.StreamTool]).
//
// The request id is the call's only credential: a cancel names the call by
// it and the agent checks the sender's name against the call's, so it is
// drawn from crypto/rand, 128 bits that nobody but the caller and the
// agent's identity (and whoever may read its tool subject) ever sees.
func (c *Client) CallToolCancelable(ctx context.Context, identity, name string, input json.RawMessage, grace time.Duration) (*ToolReply, error) {
	cc, ok := c.transport.(CallCanceler)
	if !ok {
		return c.CallTool(ctx, identity, name, input)
	}
	if err := CheckIdentity(identity); err != nil {
		return nil, err
	}
	req := NewToolRequest(c.self, identity, name, input)
	secretRequestID(req)
	// The round trip outlives ctx by grace, to take the reply the cancel
	// brings; without a deadline in ctx the transport's own bounds it.
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		var stopDeadline context.CancelFunc
		rctx, stopDeadline = context.WithDeadline(rctx, d.Add(grace))
		defer stopDeadline()
	}
	var (
		mu        sync.Mutex // guards cancelErr
		cancelErr error
	)
	unwatch := context.AfterFunc(ctx, func() {
		err := c.cancelCall(cc, identity, req)
		if err != nil {
			// The agent will not hear of it: waiting is pointless.
			mu.Lock()
			cancelErr = err
			mu.Unlock()
			stop()
			return
		}
		time.AfterFunc(grace, stop)
	})
	defer unwatch()
	reply := &ToolReply{}
	err := c.roundTrip(rctx, identity, RouteTool, req, reply)
	if ctxErr := ctx.Err(); ctxErr != nil {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case cancelErr != nil:
			return nil, fmt.Errorf("%w; %w", ctxErr, cancelErr)
		case err != nil:
			// The caller gave up; what the wait for the canceled reply
			// ran into is detail, not the agent being unavailable.
			return nil, fmt.Errorf("%w: no reply from %s within %s of the cancel (%v)", ctxErr, identity, grace, err)
		}
		return reply, ctxErr
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// cancelCall sends the cancel of the unary call req to every process of
// identity.
func (c *Client) cancelCall(cc CallCanceler, identity string, req *ToolRequest) error {
	m := &Cancel{Reason: "canceled by the caller"}
	stampRequest(m, req.Sender, &Participant{Name: identity})
	m.Request = req.ID
	m.Conversation = req.Conversation
	data, err := Encode(m)
	if err != nil {
		return fmt.Errorf("encoding cancel: %w", err)
	}
	if err := cc.CancelCall(identity, data); err != nil {
		return fmt.Errorf("cancelling the call on %s: %w", identity, err)
	}
	return nil
}

// secretRequestID gives req a request id nobody can guess, for requests
// whose id is what a cancel is checked by: nuid's ids, fine as labels,
// follow each other closely within a process.
func secretRequestID(req *ToolRequest) {
	id := rand.Text()
	req.ID, req.Request, req.Conversation = id, id, id
}
