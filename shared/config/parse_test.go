package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func TestParseFullExample(t *testing.T) {
	c := mustParse(t, fullYAML)
	if got, want := c.Identity, "nats-ops"; got != want {
		t.Errorf("got identity %q, want %q", got, want)
	}
	if got, want := c.File, testFile; got != want {
		t.Errorf("got file %q, want %q", got, want)
	}
	m := c.Expose.Agent.MCP
	if m == nil {
		t.Fatalf("got no expose.agent.mcp, want one")
	}
	if got, want := m.ToolTimeout.Duration, time.Minute; got != want {
		t.Errorf("got mcp tool_timeout %v, want %v", got, want)
	}
	if got, want := m.ConfirmOverMCP, ConfirmAlways; got != want {
		t.Errorf("got confirm_over_mcp %q, want %q", got, want)
	}
	if got, want := m.Instructions, "Tools for the NATS operations team.\n"; got != want {
		t.Errorf("got instructions %q, want %q", got, want)
	}
	if got, want := strings.Join(m.Builtins, ","), "knowledge_search,knowledge_enumerate"; got != want {
		t.Errorf("got builtins %q, want %q", got, want)
	}
	if m.TaskRetention.Duration != 5*time.Minute || m.MaxTasks != 16 {
		t.Errorf("got task_retention %v and max_tasks %d, want 5m and 16", m.TaskRetention.Duration, m.MaxTasks)
	}
	if f := m.Fleet; f == nil || f.Bucket != "OPS_GATEWAY" || f.InstanceTTL.Duration != 9*time.Second || f.Replicas != 3 {
		t.Errorf("got fleet %+v, want OPS_GATEWAY, 9s, 3 replicas", f)
	}
	if a := c.Expose.Agent.A2A; a == nil || !a.ServeTools || a.MaxConcurrentTools != 8 || a.ToolTimeout.Duration != 45*time.Second {
		t.Errorf("got a2a %+v, want serve_tools, 8, 45s", a)
	}
	if got, want := len(c.RemoteTools), 2; got != want {
		t.Fatalf("got %d remote_tools, want %d", got, want)
	}
	if got, want := c.RemoteTools[1].Exclude.Tools[0], "delete_*"; got != want {
		t.Errorf("got remote_tools[1].exclude.tools[0] %q, want %q", got, want)
	}
	if got, want := c.RefreshInterval(), 2*time.Minute; got != want {
		t.Errorf("got refresh interval %v, want %v", got, want)
	}
	if got, want := c.Expose.Agent.Tools.Exclude.Tags[0], "slow"; got != want {
		t.Errorf("got expose.agent.tools.exclude.tags[0] %q, want %q", got, want)
	}
	if c.Knowledge == nil || c.Knowledge.Directory != "./docs" {
		t.Errorf("got knowledge %+v, want directory ./docs", c.Knowledge)
	}
	for _, mode := range []Mode{ModeMCP, ModeA2AServe, ModeInfo} {
		warnings, err := c.Validate(mode)
		if err != nil {
			t.Errorf("Validate(%s): got %v, want no error", mode, err)
		}
		if len(warnings) != 0 {
			t.Errorf("Validate(%s): got warnings %q, want none", mode, warnings)
		}
	}
}

func TestParseUnknownKeys(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantKey  string
		wantLine int
		wantMsg  string
	}{
		{
			name:     "top level",
			yaml:     "identity: ops\nidentiy: ops2\n",
			wantKey:  "identiy",
			wantLine: 2,
			wantMsg:  "agent.yaml:2: unknown key identiy: did you mean identity?",
		},
		{
			name:     "top level far from any key",
			yaml:     "identity: ops\nmcp_servers: []\n",
			wantKey:  "mcp_servers",
			wantLine: 2,
			wantMsg:  "unknown key mcp_servers: remove it or use one of the keys here: application_path,",
		},
		{
			name:     "expose.agent.mcp",
			yaml:     "identity: ops\nexpose:\n  agent:\n    mcp:\n      port: 8080\n      adress: 0.0.0.0\n",
			wantKey:  "expose.agent.mcp.adress",
			wantLine: 6,
			wantMsg:  "agent.yaml:6: unknown key expose.agent.mcp.adress: did you mean address? (keys here: address, agent2agent, allowed_origins, auth, auth_token_env,",
		},
		{
			name:     "expose.agent.a2a in flow style",
			yaml:     "identity: ops\nexpose: {agent: {a2a: {serve: true}}}\n",
			wantKey:  "expose.agent.a2a.serve",
			wantLine: 2,
			wantMsg:  "unknown key expose.agent.a2a.serve",
		},
		{
			name:     "expose level",
			yaml:     "identity: ops\nexpose:\n  mcp: {}\n",
			wantKey:  "expose.mcp",
			wantLine: 3,
			wantMsg:  "unknown key expose.mcp: remove it or use one of the keys here: agent",
		},
		{
			name:     "remote_tools[0]",
			yaml:     "identity: ops\nremote_tools:\n  - host: billing\n    prefix: b_\n",
			wantKey:  "remote_tools[0].prefix",
			wantLine: 4,
			wantMsg:  "unknown key remote_tools[0].prefix: remove it or use one of the keys here: exclude, host, include",
		},
		{
			name:     "second remote host",
			yaml:     "identity: ops\nremote_tools:\n  - host: a\n  - hots: b\n",
			wantKey:  "remote_tools[1].hots",
			wantLine: 4,
			wantMsg:  "did you mean host?",
		},
		{
			name:     "filter",
			yaml:     "identity: ops\nremote_tools:\n  - host: a\n    include:\n      names: [x]\n",
			wantKey:  "remote_tools[0].include.names",
			wantLine: 5,
			wantMsg:  "keys here: tags, tools",
		},
		{
			name:     "expose.agent.tools",
			yaml:     "identity: ops\nexpose:\n  agent:\n    tools:\n      includes: {tools: [x]}\n",
			wantKey:  "expose.agent.tools.includes",
			wantLine: 5,
			wantMsg:  "did you mean include?",
		},
		{
			name:     "knowledge",
			yaml:     "identity: ops\nknowledge:\n  dir: docs\n",
			wantKey:  "knowledge.dir",
			wantLine: 3,
			wantMsg:  "keys here: check_interval, directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), testFile)
			requireInvalid(t, err)
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("got %T, want *Error", err)
			}
			if ce.Key != tt.wantKey {
				t.Errorf("got key %q, want %q", ce.Key, tt.wantKey)
			}
			if ce.Line != tt.wantLine {
				t.Errorf("got line %d, want %d", ce.Line, tt.wantLine)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d: ", testFile, tt.wantLine)) {
				t.Errorf("got %q, want it to start with the file and line", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestParseRefusals(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantKey string
		wantMsg string
	}{
		{"empty", "", "identity", "agent.yaml: the file holds no configuration: add identity: NAME"},
		{"only comments", "# nothing yet\n", "identity", "holds no configuration"},
		{"only a separator", "---\n", "identity", "holds no configuration"},
		{"null document", "~\n", "identity", "holds no configuration"},
		{"two documents", "identity: a\n---\nidentity: b\n", "", "agent.yaml:3: the file holds 2 YAML documents, want one"},
		{"top level list", "- identity: a\n", "", "agent.yaml:1: the top level: want a mapping of keys such as identity: NAME, got a list"},
		{"top level scalar", "ops\n", "", "the top level: want a mapping"},
		{"identity a list", "identity: [a]\n", "identity", "agent.yaml:1: identity: want a string, got a list"},
		{"port a string", "expose: {agent: {mcp: {port: http}}}\n", "expose.agent.mcp.port", "expose.agent.mcp.port: want a whole number, got a string"},
		{"port overflow", "expose: {agent: {mcp: {port: 99999999999999999999999}}}\n", "expose.agent.mcp.port", "expose.agent.mcp.port: "},
		{"serve_tools yes", "expose: {agent: {a2a: {serve_tools: yes}}}\n", "expose.agent.a2a.serve_tools", "expose.agent.a2a.serve_tools: want true or false, got a string"},
		{"unquoted tag in a flow mapping", "include: {tags: [impact:ro]}\n", "include.tags[0]", "include.tags[0]: want a string, got a mapping: quote a value that holds a colon, such as 'impact:rw'"},
		{"remote_tools a mapping", "remote_tools: {host: a}\n", "remote_tools", "remote_tools: want a list, got a mapping"},
		{"remote host a number", "remote_tools: [5]\n", "remote_tools[0]", "remote_tools[0]: want a mapping"},
		{"duration without unit", "expose:\n  agent:\n    mcp:\n      tool_timeout: 30\n", "expose.agent.mcp.tool_timeout", `agent.yaml:4: expose.agent.mcp.tool_timeout: want a duration such as 30s or 1m30s, got "30": time: missing unit`},
		{"duration garbage", "expose: {agent: {a2a: {tool_timeout: soon}}}\n", "expose.agent.a2a.tool_timeout", `expose.agent.a2a.tool_timeout: want a duration such as 30s or 1m30s, got "soon"`},
		{"duration a list", "remote_refresh_interval: [1s]\n", "remote_refresh_interval", "remote_refresh_interval: want a duration such as 30s, got a list"},
		{"task retention garbage", "expose: {agent: {mcp: {task_retention: later}}}\n", "expose.agent.mcp.task_retention", `expose.agent.mcp.task_retention: want a duration`},
		{"refresh garbage", "remote_refresh_interval: often\n", "remote_refresh_interval", `remote_refresh_interval: want a duration`},
		{"duplicate key", "identity: a\nidentity: b\n", "", `agent.yaml:2: parsing YAML: mapping key "identity" already defined`},
		{"syntax", "identity: a\n  nats_context: b\n", "", "agent.yaml:1: parsing YAML: "},
		{"unterminated quote", "identity: \"ops\n", "", "parsing YAML: "},
		{"too large", "identity: a\n" + strings.Repeat("#", MaxFileSize), "", "agent.yaml: the file is larger than 1048576 bytes"},
		{"too many tokens", "identity: a\nconfirm_tags: [" + strings.Repeat("t,", maxTokens) + "t]\n", "", "more than 16384 YAML tokens"},
		{"flow nesting", "memory: " + strings.Repeat("[", maxNesting+1), "", "agent.yaml:1: values are nested more than 64 levels deep"},
		{"sequence chain", "memory: " + strings.Repeat("- ", maxNesting+1) + "x\n", "", "nested more than 64 levels"},
		{"alias expansion", billionLaughs(), "", "aliases expand the document to more than 100000 values"},
		{"tag", "identity: !!str ops\n", "", "agent.yaml:1: YAML tags such as !!str are not supported: remove the tag"},
		{"tag on an empty value", "include:\n  tags: !!seq\n", "", "agent.yaml:2: YAML tags such as !!seq are not supported"},
		{"custom tag swallowing keys", "include:\n  tags: !foo\nidentity: x\n", "", "YAML tags such as !foo are not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), testFile)
			requireInvalid(t, err)
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("got %T (%v), want *Error", err, err)
			}
			if ce.Key != tt.wantKey {
				t.Errorf("got key %q, want %q", ce.Key, tt.wantKey)
			}
			if ce.File != testFile {
				t.Errorf("got file %q, want %q", ce.File, testFile)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("got a multi-line message %q, want one line", err)
			}
		})
	}
}

// billionLaughs nests aliases ten wide and eleven deep: a few hundred bytes
// that would decode to 10^11 values.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("identity: ops\nmemory:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "  a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestParseAcceptsAliasesAndMarks(t *testing.T) {
	src := "\xef\xbb\xbf" + `identity: ops
include: &common
  tools: ["stream_*"]
remote_tools:
  - host: a
    include: *common
expose:
  agent:
    mcp:
      tool_timeout: "10s"
---
`
	c := mustParse(t, src)
	if got := c.RemoteTools[0].Include.Tools; len(got) != 1 || got[0] != "stream_*" {
		t.Errorf("got remote include %v, want [stream_*]", got)
	}
	if got, want := c.Expose.Agent.MCP.ToolTimeout.Duration, 10*time.Second; got != want {
		t.Errorf("got tool_timeout %v, want %v", got, want)
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name        string
		yaml        string
		mcp         *MCP
		a2a         *A2A
		refresh     time.Duration
		refreshSet  bool
		wantRefresh time.Duration
	}{
		{
			name:        "nothing exposed",
			yaml:        "identity: ops\n",
			wantRefresh: DefaultRemoteRefresh,
		},
		{
			name:        "empty mcp block gets every default",
			yaml:        "identity: ops\nexpose: {agent: {mcp: {}}}\n",
			mcp:         &MCP{MaxConcurrentTools: tool.DefaultMaxConcurrent, ToolTimeout: Duration{tool.DefaultTimeout}, ConfirmOverMCP: ConfirmAuto},
			wantRefresh: DefaultRemoteRefresh,
		},
		{
			name:        "null mcp block is present",
			yaml:        "identity: ops\nexpose:\n  agent:\n    mcp:\n    a2a: ~\n",
			mcp:         &MCP{MaxConcurrentTools: tool.DefaultMaxConcurrent, ToolTimeout: Duration{tool.DefaultTimeout}, ConfirmOverMCP: ConfirmAuto},
			a2a:         &A2A{MaxConcurrentTools: tool.DefaultMaxConcurrent, ToolTimeout: Duration{tool.DefaultTimeout}},
			wantRefresh: DefaultRemoteRefresh,
		},
		{
			name:        "zeros mean the defaults",
			yaml:        "identity: ops\nexpose: {agent: {mcp: {max_concurrent_tools: 0, tool_timeout: 0s}, a2a: {serve_tools: true, max_concurrent_tools: 0}}}\n",
			mcp:         &MCP{MaxConcurrentTools: tool.DefaultMaxConcurrent, ToolTimeout: Duration{tool.DefaultTimeout}, ConfirmOverMCP: ConfirmAuto},
			a2a:         &A2A{ServeTools: true, MaxConcurrentTools: tool.DefaultMaxConcurrent, ToolTimeout: Duration{tool.DefaultTimeout}},
			wantRefresh: DefaultRemoteRefresh,
		},
		{
			name:        "set values are kept",
			yaml:        "identity: ops\nexpose: {agent: {mcp: {max_concurrent_tools: 5, tool_timeout: 2m, confirm_over_mcp: never}, a2a: {max_concurrent_tools: 3, tool_timeout: 5s}}}\n",
			mcp:         &MCP{MaxConcurrentTools: 5, ToolTimeout: Duration{2 * time.Minute}, ConfirmOverMCP: ConfirmNever},
			a2a:         &A2A{MaxConcurrentTools: 3, ToolTimeout: Duration{5 * time.Second}},
			wantRefresh: DefaultRemoteRefresh,
		},
		{
			name:        "refresh turned off stays off",
			yaml:        "identity: ops\nremote_refresh_interval: 0s\n",
			wantRefresh: 0,
		},
		{
			name:        "bare zero refresh is off too",
			yaml:        "identity: ops\nremote_refresh_interval: 0\n",
			wantRefresh: 0,
		},
		{
			name:        "refresh set",
			yaml:        "identity: ops\nremote_refresh_interval: 90s\n",
			wantRefresh: 90 * time.Second,
		},
		{
			name:        "null refresh is the default",
			yaml:        "identity: ops\nremote_refresh_interval: null\n",
			wantRefresh: DefaultRemoteRefresh,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.yaml)
			if got := c.Expose.Agent.MCP; !equalMCP(got, tt.mcp) {
				t.Errorf("got mcp %+v, want %+v", got, tt.mcp)
			}
			if got := c.Expose.Agent.A2A; (got == nil) != (tt.a2a == nil) || (got != nil && *got != *tt.a2a) {
				t.Errorf("got a2a %+v, want %+v", got, tt.a2a)
			}
			if got := c.RefreshInterval(); got != tt.wantRefresh {
				t.Errorf("got refresh interval %v, want %v", got, tt.wantRefresh)
			}
		})
	}
}

func equalMCP(a, b *MCP) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MaxConcurrentTools == b.MaxConcurrentTools && a.ToolTimeout == b.ToolTimeout && a.ConfirmOverMCP == b.ConfirmOverMCP
}

func TestRefreshIntervalOfHandBuiltConfig(t *testing.T) {
	var c Config
	if got, want := c.RefreshInterval(), DefaultRemoteRefresh; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(good, []byte(fullYAML), 0o600); err != nil {
		t.Fatalf("writing %s: %v", good, err)
	}
	c, err := Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.File != good {
		t.Errorf("got file %q, want %q", c.File, good)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	requireInvalid(t, err)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want it to wrap %v", err, fs.ErrNotExist)
	}

	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("identity: a\n"+strings.Repeat("# pad\n", MaxFileSize/6+1)), 0o600); err != nil {
		t.Fatalf("writing %s: %v", big, err)
	}
	_, err = Load(big)
	requireInvalid(t, err)
	if want := big + ": the file is larger than"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start with %q", err, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("identity: a\nidentty: b\n"), 0o600); err != nil {
		t.Fatalf("writing %s: %v", bad, err)
	}
	_, err = Load(bad)
	requireInvalid(t, err)
	if want := bad + ":2: unknown key identty"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %q, want it to start with %q", err, want)
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{File: "a.yaml", Line: 3, Msg: "msg"}, "a.yaml:3: msg"},
		{&Error{File: "a.yaml", Msg: "msg", Err: cause}, "a.yaml: msg: cause"},
		{&Error{Line: 3, Msg: "msg"}, "line 3: msg"},
		{&Error{Msg: "msg"}, "msg"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
		if !errors.Is(tt.err, ErrInvalidConfig) {
			t.Errorf("%q: got no %v in the chain, want it", tt.want, ErrInvalidConfig)
		}
	}
	if !errors.Is(&Error{Msg: "m", Err: cause}, cause) {
		t.Errorf("got no cause in the chain, want it")
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"adress", "address", 1},
		{"identiy", "identity", 1},
		{"hots", "host", 2},
		{"abc", "", 3},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q): got %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		fullYAML,
		"",
		"identity: ops\n",
		"identity: ops\nexpose: {agent: {mcp: {}}}\n",
		"identity: a.b\nexpose: {agent: {a2a: {serve_tools: true, tool_timeout: -1s}}}\n",
		"identity: ops\nremote_tools: [{host: a, exclude: {tags: [x]}}, {host: a}]\n",
		"identity: ops\nremote_refresh_interval: 0\n",
		"a: &a [1]\nb: *a\n",
		"- x\n",
		"identity: a\n---\nidentity: b\n",
		"expose: {agent: {mcp: {tool_timeout: 30}}}\n",
		"\xef\xbb\xbfidentity: x\n",
		"identity: \"\\x00\"\n",
		billionLaughs(),
		"include:\n  tags: !!seq\n",
		"memory: {a: &x [1], <<: *x}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want it to wrap %v", err, ErrInvalidConfig)
			}
			return
		}
		if c.RemoteRefreshInterval == nil {
			t.Fatalf("got no refresh interval after defaults")
		}
		if m := c.Expose.Agent.MCP; m != nil && (m.MaxConcurrentTools == 0 || m.ToolTimeout.Duration == 0 || m.ConfirmOverMCP == "") {
			t.Fatalf("got mcp %+v, want defaults filled in", m)
		}
		for _, mode := range []Mode{ModeMCP, ModeA2AServe, ModeInfo} {
			if _, err := c.Validate(mode); err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate(%s): got %v, want it to wrap %v", mode, err, ErrInvalidConfig)
			}
		}
	})
}

func TestLoadFor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte("identity: demo\nmemory: {}\nexpose:\n  agent:\n    mcp: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, warnings, err := LoadFor(path, ModeMCP)
	if err != nil || c == nil || c.Identity != "demo" {
		t.Fatalf("got %v, %v, want the config", c, err)
	}
	if len(warnings) == 0 {
		t.Errorf("got no warnings, want memory and application_path warned about")
	}
	c, warnings, err = LoadFor(path, ModeA2AServe)
	if c != nil || err == nil || !strings.Contains(err.Error(), "expose.agent.a2a.serve_tools: true") {
		t.Errorf("got %v, %v, want a refusal naming expose.agent.a2a.serve_tools", c, err)
	}
	if len(warnings) == 0 {
		t.Errorf("got no warnings beside the refusal, want them returned")
	}
}
