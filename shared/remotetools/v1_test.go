package remotetools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskv1test"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestImportFromV1Agent imports the tools of a Fisk AI v1 agent over real
// NATS through the real client, and calls each: replies without exit_code
// or output rebuild into the same CommandResult JSON a local command gives.
func TestImportFromV1Agent(t *testing.T) {
	ns := natstest.Start(t)
	v1 := fiskv1test.Start(t, ns.Connect(t), "legacy")
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewImporter(c, []config.RemoteHost{{Host: "legacy"}}, []string{"echo"}).ImportStrict(t.Context())
	if err != nil {
		t.Fatalf("importing a v1 agent: %v", err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name()] = tl
	}
	if got := toolNames(res.Tools); strings.Join(got, ",") != "fail,legacy_echo,silent_fail,true" {
		t.Fatalf("imported names: got %v, want echo prefixed (a local tool holds it) and the rest bare", got)
	}
	tests := []struct {
		name, input, want string
		wantErr           bool
	}{
		{name: "legacy_echo", input: `{"message":"hi"}`, want: `{"command":"fiskv1 echo -- hi","exit_code":0,"output":"hi\n","truncated":false}`},
		{name: "true", want: `{"command":"fiskv1 true","exit_code":0,"output":"","truncated":false}`},
		{name: "fail", want: `{"command":"fiskv1 fail","exit_code":3,"output":"boom\n","truncated":false}`},
		{name: "silent_fail", want: `{"command":"fiskv1 silent_fail","exit_code":1,"output":"","truncated":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := byName[tt.name].Call(t.Context(), tool.Request{Input: json.RawMessage(tt.input)})
			if err != nil {
				t.Fatal(err)
			}
			if out.IsError != tt.wantErr || out.Text() != tt.want {
				t.Errorf("got %q (error %t), want %q (error %t)", out.Text(), out.IsError, tt.want, tt.wantErr)
			}
		})
	}
	if got := v1.Calls.Load(); got != int64(len(tests)) {
		t.Errorf("calls the v1 agent answered: got %d, want %d", got, len(tests))
	}
}
