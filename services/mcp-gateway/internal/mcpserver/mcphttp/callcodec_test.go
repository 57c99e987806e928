package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestStandardHeaders holds StandardHeaders to mcp.ValidateStandardHeaders
// for a tools/call, whose params the fast path has already decoded.
func TestStandardHeaders(t *testing.T) {
	b64, ok := mcp.EncodeHeaderValue("größe")
	if !ok || b64 == "größe" {
		t.Fatalf("EncodeHeaderValue(größe) = %q, %v: want an encoded value", b64, ok)
	}
	for _, c := range []struct {
		method, name string // headers; "-" leaves one out
		body         string // the params' name
	}{
		{"tools/call", "echo", "echo"},
		{"tools/call", "other", "echo"},
		{"tools/call", "-", "echo"},
		{"tools/call", "", "echo"},
		{"-", "echo", "echo"},
		{"tools/list", "echo", "echo"},
		{"TOOLS/CALL", "echo", "echo"},
		{"tools/call", "echo", ""},
		{"tools/call", b64, "größe"},
		{"tools/call", b64, "grosse"},
		{"tools/call", "=?base64?not base64?=", "echo"},
		{"tools/call", "=?base64?ZWNobw==?=", "echo"},
	} {
		h := http.Header{}
		if c.method != "-" {
			h.Set(mcp.HeaderMethod, c.method)
		}
		if c.name != "-" {
			h.Set(mcp.HeaderName, c.name)
		}
		params, _ := json.Marshal(map[string]string{"name": c.body})
		want := mcp.ValidateStandardHeaders(h.Get, mcp.ProtocolVersion20260728, mcp.MethodToolsCall, params) == nil
		if got := StandardHeaders(h, c.body); got != want {
			t.Errorf("method %q, name %q, body name %q: got %v, want mcp-go's %v", c.method, c.name, c.body, got, want)
		}
	}
}

// FuzzNumbersFit holds NumbersFit to encoding/json: for valid JSON it
// reports exactly whether the value decodes into an any.
func FuzzNumbersFit(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a":1e400}`, `[-1e-400,0.5E+3]`, `"1e400"`, `{"s":"\\\"1e999","n":-0}`,
		`1e308`, `1.8e308`, `[true,false,null,"x"]`, `{"a":{"b":[9999999999999999999999]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var v any
		want := json.Unmarshal(raw, &v) == nil
		if got := NumbersFit(raw); got != want {
			t.Errorf("NumbersFit(%s) = %v, want %v", raw, got, want)
		}
	})
}

// TestAppendResult holds AppendResult to the bytes of mcp-go's own
// CallToolResult.MarshalJSON, for every member it may write.
func TestAppendResult(t *testing.T) {
	meta := mcp.NewMetaFromMap(map[string]any{"z": 1, "a": "<b>"})
	meta.SetServerInfo(mcp.Implementation{Name: "demo", Version: "1.0"})
	tests := []struct {
		name string
		res  *mcp.CallToolResult
	}{
		{"empty", &mcp.CallToolResult{}},
		{"text", mcp.NewToolResultText("hi <b> & \u2028 \"q\"\n")},
		{"contents", &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent("a"), mcp.NewImageContent("aGk=", "image/png"), mcp.NewTextContent(""),
		}}},
		{"meta and result type", &mcp.CallToolResult{Result: mcp.Result{Meta: meta, ResultType: mcp.ResultTypeComplete},
			Content: []mcp.Content{mcp.NewTextContent("x")}}},
		{"error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{mcp.NewTextContent("failed")}}},
		{"raw structured content", &mcp.CallToolResult{
			Content:              []mcp.Content{mcp.NewTextContent(`{"a": 1}`)},
			RawStructuredContent: json.RawMessage("{ \"a\" : [1, 2.50, \"<&>\"],\n \"b\":null }"),
		}},
		{"structured content", &mcp.CallToolResult{StructuredContent: map[string]any{"b": []any{1, "x"}, "a": "<"}}},
		{"input required", &mcp.CallToolResult{
			Result:               mcp.Result{ResultType: mcp.ResultTypeInputRequired},
			MultiRoundTripResult: mcp.MultiRoundTripResult{InputRequests: mcp.InputRequests{"r1": {Method: mcp.MethodListRoots, Roots: &mcp.ListRootsParams{}}}, RequestState: "s<1>"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, werr := tt.res.MarshalJSON()
			var b bytes.Buffer
			err := AppendResult(&b, tt.res)
			got := b.Bytes()
			if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
				t.Errorf("got %s (%v), want mcp-go's %s (%v)", got, err, want, werr)
			}
		})
	}
	// What mcp-go cannot encode, neither can it.
	bad := &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{"a":`)}
	if err := AppendResult(&bytes.Buffer{}, bad); err == nil {
		t.Error("structured content that is not JSON: got no error, want one")
	}
	if _, err := bad.MarshalJSON(); err == nil {
		t.Error("mcp-go encoded structured content that is not JSON")
	}
}
