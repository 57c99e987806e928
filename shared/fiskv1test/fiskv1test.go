// Package fiskv1test runs a stand-in for one of Fisk AI's own v1 agents on
// NATS, so fiskfleet's clients are tested against the wire those agents
// speak rather than against fiskfleet's own agent. It is imported only from
// _test.go files.
//
// It is written from what a built Fisk AI v1 agent was seen to send, not
// from fiskfleet's codec, so it cannot share the codec's mistakes:
//
//   - exec.exit_code is omitted when it is 0, and output when it is empty
//     (both optional in v1);
//   - must_understand is a boolean (true on every reply it sends);
//   - the card's protocols list is just "io.choria.fisk-ai.v1";
//   - it answers on the same subjects, choria.fisk-ai.discovery.<identity>
//     and choria.fisk-ai.tool.<identity>, in a queue group named by the
//     identity, with core NATS request-reply and no micro service.
//
// It serves four tools: echo {message} prints the message and exits 0,
// true prints nothing and exits 0, fail prints "boom" and exits 3, and
// silent_fail prints nothing and exits 1. Any other name gets an in-band
// error reply.
package fiskv1test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ProtocolFamily is the single entry of a v1 agent's protocols list.
const ProtocolFamily = "io.choria.fisk-ai.v1"

// Tools lists the names the agent serves, in card order.
var Tools = []string{"echo", "true", "fail", "silent_fail"}

// Agent is a running stand-in. Its counters are safe to read concurrently.
type Agent struct {
	Identity string
	Instance string
	// Discoveries and Calls count the requests answered on each subject.
	Discoveries atomic.Int64
	Calls       atomic.Int64
}

// Start subscribes a v1 agent named identity on nc, which the caller owns,
// and unsubscribes it at the end of the test.
func Start(tb testing.TB, nc *nats.Conn, identity string) *Agent {
	tb.Helper()
	a := &Agent{Identity: identity, Instance: identity + "-v1"}
	subs := []struct {
		subject string
		handle  func(map[string]any) map[string]any
	}{
		{"choria.fisk-ai.discovery." + identity, a.discover},
		{"choria.fisk-ai.tool." + identity, a.call},
	}
	for _, s := range subs {
		handle := s.handle
		sub, err := nc.QueueSubscribe(s.subject, identity, func(m *nats.Msg) {
			var req map[string]any
			if err := json.Unmarshal(m.Data, &req); err != nil || m.Reply == "" {
				return
			}
			body, err := json.Marshal(a.reply(req, handle(req)))
			if err != nil {
				return
			}
			_ = m.Respond(body)
		})
		if err != nil {
			tb.Fatalf("fiskv1test: subscribing %s: %v", s.subject, err)
		}
		tb.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		tb.Fatalf("fiskv1test: flushing subscriptions: %v", err)
	}
	return a
}

var replyCount atomic.Int64

// reply adds the v1 reply header to body: a fresh id, the request's id and
// conversation echoed, sender and recipient swapped, must_understand true.
func (a *Agent) reply(req, body map[string]any) map[string]any {
	body["id"] = "v1-" + strconv.FormatInt(replyCount.Add(1), 10)
	body["request"] = req["id"]
	body["conversation"] = req["conversation"]
	body["sequence"] = 0
	body["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	body["sender"] = map[string]any{"name": a.Identity, "instance": a.Instance}
	if s, ok := req["sender"].(map[string]any); ok {
		body["recipient"] = s
	}
	body["must_understand"] = true
	return body
}

func (a *Agent) discover(map[string]any) map[string]any {
	a.Discoveries.Add(1)
	object := map[string]any{"type": "object"}
	return map[string]any{
		"protocol":    "io.choria.fisk-ai.v1.discovery.reply",
		"name":        a.Identity,
		"version":     "1.4.2",
		"description": "a Fisk AI v1 agent",
		"protocols":   []string{ProtocolFamily},
		"tools": []map[string]any{
			{"name": "echo", "description": "Prints a message", "input_schema": map[string]any{
				"type":       "object",
				"properties": map[string]any{"message": map[string]any{"type": "string"}},
				"required":   []string{"message"},
			}},
			{"name": "true", "description": "Does nothing, successfully", "input_schema": object},
			{"name": "fail", "description": "Prints boom and exits 3", "input_schema": object},
			{"name": "silent_fail", "description": "Exits 1 without output", "input_schema": object},
		},
	}
}

func (a *Agent) call(req map[string]any) map[string]any {
	a.Calls.Add(1)
	reply := map[string]any{"protocol": "io.choria.fisk-ai.v1.tool.reply"}
	name, _ := req["name"].(string)
	input, _ := req["input"].(map[string]any)
	command := "fiskv1 " + name
	switch name {
	case "echo":
		msg, _ := input["message"].(string)
		reply["exec"] = map[string]any{"command": command + " -- " + msg}
		if out := msg + "\n"; msg != "" {
			reply["output"] = out
		}
	case "true":
		reply["exec"] = map[string]any{"command": command}
	case "fail":
		reply["output"] = "boom\n"
		reply["exec"] = map[string]any{"command": command, "exit_code": 3}
	case "silent_fail":
		reply["exec"] = map[string]any{"command": command, "exit_code": 1}
	default:
		reply["is_error"] = true
		reply["output"] = fmt.Sprintf("unknown tool %q", name)
	}
	return reply
}
