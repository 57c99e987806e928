package config

import (
	"strings"
	"testing"
)

func TestMetricsRefusals(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"port missing", "identity: ops\nexpose: {agent: {metrics: {}}}\n", "expose.agent.metrics.port",
			"expose.agent.metrics.port is required: add expose.agent.metrics.port: PORT"},
		{"port missing, key empty", "identity: ops\nexpose:\n  agent:\n    metrics:\n", "expose.agent.metrics.port", "is required"},
		{"port missing, address set", "identity: ops\nexpose: {agent: {metrics: {address: 0.0.0.0}}}\n", "expose.agent.metrics.port", "is required"},
		{"port negative", "identity: ops\nexpose: {agent: {metrics: {port: -1}}}\n", "expose.agent.metrics.port", "expose.agent.metrics.port -1 is not a TCP port"},
		{"port too high", "identity: ops\nexpose: {agent: {metrics: {port: 70000}}}\n", "expose.agent.metrics.port", "70000 is not a TCP port"},
		{"address with a port", "identity: ops\nexpose: {agent: {metrics: {address: '127.0.0.1:9464', port: 9464}}}\n", "expose.agent.metrics.address",
			`expose.agent.metrics.address "127.0.0.1:9464" is not a host: give an IP address or host name and put the port in expose.agent.metrics.port`},
		{"address with a path", "identity: ops\nexpose: {agent: {metrics: {address: 'host/metrics', port: 9464}}}\n", "expose.agent.metrics.address", "is not a host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRefusal(t, ModeInfo, tt.yaml, tt.wantKey, tt.wantMsg) })
	}
}

func TestMetricsAddress(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"absent", "identity: ops\n", ""},
		{"loopback by default", "identity: ops\nexpose: {agent: {metrics: {port: 9464}}}\n", "127.0.0.1:9464"},
		{"every interface", "identity: ops\nexpose: {agent: {metrics: {address: 0.0.0.0, port: 9464}}}\n", "0.0.0.0:9464"},
		{"IPv6", "identity: ops\nexpose: {agent: {metrics: {address: '::1', port: 9464}}}\n", "[::1]:9464"},
		{"IPv6 bracketed", "identity: ops\nexpose: {agent: {metrics: {address: '[::1]', port: 9464}}}\n", "[::1]:9464"},
		{"free port", "identity: ops\nexpose: {agent: {metrics: {port: 0}}}\n", "127.0.0.1:0"},
		{"host name", "identity: ops\nexpose: {agent: {metrics: {address: metrics.internal, port: 9100}}}\n", "metrics.internal:9100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			if _, err := c.Validate(ModeInfo); err != nil {
				t.Fatalf("Validate: got %v, want no error", err)
			}
			got := ""
			if m := c.Expose.Agent.Metrics; m != nil {
				got = m.HostPort()
			}
			if got != tt.want {
				t.Errorf("got address %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMetricsUnknownKey(t *testing.T) {
	_, err := Parse([]byte("identity: ops\nexpose: {agent: {metrics: {port: 9464, path: /m}}}\n"), testFile)
	if err == nil || !strings.Contains(err.Error(), "expose.agent.metrics.path") {
		t.Fatalf("got %v, want an error naming expose.agent.metrics.path", err)
	}
}
