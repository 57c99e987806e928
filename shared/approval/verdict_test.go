package approval_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

func TestVerdict(t *testing.T) {
	req := approval.Request{ID: "r1"}
	withdrawn := fmt.Errorf("%w: %w", approval.ErrWithdrawn, context.Canceled)
	tests := []struct {
		name string
		d    approval.Decision
		err  error
		want approval.Verdict
	}{
		{
			name: "approved",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeApproved, Approver: "alice"},
			want: approval.Verdict{Approved: true, Gate: audit.DecisionOperator, Answer: ops.AnswerAccepted},
		},
		{
			name: "denied",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeDenied, Approver: "alice", Reason: "not now"},
			want: approval.Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerDeclined, Refusal: "operator alice denied approval r1: not now"},
		},
		{
			name: "expired",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeExpired, Reason: "timeout: no operator answered within 2m0s"},
			want: approval.Verdict{Gate: audit.DecisionTimedOut, Answer: ops.AnswerTimeout, Refusal: "no operator answered approval r1 in time (timeout: no operator answered within 2m0s)"},
		},
		{
			name: "withdrawn by the caller",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeWithdrawn, Reason: "the caller went away"},
			err:  withdrawn,
			want: approval.Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError, Refusal: "its approval was withdrawn (approval request withdrawn: context canceled)"},
		},
		{
			name: "withdrawn by a closing broker",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeWithdrawn, Reason: "the instance is stopping"},
			err:  approval.ErrClosed,
			want: approval.Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError, Refusal: "its approval was withdrawn (approval broker closed)"},
		},
		{
			name: "could not be asked",
			err:  fmt.Errorf("publishing approval request: %w", errors.New("nats: connection closed")),
			want: approval.Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError, Refusal: "asking an operator failed: publishing approval request: nats: connection closed"},
		},
		{
			// An error wins over what the decision says: the call
			// must not run on a half-finished request.
			name: "approved but with an error",
			d:    approval.Decision{Request: req, Outcome: approval.OutcomeApproved, Approver: "alice"},
			err:  approval.ErrTooManyPending,
			want: approval.Verdict{Gate: audit.DecisionDeclined, Answer: ops.AnswerError, Refusal: "asking an operator failed: too many approval requests pending"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Verdict(tt.err); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// An operator's denial, as a server turns it into its refusal.
func ExampleDecision_Verdict() {
	d := approval.Decision{
		Request:  approval.Request{ID: "r1", Tool: "deploy"},
		Outcome:  approval.OutcomeDenied,
		Approver: "alice",
		Reason:   "not during the freeze",
	}
	v := d.Verdict(nil)
	fmt.Println(v.Approved, v.Gate, v.Answer)
	fmt.Println(d.Request.Tool + " was not run: " + v.Refusal)
	// Output:
	// false declined declined
	// deploy was not run: operator alice denied approval r1: not during the freeze
}
