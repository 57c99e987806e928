package config

import (
	"errors"
	"testing"
)

// testFile is the file name every test parses under, so messages can be
// checked for it.
const testFile = "agent.yaml"

// fullYAML sets every key; it is valid for every mode.
const fullYAML = `# An agent that serves the nats CLI both ways.
identity: nats-ops
application_path: /usr/local/bin/nats
nats_context: ops
include:
  tools: ["stream_*", "consumer_*"]
  tags: ["impact:ro"]
exclude:
  tools: ["stream_rm"]
  tags: ["experimental"]
confirm_tags: ["impact:rw"]
credential_env: [NATS_PASSWORD, AWS_SECRET_ACCESS_KEY]
expose:
  agent:
    tools:
      include: {tools: ["*"]}
      exclude: {tags: ["slow"]}
    mcp:
      address: 127.0.0.1
      port: 8099
      instructions: |
        Tools for the NATS operations team.
      max_concurrent_tools: 4
      tool_timeout: 1m
      confirm_over_mcp: always
      builtins: [knowledge_search, knowledge_enumerate]
      auth_token_env: MCP_TOKEN
      task_retention: 5m
      max_tasks: 16
      fleet: {bucket: OPS_GATEWAY, instance_ttl: 9s, replicas: 3}
    a2a:
      serve_tools: true
      max_concurrent_tools: 8
      tool_timeout: 45s
remote_tools:
  - host: billing
    include: {tools: ["invoice_*"]}
  - host: k8s_ops
    exclude: {tools: ["delete_*"]}
remote_refresh_interval: 2m
knowledge:
  directory: ./docs
`

// mustParse parses src or fails the test.
func mustParse(tb testing.TB, src string) *Config {
	tb.Helper()
	c, err := Parse([]byte(src), testFile)
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	return c
}

// configErrors returns every [*Error] in err's tree, in order.
func configErrors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if ce, ok := err.(*Error); ok {
			out = append(out, ce)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// requireInvalid fails the test unless err wraps [ErrInvalidConfig].
func requireInvalid(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("got no error, want one wrapping %v", ErrInvalidConfig)
	}
	if !errors.Is(err, ErrInvalidConfig) {
		tb.Fatalf("got %v, want it to wrap %v", err, ErrInvalidConfig)
	}
}
