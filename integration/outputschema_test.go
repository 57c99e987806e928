package integration_test

import (
	"encoding/json"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestTSClientRemoteOutputSchema lists the gateway's tools with the
// official TypeScript SDK client: every remote command tool of the demo
// agent, whose card promises the command result, declares the very
// output schema the gateway's local commands declare. It then calls every
// remote tool through the SDK, which checks each result against the
// declared schema and throws on a result outside it (or without
// structured content); every call, the non-zero exit included, passes.
func TestTSClientRemoteOutputSchema(t *testing.T) {
	t.Parallel()
	ts := findTSClient(t)
	f := startStreamFleet(t)
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "child.pid")
	t.Cleanup(func() {
		// spawn leaves a child that ignores SIGTERM and outlives the
		// call; it is this test's to stop.
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && !fisktest.ProcessGone(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	// Arguments for each of the demo agent's served tools, by the name
	// the agent serves it under; a remote tool missing here fails the
	// test, so a new demo command cannot escape the check.
	args := map[string]map[string]any{
		"echo":                {"message": "hi", "count": 2},
		"sleep":               {"duration": "10ms"},
		"ticker":              {"every": "10ms", "count": 3},
		"fail":                {"code": 4},
		"flood":               {"bytes": 100000},
		"spawn":               {"duration": "10ms", "pidfile": pidfile},
		"restart":             {"marker": filepath.Join(dir, "restarted")},
		"cluster_node_status": {"node": "n2"},
		"getenv":              {"name": "HOME"},
	}

	// First a listing alone, to learn the remote tools.
	var listed tsSchemas
	ts.runScript(t, "outputschema.mjs", f.gw.URL, &listed, "[]")
	var local json.RawMessage
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	var calls []call
	for _, tl := range listed.Tools {
		bare, remote := remoteDemoName(tl.Name, tl.Title)
		if !remote {
			if tl.Name == "echo" {
				local = tl.OutputSchema
			}
			continue
		}
		a, ok := args[bare]
		if !ok {
			t.Errorf("remote tool %s (%s): no arguments known for it; add them to this test", tl.Name, bare)
			continue
		}
		calls = append(calls, call{tl.Name, a})
	}
	if len(local) == 0 || string(local) == "null" {
		t.Fatalf("the local echo declares no output schema: %+v", listed.Tools)
	}
	if len(calls) < len(args) {
		t.Fatalf("remote tools listed: %d, want the demo agent's %d: %+v", len(calls), len(args), listed.Tools)
	}
	for _, tl := range listed.Tools {
		if _, remote := remoteDemoName(tl.Name, tl.Title); remote && !sameJSON(t, tl.OutputSchema, local) {
			t.Errorf("remote %s: output schema %s, want the local commands' %s", tl.Name, tl.OutputSchema, local)
		}
	}

	b, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	var got tsSchemas
	ts.runScript(t, "outputschema.mjs", f.gw.URL, &got, string(b))
	if len(got.Results) != len(calls) {
		t.Fatalf("results: got %d, want %d", len(got.Results), len(calls))
	}
	for _, r := range got.Results {
		if r.IsError || !r.Structured || r.Command == "" || r.ExitCode == nil {
			t.Errorf("%s: got %+v, want the command result as structured content", r.Name, r)
			continue
		}
		switch bare, _ := remoteDemoName(r.Name, " (demo)"); bare {
		case "fail":
			if *r.ExitCode != 4 {
				t.Errorf("fail: exit code %d, want 4 (a non-zero exit is a result, not an error)", *r.ExitCode)
			}
		case "echo":
			if r.Output != "hi\nhi\n" {
				t.Errorf("echo: output %q, want two lines", r.Output)
			}
		}
	}
}

// tsSchemas is what outputschema.mjs prints.
type tsSchemas struct {
	Tools []struct {
		Name         string          `json:"name"`
		Title        string          `json:"title"`
		OutputSchema json.RawMessage `json:"outputSchema"`
	} `json:"tools"`
	Results []struct {
		Name       string `json:"name"`
		IsError    bool   `json:"isError"`
		Structured bool   `json:"structured"`
		Command    string `json:"command"`
		ExitCode   *int   `json:"exitCode"`
		Output     string `json:"output"`
	} `json:"results"`
}

// remoteDemoName reports whether a tool of the stream fleet's gateway is
// the demo agent's (its title ends with the host, as remote titles do),
// and the name the agent serves it under.
func remoteDemoName(name, title string) (string, bool) {
	if !strings.HasSuffix(title, " (demo)") {
		return name, false
	}
	return strings.TrimPrefix(name, "demo_"), true
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(tb testing.TB, a, b json.RawMessage) bool {
	tb.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		tb.Fatalf("decoding %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// runScript runs script of integration/tsclient with the SDK and url, and
// decodes the JSON object it prints into out.
func (c tsClient) runScript(tb testing.TB, script, url string, out any, args ...string) {
	tb.Helper()
	c.script = filepath.Join(filepath.Dir(c.script), script)
	c.run(tb, os.Environ(), url, out, args...)
}
