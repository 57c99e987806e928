package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Invocation is a call another surface of the gateway (the Agent2Agent
// endpoint) makes through the server's one call path: the same policy
// check, argument checks, gate, shares, slots, timeout, metrics, traces
// and audit record as a tools/call, with only what that surface cannot
// share set here. Its callbacks are called from the call's goroutine and
// must not block.
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

	// outcome is the call's logged outcome, once it returned.
	outcome string
}

// Refused reports whether the call was refused before it ran: denied by
// the human or operator, or refused by the gate or the policy. Valid once
// [Server.Invoke] has returned.
func (inv *Invocation) Refused() bool {
	switch inv.outcome {
	case outcomeDenied, outcomeRefused, outcomePolicy, outcomeRate:
		return true
	}
	return false
}

type invocationKey struct{}

// invocationFrom returns the invocation a call was made for, or nil for
// a tools/call.
func invocationFrom(ctx context.Context) *Invocation {
	inv, _ := ctx.Value(invocationKey{}).(*Invocation)
	return inv
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
	req := mcp.CallToolRequest{Header: inv.Header}
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name = name
	req.Params.RawArguments = args
	ctx = context.WithValue(ctx, invocationKey{}, inv)
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	return s.handle(ctx, name, req)
}

// invocationGate decides a gated call of an [Invocation] that
// confirm_over_mcp never did not already let run: an operator decides,
// or nobody can and it is refused.
func (s *Server) invocationGate(ctx context.Context, e *entry, req mcp.CallToolRequest, input json.RawMessage, line string, rec *record) (*mcp.CallToolResult, bool) {
	if s.cfg.Approvals != nil {
		return s.operatorGate(ctx, e, req, input, line, rec)
	}
	rec.approval = "no operator to ask"
	rec.gate = audit.DecisionRefusedGated
	return rec.fail(outcomeRefused, fmt.Sprintf(
		"%s needs a human's approval, and this caller cannot be asked: set approvals.operator: true so that an operator approves it, "+
			"or expose.agent.mcp.confirm_over_mcp: never to run gated tools unasked", e.def.Name)), false
}

// ServedTool is a served tool as one caller may see it, for another
// surface's listing (an agent card's skills).
type ServedTool struct {
	// Name is the name tools/list gives.
	Name        string
	Title       string
	Description string
	Tags        []string
	// Gated is set for a tool that needs a human's approval here.
	Gated bool
	// Remote is set for a tool imported from an agent on the bus.
	Remote bool
	// InputSchema is the JSON Schema of the call's arguments.
	InputSchema json.RawMessage
	// Command is set for a tool that runs a command and answers with
	// the command result envelope (its output schema).
	Command bool
	// Tool is the served tool itself.
	Tool tool.Tool
}

// Visible returns the served tools the caller ctx carries may see and
// call, in registration order: what its tools/list shows.
func (s *Server) Visible(ctx context.Context) []ServedTool {
	_, g := s.grant(ctx)
	entries := *s.entries.Load()
	served := s.Served()
	out := make([]ServedTool, 0, len(served))
	for _, t := range served {
		e := entries[t.Name()]
		if e == nil || !s.allowed(g, e) {
			continue
		}
		out = append(out, e.served())
	}
	return out
}

// Lookup returns the served tool name as the caller ctx carries sees it,
// and false when it is unknown or hidden from that caller: the two are
// one answer, so a caller cannot tell which hidden tools exist.
func (s *Server) Lookup(ctx context.Context, name string) (ServedTool, bool) {
	e := (*s.entries.Load())[name]
	if e == nil {
		return ServedTool{}, false
	}
	_, g := s.grant(ctx)
	if !s.allowed(g, e) {
		return ServedTool{}, false
	}
	return e.served(), true
}

// served is the entry as [ServedTool] describes it.
func (e *entry) served() ServedTool {
	t := e.tool
	return ServedTool{
		Name:        e.def.Name,
		Title:       t.Title(),
		Description: t.Description(),
		Tags:        t.Tags(),
		Gated:       e.gated,
		Remote:      e.source != SourceLocal,
		InputSchema: t.InputSchema(),
		Command:     e.liner != nil || len(e.def.RawOutputSchema) > 0,
		Tool:        t,
	}
}
