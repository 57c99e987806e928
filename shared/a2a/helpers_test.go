package a2a

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Participants shared by the tests: alice names an instance, bob does not.
var (
	alice = Participant{Name: "alice", Instance: "alice-1"}
	bob   = Participant{Name: "bob"}
)

// fresh returns a new zero value of m's message type.
func fresh[M Message](m M) M {
	return reflect.New(reflect.TypeOf(m).Elem()).Interface().(M)
}

// mustEncode encodes m or fails the test.
func mustEncode(tb testing.TB, m Message) []byte {
	tb.Helper()
	data, err := Encode(m)
	if err != nil {
		tb.Fatalf("Encode(%T): %v", m, err)
	}
	return data
}

// roundTrip encodes m and decodes the result into a fresh value of its
// type, failing the test if either step fails.
func roundTrip[M Message](tb testing.TB, m M) (M, []byte) {
	tb.Helper()
	data := mustEncode(tb, m)
	got := fresh(m)
	if err := Decode(data, got); err != nil {
		tb.Fatalf("Decode(%T): %v\n%s", m, err, data)
	}
	return got, data
}

// assertSameMessage compares two messages field by field, their times by
// [time.Time.Equal] (a decoded time carries no monotonic reading and may
// carry another *time.Location).
func assertSameMessage(tb testing.TB, got, want Message) {
	tb.Helper()
	gh, wh := got.header(), want.header()
	if !gh.Time.Equal(wh.Time) {
		tb.Errorf("time: got %v, want %v", gh.Time, wh.Time)
	}
	gt, wt := gh.Time, wh.Time
	gh.Time, wh.Time = time.Time{}, time.Time{}
	defer func() { gh.Time, wh.Time = gt, wt }()
	if !reflect.DeepEqual(got, want) {
		tb.Errorf("message differs:\n got %s\nwant %s", dump(got), dump(want))
	}
}

// dump renders v for a failure message; pointers are followed, unlike %+v.
func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// asMap parses an encoded message into a generic object so a test can
// damage it.
func asMap(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatalf("parsing %s: %v", data, err)
	}
	return m
}

// mutated encodes m, applies f to its generic form and returns the JSON.
func mutated(tb testing.TB, m Message, f func(map[string]any)) []byte {
	tb.Helper()
	obj := asMap(tb, mustEncode(tb, m))
	f(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		tb.Fatalf("re-marshalling: %v", err)
	}
	return b
}

// obj returns the object at key in m, for mutating nested objects.
func obj(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

// spliceBefore inserts extra just before the final '}' of an encoded
// object: how a test adds a repeated key that a map cannot hold.
func spliceBefore(tb testing.TB, data []byte, extra string) []byte {
	tb.Helper()
	s := string(data)
	if !strings.HasSuffix(s, "}") {
		tb.Fatalf("not an object: %s", data)
	}
	return []byte(s[:len(s)-1] + extra + "}")
}

// stampedRequest returns a stamped tool request from alice to bob, the
// request the reply fixtures answer.
func stampedRequest() *ToolRequest {
	return NewToolRequest(alice, bob.Name, "disk_usage", []byte(`{"path":"/var"}`))
}

// sampleSchema is a tool input schema like the ones fisk applications
// produce.
const sampleSchema = `{"type":"object","properties":{"path":{"type":"string","description":"Directory to inspect"},"depth":{"type":"integer"}},"required":["path"]}`

// sampleCard is a small valid agent card.
func sampleCard() AgentCard {
	return AgentCard{
		Name:        "bob",
		Version:     "1.2.3",
		Description: "Bob's operations agent",
		Protocols:   []string{ProtocolDiscoveryRequest, ProtocolToolRequest},
		Tools: []ToolDescriptor{
			{Name: "disk_usage", Description: "Reports disk usage under a path.", InputSchema: json.RawMessage(sampleSchema)},
			{Name: "uptime", Description: "Reports the host's uptime.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		},
	}
}

// assertErr checks err wraps want and, when substr is set, names the cause
// with substr.
func assertErr(tb testing.TB, err, want error, substr string) {
	tb.Helper()
	if !errors.Is(err, want) {
		tb.Errorf("error: got %v, want %v", err, want)
		return
	}
	if substr != "" && !strings.Contains(err.Error(), substr) {
		tb.Errorf("error: got %q, want it to contain %q", err, substr)
	}
}
