package remotetools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestRemoteCommandResultPromise imports the tools of three agents over
// real NATS: one whose card promises the command result, one whose card
// does not (as Fisk AI's v1 agents), and one that promises and then
// answers without exec. Only the promising agents' tools promise it, a
// kept promise gives the CommandResult, and a broken one is refused
// in-band naming the agent, so a client holding the declared output
// schema never gets an answer outside it.
func TestRemoteCommandResultPromise(t *testing.T) {
	ns := natstest.Start(t)
	serveBusAgent(t, ns.Connect(t), "promised", agentOptions{cancels: true, promises: true})
	serveBusAgent(t, ns.Connect(t), "plain", agentOptions{cancels: true})
	serveBusAgent(t, ns.Connect(t), "liar", agentOptions{cancels: true, promises: true, breaksPromise: true})
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []config.RemoteHost{{Host: "promised"}, {Host: "plain"}, {Host: "liar"}}
	res, err := NewImporter(c, hosts, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name()] = tl
	}
	for name, want := range map[string]bool{
		"promised_echo": true, "promised_spawn": true,
		"plain_echo": false, "plain_spawn": false,
		"liar_echo": true,
	} {
		tl := byName[name]
		if tl == nil {
			t.Fatalf("%s not imported; got %v", name, res.Tools)
		}
		if got := tool.ReturnsCommandResult(tl); got != want {
			t.Errorf("%s: ReturnsCommandResult = %t, want %t", name, got, want)
		}
	}

	in := tool.Request{Input: json.RawMessage(`{"message":"hi"}`)}
	for _, name := range []string{"promised_echo", "plain_echo"} {
		out, err := byName[name].Call(t.Context(), in)
		if err != nil || out.Result == nil || out.Result.Output != "hi\n" {
			t.Errorf("%s: got %q, %v, want the echo's CommandResult", name, out.Text(), err)
		}
	}
	out, err := byName["liar_echo"].Call(t.Context(), in)
	if err != nil || !out.IsError || out.Result != nil ||
		!strings.Contains(out.Message, "remote agent liar") || !strings.Contains(out.Message, a2a.ProtocolCommandResult) {
		t.Errorf("broken promise: got %+v, %v, want an in-band error naming liar and %s", out, err, a2a.ProtocolCommandResult)
	}
}

// TestRemoteCommandResultPromiseChanges re-imports an agent that starts
// promising the command result (an upgrade behind the same identity): the
// import reports a change, so the gateway registers the tool again, now
// with its output schema.
func TestRemoteCommandResultPromiseChanges(t *testing.T) {
	ns := natstest.Start(t)
	old := serveBusAgent(t, ns.Connect(t), "demo", agentOptions{cancels: true})
	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	im := NewImporter(c, []config.RemoteHost{{Host: "demo"}}, nil)
	first, err := im.ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range first.Tools {
		if tool.ReturnsCommandResult(tl) {
			t.Errorf("%s promises a command result before its agent does", tl.Name())
		}
	}
	if err := old.svc.Stop(); err != nil {
		t.Fatal(err)
	}
	serveBusAgent(t, ns.Connect(t), "demo", agentOptions{cancels: true, promises: true})
	again := im.Import(t.Context())
	if len(again.Failed) > 0 || !again.Changed {
		t.Fatalf("re-import: failed %v, changed %t, want the upgraded card taken as a change", again.Failed, again.Changed)
	}
	for _, tl := range again.Tools {
		if !tool.ReturnsCommandResult(tl) {
			t.Errorf("%s: no command result promise after its agent made one", tl.Name())
		}
	}
}
