package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
)

// Invocation is a call another surface of the gateway (the Agent2Agent
// endpoint) makes through the one call core: the same policy check,
// argument checks, gate, shares, slots, timeout, metrics, traces and audit
// record as a tools/call, with only what that surface cannot share set
// here. Its callbacks are called from the call's goroutine and must not
// block.
type Invocation struct {
	// Surface names where the call came in, on its audit record
	// (audit.Surface*); empty means [audit.SurfaceMCP].
	Surface string
	// Protocol is the calling protocol's version, on the call's log line.
	Protocol string
	// Output, when set, receives a command's output while it runs, as
	// [tool.Request.Output] describes.
	Output io.Writer
	// Awaiting, when set, is told the id of the operator approval a gated
	// call waits for, once it is announced.
	Awaiting func(approvalID string)
	// Cleared, when set, is called once the call has passed its checks
	// and any approval, before it waits for a slot: it is about to run.
	Cleared func()
	// Header is the request's HTTP header, where a trace may be
	// continued from; nil means none.
	Header http.Header

	// verdict is the call's, once it returned.
	verdict call.Verdict
}

// Refused reports whether the call was refused before it ran: denied by
// the human or operator, or refused by the gate or the policy. Valid once
// [Server.Invoke] has returned.
func (inv *Invocation) Refused() bool { return inv.verdict.Refused() }

// request is the core's request for a call of name by the caller of ctx.
func (inv *Invocation) request(ctx context.Context, name string, args json.RawMessage) *call.Request {
	r := &call.Request{
		Tool:     name,
		Args:     args,
		Caller:   auth.CallerFrom(ctx),
		Surface:  inv.Surface,
		Protocol: inv.Protocol,
		Header:   inv.Header,
		Output:   inv.Output,
		Cleared:  inv.Cleared,
		// The calls of another surface outlive their requests (its tasks),
		// so a remote one stays streamed: its agent stops the command
		// should this gateway go away.
		Streamed: true,
	}
	if inv.Awaiting != nil {
		r.Awaiting = func(id string) func() { inv.Awaiting(id); return nil }
	}
	return r
}

// Invoke calls the served tool name with args (a JSON object, or empty
// for none) for the caller ctx carries ([auth.WithCaller]; the surface's
// handler passed the authentication layer), and returns its result as a
// tools/call would answer it: every failure in-band, with IsError set.
//
// A gated tool is never run unasked: with confirm_over_mcp never it runs
// (the operator's explicit choice), with approvals.operator it waits for
// an operator (telling inv.Awaiting), and otherwise it is refused naming
// the key to set. No surface calling Invoke can answer an elicitation.
// The call ends when ctx does, killing a command's process group or
// cancelling a remote tool's stream.
func (s *Server) Invoke(ctx context.Context, name string, args json.RawMessage, inv *Invocation) *mcp.CallToolResult {
	inv.verdict = s.core.Call(ctx, inv.request(ctx, name, args))
	return s.result(name, inv.verdict)
}

// Limit spends one call of the tool name for the caller of ctx on a
// surface of inv, and returns the refusal when the caller is over a
// rate, already logged, counted, traced and audited ([call.Core.Limit]).
func (s *Server) Limit(ctx context.Context, name string, args json.RawMessage, inv *Invocation) *call.Verdict {
	return s.core.Limit(ctx, inv.request(ctx, name, args))
}

// ServedTool is a served tool as one caller may see it ([call.ServedTool]).
type ServedTool = call.ServedTool

// Visible returns the served tools the caller ctx carries may see and
// call, in registration order: what its tools/list shows.
func (s *Server) Visible(ctx context.Context) []ServedTool {
	return s.core.Visible(auth.CallerFrom(ctx))
}

// Lookup returns the served tool name as the caller ctx carries sees it,
// and false when it is unknown or hidden from that caller: the two are
// one answer, so a caller cannot tell which hidden tools exist.
func (s *Server) Lookup(ctx context.Context, name string) (ServedTool, bool) {
	return s.core.Lookup(auth.CallerFrom(ctx), name)
}
