package mcpserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// CallTool runs one MCP tools/call of name through the call core and
// answers with its verdict as a result: every failure in-band, with
// isError set; it is the handler of every tool mcp-go serves, and the
// router's ([mcphttp.Backend]). cleared, when set, is told once the call is about to run
// (a task's call answers its client then). Everything the call's steps
// decide on is read here, once, from the request and the context mcp-go
// and the authentication layer filled.
func (s *Server) CallTool(ctx context.Context, name string, req mcp.CallToolRequest, cleared func()) *mcp.CallToolResult {
	r := &call.Request{
		Tool:     name,
		Args:     arguments(req),
		Caller:   auth.CallerFrom(ctx),
		Protocol: server.RequestProtocolVersion(ctx),
		Header:   req.Header,
		Cleared:  cleared,
		// A task's remote call stays streamed, so the agent stops its
		// command should this gateway go away (see tool.Remote); other
		// remote calls that ask for no progress go unary to agents that
		// can cancel them.
		Streamed: cleared != nil,
	}
	if m := req.Params.Meta; m != nil {
		r.TraceMeta = m.AdditionalFields
	}
	asker := &formAsker{s: s, req: req}
	r.Asker = asker
	if token := progressToken(req); token != nil {
		// Output is relayed as it comes, and a wait for an operator is
		// told as it goes on; without a token nothing changes.
		send := s.notifier(ctx, token)
		p := newProgress(send)
		r.Output = p
		r.Awaiting = func(id string) func() { return heartbeat(send, "awaiting operator approval (id "+id+")") }
		defer func() { p.stop(ctx.Err() == nil) }()
	}
	v := s.core.Call(ctx, r)
	if v.Outcome == audit.EndMCPApprovalRequested {
		return asker.requested
	}
	return s.Result(name, v)
}

// FastTool reports whether calls of name may be answered without mcp-go
// ([mcphttp.Backend]): a served tool the caller of ctx may see (mcp-go
// answers a hidden one as unknown), not gated (its approval asks for
// input), not task-only, and binding no parameter to a header.
func (s *Server) FastTool(ctx context.Context, name string) bool {
	e := (*s.entries.Load())[name]
	return e != nil && !e.Gated && !e.headerParams && (e.def.Execution == nil || e.def.Execution.TaskSupport != mcp.TaskSupportRequired) && !s.hidden(ctx, e)
}

// Result maps the verdict of a call of name onto what a tools/call
// answers: every failure in-band, with isError set. It is also what a
// task of another surface keeps as its result.
func (s *Server) Result(name string, v call.Verdict) *mcp.CallToolResult {
	switch {
	case v.Outcome != audit.EndOK:
		return mcp.NewToolResultError(v.Message)
	case v.Out.Result != nil:
		return ranResult(v.Out)
	}
	// An in-process tool's output is already the JSON the client asked
	// for: it travels verbatim.
	var links []mcp.Content
	if e := s.core.Entry(name); e != nil {
		links = s.resourceLinks(e.Tool, v.Out.JSON)
	}
	return &mcp.CallToolResult{Content: append([]mcp.Content{mcp.NewTextContent(string(v.Out.JSON))}, links...)}
}

// ranResult is the MCP result of a command's run: the result's JSON
// as the text, and the result as the structured content. The text's bytes
// are what the structured content marshals to, so they are written for it
// rather than marshaled a second time; StructuredContent stays for
// mcp-go's own use of it (a task's result, an output schema's check).
func ranResult(out tool.Outcome) *mcp.CallToolResult {
	text := out.Text()
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent:    out.Result,
		RawStructuredContent: json.RawMessage(text),
	}
}

// arguments returns a call's arguments as the raw JSON sent. A request
// mcp-go built from a map (never one off the wire, whose bytes it keeps)
// is encoded; a map decoded from JSON always encodes.
func arguments(req mcp.CallToolRequest) json.RawMessage {
	if len(req.Params.RawArguments) > 0 || req.Params.Arguments == nil {
		return req.Params.RawArguments
	}
	b, _ := json.Marshal(req.Params.Arguments)
	return b
}

// heartbeat tells msg through send at once and again every
// [operatorHeartbeat] until the returned stop is called.
func heartbeat(send func(int64, string), msg string) (stop func()) {
	send(0, msg)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(operatorHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				send(0, msg)
			}
		}
	}()
	return func() { close(done) }
}
