package config_test

import (
	"fmt"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.2", true},
		{"127.255.255.254", true},
		{"::1", true},
		{"0:0:0:0:0:0:0:1", true},
		{"::ffff:127.0.0.1", true},
		{"::1%lo", true},
		{"localhost", true},
		{"LocalHost", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"192.168.1.10", false},
		{"128.0.0.1", false},
		{"::2", false},
		{"fe80::1%lo", false},
		{"example.com", false},
		{"localhost.example.com", false},
		{"localhost.", false},
		// A bare host only: brackets and ports are the caller's to split.
		{"[::1]", false},
		{"127.0.0.1:80", false},
		{"localhost:80", false},
		// Not an address: leading zeros and short forms are refused.
		{"127.000.000.001", false},
		{"127.1", false},
	}
	for _, tt := range tests {
		if got := config.IsLoopback(tt.host); got != tt.want {
			t.Errorf("IsLoopback(%q): got %t, want %t", tt.host, got, tt.want)
		}
	}
}

func ExampleIsLoopback() {
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "0.0.0.0", "gateway.example.com"} {
		fmt.Println(host, config.IsLoopback(host))
	}
	// Output:
	// 127.0.0.1 true
	// ::1 true
	// localhost true
	// 0.0.0.0 false
	// gateway.example.com false
}
