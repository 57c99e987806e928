package remotetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// Caller is the A2A client side the importer needs; *a2a.Client is one.
// A Caller that is also a [Streamer] gets streamed calls.
type Caller interface {
	Discover(ctx context.Context, identity string) (*a2a.DiscoveryReply, error)
	CallTool(ctx context.Context, identity, name string, input json.RawMessage) (*a2a.ToolReply, error)
}

// Streamer is the optional streamed side of a [Caller]; *a2a.Client is
// one. A remote tool called through a Streamer hands the agent's output on
// while the command runs, and a call whose context ends sends the agent a
// cancel, so the remote process group stops with it instead of running on
// to the agent's own timeout. StreamTool itself falls back to the unary
// call for agents that serve no streams (Fisk AI's own v1 agents), so the
// importer needs no check of its own.
type Streamer interface {
	StreamTool(ctx context.Context, identity, name string, input json.RawMessage, onOutput func(string)) (*a2a.ToolReply, error)
}

// Canceler is the optional side of a [Caller] that makes unary calls its
// caller can stop; *a2a.Client is one. A remote call that wants no output
// while it runs goes unary to an agent that honours the cancel of a unary
// call ([a2a.ProtocolCallCancel]): one request and one reply, where a
// stream costs an ack, events and a final reply. Its context ending sends
// the cancel, as it does for a stream.
type Canceler interface {
	CancelsCalls(ctx context.Context, identity string) (bool, error)
	CallToolCancelable(ctx context.Context, identity, name string, input json.RawMessage, grace time.Duration) (*a2a.ToolReply, error)
}

// callerFor returns the Caller req names ([tool.Remote.Via]), else c.
func callerFor(req tool.Request, c Caller) Caller {
	if o, ok := req.Remote.Via.(Caller); ok && o != nil {
		return o
	}
	return c
}

// tagsPrefix starts the trailing line a model description carries its tags
// on; discovery has no tags field, so this is the only place they travel.
const tagsPrefix = "Tags: "

// splitTags separates a model description into the description and the
// tags of its trailing "Tags:" line, so a remote tool gets the same
// annotations a local one would.
func splitTags(desc string) (string, []string) {
	i := strings.LastIndex(desc, tagsPrefix)
	if i < 0 || (i > 0 && desc[i-1] != '\n') || strings.Contains(desc[i:], "\n") {
		return desc, nil
	}
	var tags []string
	for _, t := range strings.Split(desc[i+len(tagsPrefix):], ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return strings.TrimRight(desc[:i], "\n"), tags
}

// newRemoteTool builds the local tool for n: served over MCP only, never
// gated locally (the serving agent already refused its gated tools), no
// local argument checks (the serving agent decides), and a result rebuilt
// into the same CommandResult JSON a local command gives.
func newRemoteTool(c Caller, n Named) (tool.Tool, error) {
	desc, tags := splitTags(n.Tool.Description)
	// A tool the agent gates behind an operator's approval stays streamed
	// (see call).
	gated := strings.Contains(n.Tool.Description, a2a.ApprovalNote)
	title := strings.ReplaceAll(n.Remote, "_", " ") + " (" + n.Host + ")"
	return tool.NewFunc(tool.FuncSpec{
		Name:          n.Local,
		Title:         title,
		Description:   desc,
		Tags:          tags,
		InputSchema:   n.Tool.InputSchema,
		Exposure:      tool.ExposeMCP,
		Confirmation:  tool.ConfirmNone,
		Remote:        true,
		CommandResult: n.CommandResult,
		Call: func(ctx context.Context, req tool.Request) (tool.Outcome, error) {
			reply, err := call(ctx, callerFor(req, c), n, req, gated)
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				// The gateway's span of this call: which host, and
				// which of its instances answered.
				span.SetAttributes(tracing.AttrHost.String(n.Host))
				if reply != nil && reply.Sender.Instance != "" {
					span.SetAttributes(tracing.AttrInstance.String(reply.Sender.Instance))
				}
			}
			switch {
			case errors.Is(err, a2a.ErrPermission):
				return tool.Failure(fmt.Sprintf("remote agent %s refused by NATS permissions (tool %s): %v", n.Host, n.Remote, err)), nil
			case errors.Is(err, a2a.ErrAgentUnavailable):
				return tool.Failure(fmt.Sprintf("remote agent %s is unavailable (tool %s): %v", n.Host, n.Remote, err)), nil
			case err != nil:
				return tool.Failure(fmt.Sprintf("calling %s on remote agent %s: %v", n.Remote, n.Host, err)), nil
			case reply.IsError:
				return tool.Failure(fmt.Sprintf("remote agent %s: %s", n.Host, reply.Output)), nil
			}
			if res, ok := reply.CommandResult(); ok {
				return tool.Outcome{Result: &res}, nil
			}
			if n.CommandResult {
				// The declared output schema would not hold: refuse
				// rather than answer outside it.
				return tool.Failure(fmt.Sprintf("remote agent %s broke its card's promise of a command result (%s): its reply to %s ran no command", n.Host, a2a.ProtocolCommandResult, n.Remote)), nil
			}
			if json.Valid([]byte(reply.Output)) {
				return tool.Outcome{JSON: json.RawMessage(reply.Output)}, nil
			}
			text, _ := json.Marshal(reply.Output) // a string always marshals
			return tool.Outcome{JSON: text}, nil
		},
	})
}

// call makes one remote call. It goes unary, one request and one reply,
// when the call wants no output while it runs (no req.Output: the MCP
// client sent no progressToken), is not one that outlives its request
// ([tool.Remote.Streamed]), is not of a tool the agent gates behind an operator's
// approval (gated), and the agent honours the cancel of a unary call.
// Otherwise it is streamed when c can stream, handing output to
// req.Output as it arrives, and unary as a last resort.
//
// Gated tools stay streamed because the wait for an operator may be long:
// a stream's status events say the call waits, and its liveness probes
// let the agent withdraw the approval request once the gateway is gone,
// so that nobody approves a command whose result nobody will read.
func call(ctx context.Context, c Caller, n Named, req tool.Request, gated bool) (*a2a.ToolReply, error) {
	if cc, ok := c.(Canceler); ok && req.Output == nil && !gated && !req.Remote.Streamed {
		cancels, err := cc.CancelsCalls(ctx, n.Host)
		if err != nil {
			return nil, err
		}
		if cancels {
			// The client waits for the canceled reply itself, at most
			// cancelGrace once ctx has ended.
			return cc.CallToolCancelable(ctx, n.Host, n.Remote, req.Input, cancelGrace)
		}
	}
	s, ok := c.(Streamer)
	if !ok {
		return c.CallTool(ctx, n.Host, n.Remote, req.Input)
	}
	// handedOff is set once call returns: output arriving later (a stream
	// still draining after its caller gave up) is not written to a writer
	// its owner may have stopped.
	var handedOff atomic.Bool
	var onOutput func(string)
	if w := req.Output; w != nil {
		// The writer's errors are its own business: output still reaches
		// the final reply, which stays authoritative.
		onOutput = func(chunk string) {
			if !handedOff.Load() {
				_, _ = io.WriteString(w, chunk)
			}
		}
	}
	type answer struct {
		reply *a2a.ToolReply
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		reply, err := s.StreamTool(ctx, n.Host, n.Remote, req.Input, onOutput)
		done <- answer{reply, err}
	}()
	defer handedOff.Store(true)
	select {
	case a := <-done:
		return a.reply, a.err
	case <-ctx.Done():
	}
	// StreamTool has sent the agent a cancel and waits for the final
	// reply, up to three heartbeats when the agent's answer was lost
	// (its server went away mid-call). The call's own deadline is what
	// its caller was promised: wait a moment for the canceled reply, then
	// answer without it; the stream ends on its own.
	select {
	case a := <-done:
		return a.reply, a.err
	case <-time.After(cancelGrace):
		return nil, fmt.Errorf("%w: no answer from %s within %s of the cancel", ctx.Err(), n.Host, cancelGrace)
	}
}

// cancelGrace is how long a remote call whose context ended waits for the
// agent's answer to its cancel: a live agent answers within milliseconds
// (its process group killed, the output so far in the reply).
const cancelGrace = time.Second
