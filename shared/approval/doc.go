// Package approval is operator approvals: a second approver for gated
// commands, reached over NATS, for callers that cannot be asked themselves
// (A2A callers, MCP clients without elicitation). Both services and the
// a2a-agent approvals commands use it; the gateway's /approvals page is a
// thin handler over it.
//
// # Life of a request
//
// A serving process makes one [Broker] on its connection. A gated call
// hands [Broker.Request] what would run ([Pending]: tool, exact command
// line, arguments digest, caller) and waits, holding no slot. The broker
// publishes a requested event carrying the [Request], lists the request to
// anyone who asks, and takes answers on a subject of its own instance. The
// request ends, exactly once, by:
//
//   - an accepted answer: approved or denied, with the approver;
//   - the timeout ([Config.Timeout], two minutes by default): denied,
//     the reason saying timeout;
//   - the caller's context ending: withdrawn everywhere;
//   - [Broker.Close]: withdrawn.
//
// and the broker publishes how it ended (decided, expired, withdrawn).
// [Options.OnEvent] sees every event with its request, for the audit trail.
// The waiting server turns the end into what it does with
// [Decision.Verdict]: run the call or refuse it, and how to record it.
//
// An answer ([AnswerMessage]) is bound to the request id and the arguments
// digest, used once, and only before the request expires. The instance
// refuses, logs and replies with the reason to: an answer repeating the
// one that decided the request (replayed), another answer to a decided
// request (duplicate), an answer after expiry or withdrawal (late), an
// answer whose digest is not the request's (forged, and the request still
// waits), and, with [Config.SelfApproval] off, an answer whose approver is
// the caller (four eyes: any name the approver goes by, its name or NATS
// user, equals one the caller goes by, its verified subject, claimed A2A
// name or NATS user).
//
// # Subjects
//
// Under choria.fisk-ai.approval ([Prefix]):
//
//	<identity>.event.<instance>   events of one instance's requests; watch
//	                              *.event.> or <identity>.event.>
//	<identity>.list               scatter-gather, no queue group: every instance
//	                              of the identity replies with its pending requests
//	list                          the same for every instance of the fleet
//	<identity>.answer.<instance>  request-reply to the instance that asked, and
//	                              only it; the reply says accepted, or refused and why
//
// [EventSubject], [EventsSubject], [ListSubject], [ListAllSubject] and
// [AnswerSubject] make them.
//
// Every message has a closed JSON Schema in schemas/approval, and every
// message sent or received is validated against it ([Validate]).
//
// # Who may answer
//
// The approver an answer names is a claim, like an A2A sender: the CLI
// fills it from --as or the operator's user name, and nothing checks it,
// unless the instance lists its approvers' public nkeys
// ([Config.Signers], approvals.approvers[].nkey): it then takes only
// answers signed by one of them, over the request's identity, instance,
// id, digest, decision and reason (sign.go), and names the approver by
// the key.
// Who may answer at all is decided by NATS subject permissions: only a
// user with publish permission on the answer subjects
// (choria.fisk-ai.approval.*.answer.>, [AnswersPermission]) can reach a
// waiting instance; a publish without it never arrives, and [Answer]
// reports [ErrNotPermitted]. Give that permission to operators only; the
// agents need subscribe permission on their own answer subjects and
// publish on their event subjects; callers (automation, other agents) get
// neither, so they cannot approve their own calls whatever they claim. On
// the gateway's page the approve: true roles of its policy decide, and the
// gateway's own NATS user carries the answer. The example server
// configuration integration/examples/nats-server-approvals.conf has agents,
// the gateway, an operator and an automation account as users; the part
// that decides is:
//
//	# an operator: lists, watches and answers
//	{user: alice, permissions: {
//	  publish:   ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list",
//	              "choria.fisk-ai.approval.*.answer.>"]
//	  subscribe: ["choria.fisk-ai.approval.*.event.>", "_INBOX.>"]
//	}}
//	# automation: calls tools, cannot list or answer whatever it claims
//	{user: ci, permissions: {
//	  publish:   ["choria.fisk-ai.tool.*", "choria.fisk-ai.stream.*"]
//	  subscribe: ["_INBOX.>"]
//	}}
//
// and the agents subscribe to choria.fisk-ai.approval.list,
// choria.fisk-ai.approval.*.list and choria.fisk-ai.approval.*.answer.*,
// and publish on choria.fisk-ai.approval.*.event.* and to the askers'
// inboxes.
package approval
