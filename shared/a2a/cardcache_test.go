package a2a

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// sampleCardReply is bob's card, ready to answer discovery.
func sampleCardReply(tb testing.TB) *CardReply {
	tb.Helper()
	cr, err := NewCardReply(sampleCard())
	if err != nil {
		tb.Fatal(err)
	}
	return cr
}

// cardReplyBytes is bob's reply to a fresh discovery request from alice.
func cardReplyBytes(tb testing.TB, cr *CardReply) ([]byte, *DiscoveryRequest) {
	tb.Helper()
	req := NewDiscoveryRequest(alice, "bob")
	data, err := cr.Reply(req, bob)
	if err != nil {
		tb.Fatal(err)
	}
	return data, req
}

func TestCardCacheShortPath(t *testing.T) {
	cr := sampleCardReply(t)
	var cache cardCache
	first, _ := cardReplyBytes(t, cr)
	if _, err := cache.decode("bob", first); err != nil {
		t.Fatalf("first reply: %v", err)
	}
	known := cache.get("bob")
	if known == nil {
		t.Fatal("the card of a CardReply's reply is not kept")
	}
	data, req := cardReplyBytes(t, cr)
	got, ok := known.match(data)
	if !ok {
		t.Fatalf("a second reply with the same card does not take the short path: %s", data)
	}
	want := &DiscoveryReply{}
	if err := Decode(data, want); err != nil {
		t.Fatal(err)
	}
	if got.Request != req.ID || !reflect.DeepEqual(got, want) {
		t.Errorf("short path: got %s, want %s", dump(got), dump(want))
	}
	// What the caller gets is its own: changing it leaves the kept card.
	got.Tools[0].Name = "changed"
	got.Tools = append(got.Tools, ToolDescriptor{Name: "extra"})
	again, ok := known.match(data)
	if !ok || again.Tools[0].Name != "disk_usage" || len(again.Tools) != 2 {
		t.Errorf("after the caller changed its copy: got %s", dump(again))
	}
}

func TestCardCacheRefusesWhatDecodeRefuses(t *testing.T) {
	cr := sampleCardReply(t)
	var cache cardCache
	valid, _ := cardReplyBytes(t, cr)
	if _, err := cache.decode("bob", valid); err != nil {
		t.Fatal(err)
	}
	body := string(cr.body)
	head := strings.TrimSuffix(string(valid), body)
	tests := []struct {
		name   string
		data   string
		wantIn string
	}{
		{name: "card key repeated in the header part", data: head + `"tools":[],` + body, wantIn: `duplicate key "tools"`},
		{name: "card key in the header part", data: strings.Replace(head, `"sequence":0`, `"sequence":0,"description":"x"`, 1) + body, wantIn: `duplicate key "description"`},
		{name: "unknown key in the header part", data: strings.Replace(head, `"sequence":0`, `"sequence":0,"extra":1`, 1) + body, wantIn: "at '/extra': false schema"},
		{name: "header field of the wrong type", data: strings.Replace(head, `"sequence":0`, `"sequence":"0"`, 1) + body, wantIn: "at '/sequence': got string, want integer"},
		{name: "header field missing", data: strings.Replace(head, `"sequence":0,`, ``, 1) + body, wantIn: "missing property 'sequence'"},
		{name: "another protocol", data: strings.Replace(head, ProtocolDiscoveryReply, ProtocolToolReply, 1) + body, wantIn: "want " + ProtocolDiscoveryReply},
		{name: "header part ends inside a string", data: `{"protocol":"` + ProtocolDiscoveryReply + `","id":"a,` + body, wantIn: "invalid"},
		{name: "no header part", data: "{" + body, wantIn: "protocol missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := cache.get("bob").match([]byte(tt.data)); ok {
				t.Fatalf("short path accepted %s", tt.data)
			}
			_, err := cache.decode("bob", []byte(tt.data))
			if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrUnexpectedProtocol) || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("got %v, want an invalid message naming %q", err, tt.wantIn)
			}
			if cache.get("bob") == nil {
				t.Errorf("a refused reply dropped the kept card")
			}
		})
	}
}

func TestCardCacheFollowsAChangedCard(t *testing.T) {
	var cache cardCache
	old, _ := cardReplyBytes(t, sampleCardReply(t))
	if _, err := cache.decode("bob", old); err != nil {
		t.Fatal(err)
	}
	card := sampleCard()
	card.Tools = card.Tools[:1]
	changed, err := NewCardReply(card)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := cardReplyBytes(t, changed)
	got, err := cache.decode("bob", data)
	if err != nil || len(got.Tools) != 1 {
		t.Fatalf("changed card: got %v, %v, want one tool", got, err)
	}
	if !bytes.Equal(cache.get("bob").body, changed.body) {
		t.Errorf("the changed card was not kept")
	}
}

func TestCardCacheSkipsOtherLayouts(t *testing.T) {
	// Card fields first, header after: valid, but never the short path.
	var cache cardCache
	cr := sampleCardReply(t)
	valid, _ := cardReplyBytes(t, cr)
	m := asMap(t, valid)
	var buf bytes.Buffer
	buf.WriteString("{" + strings.TrimSuffix(string(cr.body), "}"))
	for _, k := range []string{"protocol", "id", "request", "conversation", "sequence", "time", "sender", "recipient"} {
		buf.WriteString(`,"` + k + `":` + dump(m[k]))
	}
	buf.WriteString("}")
	if _, err := cache.decode("bob", buf.Bytes()); err != nil {
		t.Fatalf("card-first layout: %v", err)
	}
	if cache.get("bob") != nil {
		t.Errorf("kept a card whose reply layout cannot take the short path")
	}
}

func TestCardCacheBounded(t *testing.T) {
	var cache cardCache
	cr := sampleCardReply(t)
	data, _ := cardReplyBytes(t, cr)
	n := maxCardCacheBytes/len(cr.body) + 10
	for i := range n {
		if _, err := cache.decode(fmt.Sprintf("agent%d", i), data); err != nil {
			t.Fatal(err)
		}
	}
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.size > maxCardCacheBytes || len(cache.byAgent) == 0 {
		t.Errorf("got %d bytes in %d entries, want at most %d bytes", cache.size, len(cache.byAgent), maxCardCacheBytes)
	}
}

// FuzzCardCacheHeader puts an arbitrary header part in front of a kept
// card's bytes: the short path may accept only what Decode accepts, and
// decode the same message.
func FuzzCardCacheHeader(f *testing.F) {
	cr := sampleCardReply(f)
	data, _ := cardReplyBytes(f, cr)
	head := data[:len(data)-len(cr.body)]
	f.Add(bytes.Clone(head))
	f.Add([]byte(strings.Replace(string(head), `"sequence":0`, `"sequence":0,"tools":[]`, 1)))
	f.Add([]byte(strings.Replace(string(head), `{`, `{ "must_understand" : true ,`, 1)))
	f.Add([]byte(`{`))
	f.Add([]byte(`{"protocol":"x",`))
	f.Fuzz(func(t *testing.T, head []byte) {
		raw := append(bytes.Clone(head), cr.body...)
		got, ok := cr.match(raw)
		if !ok {
			return
		}
		want := &DiscoveryReply{}
		if err := Decode(raw, want); err != nil {
			t.Fatalf("short path accepted %q, which Decode refuses: %v", raw, err)
		}
		if !got.Time.Equal(want.Time) {
			t.Fatalf("time: got %v, want %v", got.Time, want.Time)
		}
		canonicalise(t, got)
		canonicalise(t, want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("short path: got %s, want %s", dump(got), dump(want))
		}
	})
}
