package remotetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// fleet is a fake [Caller]: the seam is ours, and the real NATS path is
// covered end to end in the integration tests.
type fleet struct {
	mu    sync.Mutex
	cards map[string][]a2a.ToolDescriptor // nil entry: host down
	calls []string
	reply func(host, name string, input json.RawMessage) (*a2a.ToolReply, error)
}

func (f *fleet) set(host string, tools []a2a.ToolDescriptor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cards[host] = tools
}

func (f *fleet) Discover(_ context.Context, identity string) (*a2a.DiscoveryReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tools, ok := f.cards[identity]
	if !ok || tools == nil {
		return nil, fmt.Errorf("%w: no agent serves %s", a2a.ErrAgentUnavailable, identity)
	}
	return &a2a.DiscoveryReply{AgentCard: a2a.AgentCard{Name: identity, Tools: tools}}, nil
}

func (f *fleet) CallTool(_ context.Context, identity, name string, input json.RawMessage) (*a2a.ToolReply, error) {
	f.mu.Lock()
	f.calls = append(f.calls, identity+"/"+name+" "+string(input))
	down := f.cards[identity] == nil
	f.mu.Unlock()
	if down {
		return nil, fmt.Errorf("%w: no agent serves %s", a2a.ErrAgentUnavailable, identity)
	}
	return f.reply(identity, name, input)
}

func toolNames(ts []tool.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	slices.Sort(out)
	return out
}

func TestImportStrictAndLenient(t *testing.T) {
	f := &fleet{cards: map[string][]a2a.ToolDescriptor{
		"demo": desc("echo", "sleep", "status"),
		"ops":  desc("status", "logs"),
	}}
	hosts := []config.RemoteHost{{Host: "demo"}, {Host: "ops", Exclude: config.Filter{Tools: []string{"lo*"}}}}

	res, err := NewImporter(f, hosts, []string{"echo"}).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(res.Tools), []string{"demo_echo", "demo_status", "ops_status", "sleep"}; !slices.Equal(got, want) {
		t.Errorf("tools: got %v, want %v", got, want)
	}

	// A host with no agent: strict refuses naming it, lenient lists the rest.
	hosts = append(hosts, config.RemoteHost{Host: "nobody"})
	_, err = NewImporter(f, hosts, nil).ImportStrict(t.Context())
	if !errors.Is(err, ErrImport) || !errors.Is(err, a2a.ErrAgentUnavailable) || !strings.Contains(err.Error(), "remote_tools host nobody") {
		t.Errorf("strict with a missing host: got %v, want ErrImport naming host nobody", err)
	}
	im := NewImporter(f, hosts, nil)
	res = im.Import(t.Context())
	if _, ok := res.Failed["nobody"]; !ok || len(res.Tools) != 4 {
		t.Errorf("lenient: got %d tools, failed %v, want 4 tools and nobody failed", len(res.Tools), res.Failed)
	}
	for _, tl := range res.Tools {
		if got := im.Origin(tl); got != "demo" && got != "ops" {
			t.Errorf("origin of %s: got %q, want its host", tl.Name(), got)
		}
	}
}

func TestImportStrictRefusesCollisions(t *testing.T) {
	f := &fleet{cards: map[string][]a2a.ToolDescriptor{
		"x": desc("a_b"), "y": desc("a_b"), "x_a": desc("b"), "z": desc("b"),
	}}
	_, err := NewImporter(f, []config.RemoteHost{{Host: "x"}, {Host: "y"}, {Host: "x_a"}, {Host: "z"}}, nil).ImportStrict(t.Context())
	if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), `"x_a_b" collides`) || !strings.Contains(err.Error(), "remote_tools[].exclude.tools") {
		t.Errorf("got %v, want ErrImport naming the colliding name and the key to narrow it", err)
	}
}

func TestFilterHost(t *testing.T) {
	tools := append(desc("echo", "sleep", "status"), a2a.ToolDescriptor{Name: "mute", InputSchema: []byte(`{"type":"object"}`)})
	tests := []struct {
		name string
		host config.RemoteHost
		want []string
	}{
		{"everything described", config.RemoteHost{Host: "h"}, []string{"echo", "sleep", "status"}},
		{"include glob", config.RemoteHost{Host: "h", Include: config.Filter{Tools: []string{"s*"}}}, []string{"sleep", "status"}},
		{"exclude glob", config.RemoteHost{Host: "h", Exclude: config.Filter{Tools: []string{"sleep"}}}, []string{"echo", "status"}},
		{"tag include ignored", config.RemoteHost{Host: "h", Include: config.Filter{Tags: []string{"impact:ro"}}}, []string{"echo", "sleep", "status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, d := range filterHost(tt.host, tools) {
				got = append(got, d.Name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRemoteToolCall(t *testing.T) {
	f := &fleet{cards: map[string][]a2a.ToolDescriptor{"demo": {
		{Name: "echo", Description: "Echo a message\n\nTags: impact:ro", InputSchema: []byte(`{"type":"object","required":["message"]}`)},
		{Name: "fail", Description: "Fail", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "knowledge", Description: "In-process", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "broken", Description: "Errors", InputSchema: []byte(`{"type":"object"}`)},
	}}}
	f.reply = func(host, name string, input json.RawMessage) (*a2a.ToolReply, error) {
		switch name {
		case "echo":
			return &a2a.ToolReply{Output: "hi\n", Exec: &a2a.Exec{Command: "fiskdemo echo -- hi", ExitCode: 0}}, nil
		case "fail":
			return &a2a.ToolReply{Output: "boom\n", Exec: &a2a.Exec{Command: "fiskdemo fail", ExitCode: 3, Truncated: true}}, nil
		case "knowledge":
			return &a2a.ToolReply{Output: `{"documents":[]}`}, nil
		}
		return &a2a.ToolReply{IsError: true, Output: "unknown tool"}, nil
	}
	res, err := NewImporter(f, []config.RemoteHost{{Host: "demo"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tool.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name()] = tl
	}
	echo := byName["echo"]
	if echo.Confirmation() != tool.ConfirmNone || echo.Exposure() != tool.ExposeMCP {
		t.Errorf("echo: got %s exposed %s, want ungated and MCP only", echo.Confirmation(), echo.Exposure())
	}
	if !slices.Equal(echo.Tags(), []string{"impact:ro"}) || echo.Description() != "Echo a message" || echo.ModelDescription() != "Echo a message\n\nTags: impact:ro" {
		t.Errorf("echo: got tags %v description %q model %q, want the tags recovered from the card", echo.Tags(), echo.Description(), echo.ModelDescription())
	}

	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		// No local required-argument check: the serving agent decides.
		{name: "echo", input: `{}`, want: `{"command":"fiskdemo echo -- hi","exit_code":0,"output":"hi\n","truncated":false}`},
		{name: "fail", want: `{"command":"fiskdemo fail","exit_code":3,"output":"boom\n","truncated":true}`},
		{name: "knowledge", want: `{"documents":[]}`},
		{name: "broken", want: "remote agent demo: unknown tool", wantErr: true},
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

	// The host goes away: the call fails in-band naming it.
	f.set("demo", nil)
	out, err := echo.Call(t.Context(), tool.Request{})
	if err != nil || !out.IsError || !strings.Contains(out.Message, "remote agent demo is unavailable") {
		t.Errorf("host down: got %+v, %v, want an in-band error naming host demo", out, err)
	}
}

func TestWatchKeepsCurrent(t *testing.T) {
	f := &fleet{cards: map[string][]a2a.ToolDescriptor{"demo": desc("echo", "sleep")}}
	im := NewImporter(f, []config.RemoteHost{{Host: "demo"}}, nil)
	if _, err := im.ImportStrict(t.Context()); err != nil {
		t.Fatal(err)
	}
	applied := make(chan []string, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		im.Watch(ctx, 10*time.Millisecond, fisktest.Logger(t), func(r Result) { applied <- toolNames(r.Tools) })
	}()
	defer func() { cancel(); <-done }()

	// The host goes down: nothing changes, its tools stay.
	f.set("demo", nil)
	select {
	case got := <-applied:
		t.Fatalf("host down: applied %v, want the last tools kept and nothing applied", got)
	case <-time.After(100 * time.Millisecond):
	}
	// It comes back with one tool added and one removed.
	f.set("demo", desc("echo", "status"))
	select {
	case got := <-applied:
		if want := []string{"echo", "status"}; !slices.Equal(got, want) {
			t.Errorf("applied %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the changed tool set was never applied")
	}
}

func TestWatchOffWhenIntervalZero(t *testing.T) {
	im := NewImporter(&fleet{cards: map[string][]a2a.ToolDescriptor{}}, nil, nil)
	done := make(chan struct{})
	go func() { im.Watch(t.Context(), 0, nil, func(Result) {}); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch with a zero interval did not return at once")
	}
}
