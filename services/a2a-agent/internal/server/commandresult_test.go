package server_test

import (
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// TestCardPromisesCommandResult lists the command result promise on the
// card of an agent serving only commands, and keeps it: every call that
// runs, a non-zero exit included, answers with exec set, and a refused
// call answers in-band without one.
func TestCardPromisesCommandResult(t *testing.T) {
	_, c, _ := serveDemo(t, server.Config{}, fiskapp.Options{})
	card, err := c.Discover(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(card.Protocols, a2a.ProtocolCommandResult) {
		t.Fatalf("card protocols %v: want %s", card.Protocols, a2a.ProtocolCommandResult)
	}
	for _, call := range []struct{ name, input string }{
		{"echo", `{"message":"hi"}`},
		{"fail", `{}`},
		{"cluster_node_status", `{"node":"n1"}`},
	} {
		r := callTool(t, c, "demo", call.name, call.input)
		res, ok := r.CommandResult()
		if !ok {
			t.Errorf("%s: got reply %+v, want a command result", call.name, r)
			continue
		}
		if res.Command == "" {
			t.Errorf("%s: the command result names no command line: %+v", call.name, res)
		}
	}
	if r := callTool(t, c, "demo", "echo", `{"no_such_flag":true}`); !r.IsError || r.Exec != nil {
		t.Errorf("refused call: got %+v, want an in-band error without exec", r)
	}
}

// TestCardPromiseNeedsEveryTool leaves the promise off a card that also
// serves a tool which does not make it: the card's promise covers all of
// its tools or none.
func TestCardPromiseNeedsEveryTool(t *testing.T) {
	tools := append(demoTools(t, fiskapp.Options{}), funcTool(t, tool.FuncSpec{
		Name:         "lookup",
		Description:  "Answers from memory, running no command",
		Exposure:     tool.ExposeA2A,
		Confirmation: tool.ConfirmNone,
	}))
	srv := newServer(t, server.Config{}, tools)
	if p := srv.Card().Protocols; slices.Contains(p, a2a.ProtocolCommandResult) {
		t.Errorf("card protocols %v: want no %s beside a tool that runs no command", p, a2a.ProtocolCommandResult)
	}
	promised := funcTool(t, tool.FuncSpec{
		Name:          "relay",
		Description:   "Runs a command elsewhere and answers with its result",
		Exposure:      tool.ExposeA2A,
		Confirmation:  tool.ConfirmNone,
		CommandResult: true,
	})
	srv = newServer(t, server.Config{}, append(demoTools(t, fiskapp.Options{}), promised))
	if p := srv.Card().Protocols; !slices.Contains(p, a2a.ProtocolCommandResult) {
		t.Errorf("card protocols %v: want %s when every tool promises it", p, a2a.ProtocolCommandResult)
	}
}
