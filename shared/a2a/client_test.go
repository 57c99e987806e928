package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// sentRequest is one request a fakeTransport carried.
type sentRequest struct {
	ctx      context.Context
	identity string
	route    Route
	data     []byte
}

// fakeTransport stands in for the NATS binding at the Transport seam: it
// records what the client sends and answers with respond.
type fakeTransport struct {
	respond func(identity string, route Route, data []byte) ([]byte, error)

	mu   sync.Mutex // guards sent
	sent []sentRequest
}

func (f *fakeTransport) RoundTrip(ctx context.Context, identity string, route Route, data []byte) ([]byte, error) {
	f.mu.Lock()
	f.sent = append(f.sent, sentRequest{ctx: ctx, identity: identity, route: route, data: append([]byte(nil), data...)})
	f.mu.Unlock()
	return f.respond(identity, route, data)
}

func (f *fakeTransport) requests() []sentRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentRequest(nil), f.sent...)
}

// agentReplies answers as a well-behaved agent named bob would: discovery
// with its card, a tool call by echoing the tool name and input.
func agentReplies(tb testing.TB) func(string, Route, []byte) ([]byte, error) {
	tb.Helper()
	card := newCardReply(tb, sampleCard())
	return func(identity string, route Route, data []byte) ([]byte, error) {
		self := Participant{Name: identity, Instance: identity + "-1"}
		switch route {
		case RouteDiscovery:
			var req DiscoveryRequest
			if err := Decode(data, &req); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrRejected, err)
			}
			return card.Reply(&req, self)
		default:
			var req ToolRequest
			if err := Decode(data, &req); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrRejected, err)
			}
			reply := &ToolReply{Output: req.Name + " " + string(req.Input)}
			if req.Name == "nope" {
				reply = &ToolReply{IsError: true, Output: `unknown tool "nope"`}
			}
			StampReply(reply, &req, self)
			return Encode(reply)
		}
	}
}

// newTestClient returns a client sending as alice over a fake transport.
func newTestClient(tb testing.TB, respond func(string, Route, []byte) ([]byte, error)) (*Client, *fakeTransport) {
	tb.Helper()
	ft := &fakeTransport{respond: respond}
	c, err := NewClient(ft, alice)
	if err != nil {
		tb.Fatalf("NewClient: %v", err)
	}
	return c, ft
}

// onlyRequest returns the single request the transport carried.
func onlyRequest(tb testing.TB, ft *fakeTransport) sentRequest {
	tb.Helper()
	sent := ft.requests()
	if len(sent) != 1 {
		tb.Fatalf("requests sent: got %d, want 1", len(sent))
	}
	return sent[0]
}

// assertStampedRequest checks a sent request is a fresh request from
// alice to identity.
func assertStampedRequest(tb testing.TB, h *Header, identity string) {
	tb.Helper()
	if h.ID == "" || h.Request != h.ID || h.Conversation != h.ID || h.Sequence != 0 {
		tb.Errorf("request header: got id %q request %q conversation %q sequence %d, want one fresh id and sequence 0",
			h.ID, h.Request, h.Conversation, h.Sequence)
	}
	if h.Sender != alice {
		tb.Errorf("sender: got %+v, want %+v", h.Sender, alice)
	}
	if h.Recipient == nil || *h.Recipient != (Participant{Name: identity}) {
		tb.Errorf("recipient: got %s, want %s", dump(h.Recipient), identity)
	}
}

type ctxKey struct{}

func TestClientDiscover(t *testing.T) {
	c, ft := newTestClient(t, agentReplies(t))
	ctx := context.WithValue(t.Context(), ctxKey{}, "marker")
	reply, err := c.Discover(ctx, "bob")
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	sent := onlyRequest(t, ft)
	if sent.route != RouteDiscovery || sent.identity != "bob" {
		t.Errorf("sent to: got %s %s, want discovery bob", sent.route, sent.identity)
	}
	if sent.ctx.Value(ctxKey{}) != "marker" {
		t.Errorf("context: got one without the caller's value, want the caller's context")
	}
	var req DiscoveryRequest
	if err := Decode(sent.data, &req); err != nil {
		t.Fatalf("sent request: got %v, want a schema-valid discovery request", err)
	}
	assertStampedRequest(t, &req.Header, "bob")
	if !reflect.DeepEqual(reply.AgentCard, sampleCard()) {
		t.Errorf("card: got %s, want %s", dump(reply.AgentCard), dump(sampleCard()))
	}
	if reply.Request != req.ID {
		t.Errorf("reply request: got %q, want %q", reply.Request, req.ID)
	}
	if reply.Recipient == nil || *reply.Recipient != alice {
		t.Errorf("reply recipient: got %s, want %+v", dump(reply.Recipient), alice)
	}
}

func TestClientCallTool(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		input     json.RawMessage
		wantInput string // "" means the request carries no input
		wantOut   string
		wantError bool
	}{
		{name: "nil input", tool: "uptime", input: nil, wantOut: "uptime "},
		{name: "null input", tool: "uptime", input: json.RawMessage(`null`), wantOut: "uptime "},
		{name: "padded null input", tool: "uptime", input: json.RawMessage(" null "), wantOut: "uptime "},
		{name: "empty input", tool: "uptime", input: json.RawMessage(""), wantOut: "uptime "},
		{name: "empty object", tool: "uptime", input: json.RawMessage(`{}`), wantInput: `{}`, wantOut: "uptime {}"},
		{name: "object", tool: "disk_usage", input: json.RawMessage(`{"path":"/var"}`), wantInput: `{"path":"/var"}`, wantOut: `disk_usage {"path":"/var"}`},
		{name: "in-band failure is a reply", tool: "nope", wantOut: `unknown tool "nope"`, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ft := newTestClient(t, agentReplies(t))
			reply, err := c.CallTool(t.Context(), "bob", tt.tool, tt.input)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			sent := onlyRequest(t, ft)
			if sent.route != RouteTool || sent.identity != "bob" {
				t.Errorf("sent to: got %s %s, want tool bob", sent.route, sent.identity)
			}
			var req ToolRequest
			if err := Decode(sent.data, &req); err != nil {
				t.Fatalf("sent request: got %v, want a schema-valid tool request", err)
			}
			assertStampedRequest(t, &req.Header, "bob")
			if req.Name != tt.tool {
				t.Errorf("tool: got %q, want %q", req.Name, tt.tool)
			}
			_, hasInput := asMap(t, sent.data)["input"]
			if got := string(req.Input); got != tt.wantInput || hasInput != (tt.wantInput != "") {
				t.Errorf("input: got %q (present %v), want %q", got, hasInput, tt.wantInput)
			}
			if reply.Output != tt.wantOut || reply.IsError != tt.wantError {
				t.Errorf("reply: got %q is_error %v, want %q is_error %v", reply.Output, reply.IsError, tt.wantOut, tt.wantError)
			}
			if reply.Request != req.ID {
				t.Errorf("reply request: got %q, want %q", reply.Request, req.ID)
			}
		})
	}
}

func TestClientRefusesBadReplies(t *testing.T) {
	good := agentReplies(t)
	// otherReply answers correctly, but to some other request.
	otherReply := func(identity string, route Route, data []byte) ([]byte, error) {
		if route == RouteDiscovery {
			return good(identity, route, mustEncode(t, NewDiscoveryRequest(alice, identity)))
		}
		return good(identity, route, mustEncode(t, NewToolRequest(alice, identity, "uptime", nil)))
	}
	// rewrite answers correctly, then damages the reply.
	rewrite := func(f func(map[string]any)) func(string, Route, []byte) ([]byte, error) {
		return func(identity string, route Route, data []byte) ([]byte, error) {
			raw, err := good(identity, route, data)
			if err != nil {
				return nil, err
			}
			o := asMap(t, raw)
			f(o)
			return json.Marshal(o)
		}
	}
	fail := func(err error) func(string, Route, []byte) ([]byte, error) {
		return func(string, Route, []byte) ([]byte, error) { return nil, err }
	}
	tests := []struct {
		name    string
		respond func(string, Route, []byte) ([]byte, error)
		wantErr error
		alsoErr error // a cause the wrapping must keep as well
		wantIn  string
	}{
		{name: "reply to another request", respond: otherReply,
			wantErr: ErrMismatchedReply, wantIn: "reply from bob answers request"},
		{name: "request id not echoed", respond: rewrite(func(o map[string]any) { o["request"] = "someone-else" }),
			wantErr: ErrMismatchedReply, wantIn: `answers request "someone-else"`},
		{name: "no responders", respond: fail(fmt.Errorf("%w: no agent serves choria.fisk-ai.x.bob", ErrAgentUnavailable)),
			wantErr: ErrAgentUnavailable, wantIn: "no agent serves"},
		{name: "deadline", respond: fail(fmt.Errorf("%w: %w", ErrAgentUnavailable, context.DeadlineExceeded)),
			wantErr: ErrAgentUnavailable, alsoErr: context.DeadlineExceeded, wantIn: "bob"},
		{name: "rejected", respond: fail(fmt.Errorf("%w: 400 malformed", ErrRejected)),
			wantErr: ErrRejected, wantIn: "400 malformed"},
		{name: "not JSON", respond: func(string, Route, []byte) ([]byte, error) { return []byte("pong"), nil },
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "empty reply", respond: func(string, Route, []byte) ([]byte, error) { return nil, nil },
			wantErr: ErrInvalidMessage, wantIn: "not JSON"},
		{name: "unknown key", respond: rewrite(func(o map[string]any) { o["debug"] = true }),
			wantErr: ErrInvalidMessage, wantIn: "at '/debug'"},
		{name: "sender with a subject wildcard", respond: rewrite(func(o map[string]any) { obj(o, "sender")["name"] = "bob.>" }),
			wantErr: ErrInvalidMessage, wantIn: "at '/sender/name'"},
		{name: "reply of another kind", respond: rewrite(func(o map[string]any) { o["protocol"] = ProtocolAck }),
			wantErr: ErrUnexpectedProtocol, wantIn: "got " + ProtocolAck},
		{name: "request echoed back", respond: func(_ string, _ Route, data []byte) ([]byte, error) { return data, nil },
			wantErr: ErrUnexpectedProtocol, wantIn: "request, want"},
		{name: "reply over the cap", respond: func(string, Route, []byte) ([]byte, error) {
			return make([]byte, MaxMessageSize+1), nil
		}, wantErr: ErrTooLarge, wantIn: "the limit is"},
	}
	calls := []struct {
		name string
		call func(*Client) error
	}{
		{"Discover", func(c *Client) error { _, err := c.Discover(t.Context(), "bob"); return err }},
		{"CallTool", func(c *Client) error { _, err := c.CallTool(t.Context(), "bob", "uptime", nil); return err }},
	}
	for _, tt := range tests {
		for _, call := range calls {
			t.Run(tt.name+"/"+call.name, func(t *testing.T) {
				c, ft := newTestClient(t, tt.respond)
				err := call.call(c)
				assertErr(t, err, tt.wantErr, tt.wantIn)
				if tt.alsoErr != nil && !errors.Is(err, tt.alsoErr) {
					t.Errorf("error: got %v, want it to keep %v", err, tt.alsoErr)
				}
				route := map[string]string{"Discover": "discovery", "CallTool": "tool"}[call.name]
				if err != nil && !strings.Contains(err.Error(), route) {
					t.Errorf("error: got %q, want it to name the %s route", err, route)
				}
				if got := len(ft.requests()); got != 1 {
					t.Errorf("requests sent: got %d, want 1", got)
				}
			})
		}
	}
}

func TestClientRefusesBeforeSending(t *testing.T) {
	tests := []struct {
		name    string
		call    func(*Client) error
		wantErr error
		wantIn  string
	}{
		{name: "discover a subject wildcard", call: func(c *Client) error { _, err := c.Discover(t.Context(), "bob.>"); return err },
			wantErr: ErrInvalidIdentity, wantIn: `"bob.>"`},
		{name: "discover an empty identity", call: func(c *Client) error { _, err := c.Discover(t.Context(), ""); return err },
			wantErr: ErrInvalidIdentity, wantIn: `""`},
		{name: "discover all agents", call: func(c *Client) error { _, err := c.Discover(t.Context(), "*"); return err },
			wantErr: ErrInvalidIdentity, wantIn: `"*"`},
		{name: "call a dotted identity", call: func(c *Client) error { _, err := c.CallTool(t.Context(), "bob.x", "uptime", nil); return err },
			wantErr: ErrInvalidIdentity, wantIn: `"bob.x"`},
		{name: "call with a space", call: func(c *Client) error { _, err := c.CallTool(t.Context(), "bob x", "uptime", nil); return err },
			wantErr: ErrInvalidIdentity, wantIn: `"bob x"`},
		{name: "call an invalid tool name", call: func(c *Client) error { _, err := c.CallTool(t.Context(), "bob", "disk usage", nil); return err },
			wantErr: ErrInvalidMessage, wantIn: "at '/name'"},
		{name: "call with an array input", call: func(c *Client) error {
			_, err := c.CallTool(t.Context(), "bob", "uptime", json.RawMessage(`[1]`))
			return err
		}, wantErr: ErrInvalidMessage, wantIn: "at '/input': got array, want object"},
		{name: "call with input that is not JSON", call: func(c *Client) error {
			_, err := c.CallTool(t.Context(), "bob", "uptime", json.RawMessage(`{"a":`))
			return err
		}, wantErr: ErrInvalidMessage, wantIn: "encoding tool request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ft := newTestClient(t, agentReplies(t))
			assertErr(t, tt.call(c), tt.wantErr, tt.wantIn)
			if got := len(ft.requests()); got != 0 {
				t.Errorf("requests sent: got %d, want 0", got)
			}
		})
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		name    string
		self    Participant
		wantErr error
		wantIn  string
	}{
		{name: "name only", self: Participant{Name: "alice"}},
		{name: "name and instance", self: alice},
		{name: "empty name", self: Participant{}, wantErr: ErrInvalidIdentity, wantIn: "client sender"},
		{name: "dotted name", self: Participant{Name: "alice.x"}, wantErr: ErrInvalidIdentity, wantIn: "client sender"},
		{name: "wildcard instance", self: Participant{Name: "alice", Instance: ">"}, wantErr: ErrInvalidIdentity, wantIn: "client instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(&fakeTransport{}, tt.self)
			if tt.wantErr == nil {
				if err != nil || c == nil {
					t.Fatalf("NewClient: got %v, want a client", err)
				}
				return
			}
			assertErr(t, err, tt.wantErr, tt.wantIn)
			if c != nil {
				t.Errorf("NewClient: got a client with the error, want nil")
			}
		})
	}
}

func TestClientConcurrent(t *testing.T) {
	c, ft := newTestClient(t, agentReplies(t))
	const workers, each = 8, 25
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				input := json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				reply, err := c.CallTool(t.Context(), "bob", "echo", input)
				if err == nil && reply.Output != "echo "+string(input) {
					err = fmt.Errorf("reply: got %q, want the echo of %s", reply.Output, input)
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := len(ft.requests()), workers*each; got != want {
		t.Errorf("requests sent: got %d, want %d", got, want)
	}
}

func TestRouteString(t *testing.T) {
	tests := []struct {
		name  string
		route Route
		want  string
	}{
		{name: "discovery", route: RouteDiscovery, want: "discovery"},
		{name: "tool", route: RouteTool, want: "tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.route.String(); got != tt.want {
				t.Errorf("String: got %q, want %q", got, tt.want)
			}
		})
	}
}

// Compile-time check: the fake satisfies the seam.
var _ Transport = (*fakeTransport)(nil)
