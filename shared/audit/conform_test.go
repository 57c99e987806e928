package audit_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// TestConforms checks the direct check of a record against the schema's
// own verdict: records the services build pass both, bounded hostile
// ones too, and each way of breaking a field fails both.
func TestConforms(t *testing.T) {
	hostile := strings.Repeat("é\xff<&", 5000)
	valid := map[string]func(*audit.Record){
		"as built":           func(*audit.Record) {},
		"gateway, mcp":       func(r *audit.Record) { r.Service, r.Surface = audit.ServiceMCPGateway, audit.SurfaceMCP },
		"no optional fields": func(r *audit.Record) { r.Command, r.TraceID, r.Arguments, r.Outcome.ExitCode = "", "", nil, nil },
		"every caller field": func(r *audit.Record) {
			r.Caller = audit.Caller{Subject: "s", Roles: []string{"ops", "dev"}, ClientID: "c", NATSUser: "u"}
		},
		"error outcome": func(r *audit.Record) {
			r.Outcome = audit.Outcome{Result: audit.ResultInvalid, ErrorClass: "invalid_input", Message: "bad", DurationMS: 0}
		},
		"hostile labels, bounded": func(r *audit.Record) {
			r.Tool, r.Command, r.Instance, r.Gate.Approver = hostile, hostile, hostile, hostile
			r.Caller = audit.Caller{Name: hostile, Instance: hostile, Roles: strings.Split(strings.Repeat("r,", 100), ",")}
			r.Outcome.Message = hostile
			audit.Bound(r)
		},
		"zero duration": func(r *audit.Record) { r.Outcome.DurationMS = 0 },
	}
	for name, change := range valid {
		t.Run(name, func(t *testing.T) {
			r := sampleRecord(3)
			change(r)
			if !audit.Conforms(r) {
				t.Errorf("Conforms: got false, want true")
			}
			if err := audit.Validate(mustMarshal(t, r)); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	invalid := map[string]func(*audit.Record){
		"unknown service":    func(r *audit.Record) { r.Service = "agent" },
		"identity with dots": func(r *audit.Record) { r.Identity = "a.b" },
		"long identity":      func(r *audit.Record) { r.Identity = strings.Repeat("a", 65) },
		"no instance":        func(r *audit.Record) { r.Instance = "" },
		"long instance":      func(r *audit.Record) { r.Instance = strings.Repeat("i", audit.MaxLabel+1) },
		"unknown surface":    func(r *audit.Record) { r.Surface = "http" },
		"long tool":          func(r *audit.Record) { r.Tool = strings.Repeat("t", audit.MaxLabel+1) },
		"no digest":          func(r *audit.Record) { r.ArgumentsDigest = "" },
		"upper-case digest":  func(r *audit.Record) { r.ArgumentsDigest = "sha256:" + strings.Repeat("A", 64) },
		"unknown note":       func(r *audit.Record) { r.ArgumentsNote = "odd" },
		"long command":       func(r *audit.Record) { r.Command = strings.Repeat("c", audit.MaxCommand+1) },
		"no decision":        func(r *audit.Record) { r.Gate.Decision = "" },
		"long approver":      func(r *audit.Record) { r.Gate.Approver = strings.Repeat("a", audit.MaxLabel+1) },
		"unknown result":     func(r *audit.Record) { r.Outcome.Result = "fine" },
		"bad error class":    func(r *audit.Record) { r.Outcome.ErrorClass = "Invalid" },
		"long message":       func(r *audit.Record) { r.Outcome.Message = strings.Repeat("m", audit.MaxMessage+1) },
		"negative duration":  func(r *audit.Record) { r.Outcome.DurationMS = -1 },
		"short trace id":     func(r *audit.Record) { r.TraceID = "abc" },
		"too many roles":     func(r *audit.Record) { r.Caller.Roles = make([]string, audit.MaxRoles+1) },
		"long role":          func(r *audit.Record) { r.Caller.Roles = []string{strings.Repeat("r", audit.MaxLabel+1)} },
		"long caller name":   func(r *audit.Record) { r.Caller.Name = strings.Repeat("n", audit.MaxLabel+1) },
		"year 10000":         func(r *audit.Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	for name, change := range invalid {
		t.Run(name, func(t *testing.T) {
			r := sampleRecord(3)
			change(r)
			if audit.Conforms(r) {
				t.Errorf("Conforms: got true, want false")
			}
			if data, err := json.Marshal(r); err == nil && audit.Validate(data) == nil {
				t.Errorf("Validate accepts it: the direct check is stricter than the schema here\n%.300s", data)
			}
		})
	}
	// Not numbers JSON can write: the encoder refuses them.
	for _, d := range []float64{math.NaN(), math.Inf(1)} {
		r := sampleRecord(3)
		r.Outcome.DurationMS = d
		if audit.Conforms(r) {
			t.Errorf("duration %v: Conforms: got true, want false", d)
		}
	}
}

func mustMarshal(tb testing.TB, r *audit.Record) []byte {
	tb.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// FuzzConforms holds the direct check to the schema: a record it passes
// must encode to one the schema accepts.
func FuzzConforms(f *testing.F) {
	f.Add("a2a-agent", "demo", "host-1", "a2a", "echo", "", "not_gated", "ok", "", "", "0123456789abcdef0123456789abcdef", "planner,ops", 2.5, 2026, `{"a":1}`)
	f.Add("mcp-gateway", "a-b_c", "é\xff", "mcp", "\x00<&>", "too_large", "declined", "denied", "gate_declined", "no", "", "", 0.0, 0, `"s"`)
	f.Add("mcp-gateway", "x", "i", "a2a-stream", "", "invalid_json", "ran_unasked", "busy", "z9_", strings.Repeat("m", 1024), "", ",,", 1e300, 9999, `null`)
	f.Fuzz(func(t *testing.T, service, identity, instance, surface, tool, note, decision, result, class, message, traceID, roles string, duration float64, year int, args string) {
		r := &audit.Record{
			Time:    time.Date(year, 6, 1, 12, 0, 0, 0, time.UTC),
			Service: service, Identity: identity, Instance: instance, Surface: surface, Tool: tool,
			ArgumentsNote: note, Command: message,
			Caller:  audit.Caller{Name: tool, Instance: instance, Claimed: true},
			Gate:    audit.Gate{Decision: decision, Approver: message},
			Outcome: audit.Outcome{Result: result, ErrorClass: class, Message: message, DurationMS: duration},
			TraceID: traceID,
		}
		if roles != "" {
			r.Caller.Roles = strings.Split(roles, ",")
		}
		r.SetArguments(json.RawMessage(args), false)
		if !audit.Conforms(r) {
			return
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("Conforms passes a record that does not encode: %v", err)
		}
		if err := audit.Validate(data); err != nil {
			t.Fatalf("Conforms passes a record the schema refuses: %v\n%s", err, data)
		}
	})
}
