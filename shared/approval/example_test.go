package approval_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/approval"
)

func ExampleEventSubject() {
	fmt.Println(approval.EventSubject("demo", "host1-4242"))
	fmt.Println(approval.EventsSubject("demo"))
	fmt.Println(approval.EventsSubject(""))
	// Output:
	// choria.fisk-ai.approval.demo.event.host1-4242
	// choria.fisk-ai.approval.demo.event.>
	// choria.fisk-ai.approval.*.event.>
}

func ExampleListSubject() {
	fmt.Println(approval.ListSubject("demo"))
	fmt.Println(approval.ListSubject(""))
	// Output:
	// choria.fisk-ai.approval.demo.list
	// choria.fisk-ai.approval.list
}

func ExampleAnswerSubject() {
	fmt.Println(approval.AnswerSubject("demo", "host1-4242"))
	fmt.Println(approval.AnswersPermission)
	// Output:
	// choria.fisk-ai.approval.demo.answer.host1-4242
	// choria.fisk-ai.approval.*.answer.>
}

func ExampleDigest() {
	fmt.Println(approval.Digest([]byte(`{}`)))
	// Output: sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
}

func ExampleCaller_String() {
	fmt.Println(approval.Caller{Subject: "alice@example.com", Roles: []string{"ops", "deploy"}, ClientID: "claude"})
	fmt.Println(approval.Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true, NATSUser: "automation"})
	fmt.Println(approval.Caller{})
	// Output:
	// alice@example.com (roles ops, deploy), client claude
	// ci-bot/runner-1 (claimed), nats user automation
	// unknown
}

// ExampleBroker shows the call path of a gated command in a serving
// process: one broker for the process, and for each gated call a request
// that waits, holding no slot, until an operator answers.
func ExampleBroker() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	defer nc.Close()
	b, err := approval.NewBroker(nc, approval.Options{
		Identity: "demo",
		Instance: "host1-4242",
		Config:   approval.Config{Operator: true, SelfApproval: false},
		OnEvent: func(ev approval.Event, req approval.Request) {
			// Write the audit record of the request or its decision here:
			// ev.Type, req.Tool, req.Caller, ev.Decision, ev.Approver.
		},
	})
	if err != nil {
		return
	}
	defer b.Close()

	// In the call's handler, before taking a concurrency slot:
	ctx := context.Background()
	d, err := b.Request(ctx, approval.Pending{
		Tool:    "deploy",
		Command: "app deploy --env prod",
		Digest:  approval.Digest([]byte(`{"env":"prod"}`)),
		Caller:  approval.Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true},
		Announced: func(r approval.Request) {
			// Tell a streamed caller: "awaiting operator approval (id r.ID)".
		},
	})
	switch {
	case err != nil:
		// Withdrawn (the caller went away) or the broker closed: run nothing.
	case !d.Approved():
		// Denied or expired: an in-band error naming d.Reason.
	default:
		// Approved by d.Approver: take the slot and run the command, once.
	}
}
