package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/toolslist"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// fleetSize is the tool count of the paging tests: that of three agents
// of the nats CLI behind one gateway.
const fleetSize = 690

// fleetTools returns n in-process tools named PREFIX_NNN, each tagged read
// or write in turn, remote when remote is set.
func fleetTools(tb testing.TB, prefix string, n int, remote bool) []tool.Tool {
	tb.Helper()
	out := make([]tool.Tool, n)
	for i := range out {
		tag := "read"
		if i%2 == 1 {
			tag = "write"
		}
		name := fmt.Sprintf("%s_%03d", prefix, i)
		t, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Title: "Tool " + name,
			Description: "Does " + name + " things <with> & \"quotes\"", Tags: []string{tag},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"subject":{"type":"string","description":"a NATS subject"}}}`),
			Exposure:    tool.ExposeMCP, Confirmation: tool.ConfirmNone, Remote: remote,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) {
				return tool.Outcome{JSON: json.RawMessage(`"` + name + `"`)}, nil
			},
		})
		if err != nil {
			tb.Fatalf("building %s: %v", name, err)
		}
		out[i] = t
	}
	return out
}

// listPolicy grants readers the read-tagged local tools and agent a's
// tools by name, writers the write-tagged ones, admins everything.
func listPolicy() *policy.Policy {
	return policy.New(&config.Policy{Roles: map[string]*config.Role{
		"reader": {Match: []string{"readers"}, Include: config.Filter{Tags: []string{"read"}, Tools: []string{"a_*"}}},
		"writer": {Match: []string{"writers"}, Include: config.Filter{Tags: []string{"write"}}},
		"admin":  {Match: []string{"admins"}},
	}})
}

// startFleetServer serves local tools and fleetSize-local remote tools of
// source "fleet" behind testAuthenticate when pol is set.
func startFleetServer(tb testing.TB, cfg Config, local, remote int) (*Server, string) {
	tb.Helper()
	if cfg.Policy != nil {
		cfg.Authenticate = testAuthenticate
	}
	s, url := startServer(tb, cfg, fleetTools(tb, "local", local, false))
	if err := s.SetTools("fleet", fleetTools(tb, "a", remote, true)); err != nil {
		tb.Fatalf("adding remote tools: %v", err)
	}
	return s, url
}

// rawList is one tools/list POSTed by hand.
type rawList struct {
	token   string // bearer, when not empty
	session string // a session of the 2025-11-25 era, when not empty
	modern  bool
	params  string // the params object; empty for none
	accept  string // empty: both JSON and an event stream
	id      string // empty: 7
}

// do sends the request to url and returns the status, content type and
// body.
func (q rawList) do(tb testing.TB, url string) (int, string, []byte) {
	tb.Helper()
	id := q.id
	if id == "" {
		id = "7"
	}
	params := q.params
	if q.modern {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.ProtocolVersion20260728 + `","io.modelcontextprotocol/clientCapabilities":{}}`
		if params == "" {
			params = "{" + meta + "}"
		} else {
			params = strings.Replace(params, "{", "{"+meta+",", 1)
		}
	}
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"`
	if params != "" {
		body += `,"params":` + params
	}
	body += "}"
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	accept := q.accept
	if accept == "" {
		accept = "application/json, text/event-stream"
	}
	req.Header.Set("Accept", accept)
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	if q.modern {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/list")
	} else if q.session != "" {
		req.Header.Set("Mcp-Session-Id", q.session)
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("tools/list: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the tools/list answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// openSession opens a 2025-11-25 session on url as token's caller.
func openSession(tb testing.TB, url, token string) string {
	tb.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + mcp.LATEST_LEGACY_PROTOCOL_VERSION +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("initialize: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		tb.Fatalf("initialize: got status %d and session %q", resp.StatusCode, id)
	}
	return id
}

// listAnswer is a decoded tools/list answer.
type listAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Tools      []mcp.Tool `json:"tools"`
		NextCursor string     `json:"nextCursor"`
		TTLMs      *int64     `json:"ttlMs"`
		CacheScope string     `json:"cacheScope"`
		ResultType string     `json:"resultType"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeList(tb testing.TB, body []byte) listAnswer {
	tb.Helper()
	var a listAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		tb.Fatalf("decoding the tools/list answer %.200q: %v", body, err)
	}
	return a
}

// TestToolsListMatchesMCPGo holds the kept answers to what mcp-go itself
// answers the same request with, after the gateway's hooks, byte for
// byte: in both eras, for callers of different roles and without a
// policy. mcp-go is reached directly, behind the same authentication,
// so only the list path differs.
func TestToolsListMatchesMCPGo(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		tokens []string
	}{
		{name: "no policy", tokens: []string{""}},
		{name: "policy", cfg: Config{Policy: listPolicy()}, tokens: []string{"alice", "bob", "carol", "dave"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := startFleetServer(t, tt.cfg, 40, 60)
			auth := s.cfg.Authenticate
			var direct http.Handler = s.streamable
			if auth != nil {
				direct = auth(direct, s.cfg.Policy.Authorize)
			}
			hs := httptest.NewServer(direct)
			t.Cleanup(hs.Close)
			for _, token := range tt.tokens {
				for _, modern := range []bool{false, true} {
					q := rawList{token: token, modern: modern, id: `"req-1"`}
					if !modern {
						q.session = openSession(t, url, token)
					}
					status, ctype, got := q.do(t, url)
					wstatus, wctype, want := q.do(t, hs.URL+"/mcp")
					if status != wstatus || ctype != wctype || !bytes.Equal(got, want) {
						t.Errorf("%s modern %t: got %d %s %d bytes, want mcp-go's %d %s %d bytes:\n got %.300s\nwant %.300s",
							token, modern, status, ctype, len(got), wstatus, wctype, len(want), got, want)
					}
					if a := decodeList(t, got); a.Result == nil || len(a.Result.Tools) == 0 {
						t.Errorf("%s modern %t: got %.200s, want a list", token, modern, got)
					}
				}
			}
		})
	}
}

// pageThrough lists every page with the raw request q, following
// nextCursor, and returns the names in order and the page sizes.
func pageThrough(tb testing.TB, url string, q rawList) (names []string, pages []int) {
	tb.Helper()
	cursor := ""
	for len(pages) <= fleetSize {
		q.params = ""
		if cursor != "" {
			q.params = `{"cursor":"` + cursor + `"}`
		}
		status, _, body := q.do(tb, url)
		a := decodeList(tb, body)
		if status != http.StatusOK || a.Result == nil {
			tb.Fatalf("tools/list page %d: got status %d, %.300s", len(pages)+1, status, body)
		}
		pages = append(pages, len(a.Result.Tools))
		for _, t := range a.Result.Tools {
			names = append(names, t.Name)
		}
		if a.Result.NextCursor == "" {
			return names, pages
		}
		cursor = a.Result.NextCursor
	}
	tb.Fatal("tools/list: the cursor does not advance")
	return nil, nil
}

// TestToolsListPagedMCPGoClient pages through a fleet's list with mcp-go's
// client in both eras and a small page size: every tool exactly once, in
// pages of at most the size.
func TestToolsListPagedMCPGoClient(t *testing.T) {
	const pageSize = 7
	s, url := startFleetServer(t, Config{ToolsPageSize: pageSize}, 30, fleetSize-30)
	var want []string
	for _, tl := range s.Served() {
		want = append(want, tl.Name())
	}
	slices.Sort(want)
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			names, pages := listAllTools(t, c)
			if len(names) != fleetSize || !slices.Equal(slices.Sorted(slices.Values(names)), want) {
				t.Errorf("got %d names over %d pages, want each of the %d tools once", len(names), len(pages), fleetSize)
			}
			if !slices.IsSorted(names) {
				t.Error("got pages out of name order, want the list sorted as mcp-go sorts it")
			}
			if slices.Max(pages) != pageSize || len(pages) != (fleetSize+pageSize-1)/pageSize {
				t.Errorf("got %d pages of at most %d, want %d of %d", len(pages), slices.Max(pages), (fleetSize+pageSize-1)/pageSize, pageSize)
			}
			// ListTools follows the cursors itself.
			res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
			if err != nil || len(res.Tools) != fleetSize {
				t.Errorf("ListTools: got %d tools (%v), want %d", len(res.Tools), err, fleetSize)
			}
		})
	}
}

// TestToolsListPerCaller gives callers of different roles different kept
// lists, in both eras and whatever the order of their requests, paged:
// each caller pages through exactly its own list, and one caller's cursor
// is refused to another.
func TestToolsListPerCaller(t *testing.T) {
	s, url := startFleetServer(t, Config{Policy: listPolicy(), ToolsPageSize: 25}, 100, 300)
	want := map[string][]string{}
	for _, token := range []string{"alice", "bob", "dave"} {
		g := s.cfg.Policy.For(authorized(t, token))
		for _, e := range *s.entries.Load() {
			if g.Allows(e.def.Name, e.Tool.Tags(), e.Remote()) {
				want[token] = append(want[token], e.def.Name)
			}
		}
		slices.Sort(want[token])
	}
	if slices.Equal(want["alice"], want["bob"]) || len(want["dave"]) != 400 {
		t.Fatalf("the policy does not tell the callers apart: %d, %d, %d tools", len(want["alice"]), len(want["bob"]), len(want["dave"]))
	}
	for round := range 3 {
		for _, token := range []string{"bob", "alice", "dave", "alice", "bob"} {
			for _, modern := range []bool{false, true} {
				q := rawList{token: token, modern: modern}
				if !modern {
					q.session = openSession(t, url, token)
				}
				names, _ := pageThrough(t, url, q)
				if !slices.Equal(names, want[token]) {
					t.Fatalf("round %d, %s (modern %t): got %d tools, want its own %d", round, token, modern, len(names), len(want[token]))
				}
			}
		}
	}

	// Bob's second page's cursor, presented by alice.
	_, _, body := rawList{token: "bob", modern: true}.do(t, url)
	cursor := decodeList(t, body).Result.NextCursor
	status, _, body := rawList{token: "alice", modern: true, params: `{"cursor":"` + cursor + `"}`}.do(t, url)
	if a := decodeList(t, body); status != http.StatusBadRequest || a.Error == nil || a.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(a.Error.Message, "another caller's") {
		t.Errorf("bob's cursor from alice: got %d %.300s, want 400 and -32602 naming another caller's list", status, body)
	}
}

// authorized returns testCallers' caller token with its roles set.
func authorized(tb testing.TB, token string) *auth.Caller {
	tb.Helper()
	c := testCallers[token]
	c.Groups = slices.Clone(c.Groups)
	if err := listPolicy().Authorize(&c); err != nil {
		tb.Fatal(err)
	}
	return &c
}

// TestToolsListInvalidated lists again what the tool set became: an agent
// appearing and disappearing changes the kept list at once, a cursor of
// the earlier list is refused as stale, and a refresh that finds the same
// tools keeps the list and its cursors.
func TestToolsListInvalidated(t *testing.T) {
	s, url := startFleetServer(t, Config{ToolsPageSize: 50}, 10, 200)
	for _, modern := range []bool{false, true} {
		t.Run(fmt.Sprintf("modern %t", modern), func(t *testing.T) {
			q := rawList{modern: modern}
			if !modern {
				q.session = openSession(t, url, "")
			}
			names, _ := pageThrough(t, url, q)
			if len(names) != 210 {
				t.Fatalf("got %d tools, want 210", len(names))
			}
			_, _, body := q.do(t, url)
			first := decodeList(t, body).Result.NextCursor

			// The same tools again: nothing changes, the cursor stays.
			if err := s.SetTools("fleet", fleetTools(t, "a", 200, true)); err != nil {
				t.Fatal(err)
			}
			q.params = `{"cursor":"` + first + `"}`
			if _, _, body := q.do(t, url); decodeList(t, body).Result == nil {
				t.Fatalf("cursor after a refresh that changed nothing: got %.300s, want the second page", body)
			}

			// An agent appears.
			if err := s.SetTools("other", fleetTools(t, "b", 30, true)); err != nil {
				t.Fatal(err)
			}
			q.params = ""
			if names, _ := pageThrough(t, url, q); len(names) != 240 || !slices.Contains(names, "b_029") {
				t.Fatalf("after an agent appeared: got %d tools, want 240 with b_029", len(names))
			}
			q.params = `{"cursor":"` + first + `"}`
			status, _, body := q.do(t, url)
			if a := decodeList(t, body); a.Error == nil || a.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(a.Error.Message, "stale cursor") || a.Result != nil {
				t.Errorf("cursor of the list before: got %d %.300s, want -32602 stale cursor", status, body)
			}

			// It disappears again.
			if err := s.SetTools("other", nil); err != nil {
				t.Fatal(err)
			}
			q.params = ""
			if names, _ := pageThrough(t, url, q); len(names) != 210 || slices.Contains(names, "b_000") {
				t.Fatalf("after the agent left: got %d tools, want 210 without b_*", len(names))
			}
		})
	}
}

// TestToolsListHostileCursors sends cursors that are not the gateway's,
// or not for this list: each gets JSON-RPC -32602 naming the problem, in
// both eras, and never a page.
func TestToolsListHostileCursors(t *testing.T) {
	s, url := startFleetServer(t, Config{ToolsPageSize: 10}, 5, 95)
	digest, err := s.router.List.Digest(policy.All, true)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	raw := func(version byte, digest [toolslist.DigestLen]byte, offset, size int) string {
		c := toolslist.EncodeCursor(digest, offset, size)
		b, _ := base64.RawURLEncoding.DecodeString(c)
		b[0] = version
		return b64(b)
	}
	var zero [toolslist.DigestLen]byte
	tests := []struct {
		name, cursor string
		want         string // in the message
	}{
		{"garbage", "not a cursor!", "not a tools/list cursor"},
		{"mcp-go's own cursor", base64.StdEncoding.EncodeToString([]byte("a_005")), "not a tools/list cursor"},
		{"too short", b64([]byte{1, 2, 3}), "not a tools/list cursor"},
		{"too long", b64(make([]byte, toolslist.CursorLen+3)), "not a tools/list cursor"},
		{"padded", toolslist.EncodeCursor(digest, 10, 10) + "==", "not a tools/list cursor"},
		{"other version", raw(2, digest, 10, 10), "not a tools/list cursor"},
		{"forged digest", toolslist.EncodeCursor(zero, 10, 10), "no tool list this gateway serves"},
		{"off a page boundary", toolslist.EncodeCursor(digest, 13, 10), "does not point at a page"},
		{"past the end", toolslist.EncodeCursor(digest, 100, 10), "does not point at a page"},
		{"offset zero", toolslist.EncodeCursor(digest, 0, 10), "does not point at a page"},
		{"other page size", toolslist.EncodeCursor(digest, 20, 20), "expose.agent.mcp.tools_page_size"},
		{"page size zero", toolslist.EncodeCursor(digest, 20, 0), "expose.agent.mcp.tools_page_size"},
		{"huge", strings.Repeat("A", 1<<20), "not a tools/list cursor"},
		{"escapes", `\u0000\"}`, "not a tools/list cursor"},
	}
	for _, modern := range []bool{false, true} {
		sess := ""
		if !modern {
			sess = openSession(t, url, "")
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s modern %t", tt.name, modern), func(t *testing.T) {
				c, _ := json.Marshal(tt.cursor)
				if tt.name == "escapes" {
					c = []byte(`"` + tt.cursor + `"`)
				}
				status, _, body := rawList{modern: modern, session: sess, params: `{"cursor":` + string(c) + `}`}.do(t, url)
				wantStatus := http.StatusOK
				if modern {
					wantStatus = http.StatusBadRequest
				}
				a := decodeList(t, body)
				if status != wantStatus || a.Result != nil || a.Error == nil || a.Error.Code != mcp.INVALID_PARAMS ||
					!strings.Contains(a.Error.Message, tt.want) || string(a.ID) != "7" {
					t.Errorf("got %d %.300s, want %d and error -32602 with %q for id 7", status, body, wantStatus, tt.want)
				}
			})
		}
		// A cursor that is not a string is mcp-go's to refuse.
		status, _, body := rawList{modern: modern, session: sess, params: `{"cursor":12}`}.do(t, url)
		if a := decodeList(t, body); a.Result != nil || a.Error == nil {
			t.Errorf("numeric cursor (modern %t): got %d %.300s, want an error", modern, status, body)
		}
	}
	// The real cursor still works after all that.
	if names, _ := pageThrough(t, url, rawList{modern: true}); len(names) != 100 {
		t.Errorf("got %d tools, want 100", len(names))
	}
}

// TestToolsListCacheHints checks the 2026-07-28 ttlMs and cacheScope:
// public only for an open gateway without a policy, private once callers
// authenticate or lists differ per caller; none of it in the earlier era.
func TestToolsListCacheHints(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		token string
		ttl   int64
		scope string
	}{
		{"open", Config{}, "", toolslist.DefaultToolsListTTL, "public"},
		{"token", Config{AuthToken: "tok", ToolsListTTL: 5 * time.Second}, "tok", 5000, "private"},
		{"policy", Config{Policy: listPolicy()}, "dave", toolslist.DefaultToolsListTTL, "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := startFleetServer(t, tt.cfg, 3, 3)
			_, _, body := rawList{token: tt.token, modern: true}.do(t, url)
			a := decodeList(t, body)
			if a.Result == nil || a.Result.TTLMs == nil || *a.Result.TTLMs != tt.ttl || a.Result.CacheScope != tt.scope || a.Result.ResultType != "complete" {
				t.Errorf("got %.300s, want ttlMs %d, cacheScope %s and resultType complete", body, tt.ttl, tt.scope)
			}
			_, _, body = rawList{token: tt.token, session: openSession(t, url, tt.token)}.do(t, url)
			if a := decodeList(t, body); a.Result == nil || a.Result.TTLMs != nil || a.Result.CacheScope != "" || a.Result.ResultType != "" {
				t.Errorf("2025-11-25: got %.300s, want no 2026-07-28 fields", body)
			}
		})
	}
}

// TestToolsListFraming answers JSON to a client that accepts it and one
// event to a client that accepts only an event stream; the list is the
// same.
func TestToolsListFraming(t *testing.T) {
	_, url := startFleetServer(t, Config{}, 3, 3)
	sess := openSession(t, url, "")
	_, ctype, js := rawList{session: sess}.do(t, url)
	if ctype != "application/json" {
		t.Errorf("got content type %q, want application/json", ctype)
	}
	_, ctype, ev := rawList{session: sess, accept: "text/event-stream"}.do(t, url)
	data, ok := bytes.CutPrefix(ev, []byte("event: message\ndata: "))
	if ctype != "text/event-stream" || !ok || !bytes.HasSuffix(data, []byte("\n\n")) {
		t.Fatalf("got %q %.100q, want one event of an event stream", ctype, ev)
	}
	if !bytes.Equal(bytes.TrimSpace(data), bytes.TrimSpace(js)) {
		t.Error("got a different list as an event than as JSON")
	}
}

// TestToolsListSessionRules keeps the session rules in front of the kept
// lists: no session, an unknown one, and another caller's are refused as
// before.
func TestToolsListSessionRules(t *testing.T) {
	_, url := startFleetServer(t, Config{Policy: listPolicy()}, 3, 3)
	alices := openSession(t, url, "alice")
	tests := []struct {
		name string
		q    rawList
		want int
	}{
		{"no token", rawList{session: alices}, http.StatusUnauthorized},
		{"no session", rawList{token: "alice"}, http.StatusBadRequest},
		{"unknown session", rawList{token: "alice", session: "mcp-session-0000"}, http.StatusNotFound},
		{"another caller's session", rawList{token: "dave", session: alices}, http.StatusNotFound},
		{"no role", rawList{token: "mallory", modern: true}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, _, body := tt.q.do(t, url); status != tt.want || bytes.Contains(body, []byte(`"tools"`)) {
				t.Errorf("got %d %.200s, want %d and no list", status, body, tt.want)
			}
		})
	}
}

// respondQuery is a cached request for the whole list of the fleet, the
// first page in the 2025-11-25 era.
func respondQuery(tb testing.TB, pageSize int) (*toolslist.Cache, toolslist.Query) {
	tb.Helper()
	tools := append(fleetTools(tb, "local", 30, false), fleetTools(tb, "a", fleetSize-30, true)...)
	s, err := New(Config{Identity: "bench", Logger: testLogger(tb), ToolsPageSize: pageSize}, tools)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	q := toolslist.Query{ID: []byte(`12345`), Grant: policy.All}
	if pageSize > 0 {
		d, err := s.router.List.Digest(policy.All, false)
		if err != nil {
			tb.Fatal(err)
		}
		q.Cursor = []byte(toolslist.EncodeCursor(d, pageSize, pageSize))
	}
	return s.router.List, q
}

func noHeader(int, int) {}

// TestToolsListRespondAllocs holds the cached tools/list path to no
// allocation at all, with the fleet's 690 tools: whole, and a page by its
// cursor.
func TestToolsListRespondAllocs(t *testing.T) {
	for _, pageSize := range []int{0, 50} {
		l, q := respondQuery(t, pageSize)
		var out countWriter
		if err := l.Respond(&out, q, noHeader); err != nil { // builds the view
			t.Fatal(err)
		}
		if got := testing.AllocsPerRun(100, func() { _ = l.Respond(&out, q, noHeader) }); got != 0 {
			t.Errorf("page size %d: got %.1f allocations per cached tools/list, want 0", pageSize, got)
		}
	}
}

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// BenchmarkToolsListRespond measures the cached tools/list path
// ([toolslist.Cache.Respond]) for the fleet's 690 tools in one page: finding
// the caller's kept list, and writing the JSON-RPC head, the request id
// and the kept bytes to a writer that keeps nothing. Reading the request
// and the HTTP server's work are not in it. It reports 0 allocs/op.
func BenchmarkToolsListRespond(b *testing.B) {
	l, q := respondQuery(b, 0)
	var out countWriter
	if err := l.Respond(&out, q, noHeader); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(out.n))
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Respond(&out, q, noHeader)
	}
}
