package call

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// Question is what a gated call asks the human: the tool, and exactly
// what it would run.
type Question struct {
	Tool string
	// Line is the command line for a command tool (Command set), else the
	// tool name and its canonical input.
	Line    string
	Command bool
	// Input is the call's checked arguments, which an answer given on a
	// retry must have been given for.
	Input json.RawMessage
}

// Answer is what the human at the caller's end made of a [Question].
type Answer struct {
	// Run is an explicit yes.
	Run bool
	// Pending is a question asked out of band: the call ends here
	// ([audit.EndMCPApprovalRequested]) and its retry carries the answer.
	Pending bool
	// Reason says why the call does not run: the human's no, or why
	// nobody answered.
	Reason string
	// TimedOut marks a question nobody answered in time, for the audit
	// record.
	TimedOut bool
	// Metric is the approval metric's answer (ops.Answer*); empty counts
	// nothing.
	Metric string
}

// Asker asks the human at the caller's end, through the caller's own
// protocol (MCP elicitation). Ask reports asked false when nobody there
// can answer a question (the client cannot elicit); the core then asks an
// operator, refuses, or runs the call unasked, as confirm_over_mcp and
// approvals.operator say. Implementations fail closed: anything but an
// explicit yes is no.
type Asker interface {
	Ask(ctx context.Context, q Question) (a Answer, asked bool)
}

// gate decides whether a gated call runs, as the package doc says (a
// courtesy, not an enforcement boundary). It returns run true to go on, or
// the verdict to answer with: a denial, a refusal, or a question pending
// with the client.
func (c *Core) gate(ctx context.Context, r *Request, e *Entry, input json.RawMessage, line string, rec *record) (Verdict, bool) {
	if c.cfg.Confirm == config.ConfirmNever {
		rec.approval = "not asked (expose.agent.mcp.confirm_over_mcp: never)"
		rec.gate = audit.DecisionNever
		return Verdict{}, true
	}
	if r.Asker == nil {
		// Another agent: nobody at its end can be asked, and running
		// unasked is never an option for it.
		if c.cfg.Approvals != nil {
			return c.operatorGate(ctx, r, e, input, line, rec)
		}
		rec.approval = "no operator to ask"
		rec.gate = audit.DecisionRefusedGated
		return rec.fail(audit.EndMCPRefused, fmt.Sprintf(
			"%s needs a human's approval, and this caller cannot be asked: set approvals.operator: true so that an operator approves it, "+
				"or expose.agent.mcp.confirm_over_mcp: never to run gated tools unasked", e.Name())), false
	}
	a, asked := r.Asker.Ask(ctx, Question{Tool: e.Name(), Line: line, Command: e.Liner != nil, Input: input})
	if !asked {
		if c.cfg.Approvals != nil {
			// Nobody at the client's end can be asked: an operator is.
			return c.operatorGate(ctx, r, e, input, line, rec)
		}
		c.cfg.Metrics.Approval(ops.AnswerUnsupported)
		if c.cfg.Confirm == config.ConfirmAlways {
			rec.approval = "client cannot elicit"
			rec.gate = audit.DecisionRefusedGated
			return rec.fail(audit.EndMCPRefused, fmt.Sprintf(
				"%s needs a human's approval, but this client cannot answer an elicitation form and expose.agent.mcp.confirm_over_mcp is always: "+
					"use a client that supports elicitation, or set expose.agent.mcp.confirm_over_mcp to auto", e.Name())), false
		}
		rec.approval = "skipped: the client cannot elicit (expose.agent.mcp.confirm_over_mcp: auto)"
		rec.gate = audit.DecisionUnasked
		rec.warn = true
		return Verdict{}, true
	}
	if a.Metric != "" {
		c.cfg.Metrics.Approval(a.Metric)
	}
	switch {
	case a.Run:
		rec.approval = "approved"
		rec.gate = audit.DecisionElicitation
		return Verdict{}, true
	case a.Pending:
		rec.outcome = audit.EndMCPApprovalRequested
		rec.approval = "requested"
		return Verdict{Outcome: audit.EndMCPApprovalRequested}, false
	}
	v := deny(e, rec, a.Reason)
	if a.TimedOut {
		rec.gate = audit.DecisionTimedOut
	}
	return v, false
}

// deny refuses a call its human or operator did not approve.
func deny(e *Entry, rec *record, reason string) Verdict {
	rec.approval = "denied: " + reason
	rec.gate = audit.DecisionDeclined
	return rec.fail(audit.EndMCPDenied, fmt.Sprintf("%s was not run: the human did not approve it (%s)", e.Name(), reason))
}

// operatorGate puts a gated call whose caller cannot be asked to the
// operators (approvals.operator) and waits for their answer, before any
// slot is taken and outside the run timeout. The request's Awaiting hears
// of the approval once it is announced, and is stopped when the wait
// ends. The request ending (the client cancels or goes away) withdraws it
// everywhere.
func (c *Core) operatorGate(ctx context.Context, r *Request, e *Entry, input json.RawMessage, line string, rec *record) (Verdict, bool) {
	caller := approval.Caller{}
	if who := r.Caller; who != nil && !who.Static {
		caller = approval.Caller{Subject: who.Subject, Roles: who.Roles, ClientID: who.ClientID}
	} else if who != nil {
		caller = approval.Caller{Subject: who.Subject}
	}
	var (
		mu   sync.Mutex
		stop func()
		done bool
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		if stop != nil {
			stop()
		}
	}()
	dec, err := c.cfg.Approvals.Request(ctx, approval.Pending{
		Tool:    e.Name(),
		Command: line,
		Digest:  audit.Digest(input),
		Caller:  caller,
		Announced: func(a approval.Request) {
			if r.Awaiting == nil {
				return
			}
			s := r.Awaiting(a.ID)
			mu.Lock()
			defer mu.Unlock()
			if done && s != nil {
				s()
				return
			}
			stop = s
		},
	})
	v := dec.Verdict(err)
	c.cfg.Metrics.Approval(v.Answer)
	if v.Approved {
		rec.approval = "approved by operator " + dec.Approver
		rec.gate, rec.approver = v.Gate, dec.Approver
		return Verdict{}, true
	}
	refused := deny(e, rec, v.Refusal)
	// deny records a declined gate; the verdict tells a timeout apart.
	rec.gate, rec.approver = v.Gate, dec.Approver
	return refused, false
}
