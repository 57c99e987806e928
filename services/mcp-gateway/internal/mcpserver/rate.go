package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
)

// outcomeRate is a call refused because its caller is over its rate
// (expose.agent.mcp.policy.roles.*.rate or tool_rates).
const outcomeRate = "refused_rate"

// CodeRateLimited is the JSON-RPC error of a call over its caller's
// rate. MCP names no code for it; this is the one other MCP gateways
// answer (toolhive), with the wait in data.retryAfterSeconds.
const CodeRateLimited = -32029

// RateRefusal is a call over its caller's rate: how long until it could
// run, and the message naming the bound and its key.
type RateRefusal struct {
	Wait    time.Duration
	Message string
}

// RetryAfter is Wait in whole seconds, at least 1, for Retry-After and
// retryAfterSeconds.
func (r *RateRefusal) RetryAfter() int { return max(1, int(math.Ceil(r.Wait.Seconds()))) }

type rateKey struct{}

// overRate spends one call of e for the caller of ctx, and returns the
// refusal when the caller is over its rate or the tool's. A gateway
// whose policy sets no rate never gets here.
func (s *Server) overRate(ctx context.Context, e *entry) *RateRefusal {
	c, g := s.grant(ctx)
	if c == nil || g.Everything() {
		return nil
	}
	name, remote := e.def.Name, e.source != SourceLocal
	tr := g.ToolRate(name, e.tool.Tags(), remote)
	if g.Rate.Unlimited() && tr.Unlimited() {
		return nil
	}
	wait, over := s.limits.Take(c.Subject, time.Now(), policy.Bound{Rate: g.Rate}, policy.Bound{Scope: "tool:" + name, Rate: tr})
	if over < 0 {
		return nil
	}
	roles := strings.Join(g.Roles, ", ")
	r := &RateRefusal{Wait: wait}
	if over == 0 {
		r.Message = fmt.Sprintf("%s was not run: you are over your rate of %s calls (roles %s, expose.agent.mcp.policy.roles.*.rate); retry in %ds", name, g.Rate, roles, r.RetryAfter())
	} else {
		r.Message = fmt.Sprintf("%s was not run: you are over your rate of %s calls of it (roles %s, expose.agent.mcp.policy.roles.*.tool_rates); retry in %ds", name, tr, roles, r.RetryAfter())
	}
	return r
}

// Limit spends one call of the tool name for the caller of ctx on a
// surface of inv, and returns the refusal when the caller is over a
// rate; the refused call is logged, counted, traced and audited
// (refused_rate) as every call is. A surface calls it before it starts
// the call, since it answers a refusal apart (HTTP 429 and Retry-After).
// An unknown or hidden name is never limited: its answer is the
// surface's unknown-tool one.
func (s *Server) Limit(ctx context.Context, name string, args json.RawMessage, inv *Invocation) *RateRefusal {
	if !s.cfg.Policy.Rated() {
		return nil
	}
	e := (*s.entries.Load())[name]
	if e == nil || s.hidden(ctx, e) {
		return nil
	}
	rr := s.overRate(ctx, e)
	if rr != nil {
		s.Invoke(context.WithValue(ctx, rateKey{}, rr), name, args, inv)
	}
	return rr
}

// rateRefused is the call path's step for a call [Server.Limit] refused:
// it ends the call there, so that its record says why.
func rateRefused(ctx context.Context, rec *record) *mcp.CallToolResult {
	rr, ok := ctx.Value(rateKey{}).(*RateRefusal)
	if !ok {
		return nil
	}
	return rec.fail(outcomeRate, rr.Message)
}

// rateMessage is what [Server.limitCall] reads of a POSTed message.
type rateMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// limitCall answers an MCP tools/call over its caller's rate with the
// JSON-RPC error CodeRateLimited, its wait in data.retryAfterSeconds and
// a Retry-After header, and reports true; anything else it leaves to the
// rest of the transport, having written nothing. It runs in both eras
// before the call is answered or made a task, and only when the policy
// sets a rate.
func (s *Server) limitCall(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !s.cfg.Policy.Rated() || r.Method != http.MethodPost {
		return false
	}
	var msg rateMessage
	if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodToolsCall) || len(msg.ID) == 0 {
		return false
	}
	inv := &Invocation{Surface: "", Protocol: r.Header.Get(mcp.HeaderProtocolVersion), Header: r.Header}
	rr := s.Limit(r.Context(), msg.Params.Name, msg.Params.Arguments, inv)
	if rr == nil {
		return false
	}
	answer, err := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      msg.ID,
		"error": map[string]any{
			"code":    CodeRateLimited,
			"message": rr.Message,
			"data":    map[string]any{"retryAfterSeconds": rr.RetryAfter()},
		},
	})
	if err != nil {
		return false
	}
	h := w.Header()
	h["Content-Type"] = contentJSON
	h.Set("Retry-After", strconv.Itoa(rr.RetryAfter()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
	return true
}
