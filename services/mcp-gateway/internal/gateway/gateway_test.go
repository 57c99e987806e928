package gateway

import "testing"

func TestLoopback(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true}, {"::1", true}, {"localhost", true}, {"127.0.0.2", true},
		{"0.0.0.0", false}, {"", false}, {"::", false}, {"192.168.1.10", false}, {"example.com", false},
	}
	for _, tt := range tests {
		if got := loopback(tt.host); got != tt.want {
			t.Errorf("loopback(%q): got %t, want %t", tt.host, got, tt.want)
		}
	}
}
