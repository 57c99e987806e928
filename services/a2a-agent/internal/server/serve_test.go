package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// quiet is how long a negative assertion ("nothing happens") watches.
// Long enough for a request to cross a loopback NATS many times over.
const quiet = 300 * time.Millisecond

// blockingTool is a tool whose calls report their "id" input on entered and
// then hold until release is closed (or their context ends).
type blockingTool struct {
	tool.Tool
	entered chan string
	release chan struct{}
	inside  atomic.Int32
	most    atomic.Int32
}

func newBlockingTool(tb testing.TB) *blockingTool {
	tb.Helper()
	b := &blockingTool{entered: make(chan string, 16), release: make(chan struct{})}
	b.Tool = funcTool(tb, tool.FuncSpec{
		Name: "block", Description: "Holds until the test releases it",
		Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
		Call: func(ctx context.Context, req tool.Request) (tool.Outcome, error) {
			n := b.inside.Add(1)
			defer b.inside.Add(-1)
			for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
			}
			var in struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(req.Input, &in)
			b.entered <- in.ID
			select {
			case <-b.release:
			case <-ctx.Done():
				return tool.Outcome{}, ctx.Err()
			}
			return tool.Outcome{JSON: json.RawMessage(`{"id":"` + in.ID + `"}`)}, nil
		},
	})
	return b
}

type callResult struct {
	reply *a2a.ToolReply
	err   error
}

// goCall calls name on identity in a goroutine and delivers the outcome.
func goCall(tb testing.TB, c *a2a.Client, identity, name, input string) <-chan callResult {
	tb.Helper()
	out := make(chan callResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := c.CallTool(ctx, identity, name, json.RawMessage(input))
		out <- callResult{r, err}
	}()
	return out
}

func receive[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestBackPressure shows the slot is taken on the serving goroutine before
// a worker starts: with one slot held, a second call does not enter the
// tool, and the endpoint stops reading altogether (a third request that
// needs no slot is not even answered) until the slot is released.
func TestBackPressure(t *testing.T) {
	ns := natstest.Start(t)
	b := newBlockingTool(t)
	srv := newServer(t, server.Config{Identity: "narrow", MaxConcurrent: 1}, []tool.Tool{b})
	startServer(t, srv, ns.Connect(t))
	c := newClient(t, ns.Connect(t), "tester")

	// A plain subscriber on the tool subject sees every request as the
	// server routes it, so the test knows the second one reached the agent
	// before it sends the third.
	observer := make(chan *nats.Msg, 16)
	onc := ns.Connect(t)
	if _, err := onc.ChanSubscribe(natsbus.ToolSubject("narrow"), observer); err != nil {
		t.Fatal(err)
	}
	if err := onc.Flush(); err != nil {
		t.Fatal(err)
	}

	first := goCall(t, c, "narrow", "block", `{"id":"first"}`)
	if got, want := receive(t, b.entered, "the first call to enter"), "first"; got != want {
		t.Fatalf("entered: got %q, want %q", got, want)
	}
	receive(t, observer, "the first request")

	second := goCall(t, c, "narrow", "block", `{"id":"second"}`)
	receive(t, observer, "the second request")
	third := goCall(t, c, "narrow", "nosuch", `{}`)
	receive(t, observer, "the third request")

	// Discovery has its own subscription and still answers.
	if _, err := c.Discover(t.Context(), "narrow"); err != nil {
		t.Errorf("Discover while the tool endpoint is saturated: %v", err)
	}
	select {
	case id := <-b.entered:
		t.Fatalf("call %q entered the tool while the only slot was held", id)
	case r := <-third:
		t.Fatalf("a request behind a blocked one was answered (%+v): the endpoint kept reading", r)
	case <-time.After(quiet):
	}
	if got, want := b.inside.Load(), int32(1); got != want {
		t.Fatalf("calls inside the tool: got %d, want %d", got, want)
	}

	close(b.release)
	if got, want := receive(t, b.entered, "the second call to enter"), "second"; got != want {
		t.Errorf("entered after release: got %q, want %q", got, want)
	}
	for _, tc := range []struct {
		ch   <-chan callResult
		want string
	}{{first, `{"id":"first"}`}, {second, `{"id":"second"}`}} {
		r := receive(t, tc.ch, "a reply")
		if r.err != nil {
			t.Fatalf("call: %v", r.err)
		}
		if r.reply.IsError || r.reply.Output != tc.want {
			t.Errorf("reply: got is_error %t output %q, want %q", r.reply.IsError, r.reply.Output, tc.want)
		}
	}
	r := receive(t, third, "the unknown-tool reply")
	if r.err != nil || !r.reply.IsError || !strings.Contains(r.reply.Output, `unknown tool "nosuch"`) {
		t.Errorf("unknown tool: got %+v, %v; want an in-band unknown-tool error", r.reply, r.err)
	}
	if got, want := b.most.Load(), int32(1); got != want {
		t.Errorf("most calls inside at once: got %d, want %d", got, want)
	}
}

// TestFlood sends 2,000 requests at once, each with its own inbox, to an
// agent with two slots running a 50 ms command. Every caller gets exactly
// one reply or times out, at most two calls run at a time, and the agent's
// goroutines stay bounded: pending requests wait in NATS buffers, not in
// goroutines.
func TestFlood(t *testing.T) {
	const (
		requests      = 2000
		maxConcurrent = 2
		sleep         = 50 * time.Millisecond
		callerTimeout = 2 * time.Second
	)
	ns := natstest.Start(t)
	srv := newServer(t, server.Config{Identity: "flood", MaxConcurrent: maxConcurrent}, demoTools(t, fiskapp.Options{Include: configFilter("sleep")}))
	startServer(t, srv, ns.Connect(t))
	nc := ns.Connect(t)

	// Encode every request up front so the flood is one burst.
	sender := a2a.Participant{Name: "flooder"}
	bodies := make([][]byte, requests)
	for i := range bodies {
		data, err := a2a.Encode(a2a.NewToolRequest(sender, "flood", "sleep", []byte(`{"duration":"50ms"}`)))
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = data
	}

	type tally struct {
		mu      sync.Mutex // guards the fields below
		replies map[string]int
		ok      int
		other   []string
	}
	tl := &tally{replies: make(map[string]int, requests)}
	prefix := nats.NewInbox() + "."
	sub, err := nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		reply := &a2a.ToolReply{}
		decodeErr := a2a.Decode(m.Data, reply)
		tl.mu.Lock()
		defer tl.mu.Unlock()
		tl.replies[m.Subject]++
		switch {
		case decodeErr != nil:
			tl.other = append(tl.other, decodeErr.Error())
		case !reply.IsError && strings.HasPrefix(reply.Output, "slept 50ms"):
			tl.ok++
		case reply.IsError && strings.Contains(reply.Output, "is stopping"):
		default:
			tl.other = append(tl.other, reply.Output)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	baseline := runtime.NumGoroutine()
	var peak atomic.Int64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(runtime.NumGoroutine()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	start := time.Now()
	subject := natsbus.ToolSubject("flood")
	for i, body := range bodies {
		if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: fmt.Sprintf("%s%d", prefix, i), Data: body}); err != nil {
			t.Fatalf("publishing request %d: %v", i, err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Every caller gives up callerTimeout after the flood was sent.
	<-time.After(time.Until(start.Add(callerTimeout)))
	elapsed := time.Since(start)
	tl.mu.Lock()
	replied, okInTime := len(tl.replies), tl.ok
	tl.mu.Unlock()
	timeouts := requests - replied
	t.Logf("within %s: %d replies (%d commands ran), %d timeouts; goroutines baseline %d, peak %d",
		elapsed.Round(time.Millisecond), replied, okInTime, timeouts, baseline, peak.Load())
	if replied+timeouts != requests {
		t.Errorf("replies+timeouts: got %d, want %d", replied+timeouts, requests)
	}
	if okInTime == 0 {
		t.Errorf("commands run within %s: got 0, want some", callerTimeout)
	}
	// Two slots of at least 50 ms each bound how many calls can have
	// finished, plus the two that may be finishing as we look.
	if limit := maxConcurrent*int(elapsed/sleep) + maxConcurrent; okInTime > limit {
		t.Errorf("commands finished in %s: got %d, want at most %d with %d slots", elapsed, okInTime, limit, maxConcurrent)
	}

	// Stop: the calls in flight finish, the queued ones are answered
	// in-band, and nothing new starts.
	stopCtx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tl.mu.Lock()
	okBeforeStop := tl.ok
	tl.mu.Unlock()
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	fisktest.WaitFor(t, 30*time.Second, "every request to be answered after Stop", func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.replies) == requests
	})
	close(stopSampling)
	<-sampled

	// Watch a moment longer for a second reply to any inbox.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	<-time.After(quiet)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for inbox, n := range tl.replies {
		if n != 1 {
			t.Errorf("inbox %s: got %d replies, want exactly 1", inbox, n)
		}
	}
	if len(tl.other) > 0 {
		t.Errorf("unexpected replies: got %d, e.g. %q; want only results and in-band stopping errors", len(tl.other), tl.other[0])
	}
	// The two in flight at Stop may finish, and two more may have started
	// between the count above and Stop taking effect; a call admitted after
	// Stop would show as far more, or as interrupted replies.
	if late := tl.ok - okBeforeStop; late > 2*maxConcurrent {
		t.Errorf("commands finished after Stop was called: got %d, want at most %d", late, 2*maxConcurrent)
	}
	if got, limit := peak.Load(), int64(baseline+100); got > limit {
		t.Errorf("peak goroutines: got %d, want under %d (baseline %d + 100) for %d requests", got, limit, baseline, requests)
	}
}

// TestGatedToolsNotServed serves the demo app with confirm_tags
// [impact:rw]: deploy (ai:confirm) and restart (impact:rw) are in neither
// the card nor dispatch, and calling them is an in-band unknown-tool error
// that runs nothing. Without the confirm tag restart is served, so the tag
// is what keeps it off the bus.
func TestGatedToolsNotServed(t *testing.T) {
	ns, c, _ := serveDemo(t, server.Config{Identity: "gated"}, fiskapp.Options{ConfirmTags: []string{tool.TagReadWrite}})
	ungated := newServer(t, server.Config{Identity: "ungated"}, demoTools(t, fiskapp.Options{}))
	startServer(t, ungated, ns.Connect(t))

	card, err := c.Discover(t.Context(), "gated")
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	dir := t.TempDir()
	tests := []struct {
		tool  string
		input func(marker string) string
	}{
		{"deploy", func(m string) string { return fmt.Sprintf(`{"service":"web","marker":%q}`, m) }},
		{"restart", func(m string) string { return fmt.Sprintf(`{"marker":%q}`, m) }},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			if slices.Contains(cardNames(card.AgentCard), tt.tool) {
				t.Errorf("card of gated: got %v, want no %s", cardNames(card.AgentCard), tt.tool)
			}
			marker := filepath.Join(dir, tt.tool+".marker")
			reply := callTool(t, c, "gated", tt.tool, tt.input(marker))
			if !reply.IsError {
				t.Errorf("call: got is_error false (output %q), want true", reply.Output)
			}
			if want := fmt.Sprintf("unknown tool %q", tt.tool); !strings.Contains(reply.Output, want) {
				t.Errorf("call: got output %q, want it to contain %q", reply.Output, want)
			}
			if reply.Exec != nil {
				t.Errorf("call: got exec %+v, want none", reply.Exec)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("marker %s: got stat error %v, want it absent (the command ran)", marker, err)
			}
		})
	}

	t.Run("restart without confirm_tags", func(t *testing.T) {
		marker := filepath.Join(dir, "ungated.marker")
		reply := callTool(t, c, "ungated", "restart", fmt.Sprintf(`{"marker":%q}`, marker))
		if reply.IsError || reply.Exec == nil || reply.Exec.ExitCode != 0 {
			t.Fatalf("call: got %+v, want a successful run", reply)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("marker: %v, want it written", err)
		}
	})
}

// TestForgedParticipantsCannotRedirectReply sends a hand-built request
// whose sender claims to be "victim" and whose recipient names another
// agent. The reply goes to the request's inbox only: nothing is published
// on the victim's subjects or anywhere else under choria.fisk-ai.
func TestForgedParticipantsCannotRedirectReply(t *testing.T) {
	ns, c, _ := serveDemo(t, server.Config{Identity: "target"}, fiskapp.Options{Include: configFilter("echo")})

	// A snoop on everything: any message the agent publishes is seen here
	// in the order the agent published it.
	snoop := ns.Connect(t)
	all := make(chan *nats.Msg, 64)
	if _, err := snoop.ChanSubscribe(">", all); err != nil {
		t.Fatal(err)
	}
	if err := snoop.Flush(); err != nil {
		t.Fatal(err)
	}

	req := a2a.NewToolRequest(a2a.Participant{Name: "victim", Instance: "victim-1"}, "target", "echo", []byte(`{"message":"hi"}`))
	req.Recipient = &a2a.Participant{Name: "victim", Instance: "victim-1"}
	data, err := a2a.Encode(req)
	if err != nil {
		t.Fatal(err)
	}
	nc := ns.Connect(t)
	inbox := nats.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: natsbus.ToolSubject("target"), Reply: inbox, Data: data}); err != nil {
		t.Fatal(err)
	}
	msg, err := replies.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("waiting for the reply on the inbox: %v", err)
	}
	reply := &a2a.ToolReply{}
	if err := a2a.Decode(msg.Data, reply); err != nil {
		t.Fatalf("decoding reply: %v", err)
	}
	if reply.IsError || !strings.Contains(reply.Output, "hi") {
		t.Errorf("reply: got is_error %t output %q, want the echo", reply.IsError, reply.Output)
	}
	if got, want := reply.Request, req.ID; got != want {
		t.Errorf("reply.request: got %q, want %q", got, want)
	}
	if got := reply.Sender.Name; got != "target" {
		t.Errorf("reply sender: got %q, want the agent's own name, not the forged recipient", got)
	}
	// The swapped recipient is a label echoing the forged sender.
	if reply.Recipient == nil || reply.Recipient.Name != "victim" {
		t.Errorf("reply recipient: got %+v, want the victim label", reply.Recipient)
	}

	// A barrier: the agent answers a discovery after the tool reply, on the
	// same connection, so once the snoop has seen that answer it has seen
	// everything the agent published before it.
	barrier, err := c.Discover(t.Context(), "target")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for done := false; !done; {
		m := receive(t, all, "the barrier reply on the snoop")
		seen = append(seen, m.Subject)
		if strings.Contains(string(m.Data), barrier.ID) {
			done = true
		}
	}
	var onBus, toVictim []string
	for _, s := range seen {
		if strings.HasPrefix(s, natsbus.SubjectPrefix+".") {
			onBus = append(onBus, s)
		}
		if strings.HasSuffix(s, ".victim") {
			toVictim = append(toVictim, s)
		}
	}
	// The bus carried our request and the barrier's discovery request; no
	// message went to the victim's subjects.
	wantBus := []string{natsbus.ToolSubject("target"), natsbus.DiscoverySubject("target")}
	if !slices.Equal(onBus, wantBus) {
		t.Errorf("messages under %s.>: got %v, want only %v", natsbus.SubjectPrefix, onBus, wantBus)
	}
	if len(toVictim) > 0 {
		t.Errorf("messages on the victim's subjects: got %v, want none", toVictim)
	}
	if !slices.Contains(seen, inbox) {
		t.Errorf("snoop: the reply on %s was not seen (saw %v)", inbox, seen)
	}
	if _, err := replies.NextMsg(quiet); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("second message on the inbox: got %v, want none", err)
	}
}

// validRequest returns a valid tool request body as a JSON object the test
// can tamper with.
func validRequest(tb testing.TB, identity, name, input string) map[string]any {
	tb.Helper()
	data, err := a2a.Encode(a2a.NewToolRequest(a2a.Participant{Name: "tester"}, identity, name, []byte(input)))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestHostileRequests sends hand-crafted malformed messages. Each gets a
// micro error header (400, or 413 when oversized), never an in-band reply,
// and the agent keeps serving.
func TestHostileRequests(t *testing.T) {
	ns, c, _ := serveDemo(t, server.Config{Identity: "sturdy"}, fiskapp.Options{Include: configFilter("echo")})
	nc := ns.Connect(t)
	with := func(key string, value any) func(testing.TB) []byte {
		return func(tb testing.TB) []byte {
			m := validRequest(tb, "sturdy", "echo", `{"message":"hi"}`)
			if value == nil {
				delete(m, key)
			} else {
				m[key] = value
			}
			return mustJSON(tb, m)
		}
	}
	tests := []struct {
		name     string
		subject  string
		body     func(testing.TB) []byte
		wantCode string
	}{
		{"unknown key", natsbus.ToolSubject("sturdy"), with("evil", true), "400"},
		{"unknown key in sender", natsbus.ToolSubject("sturdy"), with("sender", map[string]any{"name": "tester", "admin": true}), "400"},
		{"protocol of another kind", natsbus.ToolSubject("sturdy"), with("protocol", a2a.ProtocolDiscoveryRequest), "400"},
		{"unknown protocol", natsbus.ToolSubject("sturdy"), with("protocol", "io.choria.fisk-ai.v2.tool.request"), "400"},
		{"no protocol", natsbus.ToolSubject("sturdy"), with("protocol", nil), "400"},
		{"sender with a subject token", natsbus.ToolSubject("sturdy"), with("sender", map[string]any{"name": "a.>"}), "400"},
		{"input as an array", natsbus.ToolSubject("sturdy"), with("input", []any{"hi"}), "400"},
		{"input as a string", natsbus.ToolSubject("sturdy"), with("input", "hi"), "400"},
		{"tool name with a space", natsbus.ToolSubject("sturdy"), with("name", "rm -rf"), "400"},
		{"invalid JSON", natsbus.ToolSubject("sturdy"), func(testing.TB) []byte { return []byte(`{"protocol":`) }, "400"},
		{"not an object", natsbus.ToolSubject("sturdy"), func(testing.TB) []byte { return []byte(`[1,2]`) }, "400"},
		{"empty body", natsbus.ToolSubject("sturdy"), func(testing.TB) []byte { return nil }, "400"},
		{"duplicate key", natsbus.ToolSubject("sturdy"), func(tb testing.TB) []byte {
			b := mustJSON(tb, validRequest(tb, "sturdy", "echo", `{"message":"hi"}`))
			return append([]byte(`{"name":"echo",`), b[1:]...)
		}, "400"},
		{"one byte over the cap", natsbus.ToolSubject("sturdy"), func(tb testing.TB) []byte {
			// A valid request padded with whitespace to the cap plus one:
			// refused by size alone, before it is parsed.
			b := mustJSON(tb, validRequest(tb, "sturdy", "echo", `{"message":"hi"}`))
			pad := make([]byte, a2a.MaxMessageSize+1-len(b))
			for i := range pad {
				pad[i] = ' '
			}
			return append(b, pad...)
		}, "413"},
		{"discovery: invalid JSON", natsbus.DiscoverySubject("sturdy"), func(testing.TB) []byte { return []byte("not json") }, "400"},
		{"discovery: a tool request", natsbus.DiscoverySubject("sturdy"), with("evil", nil), "400"},
		{"discovery: one byte over the cap", natsbus.DiscoverySubject("sturdy"), func(testing.TB) []byte { return make([]byte, a2a.MaxMessageSize+1) }, "413"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body(t)
			if tt.wantCode == "413" {
				if got, want := len(body), a2a.MaxMessageSize+1; got != want {
					t.Fatalf("body: got %d bytes, want %d", got, want)
				}
			}
			msg, err := nc.Request(tt.subject, body, 10*time.Second)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != tt.wantCode {
				t.Errorf("%s: got %q (body %.200q), want %q", micro.ErrorCodeHeader, got, msg.Data, tt.wantCode)
			}
			if got := msg.Header.Get(micro.ErrorHeader); got == "" {
				t.Errorf("%s: got empty, want a description", micro.ErrorHeader)
			}
			if len(msg.Data) != 0 {
				t.Errorf("body: got %.200q, want none", msg.Data)
			}
		})
	}

	reply := callTool(t, c, "sturdy", "echo", `{"message":"still here"}`)
	if reply.IsError || !strings.Contains(reply.Output, "still here") {
		t.Errorf("valid call after the hostile ones: got is_error %t output %q, want the echo", reply.IsError, reply.Output)
	}
}

// TestInBandFailures covers the outcomes that are not transport errors:
// each is a reply, with is_error for failures and the exit code for a
// command that ran and failed.
func TestInBandFailures(t *testing.T) {
	ns, c, _ := serveDemo(t, server.Config{Identity: "inband"}, fiskapp.Options{})
	// The timeout case has an agent of its own, so a loaded machine cannot
	// time out the others.
	hasty := newServer(t, server.Config{Identity: "hasty", Timeout: 500 * time.Millisecond}, demoTools(t, fiskapp.Options{Include: configFilter("sleep")}))
	startServer(t, hasty, ns.Connect(t))
	tests := []struct {
		name       string
		agent      string
		tool       string
		input      string
		wantError  bool
		wantOutput string
		wantExit   int
		maxElapsed time.Duration
		// wantTruncated expects the output cut at fiskapp's cap.
		wantTruncated bool
	}{
		{name: "success", tool: "echo", input: `{"message":"hi","upper":true}`, wantOutput: "HI\n"},
		{name: "absent input is {}", tool: "cluster_node_status", wantOutput: "node n1: status ok\n"},
		{name: "non-zero exit is not an error", tool: "fail", input: `{"code":7}`, wantOutput: "failing with exit code 7", wantExit: 7},
		{name: "output past the cap is truncated", tool: "flood", input: `{"bytes":1048576}`, wantOutput: "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk\n", wantTruncated: true},
		{name: "unknown tool", tool: "nosuch", wantError: true, wantOutput: `unknown tool "nosuch"`},
		{name: "unknown property", tool: "echo", input: `{"message":"hi","bogus":1}`, wantError: true, wantOutput: "bogus"},
		{name: "hidden flag", tool: "echo", input: `{"message":"hi","trace":true}`, wantError: true, wantOutput: "trace"},
		{name: "per-call timeout", agent: "hasty", tool: "sleep", input: `{"duration":"5s"}`, wantError: true, wantOutput: "timed out after 500ms", maxElapsed: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := tt.agent
			if agent == "" {
				agent = "inband"
			}
			start := time.Now()
			reply := callTool(t, c, agent, tt.tool, tt.input)
			elapsed := time.Since(start)
			if reply.IsError != tt.wantError {
				t.Errorf("is_error: got %t (output %q), want %t", reply.IsError, reply.Output, tt.wantError)
			}
			if !strings.Contains(reply.Output, tt.wantOutput) {
				t.Errorf("output: got %q, want it to contain %q", reply.Output, tt.wantOutput)
			}
			if !tt.wantError {
				if reply.Exec == nil {
					t.Fatalf("exec: got none, want the command run")
				}
				if got := reply.Exec.ExitCode; got != tt.wantExit {
					t.Errorf("exit code: got %d, want %d", got, tt.wantExit)
				}
				if got := reply.Exec.Truncated; got != tt.wantTruncated {
					t.Errorf("truncated: got %t, want %t", got, tt.wantTruncated)
				}
				if tt.wantTruncated && len(reply.Output) != fiskapp.DefaultOutputCap {
					t.Errorf("output: got %d bytes, want the %d-byte cap", len(reply.Output), fiskapp.DefaultOutputCap)
				}
			}
			if tt.maxElapsed > 0 && elapsed > tt.maxElapsed {
				t.Errorf("elapsed: got %s, want under %s (the command must be killed at the timeout)", elapsed, tt.maxElapsed)
			}
		})
	}
}

// TestStopDrains stops the agent with a call in flight: new requests find
// no responder at once, the call in flight completes and is answered, and
// Stop returns only after that. A second Stop is a no-op, and the server
// cannot be started again.
func TestStopDrains(t *testing.T) {
	ns := natstest.Start(t)
	b := newBlockingTool(t)
	srv := newServer(t, server.Config{Identity: "draining"}, []tool.Tool{b})
	startServer(t, srv, ns.Connect(t))
	c := newClient(t, ns.Connect(t), "tester")

	inflight := goCall(t, c, "draining", "block", `{"id":"inflight"}`)
	receive(t, b.entered, "the call to enter")

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- srv.Stop(ctx)
	}()

	// Intake stops: a new request soon finds nobody serving.
	fisktest.WaitFor(t, 10*time.Second, "intake to stop", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := c.Discover(ctx, "draining")
		return isUnavailable(err)
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with a call in flight", err)
	case r := <-inflight:
		t.Fatalf("the call in flight was answered (%+v) before it finished", r)
	case <-time.After(quiet):
	}

	close(b.release)
	r := receive(t, inflight, "the in-flight reply")
	if r.err != nil {
		t.Fatalf("in-flight call: %v", r.err)
	}
	if r.reply.IsError || r.reply.Output != `{"id":"inflight"}` {
		t.Errorf("in-flight reply: got is_error %t output %q, want the result", r.reply.IsError, r.reply.Output)
	}
	if err := receive(t, stopped, "Stop to return"); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := srv.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: got %v, want nil", err)
	}
	if err := srv.Start(ns.Connect(t)); err == nil {
		t.Errorf("Start after Stop: got nil, want an error")
	}
}

// TestStopCancelsAfterDeadline stops with a short deadline while a long
// command runs: the command is killed and the caller still gets an in-band
// answer.
func TestStopCancelsAfterDeadline(t *testing.T) {
	ns := natstest.Start(t)
	srv := newServer(t, server.Config{Identity: "impatient"}, demoTools(t, fiskapp.Options{Include: configFilter("sleep")}))
	startServer(t, srv, ns.Connect(t))
	c := newClient(t, ns.Connect(t), "tester")

	// Wait until the command is running: the micro stats count a request
	// once its handler has taken the slot and handed it to a worker.
	call := goCall(t, c, "impatient", "sleep", `{"duration":"30s"}`)
	fisktest.WaitFor(t, 10*time.Second, "the call to be handed to a worker", func() bool {
		return natstest.EndpointRequests(t, ns.Connect(t), "impatient", "tool") == 1
	})

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The grace between SIGTERM and SIGKILL is 2 s; the demo's sleep dies
	// at SIGTERM.
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Stop took %s, want it to cancel the call after its 200ms deadline", elapsed)
	}
	r := receive(t, call, "the cancelled call's reply")
	if r.err != nil {
		t.Fatalf("cancelled call: %v", r.err)
	}
	if !r.reply.IsError || !strings.Contains(r.reply.Output, "interrupted") {
		t.Errorf("cancelled call: got is_error %t output %q, want an in-band interruption", r.reply.IsError, r.reply.Output)
	}
}

// TestReconnectAfterServerRestart connects the agent from a nats context,
// as a2a-agent serve does, restarts the NATS server on the same port, and
// sees the same agent serve again without being restarted itself.
func TestReconnectAfterServerRestart(t *testing.T) {
	ns := natstest.Start(t)
	home := ns.WriteContext(t, t.TempDir(), "restart-test", nil)
	t.Setenv("XDG_CONFIG_HOME", home)
	agentConn, err := natsconn.Connect(natsconn.Options{Context: "restart-test", Name: "a2a-agent restart", Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("natsconn.Connect: %v", err)
	}
	t.Cleanup(agentConn.Close)
	srv := newServer(t, server.Config{Identity: "phoenix"}, demoTools(t, fiskapp.Options{Include: configFilter("echo")}))
	startServer(t, srv, agentConn)

	clientConn := ns.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	c := newClient(t, clientConn, "tester")
	if r := callTool(t, c, "phoenix", "echo", `{"message":"before"}`); r.IsError || r.Output != "before\n" {
		t.Fatalf("before restart: got is_error %t output %q", r.IsError, r.Output)
	}

	ns.Restart()

	var last *a2a.ToolReply
	var lastErr error
	fisktest.WaitFor(t, 20*time.Second, "the agent to serve again", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		last, lastErr = c.CallTool(ctx, "phoenix", "echo", json.RawMessage(`{"message":"after"}`))
		return lastErr == nil
	})
	if last.IsError || last.Output != "after\n" {
		t.Errorf("after restart: got is_error %t output %q, want the echo", last.IsError, last.Output)
	}
	if got := agentConn.Reconnects; got < 1 {
		t.Errorf("agent connection reconnects: got %d, want at least 1 (the same connection reconnected)", got)
	}
	if !agentConn.IsConnected() {
		t.Errorf("agent connection: got status %v, want connected", agentConn.Status())
	}
}

// TestPermissionBoundary grants one user discovery only: it can read the
// card, but a tool call never reaches the agent. The agent's own user has
// full rights and serves both.
func TestPermissionBoundary(t *testing.T) {
	ns := natstest.StartFromConfig(t, `
accounts {
  FLEET {
    users: [
      {user: agent, password: agent-secret}
      {user: operator, password: operator-secret}
      {
        user: disco, password: disco-secret
        permissions: {
          publish: {allow: ["choria.fisk-ai.discovery.*"]}
          subscribe: {allow: ["_INBOX.>"]}
        }
      }
    ]
  }
}
`)
	srv := newServer(t, server.Config{Identity: "guarded"}, demoTools(t, fiskapp.Options{Include: configFilter("restart")}))
	startServer(t, srv, ns.Connect(t, nats.UserInfo("agent", "agent-secret")))

	permErrs := make(chan error, 8)
	disco := newClient(t, ns.Connect(t, nats.UserInfo("disco", "disco-secret"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case permErrs <- err:
		default:
		}
	})), "disco")
	operator := newClient(t, ns.Connect(t, nats.UserInfo("operator", "operator-secret")), "operator")

	card, err := disco.Discover(t.Context(), "guarded")
	if err != nil {
		t.Fatalf("Discover as disco: %v", err)
	}
	if got, want := cardNames(card.AgentCard), []string{"restart"}; !slices.Equal(got, want) {
		t.Errorf("card: got %v, want %v", got, want)
	}

	dir := t.TempDir()
	denied := filepath.Join(dir, "disco.marker")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	reply, err := disco.CallTool(ctx, "guarded", "restart", json.RawMessage(fmt.Sprintf(`{"marker":%q}`, denied)))
	if err == nil {
		t.Fatalf("CallTool as disco: got reply %+v, want the call to fail", reply)
	}
	if !errors.Is(err, a2a.ErrPermission) || isUnavailable(err) {
		t.Errorf("CallTool as disco: got %v, want %v (NATS refused the publish; the agent is not down)", err, a2a.ErrPermission)
	}
	select {
	case perr := <-permErrs:
		if !strings.Contains(strings.ToLower(perr.Error()), "permissions violation") {
			t.Errorf("async error: got %v, want a permissions violation", perr)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no permissions violation reported to disco's connection")
	}
	if got := natstest.EndpointRequests(t, ns.Connect(t, nats.UserInfo("operator", "operator-secret")), "guarded", "tool"); got != 0 {
		t.Errorf("tool requests the agent handled: got %d, want 0", got)
	}
	if _, err := os.Stat(denied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker %s: got stat error %v, want it absent (the tool ran)", denied, err)
	}

	allowed := filepath.Join(dir, "operator.marker")
	r := callTool(t, operator, "guarded", "restart", fmt.Sprintf(`{"marker":%q}`, allowed))
	if r.IsError || r.Exec == nil || r.Exec.ExitCode != 0 {
		t.Fatalf("CallTool as operator: got %+v, want success", r)
	}
	if _, err := os.Stat(allowed); err != nil {
		t.Errorf("marker written by the operator's call: %v", err)
	}
}

// TestOversizedReplyIsCut returns output that the cap lets through but
// that JSON escaping inflates past the message cap: the reply is cut to fit
// and marked truncated rather than lost.
func TestOversizedReplyIsCut(t *testing.T) {
	ns := natstest.Start(t)
	// Control characters escape to six bytes each: 200 KiB become 1.2 MB.
	output := strings.Repeat("\x01", 200<<10)
	big := funcTool(t, tool.FuncSpec{
		Name: "noisy", Description: "Prints control characters", Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) {
			return tool.Outcome{Result: &tool.CommandResult{Command: "noisy", Output: output}}, nil
		},
	})
	srv := newServer(t, server.Config{Identity: "noisy"}, []tool.Tool{big})
	startServer(t, srv, ns.Connect(t))
	c := newClient(t, ns.Connect(t), "tester")

	reply := callTool(t, c, "noisy", "noisy", "")
	if reply.IsError || reply.Exec == nil {
		t.Fatalf("reply: got is_error %t exec %+v, want a command result", reply.IsError, reply.Exec)
	}
	if !reply.Exec.Truncated {
		t.Errorf("truncated: got false, want true")
	}
	if n := len(reply.Output); n == 0 || n >= len(output) || !strings.HasPrefix(output, reply.Output) {
		t.Errorf("output: got %d bytes, want a non-empty prefix of the %d produced", n, len(output))
	}
}
