package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// TestThreeInstances runs three brokers of one identity, each on its own
// connection as three agent processes would: List shows every instance's
// request, and each answer reaches only the instance that asked.
func TestThreeInstances(t *testing.T) {
	ns := natstest.Start(t)
	tp := newTap(t, ns)
	instances := []string{"i1", "i2", "i3"}
	brokers := make([]*Broker, len(instances))
	calls := make([]*call, len(instances))
	for i, inst := range instances {
		brokers[i] = newBroker(t, ns.Connect(t), Options{Identity: "demo", Instance: inst})
		p := deployCall()
		p.Command = "app deploy --env prod --host " + inst
		calls[i] = start(t, t.Context(), brokers[i], p)
	}
	other := newBroker(t, ns.Connect(t), Options{Identity: "other", Instance: "o1"})
	otherCall := start(t, t.Context(), other, deployCall())
	op := ns.Connect(t)

	tests := []struct {
		name     string
		identity string
		want     []string
	}{
		{"one identity", "demo", []string{calls[0].req.ID, calls[1].req.ID, calls[2].req.ID}},
		{"the fleet", "", []string{calls[0].req.ID, calls[1].req.ID, calls[2].req.ID, otherCall.req.ID}},
		{"an identity with none", "nobody", nil},
	}
	for _, tt := range tests {
		t.Run("list "+tt.name, func(t *testing.T) {
			reqs, err := List(t.Context(), op, tt.identity, 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range reqs {
				got = append(got, r.ID)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Errorf("listed: got %v, want %v", got, want)
			}
		})
	}

	t.Run("listed as published", func(t *testing.T) {
		got, err := Find(t.Context(), op, "demo", calls[1].req.ID, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := calls[1].req
		if got.ID != want.ID || got.Instance != "i2" || got.Command != want.Command || got.Digest != want.Digest ||
			!got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) || got.Caller.Name != "ci-bot" || !got.Caller.Claimed {
			t.Errorf("found: got %+v, want %+v", got, want)
		}
	})

	t.Run("find of an id nobody lists", func(t *testing.T) {
		_, err := Find(t.Context(), op, "demo", "no-such-request", 300*time.Millisecond)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "identity demo") {
			t.Errorf("got %v, want not found, naming the identity", err)
		}
	})

	t.Run("an answer sent to another instance is unknown there", func(t *testing.T) {
		misrouted := calls[0].req
		misrouted.Instance = "i2"
		reply, err := Answer(t.Context(), op, misrouted, true, Approver{Name: "alice"}, "")
		if !errors.Is(err, ErrRefused) || reply.Refusal != RefusedUnknown {
			t.Fatalf("got %+v, %v, want refused as unknown", reply, err)
		}
		if !calls[0].running() {
			t.Error("request on i1 ended, want it still waiting")
		}
	})

	for i, c := range calls {
		t.Run("answer reaches "+instances[i], func(t *testing.T) {
			approve := i != 1
			if _, err := Answer(t.Context(), op, c.req, approve, Approver{Name: "alice"}, "checked "+instances[i]); err != nil {
				t.Fatal(err)
			}
			d, err := c.wait(t)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := d.Approved(), approve; got != want {
				t.Errorf("approved: got %t, want %t", got, want)
			}
			if got, want := d.Reason, "checked "+instances[i]; got != want {
				t.Errorf("reason: got %q, want %q", got, want)
			}
			for j, rest := range calls[i+1:] {
				if !rest.running() {
					t.Errorf("request on %s ended, want it still waiting", instances[i+1+j])
				}
			}
			if got := len(brokers[i].Pending()); got != 0 {
				t.Errorf("pending on %s: got %d, want 0", instances[i], got)
			}
		})
	}
	if got := tp.count(KindListReply); got < 4 {
		t.Errorf("list replies seen: got %d, want at least 4", got)
	}
}

// TestOutcomes runs a request to each of its ends and checks the decision,
// the events a watcher sees, and the events the audit hook sees.
func TestOutcomes(t *testing.T) {
	ns := natstest.Start(t)
	tp := newTap(t, ns)
	op := ns.Connect(t)
	seen := watch(t, ns.Connect(t), "demo", tp)

	tests := []struct {
		name       string
		timeout    time.Duration
		end        func(t *testing.T, c *call, cancel context.CancelFunc)
		wantOut    Outcome
		wantErr    error
		wantReason string
		wantEvents []EventType
		wantAudit  string
	}{
		{
			name: "approve",
			end: func(t *testing.T, c *call, _ context.CancelFunc) {
				if _, err := Answer(t.Context(), op, c.req, true, Approver{Name: "alice", NATSUser: "alice"}, "looks right"); err != nil {
					t.Fatal(err)
				}
			},
			wantOut: OutcomeApproved, wantReason: "looks right",
			wantEvents: []EventType{EventRequested, EventDecided}, wantAudit: "decided approve alice",
		},
		{
			name: "deny",
			end: func(t *testing.T, c *call, _ context.CancelFunc) {
				if _, err := Answer(t.Context(), op, c.req, false, Approver{Name: "bob"}, "not during the freeze"); err != nil {
					t.Fatal(err)
				}
			},
			wantOut: OutcomeDenied, wantReason: "not during the freeze",
			wantEvents: []EventType{EventRequested, EventDecided}, wantAudit: "decided deny bob",
		},
		{
			name:    "timeout",
			timeout: 300 * time.Millisecond,
			end:     func(*testing.T, *call, context.CancelFunc) {},
			wantOut: OutcomeExpired, wantReason: "timeout",
			wantEvents: []EventType{EventRequested, EventExpired}, wantAudit: "expired  ",
		},
		{
			name:    "cancel",
			end:     func(_ *testing.T, _ *call, cancel context.CancelFunc) { cancel() },
			wantOut: OutcomeWithdrawn, wantErr: ErrWithdrawn, wantReason: "went away",
			wantEvents: []EventType{EventRequested, EventWithdrawn}, wantAudit: "withdrawn  ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				audit []string
			)
			b := newBroker(t, ns.Connect(t), Options{
				Instance: "outcome-" + tt.name,
				Config:   Config{Operator: true, Timeout: tt.timeout},
				OnEvent: func(ev Event, req Request) {
					mu.Lock()
					defer mu.Unlock()
					if ev.ID != req.ID {
						t.Errorf("hook: event for %s with request %s", ev.ID, req.ID)
					}
					audit = append(audit, fmt.Sprintf("%s %s %s", ev.Type, ev.Decision, ev.Approver))
				},
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			c := start(t, ctx, b, deployCall())
			tt.end(t, c, cancel)
			d, err := c.wait(t)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("error: got %v, want %v", err, tt.wantErr)
			}
			if d.Outcome != tt.wantOut {
				t.Errorf("outcome: got %q, want %q", d.Outcome, tt.wantOut)
			}
			if d.Approved() != (tt.wantOut == OutcomeApproved) {
				t.Errorf("approved: got %t, want %t", d.Approved(), tt.wantOut == OutcomeApproved)
			}
			if !strings.Contains(d.Reason, tt.wantReason) {
				t.Errorf("reason: got %q, want it to contain %q", d.Reason, tt.wantReason)
			}
			if d.Request.ID != c.req.ID {
				t.Errorf("decision for %s, want %s", d.Request.ID, c.req.ID)
			}
			fisktest.WaitFor(t, 10*time.Second, "the watcher to see the request end", func() bool {
				return len(seen.of(c.req.ID)) >= len(tt.wantEvents)
			})
			if got := seen.of(c.req.ID); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("watched events: got %v, want %v", got, tt.wantEvents)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"requested  ", tt.wantAudit}; !slices.Equal(audit, want) {
				t.Errorf("audit hook: got %q, want %q", audit, want)
			}
			if got := len(b.Pending()); got != 0 {
				t.Errorf("pending after the end: got %d, want 0", got)
			}
		})
	}
	if got := tp.count(KindEvent); got < 8 {
		t.Errorf("events seen: got %d, want at least 8", got)
	}
}

// TestRefusedAnswers sends answers the instance must refuse, and checks
// each is refused with its code, logged, and leaves the request as it was.
func TestRefusedAnswers(t *testing.T) {
	ns := natstest.Start(t)
	newTap(t, ns)
	op := ns.Connect(t)
	log, logs := logBuffer()

	answer := func(t *testing.T, req Request, approve bool, who Approver) (Reply, error) {
		t.Helper()
		return Answer(t.Context(), op, req, approve, who, "")
	}
	tests := []struct {
		name         string
		cfg          Config
		caller       Caller
		timeout      time.Duration
		act          func(t *testing.T, c *call) (Reply, error)
		want         Refusal
		wantPending  bool
		wantDecision Outcome
	}{
		{
			name: "replayed",
			act: func(t *testing.T, c *call) (Reply, error) {
				if _, err := answer(t, c.req, true, Approver{Name: "alice"}); err != nil {
					t.Fatal(err)
				}
				return answer(t, c.req, true, Approver{Name: "alice"})
			},
			want: RefusedReplayed, wantDecision: OutcomeApproved,
		},
		{
			name: "duplicate",
			act: func(t *testing.T, c *call) (Reply, error) {
				if _, err := answer(t, c.req, false, Approver{Name: "alice"}); err != nil {
					t.Fatal(err)
				}
				return answer(t, c.req, true, Approver{Name: "bob"})
			},
			want: RefusedDuplicate, wantDecision: OutcomeDenied,
		},
		{
			name: "wrong digest",
			act: func(t *testing.T, c *call) (Reply, error) {
				forged := c.req
				forged.Digest = digestOf(`{"env":"staging"}`)
				return answer(t, forged, true, Approver{Name: "alice"})
			},
			want: RefusedForged, wantPending: true,
		},
		{
			name:    "late: after expiry",
			timeout: 200 * time.Millisecond,
			act: func(t *testing.T, c *call) (Reply, error) {
				if d, _ := c.wait(t); d.Outcome != OutcomeExpired {
					t.Fatalf("outcome: got %q, want expired", d.Outcome)
				}
				return answer(t, c.req, true, Approver{Name: "alice"})
			},
			want: RefusedLate, wantDecision: OutcomeExpired,
		},
		{
			name: "unknown id",
			act: func(t *testing.T, c *call) (Reply, error) {
				unknown := c.req
				unknown.ID = "no-such-request"
				return answer(t, unknown, true, Approver{Name: "alice"})
			},
			want: RefusedUnknown, wantPending: true,
		},
		{
			name:   "self-approval by verified subject",
			caller: Caller{Subject: "alice@example.com", Roles: []string{"ops"}},
			act: func(t *testing.T, c *call) (Reply, error) {
				return answer(t, c.req, true, Approver{Name: "Alice@example.com"})
			},
			want: RefusedSelfApproval, wantPending: true,
		},
		{
			name:   "self-approval by claimed name",
			caller: Caller{Name: "ci-bot", Instance: "runner-1", Claimed: true},
			act: func(t *testing.T, c *call) (Reply, error) {
				return answer(t, c.req, true, Approver{Name: "ci-bot"})
			},
			want: RefusedSelfApproval, wantPending: true,
		},
		{
			name:   "self-approval by NATS user",
			caller: Caller{Name: "ci-bot", Claimed: true, NATSUser: "automation"},
			act: func(t *testing.T, c *call) (Reply, error) {
				return answer(t, c.req, true, Approver{Name: "alice@laptop", NATSUser: "automation"})
			},
			want: RefusedSelfApproval, wantPending: true,
		},
		{
			name:   "self-approval allowed when on",
			cfg:    Config{SelfApproval: true},
			caller: Caller{Subject: "alice@example.com"},
			act: func(t *testing.T, c *call) (Reply, error) {
				return answer(t, c.req, true, Approver{Name: "alice@example.com"})
			},
			wantDecision: OutcomeApproved,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Timeout = tt.timeout
			b := newBroker(t, ns.Connect(t), Options{Instance: fmt.Sprintf("r%d", i), Config: cfg, Logger: log})
			p := deployCall()
			if tt.caller.String() != (Caller{}).String() {
				p.Caller = tt.caller
			}
			c := start(t, t.Context(), b, p)
			reply, err := tt.act(t, c)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want the answer accepted", err)
			case tt.want != "" && (!errors.Is(err, ErrRefused) || reply.Refusal != tt.want || reply.Accepted):
				t.Fatalf("got reply %+v, error %v, want refused as %s", reply, err, tt.want)
			case tt.want != "" && reply.Reason == "":
				t.Error("reason: got none, want one")
			case tt.want != "" && !strings.Contains(logs.String(), `"refusal":"`+string(tt.want)+`"`):
				t.Errorf("logs: got\n%s\nwant a refusal %s", logs.String(), tt.want)
			}
			if tt.wantPending {
				if !c.running() {
					t.Fatal("the request ended, want it still waiting")
				}
				// A refused answer leaves the request to a proper one.
				if _, err := answer(t, c.req, true, Approver{Name: "carol"}); err != nil {
					t.Fatalf("a proper answer after the refusal: %v", err)
				}
				tt.wantDecision = OutcomeApproved
			}
			d, _ := c.wait(t)
			if d.Outcome != tt.wantDecision {
				t.Errorf("outcome: got %q, want %q", d.Outcome, tt.wantDecision)
			}
		})
	}

	t.Run("late: after withdrawal", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "withdrawn", Logger: log})
		ctx, cancel := context.WithCancel(t.Context())
		c := start(t, ctx, b, deployCall())
		cancel()
		if _, err := c.wait(t); !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("got %v, want withdrawn", err)
		}
		reply, err := answer(t, c.req, true, Approver{Name: "alice"})
		if !errors.Is(err, ErrRefused) || reply.Refusal != RefusedLate || !strings.Contains(reply.Reason, "withdrawn") {
			t.Errorf("got %+v, %v, want refused as late, naming the withdrawal", reply, err)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: malformedInstance, Logger: log})
		c := start(t, t.Context(), b, deployCall())
		for _, body := range []string{"not json", `{"id":"` + c.req.ID + `","decision":"approve"}`, `{"id":"` + c.req.ID + `","arguments_digest":"` + c.req.Digest + `","decision":"yes","approver":"alice"}`} {
			m, err := op.Request(AnswerSubject("demo", malformedInstance), []byte(body), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var reply Reply
			if err := decode(KindAnswerReply, m.Data, &reply); err != nil {
				t.Fatalf("reply to %q: %v", body, err)
			}
			if reply.Accepted || reply.Refusal != RefusedInvalid {
				t.Errorf("reply to %q: got %+v, want refused as invalid", body, reply)
			}
		}
		if !c.running() {
			t.Error("request ended, want it still waiting")
		}
	})
}

// TestPermissions runs a server whose users are an agent, an operator and
// an automation account: the operator answers, the automation account,
// without publish permission on the answer subjects, cannot.
func TestPermissions(t *testing.T) {
	ns := natstest.StartFromConfig(t, `
authorization {
  users = [
    {user: agent, password: agent, permissions: {
      publish: ["choria.fisk-ai.approval.*.event.*"]
      subscribe: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list", "choria.fisk-ai.approval.*.answer.*"]
      allow_responses: true
    }}
    {user: alice, password: alice, permissions: {
      publish: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list", "choria.fisk-ai.approval.*.answer.>"]
      subscribe: ["_INBOX.>", "choria.fisk-ai.approval.*.event.>"]
    }}
    {user: ci, password: ci, permissions: {
      publish: ["choria.fisk-ai.approval.list", "choria.fisk-ai.approval.*.list"]
      subscribe: ["_INBOX.>", "choria.fisk-ai.approval.*.event.>"]
    }}
    {user: tap, password: tap}
  ]
}
`)
	newTap(t, ns, natsUser("tap"))
	agent := ns.Connect(t, natsUser("agent"))
	b := newBroker(t, agent, Options{})
	c := start(t, t.Context(), b, Pending{Tool: "deploy", Command: "app deploy", Digest: digestOf("{}"), Caller: Caller{Name: "ci", Claimed: true, NATSUser: "ci"}})
	alice := ns.Connect(t, natsUser("alice"))
	ci := ns.Connect(t, natsUser("ci"))

	// Both may list: the automation account sees what waits.
	for name, nc := range map[string]*natsConn{"alice": alice, "ci": ci} {
		req, err := Find(t.Context(), nc, "demo", c.req.ID, 2*time.Second)
		if err != nil || req.Digest != c.req.Digest {
			t.Fatalf("%s lists: got %+v, %v, want the request", name, req, err)
		}
	}
	// ci's answer never reaches the agent, whatever it claims to be.
	_, err := Answer(t.Context(), ci, c.req, true, Approver{Name: "alice"}, "")
	if !errors.Is(err, ErrNotPermitted) || !strings.Contains(err.Error(), AnswerSubject("demo", "i1")) {
		t.Fatalf("ci answers: got %v, want not permitted, naming the subject", err)
	}
	if !c.running() {
		t.Fatal("the request ended on ci's answer, want it still waiting")
	}
	if _, err := Answer(t.Context(), alice, c.req, true, Approver{Name: "alice", NATSUser: ConnUser(alice)}, ""); err != nil {
		t.Fatalf("alice answers: %v", err)
	}
	d, err := c.wait(t)
	if err != nil || !d.Approved() || d.Approver != "alice" || d.NATSUser != "alice" {
		t.Errorf("got %+v, %v, want approved by alice (NATS user alice)", d, err)
	}

	t.Run("a broker without subscribe permission fails to start", func(t *testing.T) {
		_, err := NewBroker(ci, Options{Identity: "demo", Instance: "i9", Logger: discard})
		if !errors.Is(err, ErrNotPermitted) {
			t.Errorf("got %v, want not permitted", err)
		}
	})
}

// TestManyPending holds 50 requests at once: each is listed, and each is
// decided as soon as it is answered, in any order, while the others wait.
func TestManyPending(t *testing.T) {
	const n = 50
	ns := natstest.Start(t)
	newTap(t, ns)
	b := newBroker(t, ns.Connect(t), Options{})
	op := ns.Connect(t)
	calls := make([]*call, n)
	for i := range calls {
		p := deployCall()
		p.Command = fmt.Sprintf("app deploy --env prod --shard %d", i)
		p.Digest = digestOf(fmt.Sprintf(`{"shard":%d}`, i))
		calls[i] = start(t, t.Context(), b, p)
	}
	reqs, err := List(t.Context(), op, "demo", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(reqs); got != n {
		t.Fatalf("listed: got %d, want %d", got, n)
	}
	// The newest first: an answer waits on no other request.
	last := calls[n-1]
	if _, err := Answer(t.Context(), op, last.req, true, Approver{Name: "alice"}, ""); err != nil {
		t.Fatal(err)
	}
	if d, err := last.wait(t); err != nil || !d.Approved() {
		t.Fatalf("the last request: got %+v, %v, want approved", d, err)
	}
	for _, c := range calls[:n-1] {
		if !c.running() {
			t.Fatalf("request %s ended, want the others still waiting", c.req.ID)
		}
	}
	var wg sync.WaitGroup
	for i, c := range calls[:n-1] {
		wg.Go(func() {
			if _, err := Answer(t.Context(), op, c.req, i%2 == 0, Approver{Name: "alice"}, ""); err != nil {
				t.Errorf("answering %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, c := range calls[:n-1] {
		d, err := c.wait(t)
		if err != nil || d.Approved() != (i%2 == 0) {
			t.Errorf("request %d: got %+v, %v, want approved %t", i, d.Outcome, err, i%2 == 0)
		}
	}
}

func TestMaxPending(t *testing.T) {
	ns := natstest.Start(t)
	b := newBroker(t, ns.Connect(t), Options{MaxPending: 2})
	start(t, t.Context(), b, deployCall())
	start(t, t.Context(), b, deployCall())
	_, err := b.Request(t.Context(), deployCall())
	if !errors.Is(err, ErrTooManyPending) || !strings.Contains(err.Error(), "2 requests") {
		t.Errorf("got %v, want too many pending, naming the limit", err)
	}
}

// TestClose withdraws what waits, and an instance that stopped is gone for
// answers.
func TestClose(t *testing.T) {
	ns := natstest.Start(t)
	tp := newTap(t, ns)
	seen := watch(t, ns.Connect(t), "", tp)
	b := newBroker(t, ns.Connect(t), Options{})
	c := start(t, t.Context(), b, deployCall())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	d, err := c.wait(t)
	if !errors.Is(err, ErrClosed) || d.Outcome != OutcomeWithdrawn {
		t.Errorf("got %q, %v, want withdrawn, closed", d.Outcome, err)
	}
	fisktest.WaitFor(t, 10*time.Second, "the withdrawn event", func() bool {
		return slices.Equal(seen.of(c.req.ID), []EventType{EventRequested, EventWithdrawn})
	})
	if _, err := b.Request(t.Context(), deployCall()); !errors.Is(err, ErrClosed) {
		t.Errorf("requesting after close: got %v, want closed", err)
	}
}

// TestAnswerToAStoppedInstance answers a request whose instance stopped:
// nothing takes answers on its subject any more. No tap runs here: it
// would take every subject.
func TestAnswerToAStoppedInstance(t *testing.T) {
	ns := natstest.Start(t)
	b := newBroker(t, ns.Connect(t), Options{})
	c := start(t, t.Context(), b, deployCall())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Answer(t.Context(), ns.Connect(t), c.req, true, Approver{Name: "alice"}, ""); !errors.Is(err, ErrInstanceGone) {
		t.Errorf("got %v, want instance gone", err)
	}
	began := time.Now()
	if reqs, err := List(t.Context(), ns.Connect(t), "", 5*time.Second); err != nil || len(reqs) != 0 {
		t.Errorf("listing with no instance: got %v, %v, want none", reqs, err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("listing with no instance took %s, want no wait for replies nobody sends", took)
	}
}

// TestListSplitsLargeLists fills a broker with requests whose command
// lines do not fit one message of a server with a small payload limit: the
// list arrives in several replies, and List gathers them all.
func TestListSplitsLargeLists(t *testing.T) {
	ns := natstest.StartWithOptions(t, serverOptions{MaxPayload: 64 << 10})
	tp := newTap(t, ns)
	b := newBroker(t, ns.Connect(t), Options{})
	const n = 12
	for i := range n {
		p := deployCall()
		p.Command = fmt.Sprintf("app deploy %d %s", i, strings.Repeat("x", MaxCommand-32))
		start(t, t.Context(), b, p)
	}
	replies := tp.count(KindListReply)
	reqs, err := List(t.Context(), ns.Connect(t), "demo", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(reqs); got != n {
		t.Errorf("listed: got %d, want %d", got, n)
	}
	if got := tp.count(KindListReply) - replies; got < 3 {
		t.Errorf("list replies: got %d, want at least 3 for %d requests of 16 KiB under a 64 KiB limit", got, n)
	}
}

func TestInvalidPending(t *testing.T) {
	ns := natstest.Start(t)
	b := newBroker(t, ns.Connect(t), Options{})
	tests := []struct {
		name   string
		change func(*Pending)
	}{
		{"no tool", func(p *Pending) { p.Tool = "" }},
		{"a digest of another form", func(p *Pending) { p.Digest = "md5:abc" }},
		{"an upper-case digest", func(p *Pending) { p.Digest = strings.ToUpper(p.Digest) }},
		{"a command line too long to show", func(p *Pending) { p.Command = strings.Repeat("x", MaxCommand+1) }},
		{"a caller label too long", func(p *Pending) { p.Caller.Name = strings.Repeat("x", 257) }},
		{"too many roles", func(p *Pending) { p.Caller.Roles = make([]string, 65) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := deployCall()
			tt.change(&p)
			if _, err := b.Request(t.Context(), p); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("got %v, want invalid request", err)
			}
			if got := len(b.Pending()); got != 0 {
				t.Errorf("pending: got %d, want 0", got)
			}
		})
	}
}

func TestNewBrokerRefuses(t *testing.T) {
	ns := natstest.Start(t)
	nc := ns.Connect(t)
	tests := []struct {
		name string
		opts Options
	}{
		{"no identity", Options{Instance: "i1"}},
		{"an identity with a dot", Options{Identity: "a.b", Instance: "i1"}},
		{"an instance with a wildcard", Options{Identity: "demo", Instance: "*"}},
		{"a negative timeout", Options{Identity: "demo", Instance: "i1", Config: Config{Timeout: -time.Second}}},
		{"a negative max pending", Options{Identity: "demo", Instance: "i1", MaxPending: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewBroker(nc, tt.opts); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("got %v, want invalid config", err)
			}
		})
	}
}

// TestRequestOfAGoneCaller asks for a caller already gone: nothing is
// published, and the error says withdrawn.
func TestRequestOfAGoneCaller(t *testing.T) {
	ns := natstest.Start(t)
	tp := newTap(t, ns)
	b := newBroker(t, ns.Connect(t), Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Request(ctx, deployCall()); !errors.Is(err, ErrWithdrawn) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want withdrawn, canceled", err)
	}
	if got := tp.count(KindEvent); got != 0 {
		t.Errorf("events: got %d, want none", got)
	}
}
