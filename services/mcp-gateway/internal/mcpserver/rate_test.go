package mcpserver

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/mcphttp"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// ratePolicy: batch callers (erin) may make 3 calls a minute, and one of
// them echo; admins (frank, dave) have no rate.
func ratePolicy() *policy.Policy {
	return policy.New(&config.Policy{Roles: map[string]*config.Role{
		"batch": {Match: []string{"batch"}, Rate: "3/m", ToolRates: map[string]string{"echo": "1/m"}},
		"admin": {Match: []string{"admins"}},
	}})
}

// TestPolicyRate drives the gateway's rate limits through the mcp-go
// client in both eras: a caller over its tool's rate is refused that tool
// with the retry time while its other calls still run (the refused call
// is not charged), then refused everything once over its own rate; a
// caller of another role runs on unbounded; each refusal is audited as
// refused_rate.
func TestPolicyRate(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			tr := startAuditTrail(t)
			_, url := startServer(t, Config{Identity: "rated", Policy: ratePolicy(), Authenticate: testAuthenticate, Audit: tr.pub}, app.Tools())
			erin := connect(t, url, e, bearer("erin"))
			frank := connect(t, url, e, bearer("frank"))
			args := map[string]map[string]any{"echo": {"message": "hi"}, "sleep": {"duration": "1ms"}}
			call := func(c *client.Client, who, name string) error {
				t.Helper()
				res, err := tryCall(t.Context(), c, name, args[name])
				if err == nil && res.IsError {
					t.Fatalf("%s's %s: got the in-band error %q, want a result or the rate's protocol error", who, name, resultText(res))
				}
				if err != nil {
					t.Logf("%s %s: %v", who, name, err)
				}
				r, _ := tr.next(t)
				if err != nil && (r.Outcome.Result != audit.ResultRefused || r.Outcome.ErrorClass != "refused_rate" || r.Caller.Subject != who || r.Tool != name) {
					t.Errorf("%s's refused %s: got the record %+v, want refused_rate", who, name, r)
				}
				return err
			}
			if err := call(erin, "erin", "echo"); err != nil {
				t.Fatalf("erin's first echo: %v", err)
			}
			err := call(erin, "erin", "echo")
			if err == nil || !strings.Contains(err.Error(), "tool_rates") || !strings.Contains(err.Error(), "retry in") {
				t.Fatalf("erin's second echo in a minute: got %v, want the tool's rate naming tool_rates and the retry time", err)
			}
			for i := range 2 {
				if err := call(erin, "erin", "sleep"); err != nil {
					t.Errorf("erin's sleep %d: got %v, want it run: her refused echo is not charged to her rate", i+1, err)
				}
			}
			if err := call(erin, "erin", "sleep"); err == nil || !strings.Contains(err.Error(), "policy.roles.*.rate") {
				t.Errorf("erin's 4th call in a minute: got %v, want her role's rate", err)
			}
			for i := range 5 {
				if err := call(frank, "frank", "echo"); err != nil {
					t.Errorf("frank's echo %d: got %v, want it run: his role has no rate", i+1, err)
				}
			}
		})
	}
}

// TestPolicyRateWire: the refusal on the wire, in the 2026-07-28 era: a
// JSON-RPC error -32029 with data.retryAfterSeconds, and Retry-After.
func TestPolicyRateWire(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{Identity: "rated", Policy: ratePolicy(), Authenticate: testAuthenticate}, app.Tools())
	post := func() (*http.Response, []byte) {
		body := `{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"` + mcp.LATEST_PROTOCOL_VERSION + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer erin")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_PROTOCOL_VERSION)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, "echo")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	post()
	resp, b := post()
	var got struct {
		ID    string `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				RetryAfterSeconds int `json:"retryAfterSeconds"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.ID != "r-1" || got.Error.Code != mcphttp.CodeRateLimited || got.Error.Data.RetryAfterSeconds < 50 || got.Error.Data.RetryAfterSeconds > 60 {
		t.Fatalf("a second echo within the minute: got %d %s, want error %d with retryAfterSeconds about 60", resp.StatusCode, b, mcphttp.CodeRateLimited)
	}
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra != got.Error.Data.RetryAfterSeconds {
		t.Errorf("Retry-After: got %q, want %d", resp.Header.Get("Retry-After"), got.Error.Data.RetryAfterSeconds)
	}
}
