package a2a

import (
	"strings"
	"testing"
)

// v1Header is the header of a reply as a Fisk AI v1 agent writes it, with
// must_understand as v1 has it: a boolean.
const v1Header = `"id":"r-1","request":"q-1","conversation":"q-1","sequence":0,` +
	`"time":"2026-12-02T10:00:00.123456789Z","sender":{"name":"ops","instance":"ops-7"},` +
	`"recipient":{"name":"gw"},"must_understand":true`

// TestDecodeAcceptsWhatV1Sends decodes replies in the forms Fisk AI's own
// v1 agents send: exit_code absent when it is 0, output absent when it is
// empty, must_understand a boolean, and a card whose protocols name only
// the v1 family. Each must decode to the same values our agents send.
func TestDecodeAcceptsWhatV1Sends(t *testing.T) {
	tests := []struct {
		name string
		body string
		want ToolReply
	}{
		{
			name: "exit 0 with output",
			body: `"output":"hi\n","exec":{"command":"ops echo hi"}`,
			want: ToolReply{Output: "hi\n", Exec: &Exec{Command: "ops echo hi"}},
		},
		{
			name: "exit 0 without output",
			body: `"exec":{"command":"ops true"}`,
			want: ToolReply{Exec: &Exec{Command: "ops true"}},
		},
		{
			name: "non-zero exit without output",
			body: `"exec":{"command":"ops fail","exit_code":3,"truncated":true}`,
			want: ToolReply{Exec: &Exec{Command: "ops fail", ExitCode: 3, Truncated: true}},
		},
		{
			name: "in-band error",
			body: `"is_error":true,"output":"unknown tool \"nope\""`,
			want: ToolReply{IsError: true, Output: `unknown tool "nope"`},
		},
		{
			name: "in-band error without output",
			body: `"is_error":true`,
			want: ToolReply{IsError: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `{"protocol":"` + ProtocolToolReply + `",` + v1Header + `,` + tt.body + `}`
			var got ToolReply
			if err := Decode([]byte(data), &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !got.MustUnderstand {
				t.Errorf("must_understand: got false, want true")
			}
			if got.IsError != tt.want.IsError || got.Output != tt.want.Output {
				t.Errorf("got is_error %v output %q, want %v %q", got.IsError, got.Output, tt.want.IsError, tt.want.Output)
			}
			if (got.Exec == nil) != (tt.want.Exec == nil) || got.Exec != nil && *got.Exec != *tt.want.Exec {
				t.Errorf("exec: got %+v, want %+v", got.Exec, tt.want.Exec)
			}
			// A reply with exec rebuilds into the same CommandResult our
			// own agents' replies give.
			cr, ok := got.CommandResult()
			if ok != (tt.want.Exec != nil && !tt.want.IsError) {
				t.Fatalf("CommandResult ok: got %v", ok)
			}
			if ok && (cr.ExitCode != tt.want.Exec.ExitCode || cr.Output != tt.want.Output || cr.Command != tt.want.Exec.Command) {
				t.Errorf("CommandResult: got %+v", cr)
			}
		})
	}

	t.Run("card naming only the v1 family", func(t *testing.T) {
		data := `{"protocol":"` + ProtocolDiscoveryReply + `",` + v1Header +
			`,"name":"ops","version":"1.2.0","protocols":["io.choria.fisk-ai.v1"],` +
			`"tools":[{"name":"echo","description":"Echo","input_schema":{"type":"object"}}]}`
		var got DiscoveryReply
		if err := Decode([]byte(data), &got); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if len(got.Protocols) != 1 || len(got.Tools) != 1 {
			t.Errorf("got protocols %v tools %v", got.Protocols, got.Tools)
		}
	})
}

// TestEncodeSendsWhatV1Accepts checks that what we send keeps the fields
// v1 receivers accept and that we always send: exit_code and output, also
// when zero and empty, and no must_understand unless set.
func TestEncodeSendsWhatV1Accepts(t *testing.T) {
	reply := asReply(&ToolReply{Exec: &Exec{Command: "app true"}})
	data, err := Encode(reply)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"output":""`, `"exit_code":0`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded reply lacks %s: %s", want, data)
		}
	}
	if strings.Contains(string(data), "must_understand") {
		t.Errorf("encoded reply sends must_understand unasked: %s", data)
	}
}
