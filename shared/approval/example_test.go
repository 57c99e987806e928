package approval_test

import (
	"fmt"

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
