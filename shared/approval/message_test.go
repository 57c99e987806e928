package approval

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestIsSelf(t *testing.T) {
	tests := []struct {
		name   string
		caller Caller
		answer AnswerMessage
		want   bool
	}{
		{"verified subject", Caller{Subject: "alice"}, AnswerMessage{Approver: "alice"}, true},
		{"subject in another case", Caller{Subject: "Alice"}, AnswerMessage{Approver: "alice"}, true},
		{"claimed name", Caller{Name: "ci-bot", Claimed: true}, AnswerMessage{Approver: "ci-bot"}, true},
		{"NATS user", Caller{Name: "ci-bot", NATSUser: "auto"}, AnswerMessage{Approver: "alice", NATSUser: "auto"}, true},
		{"approver named as the caller's NATS user", Caller{NATSUser: "auto"}, AnswerMessage{Approver: "auto"}, true},
		{"someone else", Caller{Subject: "alice", Name: "x", NATSUser: "auto"}, AnswerMessage{Approver: "bob", NATSUser: "bob"}, false},
		{"an unknown caller", Caller{}, AnswerMessage{Approver: "bob"}, false},
		{"empty names never match", Caller{Subject: "alice"}, AnswerMessage{Approver: "bob", NATSUser: ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isSelf(tt.caller, tt.answer); got != tt.want {
				t.Errorf("got %t, want %t", got, tt.want)
			}
		})
	}
}

func TestHistoryForgetsTheOldest(t *testing.T) {
	h := newHistory(3)
	for i := range 5 {
		h.add(fmt.Sprint(i), ended{outcome: OutcomeExpired})
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, got := h.get(fmt.Sprint(i)); got != want {
			t.Errorf("remembers %d: got %t, want %t", i, got, want)
		}
	}
	if got, want := len(h.byID), 3; got != want {
		t.Errorf("entries: got %d, want %d", got, want)
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},
		{"日本", 4, "日"},
	}
	for _, tt := range tests {
		if got := cut(tt.s, tt.n); got != tt.want {
			t.Errorf("cut(%q, %d): got %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// TestSchemas checks the messages the package builds validate, and that
// the schemas refuse what a peer must not send.
func TestSchemas(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	req := Request{ID: "r1", Identity: "demo", Instance: "i1", Tool: "deploy", Command: "app deploy", Digest: digestOf("{}"),
		Caller: Caller{Name: "ci", Claimed: true}, Created: now, Expires: now.Add(2 * time.Minute)}
	tests := []struct {
		name  string
		kind  string
		msg   any
		valid bool
	}{
		{"request", KindRequest, req, true},
		{"request without a caller's fields", KindRequest, func() Request { r := req; r.Caller = Caller{}; return r }(), true},
		{"request with an instance holding a dot", KindRequest, func() Request { r := req; r.Instance = "a.b"; return r }(), false},
		{"request with no tool", KindRequest, func() Request { r := req; r.Tool = ""; return r }(), false},
		{"requested event", KindEvent, Event{Type: EventRequested, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Request: &req}, true},
		{"requested event without its request", KindEvent, Event{Type: EventRequested, ID: "r1", Identity: "demo", Instance: "i1", Time: now}, false},
		{"decided event", KindEvent, Event{Type: EventDecided, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Decision: DecisionApprove, Approver: "alice"}, true},
		{"decided event without an approver", KindEvent, Event{Type: EventDecided, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Decision: DecisionApprove}, false},
		{"expired event", KindEvent, Event{Type: EventExpired, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Reason: "timeout"}, true},
		{"expired event with an approver", KindEvent, Event{Type: EventExpired, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Approver: "alice"}, false},
		{"withdrawn event carrying the request", KindEvent, Event{Type: EventWithdrawn, ID: "r1", Identity: "demo", Instance: "i1", Time: now, Request: &req}, false},
		{"answer", KindAnswer, AnswerMessage{ID: "r1", Digest: req.Digest, Decision: DecisionDeny, Approver: "alice", Reason: "no"}, true},
		{"answer without an approver", KindAnswer, AnswerMessage{ID: "r1", Digest: req.Digest, Decision: DecisionDeny}, false},
		{"answer with a long reason", KindAnswer, AnswerMessage{ID: "r1", Digest: req.Digest, Decision: DecisionDeny, Approver: "a", Reason: strings.Repeat("x", 1025)}, false},
		{"accepted reply", KindAnswerReply, Reply{ID: "r1", Accepted: true}, true},
		{"refused reply", KindAnswerReply, Reply{ID: "r1", Refusal: RefusedForged, Reason: "digest"}, true},
		{"refused reply without a reason", KindAnswerReply, Reply{ID: "r1", Refusal: RefusedForged}, false},
		{"accepted reply with a refusal", KindAnswerReply, Reply{Accepted: true, Refusal: RefusedForged, Reason: "x"}, false},
		{"list reply", KindListReply, ListReply{Identity: "demo", Instance: "i1", Pending: []Request{req}}, true},
		{"empty list reply", KindListReply, ListReply{Identity: "demo", Instance: "i1", Pending: []Request{}}, true},
		{"list reply with a null list", KindListReply, ListReply{Identity: "demo", Instance: "i1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := encode(tt.kind, tt.msg)
			if got := err == nil; got != tt.valid {
				t.Errorf("valid: got %t (%v), want %t", got, err, tt.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("error: got %v, want it to wrap ErrInvalidMessage", err)
			}
		})
	}
	t.Run("unknown keys", func(t *testing.T) {
		for _, kind := range []string{KindRequest, KindAnswer, KindAnswerReply, KindListReply, KindEvent} {
			if err := Validate(kind, []byte(`{"surprise":true}`)); !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("%s: got %v, want invalid", kind, err)
			}
		}
	})
	t.Run("too large", func(t *testing.T) {
		if err := Validate(KindAnswer, make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("got %v, want invalid", err)
		}
	})
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		wantErr     bool
		wantTimeout time.Duration
	}{
		{"zero is off with the default timeout", Config{}, false, DefaultTimeout},
		{"a timeout of its own", Config{Operator: true, Timeout: 30 * time.Second}, false, 30 * time.Second},
		{"a negative timeout", Config{Operator: true, Timeout: -time.Second}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := err != nil; got != tt.wantErr {
				t.Fatalf("error: got %v, want error %t", err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "approvals.timeout") {
					t.Errorf("error: got %v, want invalid config naming approvals.timeout", err)
				}
				return
			}
			if got := tt.cfg.withDefaults().Timeout; got != tt.wantTimeout {
				t.Errorf("timeout: got %s, want %s", got, tt.wantTimeout)
			}
		})
	}
}
