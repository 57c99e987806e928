package integration_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// Where `make tools` installs the official MCP conformance suite
// (@modelcontextprotocol/conformance) and the Node it needs, relative to
// the workspace root; the Makefile pins both versions.
const (
	conformanceNode = "bin/npm/node_modules/.bin/node"
	conformanceCLI  = "bin/npm/node_modules/.bin/conformance"
)

// notApplicablePath lists the suite's server scenarios the gateway does not
// run, one a line with the reason (see the file's header).
const notApplicablePath = "conformance/not-applicable.txt"

// demoConfig is the dev fleet's agent.yaml, the one `make run` serves: the
// suite runs against the gateway a new user meets first.
const demoConfig = "examples/demo.yaml"

// conformanceSuite is the installed suite: the Node binary and the suite's
// command it runs.
type conformanceSuite struct {
	node, cli string
}

// findConformanceSuite returns the suite `make tools` installed. A missing
// suite skips tb on a developer's machine, naming the fix; with CI set it
// fails tb, since `make test` installs the suite first and CI must not pass
// without running it.
func findConformanceSuite(tb testing.TB) conformanceSuite {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	s := conformanceSuite{node: filepath.Join(root, conformanceNode), cli: filepath.Join(root, conformanceCLI)}
	fisktest.RequireInstalled(tb, "the MCP conformance suite", s.node, s.cli)
	return s
}

// run runs the suite's command with args to completion.
func (s conformanceSuite) run(tb testing.TB, args ...string) fleettest.Result {
	tb.Helper()
	env := append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	return fleettest.Run(tb, env, s.node, append([]string{s.cli}, args...)...)
}

// serverScenarios returns every server scenario the suite knows, pending
// ones included, as `conformance list --server` prints them.
func (s conformanceSuite) serverScenarios(tb testing.TB) []string {
	tb.Helper()
	res := s.run(tb, "list", "--server")
	if res.ExitCode != 0 {
		tb.Fatalf("conformance list --server: got exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	names, err := parseScenarioList(res.Stdout)
	if err != nil {
		tb.Fatalf("conformance list --server: %v\nstdout:\n%s", err, res.Stdout)
	}
	return names
}

// scenarioLineRE matches one scenario of `conformance list`: its name, then
// the spec versions it applies to in brackets.
var scenarioLineRE = regexp.MustCompile(`^\s+- (\S+)(?: \[[^\]]*\])?$`)

// parseScenarioList returns the scenario names of `conformance list
// --server` output, in order. Any line it does not understand is an error,
// so a change of format can never hide a scenario from the test.
func parseScenarioList(out string) ([]string, error) {
	var names []string
	header := false
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.TrimSpace(line) == "":
		case !header && strings.HasPrefix(line, "Server scenarios"):
			header = true
		case !header:
			return nil, fmt.Errorf("got %q before the server scenarios header", line)
		default:
			m := scenarioLineRE.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("got %q, want a scenario line \"  - name [versions]\"", line)
			}
			if slices.Contains(names, m[1]) {
				return nil, fmt.Errorf("scenario %q listed twice", m[1])
			}
			names = append(names, m[1])
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no server scenarios listed")
	}
	return names, nil
}

// parseNotApplicable reads the not-applicable list: one scenario a line
// followed by `# reason`; blank lines and lines starting with # are
// comments. Every scenario must have a reason and appear once.
func parseNotApplicable(text string) (map[string]string, error) {
	reasons := map[string]string{}
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "#")
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		switch {
		case strings.ContainsAny(name, " \t"):
			return nil, fmt.Errorf("line %d: got %q, want one scenario name before the #", n, name)
		case reason == "":
			return nil, fmt.Errorf("line %d: scenario %q has no reason: add `# why it does not apply`", n, name)
		case reasons[name] != "":
			return nil, fmt.Errorf("line %d: scenario %q listed twice", n, name)
		}
		reasons[name] = reason
	}
	return reasons, nil
}

// readNotApplicable reads and parses [notApplicablePath].
func readNotApplicable(tb testing.TB) map[string]string {
	tb.Helper()
	b, err := os.ReadFile(notApplicablePath)
	if err != nil {
		tb.Fatalf("reading the not-applicable scenarios: %v", err)
	}
	reasons, err := parseNotApplicable(string(b))
	if err != nil {
		tb.Fatalf("%s: %v", notApplicablePath, err)
	}
	return reasons
}

// conformanceCheck is one check of a scenario, as the suite writes it to
// checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// String formats the check for a failure message: status, id, what it
// checks, the suite's error and its details.
func (c conformanceCheck) String() string {
	s := fmt.Sprintf("%s %s: %s", c.Status, c.ID, c.Description)
	if c.ErrorMessage != "" {
		s += "\n    error: " + c.ErrorMessage
	}
	if len(c.Details) > 0 {
		s += "\n    details: " + string(c.Details)
	}
	return s
}

// resultDirRE matches a directory the suite's `-o DIR` writes per server
// scenario: server-<scenario>-<timestamp>.
var resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// readScenarioResults returns the checks of every scenario the suite wrote
// into dir, by scenario name.
func readScenarioResults(tb testing.TB, dir string) map[string][]conformanceCheck {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatalf("reading the suite's results: %v", err)
	}
	results := map[string][]conformanceCheck{}
	for _, e := range entries {
		m := resultDirRE.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			tb.Fatalf("suite results: got %s in %s, want only server-<scenario>-<timestamp> directories", e.Name(), dir)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			tb.Fatalf("reading the checks of %s: %v", m[1], err)
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(b, &checks); err != nil {
			tb.Fatalf("decoding the checks of %s: %v", m[1], err)
		}
		if _, dup := results[m[1]]; dup {
			tb.Fatalf("suite results: scenario %s ran twice", m[1])
		}
		results[m[1]] = checks
	}
	return results
}

// tally splits checks into failures and counts the successes; INFO and
// WARNING checks are neither.
func tally(checks []conformanceCheck) (failed []conformanceCheck, passed int) {
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed++
		case "FAILURE":
			failed = append(failed, c)
		}
	}
	return failed, passed
}

// demoWithKnowledge writes [demoConfig] with a knowledge directory of a
// few documents served as MCP resources (expose.agent.mcp.resources:
// [knowledge]) and returns its path: the dev fleet as an operator who
// turned resources on runs it, so the suite's resource scenarios have
// resources to list.
func demoWithKnowledge(tb testing.TB) string {
	tb.Helper()
	src, err := os.ReadFile(demoConfig)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		tb.Fatalf("%s: %v", demoConfig, err)
	}
	mcp, ok := doc["expose"].(map[string]any)["agent"].(map[string]any)["mcp"].(map[string]any)
	if !ok {
		tb.Fatalf("%s: no expose.agent.mcp mapping", demoConfig)
	}
	mcp["resources"] = []string{config.ResourceKnowledge}
	docs := tb.TempDir()
	fleettest.WriteFile(tb, docs, "runbook.md", "# Runbook\n\n## Restart\n\nRestart the demo agents one at a time.\n")
	fleettest.WriteFile(tb, docs, "notes.txt", "Notes about the demo fleet.\n")
	doc["knowledge"] = map[string]any{"directory": docs, "store": filepath.Join(tb.TempDir(), "store")}
	out, err := yaml.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return fleettest.WriteFile(tb, tb.TempDir(), "demo-knowledge.yaml", string(out))
}

// startDemoFleet starts the dev fleet of cfgPath (a copy of [demoConfig])
// on a private bus, as `make run` does with its file: one `a2a-agent
// serve` on identity demo and `mcp-gateway serve` in front of it on a
// random loopback port, with fiskdemo found on PATH and the file's nats
// context in the home. It returns the gateway once it lists both its
// local tools and the ones it imports from the agent, so the suite sees
// both kinds.
func startDemoFleet(tb testing.TB, cfgPath string) *gatewayProcess {
	tb.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		tb.Fatalf("loading %s: %v", cfgPath, err)
	}
	demo := fleettest.FiskDemo(tb)
	if filepath.Base(demo) != cfg.ApplicationPath {
		tb.Fatalf("%s application_path: got %q, want %q, the demo binary found on PATH", demoConfig, cfg.ApplicationPath, filepath.Base(demo))
	}
	b := newBus(tb)
	b.home.AddContext(tb, b.ns, cfg.NATSContext, nil)
	env := b.home.Env("PATH=" + filepath.Dir(demo) + string(os.PathListSeparator) + os.Getenv("PATH"))
	fleettest.StartAgent(tb, env, cfgPath)
	gw := startGateway(tb, env, cfgPath)

	names := listNames(tb, connectMCP(tb, gw.URL, nil))
	remote := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, cfg.Identity+"_") })
	if !slices.Contains(names, "echo") || !remote {
		tb.Fatalf("gateway tools: got %v, want the local echo and tools imported from %s (prefixed %s_)", names, cfg.Identity, cfg.Identity)
	}
	return gw
}

// TestMCPConformance runs every server scenario of the official MCP
// conformance suite against `mcp-gateway serve` fronting the dev fleet,
// with knowledge documents served as resources (see [demoWithKnowledge]). A
// scenario in [notApplicablePath] must not pass (it would belong out of the
// list); every other scenario must record at least one passing check and
// no failing one. The scenario list comes from the suite itself, so a
// scenario a new suite version adds is run, not skipped.
func TestMCPConformance(t *testing.T) {
	t.Parallel()
	notApplicable := readNotApplicable(t)
	suite := findConformanceSuite(t)
	scenarios := suite.serverScenarios(t)
	for _, name := range slices.Sorted(maps.Keys(notApplicable)) {
		if !slices.Contains(scenarios, name) {
			t.Errorf("%s names %q, which the suite does not have (it lists %v): remove the line", notApplicablePath, name, scenarios)
		}
	}

	gw := startDemoFleet(t, demoWithKnowledge(t))
	out := t.TempDir()
	// One run of every scenario, pending ones included: the suite decides
	// nothing here, each scenario is judged below from its checks.
	res := suite.run(t, "server", "--url", gw.URL, "--suite", "all", "-o", out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("conformance server --url %s --suite all: exit code %d\nstdout:\n%s\nstderr:\n%s", gw.URL, res.ExitCode, res.Stdout, res.Stderr)
		}
	})
	results := readScenarioResults(t, out)

	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			checks, ok := results[sc]
			if !ok {
				t.Fatalf("got no results for %s from the suite (it wrote %d scenarios), want its checks", sc, len(results))
			}
			failed, passed := tally(checks)
			if reason, na := notApplicable[sc]; na {
				if len(failed) == 0 && passed > 0 {
					t.Errorf("got %d passing checks and no failure, want the scenario to fail as %s says it does not apply (%s): the gateway serves it now, so remove its line", passed, notApplicablePath, reason)
					return
				}
				t.Skipf("not applicable: %s", reason)
			}
			if len(failed) > 0 || passed == 0 {
				var b strings.Builder
				for _, c := range checks {
					fmt.Fprintf(&b, "  %s\n", c)
				}
				t.Errorf("got %d failing and %d passing checks, want no failure and at least one pass; the suite's checks:\n%s", len(failed), passed, b.String())
			}
		})
	}
}

func TestParseScenarioList(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []string
		wantErr string
	}{
		{
			name: "versions",
			out:  "Server scenarios (test against a server):\n  - server-initialize [2025-06-18,2025-11-25]\n  - json-schema-2020-12 [2025-11-25]\n",
			want: []string{"server-initialize", "json-schema-2020-12"},
		},
		{
			name: "no versions",
			out:  "Server scenarios (test against a server):\n  - ping\n\n",
			want: []string{"ping"},
		},
		{name: "empty", out: "", wantErr: "no server scenarios"},
		{name: "header only", out: "Server scenarios (test against a server):\n", wantErr: "no server scenarios"},
		{name: "no header", out: "  - ping\n", wantErr: "before the server scenarios header"},
		{name: "unknown line", out: "Server scenarios:\n  - ping\nClient scenarios:\n", wantErr: "want a scenario line"},
		{name: "twice", out: "Server scenarios:\n  - ping\n  - ping [2025-11-25]\n", wantErr: "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseScenarioList(tt.out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseNotApplicable(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    map[string]string
		wantErr string
	}{
		{
			name: "entries and comments",
			text: "# header\n\nprompts-list # no prompts\n  logging-set-level   #  no logging # at all \n",
			want: map[string]string{"prompts-list": "no prompts", "logging-set-level": "no logging # at all"},
		},
		{name: "empty", text: "# only a comment\n", want: map[string]string{}},
		{name: "no reason", text: "prompts-list\n", wantErr: "line 1: scenario \"prompts-list\" has no reason"},
		{name: "empty reason", text: "# c\nprompts-list #  \n", wantErr: "line 2: scenario \"prompts-list\" has no reason"},
		{name: "two names", text: "prompts-list ping # x\n", wantErr: "want one scenario name"},
		{name: "twice", text: "ping # a\nping # b\n", wantErr: "line 2: scenario \"ping\" listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNotApplicable(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("reason of %s: got %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
