package audit

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// Services, the values of [Record.Service].
const (
	ServiceA2AAgent   = "a2a-agent"
	ServiceMCPGateway = "mcp-gateway"
)

// Surfaces, the values of [Record.Surface]: where the call came in.
const (
	// SurfaceMCP is a tools/call on the gateway.
	SurfaceMCP = "mcp"
	// SurfaceA2A is a request on an agent's tool endpoint.
	SurfaceA2A = "a2a"
	// SurfaceA2AStream is a request on an agent's stream endpoint.
	SurfaceA2AStream = "a2a-stream"
	// SurfaceAgent2Agent is a call on the gateway's Agent2Agent (HTTP)
	// endpoint.
	SurfaceAgent2Agent = "agent2agent"
)

// Gate decisions, the values of [Gate.Decision].
const (
	// DecisionNotGated is a tool that needs no approval.
	DecisionNotGated = "not_gated"
	// DecisionElicitation is a gated tool the MCP client's user approved.
	DecisionElicitation = "approved_by_elicitation"
	// DecisionOperator is a gated tool an operator approved.
	DecisionOperator = "approved_by_operator"
	// DecisionNever is a gated tool run without asking because the
	// operator set confirm_over_mcp: never.
	DecisionNever = "ungated_by_operator"
	// DecisionUnasked is a gated tool run without asking because the
	// client cannot elicit and confirm_over_mcp is auto.
	DecisionUnasked = "ran_unasked"
	// DecisionDeclined is an approval that was refused.
	DecisionDeclined = "declined"
	// DecisionTimedOut is an approval nobody gave in time.
	DecisionTimedOut = "timed_out"
	// DecisionPolicy is a call the caller's policy does not allow.
	DecisionPolicy = "refused_by_policy"
	// DecisionRefusedGated is a gated tool refused because nobody could be
	// asked (confirm_over_mcp: always and a client that cannot elicit).
	DecisionRefusedGated = "refused_gated"
)

// Results, the values of [Outcome.Result].
const (
	// ResultOK is a call that ran and succeeded (exit code 0).
	ResultOK = "ok"
	// ResultFailed is a command that ran and exited non-zero; the exit
	// code is in [Outcome.ExitCode].
	ResultFailed = "failed"
	// ResultError is an in-band failure: the tool reported an error, or
	// its command could not be started.
	ResultError = "error"
	// ResultInvalid is arguments the tool refused before running anything.
	ResultInvalid = "invalid"
	// ResultUnknownTool is a name the service does not serve.
	ResultUnknownTool = "unknown_tool"
	// ResultDenied is a gated call that was not approved.
	ResultDenied = "denied"
	// ResultRefused is a call refused before it ran (policy, a stopping
	// service).
	ResultRefused = "refused"
	// ResultTimeout is a call stopped by the tool timeout.
	ResultTimeout = "timeout"
	// ResultCanceled is a call its caller canceled, or that went away.
	ResultCanceled = "canceled"
	// ResultBusy is a call refused because every slot was taken.
	ResultBusy = "busy"
)

// Argument notes, the values of [Record.ArgumentsNote].
const (
	// NoteInvalidJSON marks arguments that were not JSON: they are
	// recorded as a JSON string holding the bytes sent (invalid UTF-8
	// replaced), and digested as such.
	NoteInvalidJSON = "invalid_json"
	// NoteTooLarge marks arguments whose canonical JSON exceeds
	// [MaxArguments]: only their digest is recorded.
	NoteTooLarge = "too_large"
)

// Bounds on what a record holds. A caller chooses the arguments, the tool
// name and much of the error text, so each is bounded: a record must fit a
// NATS message (1 MiB by default) with room to spare, and a trail of
// megabyte records is expensive to keep for 90 days. The schema enforces
// the same bounds; [Publisher] cuts longer values (never inside a UTF-8
// character) before it validates.
const (
	// MaxArguments is the largest canonical JSON recorded in full; larger
	// arguments are recorded by digest with [NoteTooLarge].
	MaxArguments = 64 << 10
	// MaxMessage bounds [Outcome.Message].
	MaxMessage = 1 << 10
	// MaxCommand bounds [Record.Command].
	MaxCommand = 16 << 10
	// MaxLabel bounds the tool name, the instance, every caller field and
	// the approver.
	MaxLabel = 256
	// MaxRoles bounds the number of [Caller.Roles].
	MaxRoles = 64
)

// Record is one tool call. Build one per call once the call has been
// answered, and hand it to [Publisher.Publish], which owns it from then on.
type Record struct {
	// Time is when the call arrived; it is written in UTC with a
	// microsecond fraction. Zero means the time it is published.
	Time time.Time `json:"time"`
	// Service is [ServiceA2AAgent] or [ServiceMCPGateway].
	Service string `json:"service"`
	// Identity is the serving identity.
	Identity string `json:"identity"`
	// Instance is the serving process: the agent's instance label (its
	// micro metadata fiskfleet.instance, the sender.instance of its
	// replies) or the gateway's.
	Instance string `json:"instance"`
	// Surface is where the call came in: [SurfaceMCP], [SurfaceA2A],
	// [SurfaceA2AStream] or [SurfaceAgent2Agent].
	Surface string `json:"surface"`
	// Caller is who called, as far as the service knows.
	Caller Caller `json:"caller"`
	// Tool is the tool name as the caller sent it, served or not.
	Tool string `json:"tool"`
	// Arguments is the canonical JSON of the call's arguments; absent with
	// audit.arguments: digest, or when ArgumentsNote is [NoteTooLarge].
	// Set it with [Record.SetArguments].
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsDigest is "sha256:" and the hex SHA-256 of the canonical
	// JSON of the arguments ([Digest]); it is always present.
	ArgumentsDigest string `json:"arguments_digest"`
	// ArgumentsNote says why the arguments are not recorded as sent:
	// [NoteInvalidJSON] or [NoteTooLarge]; empty when they are.
	ArgumentsNote string `json:"arguments_note,omitempty"`
	// Command is the command line that ran, or would have run, when
	// known. It spells out the arguments, so it is left out with
	// audit.arguments: digest; set it with [Record.SetCommand].
	Command string `json:"command,omitempty"`
	// Gate is what the approval gate decided.
	Gate Gate `json:"gate"`
	// Outcome is how the call ended.
	Outcome Outcome `json:"outcome"`
	// TraceID is the call's OpenTelemetry trace id (32 hex digits) when a
	// span was recording.
	TraceID string `json:"trace_id,omitempty"`
}

// Caller is who made a call. On MCP it is what a verified token
// established; on A2A it is the sender the request names, which nobody has
// verified: Claimed is then true, and the name is a label, never proof.
type Caller struct {
	// Subject is the MCP token's sub.
	Subject string `json:"subject,omitempty"`
	// Roles are the caller's policy roles.
	Roles []string `json:"roles,omitempty"`
	// ClientID is the MCP token's client id.
	ClientID string `json:"client_id,omitempty"`
	// Name is the A2A sender name the request claims.
	Name string `json:"name,omitempty"`
	// Instance is the A2A sender instance the request claims.
	Instance string `json:"instance,omitempty"`
	// Claimed marks a caller that is an unauthenticated label (an A2A
	// sender), never proof of who called.
	Claimed bool `json:"claimed,omitempty"`
	// NATSUser is reserved for the NATS user of the request, once NATS
	// tells the service.
	NATSUser string `json:"nats_user,omitempty"`
}

// Gate is what the approval gate decided about a call.
type Gate struct {
	// Decision is one of the Decision constants.
	Decision string `json:"decision"`
	// Approver names who approved, when someone did.
	Approver string `json:"approver,omitempty"`
}

// Outcome is how a call ended.
type Outcome struct {
	// Result is one of the Result constants.
	Result string `json:"result"`
	// ExitCode is the command's exit code, when a command ran to its end.
	ExitCode *int `json:"exit_code,omitempty"`
	// ErrorClass is a short machine-readable reason for a result other
	// than ok (lower case, digits and underscores: "invalid_input").
	ErrorClass string `json:"error_class,omitempty"`
	// Message is the error text a caller received, cut to [MaxMessage]
	// bytes. A successful call's output is never recorded.
	Message string `json:"message,omitempty"`
	// DurationMS is how long the call took, in milliseconds.
	DurationMS float64 `json:"duration_ms"`
}

// DurationMS converts d to the milliseconds of [Outcome.DurationMS], to
// the microsecond.
func DurationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ExitCode returns a pointer to code, for [Outcome.ExitCode].
func ExitCode(code int) *int { return &code }

// Subject is the subject the audit trail of identity is published on when
// audit.subject is not set: choria.fisk-ai.audit.<identity>. Use
// config.Config.AuditSubject to honour audit.subject.
func Subject(identity string) string { return config.AuditSubject(identity) }

// SubjectAll is the subject matching the default audit trail of every
// identity: choria.fisk-ai.audit.>.
func SubjectAll() string { return config.AuditSubject(">") }

// SetArguments records input, the call's arguments, as its canonical JSON
// and digest ([Canonical], [Digest]). With digestOnly (audit.arguments:
// digest) only the digest is kept. Arguments over [MaxArguments] are kept
// by digest too, with [NoteTooLarge]; input that is not JSON is noted with
// [NoteInvalidJSON].
func (r *Record) SetArguments(input json.RawMessage, digestOnly bool) {
	c, valid := canonical(input)
	r.ArgumentsDigest = digestOf(c)
	r.Arguments, r.ArgumentsNote = nil, ""
	switch {
	case len(c) > MaxArguments:
		r.ArgumentsNote = NoteTooLarge
		return
	case !valid:
		r.ArgumentsNote = NoteInvalidJSON
	}
	if !digestOnly {
		r.Arguments = c
	}
}

// SetCommand records line, the command line of the call, unless
// digestOnly: a command line holds the arguments the digest stands for.
func (r *Record) SetCommand(line string, digestOnly bool) {
	r.Command = ""
	if !digestOnly {
		r.Command = line
	}
}

// timeLayout writes a record's time in UTC with a fixed microsecond
// fraction, so records sort as text in time order.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// MarshalJSON writes the record with its time in UTC and a microsecond
// fraction. json.Marshal escapes <, > and & in what it returns; the
// [Publisher] writes records without that escaping, so command lines read
// as they ran (a && b, not a \u0026\u0026 b).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	return marshal(struct {
		Time string `json:"time"`
		plain
	}{Time: r.Time.UTC().Format(timeLayout), plain: plain(r)})
}

// marshal encodes v without HTML escaping and without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// bound cuts every caller-influenced value to its bound, fills a zero time
// and clamps a negative duration, so a record of a hostile call still
// validates and fits a message.
func (r *Record) bound(now time.Time) {
	if r.Time.IsZero() {
		r.Time = now
	}
	r.Instance = cut(r.Instance, MaxLabel)
	r.Tool = cut(r.Tool, MaxLabel)
	r.Command = cut(r.Command, MaxCommand)
	c := &r.Caller
	c.Subject, c.ClientID, c.Name = cut(c.Subject, MaxLabel), cut(c.ClientID, MaxLabel), cut(c.Name, MaxLabel)
	c.Instance, c.NATSUser = cut(c.Instance, MaxLabel), cut(c.NATSUser, MaxLabel)
	// A copy: the roles may be shared with the caller's own identity.
	roles := c.Roles[:min(len(c.Roles), MaxRoles)]
	c.Roles = nil
	for _, role := range roles {
		c.Roles = append(c.Roles, cut(role, MaxLabel))
	}
	r.Gate.Approver = cut(r.Gate.Approver, MaxLabel)
	r.Outcome.Message = cut(r.Outcome.Message, MaxMessage)
	if r.Outcome.DurationMS < 0 {
		r.Outcome.DurationMS = 0
	}
}

// cut returns at most n bytes of s, never ending inside a UTF-8 character,
// and with invalid UTF-8 replaced so the record encodes as it reads.
func cut(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
