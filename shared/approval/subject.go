package approval

import "github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"

// Prefix is the root of every approval subject, inside the Choria subject
// space beside the A2A subjects.
const Prefix = natsbus.SubjectPrefix + ".approval"

// EventSubject is the subject one instance of identity publishes the events
// of its requests on (requested, decided, withdrawn, expired). Watchers
// subscribe with [EventsSubject].
func EventSubject(identity, instance string) string {
	return Prefix + "." + identity + ".event." + instance
}

// EventsSubject is the wildcard of every event of identity's instances, or
// of the whole fleet when identity is empty
// (choria.fisk-ai.approval.*.event.>).
func EventsSubject(identity string) string {
	if identity == "" {
		identity = "*"
	}
	return Prefix + "." + identity + ".event.>"
}

// ListSubject is the subject every instance of identity answers list
// requests on, each with its own pending requests: a scatter-gather with no
// queue group, since every instance holds requests of its own. An empty
// identity gives [ListAllSubject].
func ListSubject(identity string) string {
	if identity == "" {
		return ListAllSubject()
	}
	return Prefix + "." + identity + ".list"
}

// ListAllSubject is the subject every instance of every identity answers
// list requests on, for an operator watching the whole fleet. NATS does not
// deliver a publish to a wildcard, so the fleet-wide list has a subject of
// its own, one token shorter than any identity's: it cannot collide with
// an identity named "list".
func ListAllSubject() string { return Prefix + ".list" }

// AnswerSubject is the subject only the instance that asked subscribes to
// for answers to its requests, as NATS request-reply: the reply says
// whether the answer was accepted. Keying it by instance sends each answer
// to the one process whose caller waits, and keeps the others from ever
// seeing it.
func AnswerSubject(identity, instance string) string {
	return Prefix + "." + identity + ".answer." + instance
}

// AnswersPermission is the subject pattern an approver's NATS user needs
// publish permission on to answer any request of the fleet. Narrow it to
// choria.fisk-ai.approval.<identity>.answer.> to let an approver answer for
// one identity only. Agents need subscribe permission on their own answer
// subjects, which nobody else needs.
const AnswersPermission = Prefix + ".*.answer.>"
