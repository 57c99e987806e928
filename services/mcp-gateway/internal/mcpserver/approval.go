package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// approvalKey is the one property of the approval form, and the key of the
// input request that carries the form in the 2026-07-28 revision.
const approvalKey = "approve"

// approvalSchema is the approval form: one required boolean.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		approvalKey: map[string]any{
			"type":        "boolean",
			"title":       "Approve",
			"description": "Run exactly the command shown",
		},
	},
	"required": []string{approvalKey},
}

// formAsker is the [call.Asker] of one MCP tools/call: it asks the human
// at the client's end through an approval form. Clients of the
// session-based protocol revisions are asked with a server-initiated
// elicitation/create request, bounded by the approval timeout; clients of
// the 2026-07-28 revision get an input request (requested) carrying the
// form and a single-use nonce, and retry the call with the answer.
type formAsker struct {
	s   *Server
	req mcp.CallToolRequest
	// requested is the input request answered to a 2026-07-28 client,
	// once Ask returned a pending answer.
	requested *mcp.CallToolResult
}

// Ask asks as described above, or redeems the answer a retried call
// carries. It reports asked false when the client cannot elicit.
func (fa *formAsker) Ask(ctx context.Context, q call.Question) (call.Answer, bool) {
	s := fa.s
	if rt := fa.req.Params.MultiRoundTripParams; rt.RequestState != "" || len(rt.InputResponses) > 0 {
		return s.redeem(ctx, q, rt), true
	}
	// The capability is read on every call, never cached: a session-based
	// client declared it once at initialize, a client of the 2026-07-28
	// revision declares it on each request.
	modern := mcp.IsModernProtocol(server.RequestProtocolVersion(ctx))
	if !canElicit(ctx, modern) {
		return call.Answer{}, false
	}
	params := s.approvalForm(q)
	if modern {
		// No request is held open: the client asks its human and retries
		// the call with the answer and this nonce, which is bound to the
		// tool and the exact arguments.
		nonce, err := s.approvals.issue(ctx, q.Tool, digest(q.Tool, q.Input))
		if err != nil {
			return call.Answer{Reason: err.Error(), Metric: ops.AnswerError}, true
		}
		fa.requested = server.NewInputRequestBuilder(nonce).Elicit(approvalKey, params).ToolResult()
		return call.Answer{Pending: true}, true
	}

	actx, cancel := context.WithTimeout(ctx, s.cfg.ApprovalTimeout)
	defer cancel()
	answer, err := s.mcp.RequestElicitation(actx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  params,
	})
	if err != nil {
		a := call.Answer{Reason: "asking failed: " + err.Error(), Metric: ops.AnswerError}
		switch {
		case ctx.Err() != nil:
			a.Reason, a.Metric = "the request ended while waiting for an answer", ops.AnswerCanceled
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			a.Reason, a.Metric, a.TimedOut = fmt.Sprintf("no answer within %s", s.cfg.ApprovalTimeout), ops.AnswerTimeout, true
		}
		return a, true
	}
	return decide(answer), true
}

// operatorHeartbeat is how often a client waiting for an operator hears
// that it still waits: the A2A stream's heartbeat interval, so both
// surfaces keep callers informed alike.
const operatorHeartbeat = a2a.HeartbeatInterval

// redeem checks an answer carried by a retried call: the nonce must be one
// this server issued, unexpired, unused, and issued for this tool and these
// exact arguments. It is spent whatever the outcome.
func (s *Server) redeem(ctx context.Context, q call.Question, rt mcp.MultiRoundTripParams) call.Answer {
	if err := s.approvals.redeem(ctx, rt.RequestState, q.Tool, digest(q.Tool, q.Input)); err != nil {
		return call.Answer{Reason: err.Error(), Metric: ops.AnswerError}
	}
	answer := server.ElicitationResponse(rt.InputResponses, approvalKey)
	if answer == nil {
		return call.Answer{Reason: "the retried call carried no answer to the approval form", Metric: ops.AnswerError}
	}
	return decide(answer)
}

// decide runs the call only for an explicit accept whose approve property
// is the JSON boolean true. Everything else fails closed.
func decide(answer *mcp.ElicitationResult) (a call.Answer) {
	defer func() { a.Metric = answerOf(answer, a.Run) }()
	if answer == nil {
		return call.Answer{Reason: "no answer"}
	}
	switch answer.Action {
	case mcp.ElicitationResponseActionAccept:
	case mcp.ElicitationResponseActionDecline:
		return call.Answer{Reason: "declined"}
	case mcp.ElicitationResponseActionCancel:
		return call.Answer{Reason: "dismissed the request"}
	default:
		return call.Answer{Reason: fmt.Sprintf("unknown answer %q", answer.Action)}
	}
	content, ok := answer.Content.(map[string]any)
	if !ok {
		return call.Answer{Reason: "the answer carried no form content"}
	}
	v, ok := content[approvalKey]
	if !ok {
		return call.Answer{Reason: fmt.Sprintf("the answer did not say %q", approvalKey)}
	}
	approved, ok := v.(bool)
	switch {
	case !ok:
		return call.Answer{Reason: fmt.Sprintf("the answer to %q was not a boolean", approvalKey)}
	case !approved:
		return call.Answer{Reason: "answered no"}
	}
	return call.Answer{Run: true}
}

// answerOf names a human's answer to an approval form for the metrics:
// run is whether [decide] let the call go on.
func answerOf(answer *mcp.ElicitationResult, run bool) string {
	switch {
	case run:
		return ops.AnswerAccepted
	case answer == nil:
		return ops.AnswerError
	case answer.Action == mcp.ElicitationResponseActionDecline:
		return ops.AnswerDeclined
	case answer.Action == mcp.ElicitationResponseActionCancel:
		return ops.AnswerCanceled
	case answer.Action == mcp.ElicitationResponseActionAccept:
		// Accepted the form but did not say yes: a "no", or a malformed
		// answer, which denies like one.
		return ops.AnswerDeclined
	}
	return ops.AnswerError
}

// approvalForm is the form that asks the human. Its message names exactly
// what will run.
func (s *Server) approvalForm(q call.Question) mcp.ElicitationParams {
	what := "run this command"
	if !q.Command {
		what = "call this tool"
	}
	return mcp.ElicitationParams{
		Mode:            mcp.ElicitationModeForm,
		Message:         fmt.Sprintf("%s asks to %s:\n\n%s\n\nApprove?", s.cfg.Identity, what, q.Line),
		RequestedSchema: approvalSchema,
	}
}

// canElicit reports whether the client behind this request can answer a
// form: for the 2026-07-28 revision from the capabilities on the request,
// else from those the session declared at initialize. An elicitation
// capability without sub-capabilities means form mode.
func canElicit(ctx context.Context, modern bool) bool {
	var caps *mcp.ClientCapabilities
	if modern {
		if info := server.RequestProtocolInfoFromContext(ctx); info != nil {
			caps = info.ClientCapabilities
		}
	} else if sess, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		c := sess.GetClientCapabilities()
		caps = &c
	}
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	return caps.Elicitation.Form != nil || caps.Elicitation.URL == nil
}

// digest binds an approval to a tool and its exact arguments.
func digest(name string, input json.RawMessage) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(canonical(input))
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// canonical is [call.Canonical], what an approval's digest is taken of.
func canonical(input json.RawMessage) []byte { return call.Canonical(input) }

// approvalNonces keeps the approvals asked of clients of the 2026-07-28
// revision and not yet answered: random single-use nonces, each bound to a
// tool and an argument digest, expiring with the approval timeout. In
// memory ([approvals]) a retry reaching another gateway instance is
// denied; in a fleet's bucket ([bucketApprovals]) any gateway honours it,
// once.
type approvalNonces interface {
	issue(ctx context.Context, tool string, d [sha256.Size]byte) (string, error)
	redeem(ctx context.Context, nonce, tool string, d [sha256.Size]byte) error
}

// approvals are the pending approvals of one gateway, in memory.
type approvals struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex // guards pending
	pending map[string]pendingApproval
}

type pendingApproval struct {
	tool    string
	digest  [sha256.Size]byte
	expires time.Time
}

func newApprovals(ttl time.Duration, max int, now func() time.Time) *approvals {
	return &approvals{ttl: ttl, max: max, now: now, pending: map[string]pendingApproval{}}
}

// issue records a pending approval and returns its nonce.
func (a *approvals) issue(_ context.Context, tool string, d [sha256.Size]byte) (string, error) {
	nonce, err := newNonce()
	if err != nil {
		return "", err
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) >= a.max {
		for k, p := range a.pending {
			if !now.Before(p.expires) {
				delete(a.pending, k)
			}
		}
		if len(a.pending) >= a.max {
			return "", fmt.Errorf("%w (%d); answer or abandon some first", errApprovalsFull, a.max)
		}
	}
	a.pending[nonce] = pendingApproval{tool: tool, digest: d, expires: now.Add(a.ttl)}
	return nonce, nil
}

// redeem spends the nonce and reports whether it approves tool with
// arguments digest d.
func (a *approvals) redeem(_ context.Context, nonce, tool string, d [sha256.Size]byte) error {
	now := a.now()
	a.mu.Lock()
	p, ok := a.pending[nonce]
	delete(a.pending, nonce)
	a.mu.Unlock()
	switch {
	case !ok:
		return errApprovalUnknown
	case !now.Before(p.expires):
		return fmt.Errorf("%w: it was valid for %s", errApprovalExpired, a.ttl)
	case p.tool != tool || p.digest != d:
		return errApprovalMismatch
	}
	return nil
}

// newNonce draws an approval nonce: 256 random bits, URL-safe (it travels
// as requestState and may name a key in a bucket).
func newNonce() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("drawing an approval nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
