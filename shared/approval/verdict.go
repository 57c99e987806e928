package approval

import (
	"errors"
	"fmt"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// Verdict is what a server does with how a request ended: whether the
// gated call runs, and what its audit record, the approvals metric and its
// caller are told. Both servers take it from [Decision.Verdict], so an
// operator's answer reads the same whichever surface the call came in on.
type Verdict struct {
	// Approved is whether the call may run, once.
	Approved bool
	// Gate is the audit record's gate decision: [audit.DecisionOperator],
	// [audit.DecisionTimedOut] or [audit.DecisionDeclined].
	Gate string
	// Answer is the answer label of the approvals metric: one of
	// [ops.AnswerAccepted], [ops.AnswerTimeout], [ops.AnswerDeclined] and
	// [ops.AnswerError].
	Answer string
	// Refusal says why the call did not run, for its caller and its audit
	// record; empty when Approved. It does not name the tool: each server
	// puts its own words before it ("deploy was not run: ").
	Refusal string
}

// Verdict maps what [Broker.Request] returned, d and its error err, onto
// what a server does. Only an approval with a nil error runs the call.
// Every other end denies it: a timeout is recorded as timed out, anything
// else as declined, and the refusal says who denied it or what went wrong.
// A request that could not be asked or was withdrawn counts as an error
// answer: nobody answered it.
func (d Decision) Verdict(err error) Verdict {
	switch {
	case err == nil && d.Approved():
		return Verdict{Approved: true, Gate: audit.DecisionOperator, Answer: ops.AnswerAccepted}
	case err == nil && d.Outcome == OutcomeExpired:
		return Verdict{Gate: audit.DecisionTimedOut, Answer: ops.AnswerTimeout,
			Refusal: fmt.Sprintf("no operator answered approval %s in time (%s)", d.Request.ID, d.Reason)}
	case err == nil:
		return Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerDeclined,
			Refusal: fmt.Sprintf("operator %s denied approval %s: %s", d.Approver, d.Request.ID, d.Reason)}
	case errors.Is(err, ErrWithdrawn), errors.Is(err, ErrClosed):
		return Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError,
			Refusal: fmt.Sprintf("its approval was withdrawn (%v)", err)}
	}
	return Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError,
		Refusal: fmt.Sprintf("asking an operator failed: %v", err)}
}
