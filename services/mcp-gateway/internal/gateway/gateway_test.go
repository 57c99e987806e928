package gateway

import (
	"net"
	"strings"
	"testing"
)

// TestListenResource: only a listener on loopback names the gateway for
// its clients; any other address needs expose.agent.mcp.auth.resource.
func TestListenResource(t *testing.T) {
	tests := []struct {
		name string
		addr net.Addr
		want string // empty: an error naming auth.resource
	}{
		{"IPv4 loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/mcp"},
		{"another IPv4 loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 8080}, "http://127.0.0.2:8080/mcp"},
		{"IPv6 loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 9000}, "http://[::1]:9000/mcp"},
		{"every IPv4 interface", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, ""},
		{"every IPv6 interface", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, ""},
		{"a LAN address", &net.TCPAddr{IP: net.IPv4(192, 168, 1, 10), Port: 8080}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listenResource(tt.addr)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), "expose.agent.mcp.auth.resource is required") {
					t.Errorf("got %q, %v, want an error naming expose.agent.mcp.auth.resource", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}
