package approval

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

func userKey(tb testing.TB) (nkeys.KeyPair, string) {
	tb.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		tb.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return kp, pub
}

// TestSignedAnswers: an instance listing its approvers' nkeys takes only
// answers signed by one of them, names the approver by the key whatever
// the answer claims, and refuses unsigned, unlisted, tampered and
// replayed-elsewhere signatures, the request still waiting each time.
func TestSignedAnswers(t *testing.T) {
	ns := natstest.Start(t)
	op := ns.Connect(t)
	log, logs := logBuffer()
	alice, alicePub := userKey(t)
	bob, bobPub := userKey(t)
	mallory, _ := userKey(t)
	cfg := Config{Signers: map[string]Signer{alicePub: {Name: "alice"}, bobPub: {Name: "bob"}}}

	answer := func(req Request, approve bool, who Approver) (Reply, error) {
		return Answer(t.Context(), op, req, approve, who, "")
	}
	refused := func(t *testing.T, c *call, reply Reply, err error, want Refusal) {
		t.Helper()
		if !errors.Is(err, ErrRefused) || reply.Refusal != want || reply.Accepted {
			t.Fatalf("got %+v, %v, want refused as %s", reply, err, want)
		}
		if !strings.Contains(logs.String(), `"refusal":"`+string(want)+`"`) {
			t.Errorf("logs: got\n%s\nwant the refusal %s", logs.String(), want)
		}
		if !c.running() {
			t.Fatal("the request ended, want it still waiting")
		}
	}

	t.Run("a listed signer decides, under the key's name", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "s1", Config: cfg, Logger: log})
		c := start(t, t.Context(), b, deployCall())
		// Bob's key, claiming to be alice: bob answered.
		if _, err := answer(c.req, true, Approver{Name: "alice", Signer: bob}); err != nil {
			t.Fatalf("bob's signed answer: %v", err)
		}
		if d, _ := c.wait(t); d.Outcome != OutcomeApproved || d.Approver != "bob" {
			t.Errorf("got %+v, want approved by bob, the key's name", d)
		}
	})

	t.Run("unsigned", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "s2", Config: cfg, Logger: log})
		c := start(t, t.Context(), b, deployCall())
		reply, err := answer(c.req, true, Approver{Name: "alice"})
		refused(t, c, reply, err, RefusedUnsigned)
	})

	t.Run("unlisted key", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "s3", Config: cfg, Logger: log})
		c := start(t, t.Context(), b, deployCall())
		reply, err := answer(c.req, true, Approver{Name: "alice", Signer: mallory})
		refused(t, c, reply, err, RefusedUnknownSigner)
	})

	t.Run("a signature moved to another request or decision", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "s4", Config: cfg, Logger: log})
		first := start(t, t.Context(), b, deployCall())
		second := start(t, t.Context(), b, deployCall())
		// Alice's valid denial of the first, replayed as the second's.
		a := AnswerMessage{ID: first.req.ID, Digest: first.req.Digest, Decision: DecisionDeny, Approver: "alice"}
		if err := sign(alice, "demo", "s4", &a); err != nil {
			t.Fatal(err)
		}
		send := func(a AnswerMessage) Reply {
			t.Helper()
			data, _ := json.Marshal(a)
			m, err := op.Request(AnswerSubject("demo", "s4"), data, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var reply Reply
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				t.Fatal(err)
			}
			return reply
		}
		moved := a
		moved.ID = second.req.ID
		if reply := send(moved); reply.Refusal != RefusedBadSignature {
			t.Errorf("a signature of another request: got %+v, want bad_signature", reply)
		}
		flipped := a
		flipped.Decision = DecisionApprove
		if reply := send(flipped); reply.Refusal != RefusedBadSignature {
			t.Errorf("the decision flipped under the signature: got %+v, want bad_signature", reply)
		}
		if !first.running() || !second.running() {
			t.Fatal("a request ended, want both waiting")
		}
		if reply := send(a); !reply.Accepted {
			t.Fatalf("the signed answer itself: got %+v, want it accepted", reply)
		}
		if d, _ := first.wait(t); d.Outcome != OutcomeDenied || d.Approver != "alice" {
			t.Errorf("got %+v, want denied by alice", d)
		}
	})

	t.Run("four eyes against the verified approver", func(t *testing.T) {
		b := newBroker(t, ns.Connect(t), Options{Instance: "s5", Config: cfg, Logger: log})
		p := deployCall()
		p.Caller = Caller{Subject: "alice", Roles: []string{"ops"}}
		c := start(t, t.Context(), b, p)
		// Alice's own key, claiming to be carol: still alice.
		reply, err := answer(c.req, true, Approver{Name: "carol", Signer: alice})
		refused(t, c, reply, err, RefusedSelfApproval)
		if _, err := answer(c.req, true, Approver{Signer: bob, Name: "bob"}); err != nil {
			t.Fatalf("bob's answer: %v", err)
		}
		if d, _ := c.wait(t); d.Outcome != OutcomeApproved || d.Approver != "bob" {
			t.Errorf("got %+v, want approved by bob", d)
		}
	})

	t.Run("a delegate's key vouches for the name it signs", func(t *testing.T) {
		web, webPub := userKey(t)
		dcfg := Config{Signers: map[string]Signer{alicePub: {Name: "alice"}, webPub: {Name: "web", Delegate: true}}}
		b := newBroker(t, ns.Connect(t), Options{Instance: "s6", Config: dcfg, Logger: log})
		p := deployCall()
		p.Caller = Caller{Subject: "sub-42"}
		c := start(t, t.Context(), b, p)
		// The page signed in the caller herself: four eyes, by the
		// vouched name.
		reply, err := answer(c.req, true, Approver{Name: "sub-42", Signer: web})
		refused(t, c, reply, err, RefusedSelfApproval)
		if _, err := answer(c.req, true, Approver{Name: "sub-7", Signer: web}); err != nil {
			t.Fatalf("the page's answer for sub-7: %v", err)
		}
		if d, _ := c.wait(t); d.Outcome != OutcomeApproved || d.Approver != "sub-7 via web" {
			t.Errorf("got %+v, want approved by sub-7 via web", d)
		}
	})

	t.Run("seeds", func(t *testing.T) {
		seed, _ := alice.Seed()
		kp, err := ParseSigner(seed)
		if pub, _ := kp.PublicKey(); err != nil || pub != alicePub {
			t.Errorf("ParseSigner(alice's seed): got %v, want alice's key", err)
		}
		acct, _ := nkeys.CreateAccount()
		aseed, _ := acct.Seed()
		if _, err := ParseSigner(aseed); err == nil {
			t.Error("ParseSigner(an account seed): got no error, want a user seed asked for")
		}
	})
}
