package a2a

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// withOptionalHeader sets the optional header fields a stamp leaves unset.
func withOptionalHeader[M Message](m M) M {
	h := m.header()
	h.Parent = "parent-1"
	h.MustUnderstand = true
	return m
}

// asRequest stamps m as a new request from alice to bob.
func asRequest[M Message](m M) M {
	stampRequest(m, alice, &Participant{Name: bob.Name})
	return m
}

// asReply stamps m as bob's reply to a tool request from alice.
func asReply[M Message](m M) M {
	stampReply(m, stampedRequest(), bob)
	return m
}

func TestRoundTripMessages(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		// absent lists keys the encoding must not carry: unset optional
		// fields are omitted, not sent as zero values.
		absent []string
	}{
		{
			name:   "discovery request minimal",
			msg:    func() Message { m := &DiscoveryRequest{}; stampRequest(m, bob, nil); return m }(),
			absent: []string{"recipient", "parent", "must_understand", "instance"},
		},
		{
			name: "discovery request from constructor",
			msg:  NewDiscoveryRequest(alice, "bob"),
		},
		{
			name: "discovery request optional header",
			msg:  withOptionalHeader(NewDiscoveryRequest(alice, "bob")),
		},
		{
			name: "discovery reply minimal",
			msg: asReply(&DiscoveryReply{AgentCard: AgentCard{
				Name: "bob", Version: "1", Protocols: []string{}, Tools: []ToolDescriptor{},
			}}),
			absent: []string{"description", "parent"},
		},
		{
			name: "discovery reply full",
			msg:  withOptionalHeader(asReply(&DiscoveryReply{AgentCard: sampleCard()})),
		},
		{
			name:   "tool request without input",
			msg:    NewToolRequest(alice, "bob", "uptime", nil),
			absent: []string{"input"},
		},
		{
			name: "tool request with input",
			msg:  NewToolRequest(alice, "bob", "disk_usage", []byte(`{"path":"/var","depth":2,"opts":{"human":true},"tags":["a","b"]}`)),
		},
		{
			name: "tool request empty input object",
			msg:  NewToolRequest(alice, "bob", "uptime", []byte(`{}`)),
		},
		{
			name:   "tool reply minimal",
			msg:    asReply(&ToolReply{}),
			absent: []string{"is_error", "exec"},
		},
		{
			name: "tool reply in-band error",
			msg:  asReply(&ToolReply{IsError: true, Output: "unknown tool \"nope\""}),
		},
		{
			name: "tool reply with exec",
			msg:  asReply(&ToolReply{Output: "42G\t/var\n", Exec: &Exec{Command: "app disk usage --path /var", ExitCode: 0}}),
		},
		{
			name: "tool reply with failed truncated exec",
			msg:  withOptionalHeader(asReply(&ToolReply{Output: "partial…", Exec: &Exec{Command: "app x", ExitCode: -1, Truncated: true}})),
		},
		{
			name:   "request minimal",
			msg:    asRequest(&Request{Prompt: "summarise the disk usage"}),
			absent: []string{"context", "tool_hints", "budget", "stream"},
		},
		{
			name: "request full",
			msg: withOptionalHeader(asRequest(&Request{
				Prompt:    "summarise the disk usage",
				Context:   "the host is a build server",
				ToolHints: []string{"disk_usage", "uptime"},
				Budget:    &Budget{MaxTokens: 4096, MaxIterations: 8, CallTimeout: "1m30s"},
				Stream:    true,
			})),
		},
		{
			name: "request empty budget",
			msg:  asRequest(&Request{Prompt: "p", Budget: &Budget{}}),
		},
		{
			name: "event",
			msg:  asReply(&Event{Block: Block{Content: &TextBlock{Text: "hello"}}}),
		},
		{
			name:   "result minimal",
			msg:    asReply(&Result{StopReason: StopEndTurn}),
			absent: []string{"text", "usage"},
		},
		{
			name: "result full",
			msg:  withOptionalHeader(asReply(&Result{StopReason: StopMaxTokens, Text: "done", Usage: &Usage{InputTokens: 1200, OutputTokens: 300}})),
		},
		{
			name:   "error minimal",
			msg:    asReply(&ErrorMessage{Error: "model unavailable"}),
			absent: []string{"code", "stop_reason"},
		},
		{
			name: "error full",
			msg:  asReply(&ErrorMessage{Error: "budget spent", Code: "429", StopReason: StopBudgetExhausted}),
		},
		{
			name:   "cancel minimal",
			msg:    asRequest(&Cancel{}),
			absent: []string{"reason"},
		},
		{
			name: "cancel with reason",
			msg:  asRequest(&Cancel{Reason: "operator interrupt"}),
		},
		{
			name: "ack refused",
			msg:  asReply(&Ack{}),
		},
		{
			name: "ack accepted with reason",
			msg:  withOptionalHeader(asReply(&Ack{Accepted: true, Reason: "queued"})),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, data := roundTrip(t, tt.msg)
			assertSameMessage(t, got, tt.msg)
			if got, want := got.header().Protocol, tt.msg.ProtocolID(); got != want {
				t.Errorf("protocol: got %q, want %q", got, want)
			}
			enc := asMap(t, data)
			for _, key := range tt.absent {
				if _, ok := enc[key]; ok {
					t.Errorf("encoding carries %q: got %s, want it omitted", key, data)
				}
				if _, ok := obj(enc, "sender")[key]; ok {
					t.Errorf("sender carries %q: got %s, want it omitted", key, data)
				}
			}
		})
	}
}

// TestRoundTripKinds checks the table above covers all ten kinds.
func TestRoundTripKinds(t *testing.T) {
	kinds := []Message{
		&DiscoveryRequest{}, &DiscoveryReply{}, &ToolRequest{}, &ToolReply{}, &Request{},
		&Event{}, &Result{}, &ErrorMessage{}, &Cancel{}, &Ack{},
	}
	seen := map[string]bool{}
	for _, m := range kinds {
		id := m.ProtocolID()
		if seen[id] {
			t.Errorf("protocol id %s: got it twice, want one per kind", id)
		}
		seen[id] = true
		if _, ok := mustValidator().byProtocol[id]; !ok {
			t.Errorf("protocol id %s: got no schema, want one", id)
		}
	}
	if got, want := len(seen), len(mustValidator().byProtocol); got != want {
		t.Errorf("kinds: got %d, want %d (one per schema)", got, want)
	}
}

func TestRoundTripStopReasons(t *testing.T) {
	reasons := []StopReason{
		StopEndTurn, StopMaxTokens, StopRefusal, StopCanceled, StopError,
		StopBudgetExhausted, StopSuspended, StopMaxIterations,
	}
	for _, r := range reasons {
		t.Run(string(r), func(t *testing.T) {
			res := asReply(&Result{StopReason: r})
			got, _ := roundTrip(t, res)
			assertSameMessage(t, got, res)
			em := asReply(&ErrorMessage{Error: "stopped", StopReason: r})
			gotErr, _ := roundTrip(t, em)
			assertSameMessage(t, gotErr, em)
		})
	}
}

func TestRoundTripBlocks(t *testing.T) {
	tests := []struct {
		name    string
		content BlockContent
		// want is the exact JSON of the block: "type" first, unset
		// optional fields omitted.
		want string
	}{
		{
			name:    "thinking minimal",
			content: &ThinkingBlock{Text: "let me check the disk"},
			want:    `{"type":"thinking","text":"let me check the disk"}`,
		},
		{
			name:    "thinking full",
			content: &ThinkingBlock{Text: "hmm", Signature: "sig-abc", Provider: "anthropic"},
			want:    `{"type":"thinking","text":"hmm","signature":"sig-abc","provider":"anthropic"}`,
		},
		{
			name:    "text",
			content: &TextBlock{Text: "The disk is 80% full."},
			want:    `{"type":"text","text":"The disk is 80% full."}`,
		},
		{
			name:    "text empty",
			content: &TextBlock{},
			want:    `{"type":"text","text":""}`,
		},
		{
			name:    "tool call minimal",
			content: &ToolCallBlock{ID: "call-1", Name: "uptime"},
			want:    `{"type":"tool_call","id":"call-1","name":"uptime"}`,
		},
		{
			name:    "tool call with input",
			content: &ToolCallBlock{ID: "call-2", Name: "disk_usage", Input: json.RawMessage(`{"path":"/var"}`)},
			want:    `{"type":"tool_call","id":"call-2","name":"disk_usage","input":{"path":"/var"}}`,
		},
		{
			name:    "tool result minimal",
			content: &ToolResultBlock{CallID: "call-1"},
			want:    `{"type":"tool_result","call_id":"call-1"}`,
		},
		{
			name:    "tool result full",
			content: &ToolResultBlock{CallID: "call-2", IsError: true, Output: "denied", Exec: &Exec{Command: "app rm", ExitCode: 3, Truncated: true}},
			want:    `{"type":"tool_result","call_id":"call-2","is_error":true,"output":"denied","exec":{"command":"app rm","exit_code":3,"truncated":true}}`,
		},
		{
			name:    "agent call",
			content: &AgentCallBlock{ID: "call-3", Name: "carol", Task: "rotate the logs"},
			want:    `{"type":"agent_call","id":"call-3","name":"carol","task":"rotate the logs"}`,
		},
		{
			name:    "status empty",
			content: &StatusBlock{},
			want:    `{"type":"status"}`,
		},
		{
			name:    "status full",
			content: &StatusBlock{Iteration: 3, Phase: "tool", Usage: &Usage{InputTokens: 10, OutputTokens: 20}},
			want:    `{"type":"status","iteration":3,"phase":"tool","usage":{"input_tokens":10,"output_tokens":20}}`,
		},
		{
			name:    "status partial usage",
			content: &StatusBlock{Usage: &Usage{OutputTokens: 5}},
			want:    `{"type":"status","usage":{"output_tokens":5}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Block{Content: tt.content}
			raw, err := json.Marshal(b)
			if err != nil {
				t.Fatalf("marshalling block: %v", err)
			}
			if got := string(raw); got != tt.want {
				t.Errorf("block JSON: got %s, want %s", got, tt.want)
			}

			var direct Block
			if err := json.Unmarshal(raw, &direct); err != nil {
				t.Fatalf("unmarshalling block: %v", err)
			}
			if !reflect.DeepEqual(direct, b) {
				t.Errorf("block: got %s, want %s", dump(direct), dump(b))
			}

			ev := asReply(&Event{Block: b})
			got, data := roundTrip(t, ev)
			assertSameMessage(t, got, ev)
			if !strings.Contains(string(data), `"block":`+tt.want) {
				t.Errorf("event: got %s, want it to carry %s", data, tt.want)
			}
		})
	}
}
