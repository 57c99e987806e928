package auth

import (
	"slices"
	"testing"
)

func TestIssuerMetadataURLs(t *testing.T) {
	tests := []struct {
		issuer string
		want   []string
	}{
		{"https://id.example", []string{
			"https://id.example/.well-known/openid-configuration",
			"https://id.example/.well-known/oauth-authorization-server",
		}},
		{"https://id.example/", []string{
			"https://id.example/.well-known/openid-configuration",
			"https://id.example/.well-known/oauth-authorization-server",
		}},
		{"https://id.example/realms/ops", []string{
			"https://id.example/realms/ops/.well-known/openid-configuration",
			"https://id.example/.well-known/oauth-authorization-server/realms/ops",
			"https://id.example/.well-known/openid-configuration/realms/ops",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.issuer, func(t *testing.T) {
			got, err := issuerMetadataURLs(tt.issuer)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestMetadataURL(t *testing.T) {
	tests := []struct{ resource, want string }{
		{"https://gw.example/mcp", "https://gw.example/.well-known/oauth-protected-resource/mcp"},
		{"https://gw.example:8443/mcp/", "https://gw.example:8443/.well-known/oauth-protected-resource/mcp"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/.well-known/oauth-protected-resource"},
		{"https://gw.example/", "https://gw.example/.well-known/oauth-protected-resource"},
		{"https://gw.example/a/mcp?tenant=x", "https://gw.example/.well-known/oauth-protected-resource/a/mcp?tenant=x"},
	}
	for _, tt := range tests {
		t.Run(tt.resource, func(t *testing.T) {
			if got, err := metadataURL(tt.resource); err != nil || got != tt.want {
				t.Errorf("got %s, %v, want %s", got, err, tt.want)
			}
		})
	}
}
