package a2a

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestHeaderOnlyTakesCommonForms checks the fast path takes the headers
// fiskfleet and Fisk AI's v1 agents send, so discovery does not fall back
// to the schema validator in the ordinary case.
func TestHeaderOnlyTakesCommonForms(t *testing.T) {
	ours := mustEncode(t, NewDiscoveryRequest(alice, "bob"))
	minimal := `{"protocol":"` + ProtocolDiscoveryRequest + `","id":"a","request":"a","conversation":"a","sequence":0,"time":"2026-12-31T23:04:05Z","sender":{"name":"x"}}`
	tests := []struct {
		name, data string
		want       bool
	}{
		{"ours", string(ours), true},
		{"v1 form", `{"protocol":"` + ProtocolDiscoveryRequest + `",` + v1Header + `}`, true},
		{"offset zone", strings.Replace(minimal, `05Z"`, `05+02:00"`, 1), true},
		{"no recipient", minimal, true},
		// Valid, but left to the schema: the fast path is a strict subset.
		{"lower-case t", strings.Replace(minimal, "31T23", "31t23", 1), false},
		{"non-ASCII id", `{"protocol":"` + ProtocolDiscoveryRequest + `","id":"é","request":"a","conversation":"a","sequence":0,"time":"2026-01-02T03:04:05Z","sender":{"name":"x"}}`, false},
		// Invalid.
		{"another protocol", strings.Replace(string(ours), ProtocolDiscoveryRequest, ProtocolToolRequest, 1), false},
		{"extra key", strings.Replace(string(ours), `{`, `{"name":"x",`, 1), false},
		{"missing sender", strings.Replace(minimal, `,"sender":{"name":"x"}`, ``, 1), false},
		{"hour 24", strings.Replace(minimal, "23:04:05", "24:04:05", 1), false},
		{"February 30", strings.Replace(minimal, "12-31", "02-30", 1), false},
		{"leap second", strings.Replace(minimal, "23:04:05", "23:59:60", 1), false},
		{"sequence 1.0", strings.Replace(string(ours), `"sequence":0`, `"sequence":1.0`, 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := parse([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			var h Header
			if got := headerOnly(doc.(map[string]any), ProtocolDiscoveryRequest, &h); got != tt.want {
				t.Errorf("headerOnly(%s): got %v, want %v", tt.data, got, tt.want)
			}
		})
	}
}

// FuzzHeaderOnly holds the fast path to the schema: whatever headerOnly
// accepts, the schema and json.Unmarshal accept too, decoding the same
// header. (What it refuses goes to the schema anyway.)
func FuzzHeaderOnly(f *testing.F) {
	addSeeds(f, nil,
		NewDiscoveryRequest(alice, "bob"),
		withOptionalHeader(NewDiscoveryRequest(bob, "alice")),
		func() Message { m := &DiscoveryRequest{}; stampRequest(m, bob, nil); return m }(),
	)
	addHostileSeeds(f, noPrefix)
	f.Add([]byte(`{"protocol":"` + ProtocolDiscoveryRequest + `",` + v1Header + `}`))
	v := mustValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := parse(data)
		if err != nil {
			return
		}
		obj, ok := doc.(map[string]any)
		if !ok {
			return
		}
		for _, c := range []struct {
			protocol string
			schema   *jsonschema.Schema
		}{
			{ProtocolDiscoveryRequest, v.byProtocol[ProtocolDiscoveryRequest]},
			{ProtocolDiscoveryReply, v.header},
		} {
			var fast Header
			if !headerOnly(obj, c.protocol, &fast) {
				continue
			}
			var full Header
			if err := decodeAs(data, &full, c.protocol, c.schema); err != nil {
				t.Fatalf("headerOnly accepted %q as %s, which the schema path refuses: %v", data, c.protocol, err)
			}
			if !fast.Time.Equal(full.Time) {
				t.Fatalf("time: got %v, want %v", fast.Time, full.Time)
			}
			fast.Time, full.Time = time.Time{}, time.Time{}
			if !reflect.DeepEqual(fast, full) {
				t.Fatalf("headerOnly decoded %q as %+v, the schema path as %+v", data, fast, full)
			}
		}
	})
}

// TestAppendDiscoveryRequest holds the direct encoding of discovery
// requests to json.Marshal's bytes and to the schema, and checks it leaves
// requests it cannot encode directly to the full path.
func TestAppendDiscoveryRequest(t *testing.T) {
	withParent := NewDiscoveryRequest(alice, "bob")
	withParent.Parent = "p-1"
	oddID := NewDiscoveryRequest(alice, "bob")
	oddID.ID = "id-with-dash"
	tests := []struct {
		name   string
		req    *DiscoveryRequest
		direct bool
	}{
		{"with instance", NewDiscoveryRequest(alice, "bob"), true},
		{"without instance", NewDiscoveryRequest(bob, "alice"), true},
		{"without recipient", func() *DiscoveryRequest { m := &DiscoveryRequest{}; stampRequest(m, bob, nil); return m }(), true},
		{"with parent", withParent, false},
		{"id with a dash", oddID, false},
		{"must_understand", withOptionalHeader(NewDiscoveryRequest(alice, "bob")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := appendDiscoveryRequest(nil, tt.req)
			if ok != tt.direct {
				t.Fatalf("direct: got %v, want %v", ok, tt.direct)
			}
			want, err := json.Marshal(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := Encode(tt.req)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(enc, want) {
				t.Errorf("Encode: got %s, want json.Marshal's %s", enc, want)
			}
			if ok && !bytes.Equal(got, want) {
				t.Errorf("direct: got %s, want json.Marshal's %s", got, want)
			}
			if err := mustValidator().validate(ProtocolDiscoveryRequest, mustParse(t, enc)); err != nil {
				t.Errorf("schema: %v", err)
			}
		})
	}
	// Many fresh requests: ids and times vary, the bytes stay json.Marshal's.
	for range 1000 {
		req := NewDiscoveryRequest(alice, "bob")
		got, ok := appendDiscoveryRequest(nil, req)
		want, _ := json.Marshal(req)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("got %s (direct %v), want %s", got, ok, want)
		}
	}
}

func mustParse(tb testing.TB, data []byte) any {
	tb.Helper()
	doc, err := parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	return doc
}

// TestCardReplyHeader checks a card reply's header, written directly or,
// for a request whose ids are not plain, by json.Marshal, is the header
// json.Marshal writes, and that the reply is valid.
func TestCardReplyHeader(t *testing.T) {
	cr := sampleCardReply(t)
	dashed := NewDiscoveryRequest(alice, "bob")
	dashed.ID, dashed.Request, dashed.Conversation = "3f2c-9a", "3f2c-9a", "3f2c-9a"
	for _, req := range []*DiscoveryRequest{NewDiscoveryRequest(alice, "bob"), NewDiscoveryRequest(bob, "bob"), dashed} {
		data, err := cr.Reply(req, bob)
		if err != nil {
			t.Fatal(err)
		}
		var reply DiscoveryReply
		if err := Decode(data, &reply); err != nil {
			t.Fatalf("reply to %s: %v", req.ID, err)
		}
		head, err := json.Marshal(&reply.Header)
		if err != nil {
			t.Fatal(err)
		}
		want := string(head[:len(head)-1]) + "," + string(cr.body)
		if string(data) != want {
			t.Errorf("reply to %s: got %s, want %s", req.ID, data, want)
		}
	}
}
