package audit_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

func TestRecordJSON(t *testing.T) {
	r := sampleRecord(7)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Validate(data); err != nil {
		t.Fatalf("Validate: %v\n%s", err, data)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		key  string
		want any
	}{
		{"time", "2026-12-03T06:00:00.123456Z"},
		{"service", "a2a-agent"},
		{"surface", "a2a"},
		{"tool", "tool-00007"},
		{"command", "/bin/demo echo --message hi && true"},
		{"arguments_digest", audit.Digest(json.RawMessage(`{"message":"hi","n":7}`))},
		{"trace_id", "0123456789abcdef0123456789abcdef"},
	}
	for _, c := range checks {
		if got[c.key] != c.want {
			t.Errorf("%s: got %v, want %v", c.key, got[c.key], c.want)
		}
	}
	if got, want := string(r.Arguments), `{"message":"hi","n":7}`; got != want {
		t.Errorf("arguments: got %s, want %s", got, want)
	}
	back, err := audit.Decode(data)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !back.Time.Equal(r.Time.Truncate(1000)) || back.Tool != r.Tool || *back.Outcome.ExitCode != 0 || !back.Caller.Claimed {
		t.Errorf("Decode: got %+v, want the record back", back)
	}
}

func TestSetArguments(t *testing.T) {
	big := `{"blob":"` + strings.Repeat("x", audit.MaxArguments) + `"}`
	tests := []struct {
		name       string
		input      string
		digestOnly bool
		wantArgs   string
		wantNote   string
	}{
		{name: "recorded in full", input: `{"b":1, "a":2}`, wantArgs: `{"a":2,"b":1}`},
		{name: "none is the empty object", input: ``, wantArgs: `{}`},
		{name: "digest only", input: `{"secret":"x"}`, digestOnly: true},
		{name: "too large: digest only", input: big, wantNote: audit.NoteTooLarge},
		{name: "too large with digest only", input: big, digestOnly: true, wantNote: audit.NoteTooLarge},
		{name: "invalid JSON: its bytes as a string", input: `{"a":`, wantArgs: `"{\"a\":"`, wantNote: audit.NoteInvalidJSON},
		{name: "invalid JSON with digest only", input: `{"a":`, digestOnly: true, wantNote: audit.NoteInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord(0)
			r.SetArguments(json.RawMessage(tt.input), tt.digestOnly)
			if got := string(r.Arguments); got != tt.wantArgs {
				t.Errorf("arguments: got %.80s, want %s", got, tt.wantArgs)
			}
			if got := r.ArgumentsNote; got != tt.wantNote {
				t.Errorf("note: got %q, want %q", got, tt.wantNote)
			}
			if got, want := r.ArgumentsDigest, audit.Digest(json.RawMessage(tt.input)); got != want {
				t.Errorf("digest: got %s, want %s", got, want)
			}
			data, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := audit.Validate(data); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if tt.wantArgs == "" && strings.Contains(string(data), `"arguments":`) {
				t.Errorf("record: got arguments in %.200s, want none", data)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	valid, err := json.Marshal(sampleRecord(1))
	if err != nil {
		t.Fatal(err)
	}
	change := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	sub := func(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }
	tests := []struct {
		name string
		data string
	}{
		{"not JSON", `{`},
		{"not an object", `[]`},
		{"unknown top-level key", change(func(m map[string]any) { m["extra"] = 1 })},
		{"unknown caller key", change(func(m map[string]any) { sub(m, "caller")["token"] = "x" })},
		{"unknown gate key", change(func(m map[string]any) { sub(m, "gate")["why"] = "x" })},
		{"unknown outcome key", change(func(m map[string]any) { sub(m, "outcome")["output"] = "x" })},
		{"unknown decision", change(func(m map[string]any) { sub(m, "gate")["decision"] = "maybe" })},
		{"unknown result", change(func(m map[string]any) { sub(m, "outcome")["result"] = "meh" })},
		{"unknown surface", change(func(m map[string]any) { m["surface"] = "http" })},
		{"unknown service", change(func(m map[string]any) { m["service"] = "other" })},
		{"bad digest", change(func(m map[string]any) { m["arguments_digest"] = "md5:00" })},
		{"bad time", change(func(m map[string]any) { m["time"] = "yesterday" })},
		{"bad identity", change(func(m map[string]any) { m["identity"] = "a.b" })},
		{"bad trace id", change(func(m map[string]any) { m["trace_id"] = "xyz" })},
		{"negative duration", change(func(m map[string]any) { sub(m, "outcome")["duration_ms"] = -1 })},
		{"message too long", change(func(m map[string]any) { sub(m, "outcome")["message"] = strings.Repeat("x", 1025) })},
		{"no outcome", change(func(m map[string]any) { delete(m, "outcome") })},
		{"no digest", change(func(m map[string]any) { delete(m, "arguments_digest") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := audit.Validate([]byte(tt.data)); !errors.Is(err, audit.ErrInvalidRecord) {
				t.Errorf("Validate: got %v, want %v", err, audit.ErrInvalidRecord)
			}
			if _, err := audit.Decode([]byte(tt.data)); !errors.Is(err, audit.ErrInvalidRecord) {
				t.Errorf("Decode: got %v, want %v", err, audit.ErrInvalidRecord)
			}
		})
	}
}

func TestSubject(t *testing.T) {
	if got, want := audit.Subject("demo"), "choria.fisk-ai.audit.demo"; got != want {
		t.Errorf("Subject: got %q, want %q", got, want)
	}
	if got, want := audit.SubjectAll(), "choria.fisk-ai.audit.>"; got != want {
		t.Errorf("SubjectAll: got %q, want %q", got, want)
	}
	cfg := config.Config{Identity: "demo"}
	if got, want := cfg.AuditSubject(), audit.Subject("demo"); got != want {
		t.Errorf("config and audit disagree: got %q, want %q", got, want)
	}
}

func TestSetCommand(t *testing.T) {
	tests := []struct {
		name       string
		digestOnly bool
		want       string
	}{
		{name: "recorded", want: "app echo -- secret"},
		{name: "left out with the digest only", digestOnly: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleRecord(0)
			r.SetCommand("app echo -- secret", tt.digestOnly)
			if r.Command != tt.want {
				t.Errorf("command: got %q, want %q", r.Command, tt.want)
			}
		})
	}
}
