package httpedge_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
)

// TestEveryRoute holds the edge's checks to every route it mounts, not
// only /mcp: a foreign Origin and a rebinding Host are refused on open and
// authenticated routes alike, a missing token and an oversized body on
// authenticated ones, and the probes answer without token or Origin.
func TestEveryRoute(t *testing.T) {
	edge := httpedge.New(httpedge.Config{AuthToken: "s3cret", MaxBodyBytes: 64, AllowedOrigins: []string{"https://app.example"}})
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := "nobody"
		if c := auth.CallerFrom(r.Context()); c != nil {
			who = c.Subject
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d", r.URL.Path, who, len(b))
	})
	edge.Open("/open", echo)
	edge.Authenticated("/mcp", echo)
	edge.Authenticated("/a2a", echo)
	hs := httptest.NewServer(edge.Handler())
	t.Cleanup(hs.Close)

	tests := []struct {
		name       string
		method     string
		path       string
		header     map[string]string
		body       string
		wantStatus int
		wantBody   string
	}{
		{name: "open route without token", method: "GET", path: "/open", wantStatus: 200, wantBody: "/open nobody 0"},
		{name: "authenticated route with token", method: "POST", path: "/a2a", header: map[string]string{"Authorization": "Bearer s3cret"}, body: "{}", wantStatus: 200, wantBody: "/a2a " + auth.StaticSubject + " 2"},
		{name: "authenticated route without token", method: "POST", path: "/a2a", body: "{}", wantStatus: 401},
		{name: "wrong token", method: "POST", path: "/mcp", header: map[string]string{"Authorization": "Bearer nope"}, body: "{}", wantStatus: 401},
		{name: "foreign origin on an open route", method: "GET", path: "/open", header: map[string]string{"Origin": "https://evil.example"}, wantStatus: 403, wantBody: "expose.agent.mcp.allowed_origins"},
		{name: "foreign origin on an authenticated route", method: "POST", path: "/a2a", header: map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer s3cret"}, body: "{}", wantStatus: 403},
		{name: "allowed origin", method: "GET", path: "/open", header: map[string]string{"Origin": "https://app.example"}, wantStatus: 200},
		{name: "rebinding host", method: "GET", path: "/open", header: map[string]string{"Host": "attacker.example"}, wantStatus: 403, wantBody: "not this machine's"},
		{name: "oversized body", method: "POST", path: "/mcp", header: map[string]string{"Authorization": "Bearer s3cret"}, body: strings.Repeat("x", 65), wantStatus: 413},
		{name: "liveness probe without token or origin check", method: "GET", path: "/healthz", header: map[string]string{"Origin": "https://evil.example"}, wantStatus: 200},
		{name: "readiness probe", method: "GET", path: "/readyz", wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, hs.URL+tt.path, bytes.NewBufferString(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(b), tt.wantBody) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, b, tt.wantStatus, tt.wantBody)
			}
			if tt.header["Origin"] == "https://app.example" && resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
				t.Errorf("an allowed origin got no CORS header: %v", resp.Header)
			}
		})
	}
}
