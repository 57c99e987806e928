package remotetools

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestWithCallerRoutesTheCall shows a call whose request names another
// Caller (tool.Remote.Via) goes through that one only: the gateway's own connection sees
// nothing of it.
func TestWithCallerRoutesTheCall(t *testing.T) {
	reply := func(host, name string, _ json.RawMessage) (*a2a.ToolReply, error) {
		return &a2a.ToolReply{Output: "ran on " + host, Exec: &a2a.Exec{Command: name}}, nil
	}
	cards := func() map[string][]a2a.ToolDescriptor {
		return map[string][]a2a.ToolDescriptor{"demo": desc("echo")}
	}
	own := &fleet{cards: cards(), reply: reply}
	role := &fleet{cards: cards(), reply: reply}
	res, err := NewImporter(own, []config.RemoteHost{{Host: "demo"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	echo := res.Tools[0]

	if _, err := echo.Call(t.Context(), tool.Request{Input: json.RawMessage(`{"a":1}`), Remote: tool.Remote{Via: role}}); err != nil {
		t.Fatal(err)
	}
	if want := []string{`demo/echo {"a":1}`}; !slices.Equal(role.calls, want) || len(own.calls) != 0 {
		t.Errorf("with the role's caller: got role calls %v and own calls %v, want %v and none", role.calls, own.calls, want)
	}

	if _, err := echo.Call(t.Context(), tool.Request{}); err != nil {
		t.Fatal(err)
	}
	if len(own.calls) != 1 || len(role.calls) != 1 {
		t.Errorf("without: got own calls %v and role calls %v, want one each", own.calls, role.calls)
	}
}
