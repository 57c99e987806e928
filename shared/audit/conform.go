package audit

import (
	"math"
	"regexp"
	"slices"
)

// The schema walk of [Validate] costs a record some 30 µs of CPU and 190
// allocations, on every call of both services: about as much as the rest
// of the call's own work. The publisher builds every record itself, field
// by field, so instead of walking the encoded bytes it checks the fields
// against the schema's rules directly ([Record.conforms]), and keeps the
// walk for a record that fails them, to say why. FuzzConforms holds the
// direct check to the schema: whatever it passes, the schema accepts.

// The enums of the schema (schemas/audit/record.json).
var (
	services  = []string{ServiceA2AAgent, ServiceMCPGateway}
	surfaces  = []string{SurfaceMCP, SurfaceA2A, SurfaceA2AStream, SurfaceAgent2Agent}
	decisions = []string{
		DecisionNotGated, DecisionElicitation, DecisionOperator, DecisionNever, DecisionUnasked,
		DecisionDeclined, DecisionTimedOut, DecisionPolicy, DecisionRefusedGated,
	}
	results = []string{
		ResultOK, ResultFailed, ResultError, ResultInvalid, ResultUnknownTool,
		ResultDenied, ResultRefused, ResultTimeout, ResultCanceled, ResultBusy,
	}
	notes = []string{NoteInvalidJSON, NoteTooLarge}
)

// The patterns of the schema.
var (
	identityRE   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	digestRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	errorClassRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	traceIDRE    = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// conforms reports whether r encodes to a record the schema accepts, as
// far as its fields tell: each enum, pattern and bound of the schema,
// checked on the field. Lengths are checked in bytes, which bounds the
// characters the schema counts (the encoder writes an invalid byte as
// one replacement character). The arguments are not looked at: the
// encoder refuses any that are not JSON, and the schema takes any that
// are. A record it refuses may still be valid: [Validate] decides.
func (r *Record) conforms() bool {
	year := r.Time.UTC().Year()
	c, o := &r.Caller, &r.Outcome
	return year >= 0 && year <= 9999 &&
		slices.Contains(services, r.Service) &&
		identityRE.MatchString(r.Identity) &&
		r.Instance != "" && len(r.Instance) <= MaxLabel &&
		slices.Contains(surfaces, r.Surface) &&
		callerConforms(c) &&
		len(r.Tool) <= MaxLabel &&
		digestRE.MatchString(r.ArgumentsDigest) &&
		(r.ArgumentsNote == "" || slices.Contains(notes, r.ArgumentsNote)) &&
		len(r.Command) <= MaxCommand &&
		slices.Contains(decisions, r.Gate.Decision) && len(r.Gate.Approver) <= MaxLabel &&
		slices.Contains(results, o.Result) &&
		(o.ErrorClass == "" || errorClassRE.MatchString(o.ErrorClass)) &&
		len(o.Message) <= MaxMessage &&
		o.DurationMS >= 0 && !math.IsInf(o.DurationMS, 1) &&
		(r.TraceID == "" || traceIDRE.MatchString(r.TraceID))
}

// callerConforms checks a record's caller: every label within its bound,
// and at most [MaxRoles] roles.
func callerConforms(c *Caller) bool {
	if len(c.Roles) > MaxRoles {
		return false
	}
	for _, role := range c.Roles {
		if len(role) > MaxLabel {
			return false
		}
	}
	return len(c.Subject) <= MaxLabel && len(c.ClientID) <= MaxLabel && len(c.Name) <= MaxLabel &&
		len(c.Instance) <= MaxLabel && len(c.NATSUser) <= MaxLabel
}
