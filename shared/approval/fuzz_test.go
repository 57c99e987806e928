package approval

import (
	"testing"
	"time"
)

// FuzzAnswer feeds arbitrary bytes to the answer path of a broker waiting
// on one request: whatever arrives, the reply is schema-valid, and only a
// valid answer for that request's id and digest, from someone other than
// its caller, decides it.
func FuzzAnswer(f *testing.F) {
	digest := digestOf(`{"env":"prod"}`)
	for _, seed := range []string{
		`{"id":"req1","arguments_digest":"` + digest + `","decision":"approve","approver":"bob"}`,
		`{"id":"req1","arguments_digest":"` + digest + `","decision":"deny","approver":"bob","reason":"no"}`,
		`{"id":"req1","arguments_digest":"` + digest + `","decision":"approve","approver":"alice"}`,
		`{"id":"req1","arguments_digest":"` + digestOf("{}") + `","decision":"approve","approver":"bob"}`,
		`{"id":"req2","arguments_digest":"` + digest + `","decision":"approve","approver":"bob","nats_user":"x"}`,
		`{"id":"req1","arguments_digest":"` + digest + `","decision":"approve","approver":"bob","extra":1}`,
		`{"id":"a.b","decision":"maybe"}`,
		`{"id":"` + string([]byte{0xff, 0xfe}) + `"}`,
		`[]`, `null`, ``, `{`, `"req1"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &Broker{identity: "demo", instance: "i1", log: discard, pending: map[string]*waiter{}, finished: newHistory(4)}
		w := &waiter{
			req:      Request{ID: "req1", Identity: "demo", Instance: "i1", Digest: digest, Caller: Caller{Subject: "alice"}},
			deadline: time.Now().Add(time.Hour),
			result:   make(chan result, 1),
		}
		b.pending["req1"] = w
		reply, a := b.answer(data)
		if _, err := encode(KindAnswerReply, reply); err != nil {
			t.Fatalf("reply to %q is not schema-valid: %v (%+v)", data, err, reply)
		}
		if !reply.Accepted {
			if _, ok := b.pending["req1"]; !ok {
				t.Fatalf("refused answer %q ended the request", data)
			}
			return
		}
		if err := Validate(KindAnswer, data); err != nil {
			t.Fatalf("accepted an invalid answer %q: %v", data, err)
		}
		if a.ID != "req1" || a.Digest != digest || isSelf(w.req.Caller, a) {
			t.Fatalf("accepted %+v, want only answers for req1's digest from another approver", a)
		}
		res := <-w.result
		if want := a.Decision == DecisionApprove; res.d.Approved() != want {
			t.Fatalf("decision %q gave outcome %q", a.Decision, res.d.Outcome)
		}
		if again, _ := b.answer(data); again.Accepted || again.Refusal != RefusedReplayed {
			t.Fatalf("the same answer again: got %+v, want refused as replayed", again)
		}
	})
}
