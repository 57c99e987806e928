package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/knowledge"
)

// servable is valid for every mode; refusal cases start from it.
const servable = `identity: ops
application_path: /bin/app
nats_context: ops
expose:
  agent:
    mcp: {}
    a2a: {serve_tools: true}
`

func TestValidateRefusals(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		yaml    string
		wantKey string
		wantMsg string
	}{
		// Every mode.
		{"agent2agent url not absolute", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {agent2agent: {url: 'gw.example.com'}}}}\n", "expose.agent.mcp.agent2agent.url",
			`expose.agent.mcp.agent2agent.url "gw.example.com": want scheme http or https`},
		{"agent2agent url with query", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {agent2agent: {url: 'https://gw.example.com/?x=1'}}}}\n", "expose.agent.mcp.agent2agent.url",
			"want no user, query or fragment"},
		{"fleet bucket", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {fleet: {bucket: 'a.b'}}}}\n", "expose.agent.mcp.fleet.bucket",
			`agent.yaml: expose.agent.mcp.fleet.bucket "a.b" is not a JetStream bucket name`},
		{"fleet instance ttl", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {fleet: {instance_ttl: 100ms}}}}\n", "expose.agent.mcp.fleet.instance_ttl",
			"expose.agent.mcp.fleet.instance_ttl must be at least 1s, got 100ms"},
		{"fleet negative instance ttl", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {fleet: {instance_ttl: -5s}}}}\n", "expose.agent.mcp.fleet.instance_ttl", "must be at least 1s"},
		{"fleet replicas", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {fleet: {replicas: 7}}}}\n", "expose.agent.mcp.fleet.replicas",
			"expose.agent.mcp.fleet.replicas must be between 1 and 5, got 7"},
		{"fleet without nats", ModeMCP, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {fleet: {}}}}\n", "nats_context",
			"expose.agent.mcp.fleet keeps tasks in JetStream: add nats_context: NAME"},
		{"identity missing", ModeInfo, "nats_context: ops\n", "identity",
			"agent.yaml: identity is required: add identity: NAME matching ^[a-zA-Z0-9_-]{1,64}$"},
		{"identity with a dot", ModeInfo, "identity: ops.eu\n", "identity",
			`agent.yaml: identity "ops.eu" cannot name NATS subjects: fix identity: invalid identity: "ops.eu" does not match ^[a-zA-Z0-9_-]{1,64}$`},
		{"identity with a star", ModeMCP, "identity: 'ops*'\nexpose: {agent: {mcp: {}}}\n", "identity", `identity "ops*" cannot name NATS subjects`},
		{"identity with a gt", ModeA2AServe, "identity: 'ops>'\napplication_path: /bin/app\nnats_context: ops\nexpose: {agent: {a2a: {serve_tools: true}}}\n", "identity", `identity "ops>" cannot name NATS subjects`},
		{"identity with a space", ModeInfo, "identity: ops eu\n", "identity", `identity "ops eu" cannot name NATS subjects`},
		{"identity too long", ModeInfo, "identity: " + strings.Repeat("a", 65) + "\n", "identity", "cannot name NATS subjects: fix identity"},
		{"include glob", ModeInfo, "identity: ops\ninclude: {tools: ['stream_[']}\n", "include.tools[0]",
			`agent.yaml: include.tools[0] "stream_[" is not a valid glob: fix include.tools[0]: syntax error in pattern`},
		{"exclude glob", ModeInfo, "identity: ops\nexclude: {tools: [ok, '\\']}\n", "exclude.tools[1]", `exclude.tools[1] "\\" is not a valid glob`},
		{"empty glob", ModeInfo, "identity: ops\ninclude: {tools: ['']}\n", "include.tools[0]", "include.tools[0] is empty: remove it or give a name glob"},
		{"empty tag", ModeInfo, "identity: ops\nexclude: {tags: [' ']}\n", "exclude.tags[0]", "exclude.tags[0] is empty"},
		{"expose include glob", ModeInfo, "identity: ops\nexpose: {agent: {tools: {include: {tools: ['[a-']}}}}\n", "expose.agent.tools.include.tools[0]", "expose.agent.tools.include.tools[0] \"[a-\" is not a valid glob"},
		{"expose exclude glob", ModeInfo, "identity: ops\nexpose: {agent: {tools: {exclude: {tools: ['[']}}}}\n", "expose.agent.tools.exclude.tools[0]", "fix expose.agent.tools.exclude.tools[0]"},
		{"confirm tag empty", ModeInfo, "identity: ops\nconfirm_tags: [impact:rw, '']\n", "confirm_tags[1]", "agent.yaml: confirm_tags[1] is empty: remove it or name a tag such as impact:rw"},
		{"credential env", ModeInfo, "identity: ops\ncredential_env: [OK_NAME, NATS-PASSWORD]\n", "credential_env[1]",
			`agent.yaml: credential_env[1] "NATS-PASSWORD" is not an environment variable name: fix credential_env[1]`},
		{"credential env digit", ModeInfo, "identity: ops\ncredential_env: ['1X']\n", "credential_env[0]", "is not an environment variable name"},
		{"remote host missing", ModeInfo, "identity: ops\nremote_tools: [{include: {tools: [a]}}]\n", "remote_tools[0].host",
			"agent.yaml: remote_tools[0].host is required: add remote_tools[0].host: IDENTITY"},
		{"remote host invalid", ModeInfo, "identity: ops\nremote_tools: [{host: billing.eu}]\n", "remote_tools[0].host",
			`remote_tools[0].host "billing.eu" is not an agent identity: fix remote_tools[0].host: invalid identity`},
		{"remote host wildcard", ModeInfo, "identity: ops\nremote_tools: [{host: '>'}]\n", "remote_tools[0].host", "is not an agent identity"},
		{"remote host repeated", ModeInfo, "identity: ops\nremote_tools: [{host: a}, {host: b}, {host: a}]\n", "remote_tools[2].host",
			`agent.yaml: remote_tools[2].host "a" repeats remote_tools[0]: merge the two entries`},
		{"remote tag exclude", ModeInfo, "identity: ops\nremote_tools: [{host: a}, {host: b, exclude: {tags: ['impact:rw']}}]\n", "remote_tools[1].exclude.tags",
			"agent.yaml: remote_tools[1].exclude.tags cannot be honoured: discovery carries no tags"},
		{"remote include glob", ModeInfo, "identity: ops\nremote_tools: [{host: a, include: {tools: ['[']}}]\n", "remote_tools[0].include.tools[0]", "is not a valid glob"},
		{"remote exclude glob", ModeInfo, "identity: ops\nremote_tools: [{host: a, exclude: {tools: ['[']}}]\n", "remote_tools[0].exclude.tools[0]", "is not a valid glob"},
		{"negative refresh", ModeInfo, "identity: ops\nremote_refresh_interval: -5s\n", "remote_refresh_interval",
			"agent.yaml: remote_refresh_interval must not be negative, got -5s: fix remote_refresh_interval (0 turns refreshing off)"},
		{"port negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {port: -1}}}\n", "expose.agent.mcp.port", "expose.agent.mcp.port -1 is not a TCP port: use 1-65535"},
		{"port too high", ModeMCP, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {port: 65536}}}\n", "expose.agent.mcp.port", "expose.agent.mcp.port 65536 is not a TCP port"},
		{"mcp concurrency negative", ModeMCP, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {max_concurrent_tools: -2}}}\n", "expose.agent.mcp.max_concurrent_tools",
			"agent.yaml: expose.agent.mcp.max_concurrent_tools must be at least 1, got -2"},
		{"mcp timeout negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {tool_timeout: -1s}}}\n", "expose.agent.mcp.tool_timeout", "expose.agent.mcp.tool_timeout must be positive, got -1s"},
		{"confirm policy", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {confirm_over_mcp: sometimes}}}\n", "expose.agent.mcp.confirm_over_mcp",
			`agent.yaml: expose.agent.mcp.confirm_over_mcp "sometimes" is not one of auto, always, never`},
		{"auth token env", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {auth_token_env: 'my token'}}}\n", "expose.agent.mcp.auth_token_env", `expose.agent.mcp.auth_token_env "my token" is not an environment variable name`},
		{"origin with a path", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {allowed_origins: ['https://app.example.com/']}}}\n", "expose.agent.mcp.allowed_origins[0]",
			`expose.agent.mcp.allowed_origins[0] "https://app.example.com/": want only scheme://host[:port], with no user, path, query or fragment: fix expose.agent.mcp.allowed_origins[0]`},
		{"origin without scheme", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {allowed_origins: [app.example.com]}}}\n", "expose.agent.mcp.allowed_origins[0]", "want scheme http or https"},
		{"origin upper case", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {allowed_origins: ['https://App.example.com']}}}\n", "expose.agent.mcp.allowed_origins[0]", "want lower case"},
		{"origin bad port", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {allowed_origins: ['http://localhost:99999']}}}\n", "expose.agent.mcp.allowed_origins[0]", "1-65535"},
		{"origin wildcard", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {allowed_origins: ['*']}}}\n", "expose.agent.mcp.allowed_origins[0]", "want scheme http or https"},
		{"session idle negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {session_idle_timeout: -1m}}}\n", "expose.agent.mcp.session_idle_timeout", "session_idle_timeout must be positive"},
		{"max sessions negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {max_sessions: -1}}}\n", "expose.agent.mcp.max_sessions", "max_sessions must be positive"},
		{"tools page size negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {tools_page_size: -1}}}\n", "expose.agent.mcp.tools_page_size",
			"agent.yaml: expose.agent.mcp.tools_page_size must not be negative, got -1: fix expose.agent.mcp.tools_page_size (0 lists every tool in one page)"},
		{"task retention negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {task_retention: -5m}}}\n", "expose.agent.mcp.task_retention", "expose.agent.mcp.task_retention must be positive, got -5m0s"},
		{"max tasks negative", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {max_tasks: -3}}}\n", "expose.agent.mcp.max_tasks", "expose.agent.mcp.max_tasks must be positive, got -3"},
		{"unknown builtin", ModeInfo, "identity: ops\nexpose: {agent: {mcp: {builtins: [memory_store]}}}\n", "expose.agent.mcp.builtins[0]",
			`agent.yaml: expose.agent.mcp.builtins[0] "memory_store" is not a built-in: use one of knowledge_enumerate, knowledge_search`},
		{"knowledge builtin without directory", ModeMCP, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {builtins: [knowledge_search]}}}\n", "knowledge.directory",
			"agent.yaml: expose.agent.mcp.builtins lists knowledge_search, which serves documents: add knowledge.directory: PATH"},
		{"knowledge builtin with empty directory", ModeInfo, "identity: ops\nknowledge: {directory: ''}\nexpose: {agent: {mcp: {builtins: [knowledge_enumerate]}}}\n", "knowledge.directory", "add knowledge.directory"},
		{"a2a concurrency negative", ModeInfo, "identity: ops\nexpose: {agent: {a2a: {max_concurrent_tools: -1}}}\n", "expose.agent.a2a.max_concurrent_tools", "expose.agent.a2a.max_concurrent_tools must be at least 1"},
		{"a2a timeout negative", ModeInfo, "identity: ops\nexpose: {agent: {a2a: {tool_timeout: -30s}}}\n", "expose.agent.a2a.tool_timeout", "expose.agent.a2a.tool_timeout must be positive"},

		// MCP.
		{"mcp not enabled", ModeMCP, "identity: ops\napplication_path: /bin/app\n", "expose.agent.mcp",
			"agent.yaml: MCP serving is not enabled: add expose.agent.mcp: {}"},
		{"mcp remote tools without nats", ModeMCP, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {mcp: {}}}\nremote_tools: [{host: billing}]\n", "nats_context",
			"agent.yaml: remote_tools needs a NATS connection to discover its hosts: add nats_context: NAME"},

		// A2A serving.
		{"a2a not configured", ModeA2AServe, "identity: ops\napplication_path: /bin/app\nnats_context: ops\n", "expose.agent.a2a.serve_tools",
			"agent.yaml: A2A serving is not enabled: add expose.agent.a2a.serve_tools: true"},
		{"a2a serve_tools false", ModeA2AServe, "identity: ops\napplication_path: /bin/app\nnats_context: ops\nexpose: {agent: {a2a: {serve_tools: false}}}\n", "expose.agent.a2a.serve_tools",
			"A2A serving is not enabled: add expose.agent.a2a.serve_tools: true"},
		{"a2a without application", ModeA2AServe, "identity: ops\nnats_context: ops\nexpose: {agent: {a2a: {serve_tools: true}}}\n", "application_path",
			"agent.yaml: A2A serving needs the fisk application whose commands it serves: add application_path: PATH"},
		{"a2a without nats", ModeA2AServe, "identity: ops\napplication_path: /bin/app\nexpose: {agent: {a2a: {serve_tools: true}}}\n", "nats_context",
			"agent.yaml: A2A serving needs a NATS connection: add nats_context: NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRefusal(t, tt.mode, tt.yaml, tt.wantKey, tt.wantMsg)
			if !strings.HasPrefix(err.Error(), testFile+": ") {
				t.Errorf("got %q, want it to start with the file", err)
			}
			// The refusal names the key it is about, whatever else it says.
			if !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("got %q, want it to name %s", err, tt.wantKey)
			}
		})
	}
}

func TestValidateReportsEveryMissingKey(t *testing.T) {
	c := mustParse(t, "identity: ops\n")
	_, err := c.Validate(ModeA2AServe)
	requireInvalid(t, err)
	var keys []string
	for _, e := range configErrors(err) {
		keys = append(keys, e.Key)
	}
	if want := []string{"expose.agent.a2a.serve_tools", "application_path", "nats_context"}; !slices.Equal(keys, want) {
		t.Errorf("got keys %v, want %v", keys, want)
	}
	if got, want := strings.Count(err.Error(), "\n"), 2; got != want {
		t.Errorf("got %d line breaks in %q, want one refusal per line", got, err)
	}
}

func TestValidateWarnings(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		yaml    string
		want    []string
		wantErr bool
	}{
		{
			name: "clean",
			mode: ModeMCP,
			yaml: servable,
		},
		{
			name: "mcp without application",
			mode: ModeMCP,
			yaml: "identity: ops\nexpose: {agent: {mcp: {}}}\n",
			want: []string{"agent.yaml: no application_path: only built-ins and remote tools are served; add application_path to serve a fisk application's commands"},
		},
		{
			name: "loop settings",
			mode: ModeA2AServe,
			yaml: servable + "human_in_the_loop: {enabled: true}\nmemory: {store: kv}\n",
			want: []string{
				"agent.yaml: human_in_the_loop has no effect when serving: nobody is at this end to ask; remove it",
				"agent.yaml: memory has no effect when serving: served calls keep no state; remove it",
			},
		},
		{
			name: "loop settings over mcp",
			mode: ModeMCP,
			yaml: servable + "memory: false\n",
			want: []string{"agent.yaml: memory has no effect when serving: served calls keep no state; remove it"},
		},
		{
			name: "remote tag include",
			mode: ModeMCP,
			yaml: servable + "remote_tools: [{host: billing, include: {tags: ['impact:ro']}}]\n",
			want: []string{"agent.yaml: remote_tools[0].include.tags is ignored: discovery carries no tags; select tools by name with remote_tools[0].include.tools"},
		},
		{
			name: "info without application or nats",
			mode: ModeInfo,
			yaml: "identity: ops\nremote_tools: [{host: billing}]\nhuman_in_the_loop: true\n",
			want: []string{
				"agent.yaml: no application_path: only built-ins and remote tools are listed; add application_path to list a fisk application's commands",
				"agent.yaml: remote_tools are not listed without a NATS connection: add nats_context: NAME",
				"agent.yaml: human_in_the_loop has no effect when serving: nobody is at this end to ask; remove it",
			},
		},
		{
			name:    "warnings come with a refusal",
			mode:    ModeA2AServe,
			yaml:    "identity: ops\nmemory: {}\n",
			want:    []string{"agent.yaml: memory has no effect when serving: served calls keep no state; remove it"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			got, err := c.Validate(tt.mode)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got warnings %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateUnknownMode(t *testing.T) {
	c := mustParse(t, servable)
	_, err := c.Validate(Mode(0))
	requireInvalid(t, err)
	if want := "agent.yaml: validating for unknown mode Mode(0)"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

func TestValidateHandBuiltConfig(t *testing.T) {
	// Zero means default in a Config built without Parse.
	c := &Config{Identity: "ops", ApplicationPath: "/bin/app", NATSContext: "ops",
		Expose: Expose{Agent: Agent{MCP: &MCP{}, A2A: &A2A{ServeTools: true}}}}
	for _, mode := range []Mode{ModeMCP, ModeA2AServe, ModeInfo} {
		if _, err := c.Validate(mode); err != nil {
			t.Errorf("Validate(%s): got %v, want no error", mode, err)
		}
	}
	c.Identity = "a.b"
	_, err := c.Validate(ModeInfo)
	requireInvalid(t, err)
	if want := `identity "a.b" cannot name`; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start with %q (no file to name)", err, want)
	}
}

// TestIdentityRuleIsShared checks the config accepts exactly the identities
// the a2a rule accepts.
func TestIdentityRuleIsShared(t *testing.T) {
	for _, id := range []string{"ops", "a_b-C9", strings.Repeat("x", 64), strings.Repeat("x", 65), "a.b", "a*", "a>", "a b", "ä", "a\tb"} {
		c := &Config{Identity: id}
		_, err := c.Validate(ModeInfo)
		if got, want := err == nil, a2a.ValidIdentity(id); got != want {
			t.Errorf("identity %q: got accepted %v, want %v (%v)", id, got, want, err)
		}
	}
}

func TestBuiltinsAreKnowledgeTools(t *testing.T) {
	if got, want := Builtins(), knowledge.ToolNames(); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestModeString(t *testing.T) {
	tests := []struct {
		mode Mode
		want string
	}{
		{ModeMCP, "mcp"},
		{ModeA2AServe, "a2a serve"},
		{ModeInfo, "info"},
		{Mode(9), "Mode(9)"},
	}
	for _, tt := range tests {
		if got := tt.mode.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestErrorsAs(t *testing.T) {
	c := mustParse(t, "identity: ops\n")
	_, err := c.Validate(ModeMCP)
	ce, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("got %T, want *Error", err)
	}
	if got, want := ce.Key, "expose.agent.mcp"; got != want {
		t.Errorf("got key %q, want %q", got, want)
	}
}

// checkRefusal validates yaml for mode and requires exactly one refusal,
// about wantKey, whose message contains wantMsg. It returns the error.
func checkRefusal(tb testing.TB, mode Mode, yaml, wantKey, wantMsg string) error {
	tb.Helper()
	c := mustParse(tb, yaml)
	_, err := c.Validate(mode)
	requireInvalid(tb, err)
	errs := configErrors(err)
	if len(errs) != 1 {
		tb.Fatalf("got %d refusals (%v), want 1", len(errs), err)
	}
	if got := errs[0].Key; got != wantKey {
		tb.Errorf("got key %q, want %q", got, wantKey)
	}
	if !strings.Contains(err.Error(), wantMsg) {
		tb.Errorf("got %q, want it to contain %q", err, wantMsg)
	}
	return err
}
