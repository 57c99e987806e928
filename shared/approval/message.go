package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Request is a gated call waiting for an operator, as its instance
// publishes and lists it (schemas/approval/common.json#/$defs/request).
type Request struct {
	// ID names the request; an answer names it too.
	ID string `json:"id"`
	// Identity and Instance are the agent (or gateway) that asked, and the
	// one process among its instances that takes the answer.
	Identity string `json:"identity"`
	Instance string `json:"instance"`
	// Tool is the gated tool's name.
	Tool string `json:"tool"`
	// Command is the exact command line that runs once approved.
	Command string `json:"command"`
	// Digest is the arguments digest ("sha256:" and 64 hex digits) an
	// answer must repeat: an answer is for these arguments only.
	Digest string `json:"arguments_digest"`
	// Caller is who waits, as far as the service knows.
	Caller Caller `json:"caller"`
	// Created is when the request was made; Expires is when it is denied
	// if nobody answered, and after which answers are refused.
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
}

// Caller is who made a gated call: on MCP what a verified token
// established, on A2A the sender the request names, which nobody has
// verified (Claimed is then true). Its fields are those of the audit
// record's caller.
type Caller struct {
	// Subject is the MCP token's sub.
	Subject string `json:"subject,omitempty"`
	// Roles are the caller's policy roles.
	Roles []string `json:"roles,omitempty"`
	// ClientID is the MCP token's client id.
	ClientID string `json:"client_id,omitempty"`
	// Name and Instance are the A2A sender the request claims.
	Name     string `json:"name,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Claimed marks a caller that is an unauthenticated label.
	Claimed bool `json:"claimed,omitempty"`
	// NATSUser is the caller's NATS user, when NATS told the service.
	NATSUser string `json:"nats_user,omitempty"`
}

// names returns every non-empty name the caller goes by, for the
// four-eyes rule.
func (c Caller) names() []string {
	var names []string
	for _, n := range []string{c.Subject, c.Name, c.NATSUser} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

// String describes the caller for a person: the verified subject, or the
// claimed sender marked as claimed, and the NATS user when known.
func (c Caller) String() string {
	var parts []string
	if c.Subject != "" {
		s := c.Subject
		if len(c.Roles) > 0 {
			s += " (roles " + strings.Join(c.Roles, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if c.Name != "" {
		s := c.Name
		if c.Instance != "" {
			s += "/" + c.Instance
		}
		if c.Claimed {
			s += " (claimed)"
		}
		parts = append(parts, s)
	}
	if c.ClientID != "" {
		parts = append(parts, "client "+c.ClientID)
	}
	if c.NATSUser != "" {
		parts = append(parts, "nats user "+c.NATSUser)
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// Decisions an answer carries, the values of [AnswerMessage.Decision] and
// [Event.Decision].
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// AnswerMessage is an operator's answer to one request
// (schemas/approval/answer.json), as [Answer] sends it.
type AnswerMessage struct {
	// ID is the request answered.
	ID string `json:"id"`
	// Digest must equal the request's [Request.Digest].
	Digest string `json:"arguments_digest"`
	// Decision is [DecisionApprove] or [DecisionDeny].
	Decision string `json:"decision"`
	// Approver names who answers. It is the answering client's claim; NATS
	// permissions decide who may answer at all.
	Approver string `json:"approver"`
	// NATSUser is the NATS user the answering client connected as, when
	// it knows; compared with the caller's for the four-eyes rule.
	NATSUser string `json:"nats_user,omitempty"`
	// Reason says why, for the audit trail and the caller.
	Reason string `json:"reason,omitempty"`
	// Key and Signature, when the approver signs, are its public user
	// nkey and its signature of the answer (see sign.go): proof of who
	// answered, which an instance with [Config.Signers] requires.
	Key       string `json:"key,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// Refusal is why an answer was refused, a stable code in [Reply.Refusal].
type Refusal string

// Refusals.
const (
	// RefusedInvalid is an answer that is not valid JSON or breaks its
	// schema.
	RefusedInvalid Refusal = "invalid"
	// RefusedUnknown is an id the instance has never had, or has long
	// forgotten.
	RefusedUnknown Refusal = "unknown"
	// RefusedLate is an answer to a request that expired or was withdrawn.
	RefusedLate Refusal = "late"
	// RefusedReplayed is the answer that decided a request, sent again.
	RefusedReplayed Refusal = "replayed"
	// RefusedDuplicate is another answer to a request already decided.
	RefusedDuplicate Refusal = "duplicate"
	// RefusedForged is an answer whose digest is not the request's: it was
	// made for other arguments. The request still waits.
	RefusedForged Refusal = "forged"
	// RefusedSelfApproval is an approver who is the caller, with
	// self-approval off. The request still waits for somebody else.
	RefusedSelfApproval Refusal = "self_approval"
	// RefusedClosed is an answer that reached an instance while it stopped.
	RefusedClosed Refusal = "closed"
	// RefusedUnsigned is an answer without a signature, to an instance
	// that lists its approvers' keys. The request still waits.
	RefusedUnsigned Refusal = "unsigned"
	// RefusedUnknownSigner is an answer signed with a key the instance
	// does not list.
	RefusedUnknownSigner Refusal = "unknown_signer"
	// RefusedBadSignature is an answer whose signature does not verify:
	// forged, tampered with, or made for another request.
	RefusedBadSignature Refusal = "bad_signature"
)

// Reply is the instance's reply to an answer
// (schemas/approval/answer.reply.json).
type Reply struct {
	// ID is the request answered, when the answer named one.
	ID string `json:"id,omitempty"`
	// Accepted is true when the answer decided the request.
	Accepted bool `json:"accepted"`
	// Refusal and Reason say why an answer was refused.
	Refusal Refusal `json:"refusal,omitempty"`
	Reason  string  `json:"reason,omitempty"`
}

// ListReply is one instance's pending requests
// (schemas/approval/list.reply.json).
type ListReply struct {
	Identity string    `json:"identity"`
	Instance string    `json:"instance"`
	Pending  []Request `json:"pending"`
}

// EventType is what happened to a request.
type EventType string

// Event types.
const (
	// EventRequested is a new request; the event carries it.
	EventRequested EventType = "requested"
	// EventDecided is an accepted answer: its decision and approver.
	EventDecided EventType = "decided"
	// EventWithdrawn is a request whose caller went away, or whose
	// instance stopped, before anyone answered.
	EventWithdrawn EventType = "withdrawn"
	// EventExpired is a request nobody answered in time: it was denied.
	EventExpired EventType = "expired"
)

// Event is what happened to a request, published on [EventSubject]
// (schemas/approval/event.json).
type Event struct {
	Type     EventType `json:"type"`
	ID       string    `json:"id"`
	Identity string    `json:"identity"`
	Instance string    `json:"instance"`
	Time     time.Time `json:"time"`
	// Request is set on [EventRequested] only.
	Request *Request `json:"request,omitempty"`
	// Decision and Approver are set on [EventDecided] only.
	Decision string `json:"decision,omitempty"`
	Approver string `json:"approver,omitempty"`
	// Reason is the answer's reason, or why a request expired or was
	// withdrawn.
	Reason string `json:"reason,omitempty"`
}

// Digest returns "sha256:" and the hex SHA-256 of canonical, the canonical
// JSON of a call's arguments. Pass the same canonical form the audit
// record digests, so a request and its audit record name one digest.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}
