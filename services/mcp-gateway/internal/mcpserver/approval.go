package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
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

// gate decides whether a gated call runs. It returns run true to go on, or
// the result to answer with: a denial, a refusal, or (for a client of the
// 2026-07-28 revision) the input request that asks for approval.
//
// The gate is a courtesy, not an enforcement boundary: under
// confirm_over_mcp never, and under auto for a client that cannot elicit,
// gated tools run unasked. ai:deny is the only reliable exclusion.
func (s *Server) gate(ctx context.Context, e *entry, req mcp.CallToolRequest, input json.RawMessage, line string, rec *record) (res *mcp.CallToolResult, run bool) {
	if s.cfg.Confirm == config.ConfirmNever {
		rec.approval = "not asked (expose.agent.mcp.confirm_over_mcp: never)"
		rec.gate = audit.DecisionNever
		return nil, true
	}
	if invocationFrom(ctx) != nil {
		return s.invocationGate(ctx, e, req, input, line, rec)
	}
	if rt := req.Params.MultiRoundTripParams; rt.RequestState != "" || len(rt.InputResponses) > 0 {
		return s.redeem(ctx, e, rt, input, rec)
	}

	// The capability is read on every call, never cached: a session-based
	// client declared it once at initialize, a client of the 2026-07-28
	// revision declares it on each request.
	modern := mcp.IsModernProtocol(server.RequestProtocolVersion(ctx))
	if !canElicit(ctx, modern) {
		if s.cfg.Approvals != nil {
			// Nobody at the client's end can be asked: an operator is.
			return s.operatorGate(ctx, e, req, input, line, rec)
		}
		if s.cfg.Confirm == config.ConfirmAlways {
			rec.approval = "client cannot elicit"
			rec.gate = audit.DecisionRefusedGated
			s.cfg.Metrics.Approval(ops.AnswerUnsupported)
			return rec.fail(outcomeRefused, fmt.Sprintf(
				"%s needs a human's approval, but this client cannot answer an elicitation form and expose.agent.mcp.confirm_over_mcp is always: "+
					"use a client that supports elicitation, or set expose.agent.mcp.confirm_over_mcp to auto", e.def.Name)), false
		}
		rec.approval = "skipped: the client cannot elicit (expose.agent.mcp.confirm_over_mcp: auto)"
		rec.gate = audit.DecisionUnasked
		s.cfg.Metrics.Approval(ops.AnswerUnsupported)
		rec.warn = true
		return nil, true
	}

	params := s.approvalForm(e, line)
	if modern {
		// No request is held open: the client asks its human and retries
		// the call with the answer and this nonce, which is bound to the
		// tool and the exact arguments.
		nonce, err := s.approvals.issue(ctx, e.def.Name, digest(e.def.Name, input))
		if err != nil {
			rec.approval = "not asked: " + err.Error()
			s.cfg.Metrics.Approval(ops.AnswerError)
			return s.deny(e, rec, err.Error()), false
		}
		rec.outcome = outcomeRequested
		rec.approval = "requested"
		return server.NewInputRequestBuilder(nonce).Elicit(approvalKey, params).ToolResult(), false
	}

	actx, cancel := context.WithTimeout(ctx, s.cfg.ApprovalTimeout)
	defer cancel()
	answer, err := s.mcp.RequestElicitation(actx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params:  params,
	})
	if err != nil {
		reason, answer := "asking failed: "+err.Error(), ops.AnswerError
		switch {
		case ctx.Err() != nil:
			reason, answer = "the request ended while waiting for an answer", ops.AnswerCanceled
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			reason, answer = fmt.Sprintf("no answer within %s", s.cfg.ApprovalTimeout), ops.AnswerTimeout
		}
		s.cfg.Metrics.Approval(answer)
		res := s.deny(e, rec, reason)
		if answer == ops.AnswerTimeout {
			rec.gate = audit.DecisionTimedOut
		}
		return res, false
	}
	return s.decide(e, answer, rec)
}

// operatorGate puts a gated call of a client that cannot elicit to the
// operators (approvals.operator) and waits for their answer, before any
// slot is taken and outside the run timeout. A client that sent a
// progress token hears "awaiting operator approval (id …)" at once and
// again every heartbeat while it waits. The request ending (the client
// cancels or goes away) withdraws it everywhere.
func (s *Server) operatorGate(ctx context.Context, e *entry, req mcp.CallToolRequest, input json.RawMessage, line string, rec *record) (*mcp.CallToolResult, bool) {
	caller := approval.Caller{}
	if c := auth.CallerFrom(ctx); c != nil && !c.Static {
		caller = approval.Caller{Subject: c.Subject, Roles: c.Roles, ClientID: c.ClientID}
	} else if c != nil {
		caller = approval.Caller{Subject: c.Subject}
	}
	var (
		tell  func(string)
		stopC = make(chan struct{})
	)
	if token := progressToken(req); token != nil {
		send := s.notifier(ctx, token)
		tell = func(msg string) { send(0, msg) }
	}
	inv := invocationFrom(ctx)
	defer close(stopC)
	dec, err := s.cfg.Approvals.Request(ctx, approval.Pending{
		Tool:    e.def.Name,
		Command: line,
		Digest:  audit.Digest(input),
		Caller:  caller,
		Announced: func(r approval.Request) {
			if inv != nil && inv.Awaiting != nil {
				inv.Awaiting(r.ID)
			}
			if tell == nil {
				return
			}
			msg := "awaiting operator approval (id " + r.ID + ")"
			tell(msg)
			go func() {
				t := time.NewTicker(operatorHeartbeat)
				defer t.Stop()
				for {
					select {
					case <-stopC:
						return
					case <-t.C:
						tell(msg)
					}
				}
			}()
		},
	})
	switch {
	case err == nil && dec.Approved():
		rec.approval = "approved by operator " + dec.Approver
		rec.gate, rec.approver = audit.DecisionOperator, dec.Approver
		s.cfg.Metrics.Approval(ops.AnswerAccepted)
		return nil, true
	case err == nil && dec.Outcome == approval.OutcomeExpired:
		s.cfg.Metrics.Approval(ops.AnswerTimeout)
		res := s.deny(e, rec, fmt.Sprintf("no operator answered approval %s in time", dec.Request.ID))
		rec.gate = audit.DecisionTimedOut
		return res, false
	case err == nil:
		s.cfg.Metrics.Approval(ops.AnswerDeclined)
		res := s.deny(e, rec, fmt.Sprintf("operator %s denied approval %s: %s", dec.Approver, dec.Request.ID, dec.Reason))
		rec.approver = dec.Approver
		return res, false
	default:
		s.cfg.Metrics.Approval(ops.AnswerError)
		return s.deny(e, rec, "asking an operator failed: "+err.Error()), false
	}
}

// operatorHeartbeat is how often a client waiting for an operator hears
// that it still waits: the A2A stream's heartbeat interval, so both
// surfaces keep callers informed alike.
const operatorHeartbeat = a2a.HeartbeatInterval

// redeem checks an answer carried by a retried call: the nonce must be one
// this server issued, unexpired, unused, and issued for this tool and these
// exact arguments. It is spent whatever the outcome.
func (s *Server) redeem(ctx context.Context, e *entry, rt mcp.MultiRoundTripParams, input json.RawMessage, rec *record) (*mcp.CallToolResult, bool) {
	if err := s.approvals.redeem(ctx, rt.RequestState, e.def.Name, digest(e.def.Name, input)); err != nil {
		s.cfg.Metrics.Approval(ops.AnswerError)
		return s.deny(e, rec, err.Error()), false
	}
	answer := server.ElicitationResponse(rt.InputResponses, approvalKey)
	if answer == nil {
		s.cfg.Metrics.Approval(ops.AnswerError)
		return s.deny(e, rec, "the retried call carried no answer to the approval form"), false
	}
	return s.decide(e, answer, rec)
}

// decide runs the call only for an explicit accept whose approve property
// is the JSON boolean true. Everything else fails closed.
func (s *Server) decide(e *entry, answer *mcp.ElicitationResult, rec *record) (res *mcp.CallToolResult, run bool) {
	defer func() { s.cfg.Metrics.Approval(answerOf(answer, run)) }()
	if answer == nil {
		return s.deny(e, rec, "no answer"), false
	}
	switch answer.Action {
	case mcp.ElicitationResponseActionAccept:
	case mcp.ElicitationResponseActionDecline:
		return s.deny(e, rec, "declined"), false
	case mcp.ElicitationResponseActionCancel:
		return s.deny(e, rec, "dismissed the request"), false
	default:
		return s.deny(e, rec, fmt.Sprintf("unknown answer %q", answer.Action)), false
	}
	content, ok := answer.Content.(map[string]any)
	if !ok {
		return s.deny(e, rec, "the answer carried no form content"), false
	}
	v, ok := content[approvalKey]
	if !ok {
		return s.deny(e, rec, fmt.Sprintf("the answer did not say %q", approvalKey)), false
	}
	approved, ok := v.(bool)
	switch {
	case !ok:
		return s.deny(e, rec, fmt.Sprintf("the answer to %q was not a boolean", approvalKey)), false
	case !approved:
		return s.deny(e, rec, "answered no"), false
	}
	rec.approval = "approved"
	rec.gate = audit.DecisionElicitation
	return nil, true
}

func (s *Server) deny(e *entry, rec *record, reason string) *mcp.CallToolResult {
	rec.approval = "denied: " + reason
	rec.gate = audit.DecisionDeclined
	return rec.fail(outcomeDenied, fmt.Sprintf("%s was not run: the human did not approve it (%s)", e.def.Name, reason))
}

// approvalForm is the form that asks the human. Its message names exactly
// what will run.
func (s *Server) approvalForm(e *entry, line string) mcp.ElicitationParams {
	what := "run this command"
	if e.liner == nil {
		what = "call this tool"
	}
	return mcp.ElicitationParams{
		Mode:            mcp.ElicitationModeForm,
		Message:         fmt.Sprintf("%s asks to %s:\n\n%s\n\nApprove?", s.cfg.Identity, what, line),
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

// canonical re-encodes a JSON object with sorted keys and no insignificant
// space, so two encodings of the same arguments digest alike. Numbers keep
// their literal text. Absent input is the empty object.
func canonical(input json.RawMessage) []byte {
	if len(input) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(input)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return input
	}
	b, err := json.Marshal(v)
	if err != nil {
		return input
	}
	return b
}

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
