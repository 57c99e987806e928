package integration_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// a2aJSSDKDir is where make tools installs @a2a-js/sdk.
const a2aJSSDKDir = "bin/npm/node_modules/@a2a-js/sdk"

// a2aJS runs integration/a2ajs/client.mjs, @a2a-js/sdk's own client.
type a2aJS struct{ node, sdk, script string }

func findA2AJS(tb testing.TB) a2aJS {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	c := a2aJS{
		node:   filepath.Join(root, conformanceNode),
		sdk:    filepath.Join(root, a2aJSSDKDir),
		script: filepath.Join(root, "integration", "a2ajs", "client.mjs"),
	}
	fisktest.RequireInstalled(tb, "the Agent2Agent JavaScript SDK (@a2a-js/sdk)", c.node, filepath.Join(c.sdk, "package.json"))
	return c
}

// jsTask is a task as the script prints it.
type jsTask struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Status    string `json:"status"`
	Artifacts []struct {
		ID    string           `json:"id"`
		Parts []map[string]any `json:"parts"`
	} `json:"artifacts"`
}

// envelope returns the result artifact's envelope and text.
func (t jsTask) envelope(tb testing.TB) (map[string]any, string) {
	tb.Helper()
	for _, a := range t.Artifacts {
		if a.ID == "result" && len(a.Parts) == 2 {
			env, _ := a.Parts[0]["data"].(map[string]any)
			text, _ := a.Parts[1]["text"].(string)
			return env, text
		}
	}
	tb.Fatalf("task %s: got artifacts %+v, want the result with a DataPart and a TextPart", t.ID, t.Artifacts)
	return nil, ""
}

type jsOut struct {
	Protocol string `json:"protocol"`
	Skills   []struct {
		ID   string   `json:"id"`
		Tags []string `json:"tags"`
	} `json:"skills"`
	Result struct {
		Task    *jsTask          `json:"task"`
		Message []map[string]any `json:"message"`
	} `json:"result"`
	Got    jsTask `json:"got"`
	Events []struct {
		Task     *jsTask          `json:"task"`
		Artifact string           `json:"artifact"`
		Append   bool             `json:"append"`
		Parts    []map[string]any `json:"parts"`
		State    string           `json:"state"`
		At       int64            `json:"at"`
	} `json:"events"`
	Started   jsTask `json:"started"`
	Running   jsTask `json:"running"`
	Cancelled jsTask `json:"cancelled"`
	Again     string `json:"again"`
	Error     string `json:"error"`
}

func (c a2aJS) run(tb testing.TB, base, version, scenario string, args ...string) jsOut {
	tb.Helper()
	res := fleettest.Run(tb, nil, c.node, append([]string{c.script, c.sdk, base, version, scenario}, args...)...)
	if res.ExitCode != 0 {
		tb.Fatalf("the @a2a-js/sdk client (%s %s) exited %d:\nstdout:\n%s\nstderr:\n%s", version, scenario, res.ExitCode, res.Stdout, res.Stderr)
	}
	var out jsOut
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		tb.Fatalf("decoding the @a2a-js/sdk client's answer %q: %v", res.Stdout, err)
	}
	return out
}

// TestAgent2AgentJSClient drives the gateway with @a2a-js/sdk 1.3.0, in
// both protocol versions the SDK speaks: its default client (1.0) and its
// v0.3 JSON-RPC transport. Each reads the card, calls a tool and reads
// the task back, streams a long command's output piece by piece, cancels
// a running task (its process group is gone), calls a remote identity's
// tool through that identity's card, and gets the protocol's errors.
func TestAgent2AgentJSClient(t *testing.T) {
	t.Parallel()
	js := findA2AJS(t)
	f := startAgent2AgentFleet(t, nil)
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			out := js.run(t, f.base, version, "send", "echo", `{"message": "hello js"}`)
			if !strings.HasPrefix(out.Protocol, version) {
				t.Errorf("protocol: got %q, want %s", out.Protocol, version)
			}
			var ids []string
			for _, s := range out.Skills {
				ids = append(ids, s.ID)
				if s.ID == "deploy" && !slices.Contains(s.Tags, "gated") {
					t.Errorf("the deploy skill: got tags %v, want gated", s.Tags)
				}
			}
			if !slices.Contains(ids, "echo") || !slices.Contains(ids, "deploy") || slices.Contains(ids, "destroy") {
				t.Errorf("skills: got %v, want echo and deploy, no destroy (ai:deny)", ids)
			}
			if out.Result.Task == nil || out.Result.Task.State != "TASK_STATE_COMPLETED" {
				t.Fatalf("send: got %+v, want a completed task", out.Result)
			}
			env, text := out.Result.Task.envelope(t)
			if text != "hello js\n" || env["exit_code"] != float64(0) || env["output"] != "hello js\n" {
				t.Errorf("send: got %v and %q, want exit 0 and the output", env, text)
			}
			if out.Got.ID != out.Result.Task.ID || out.Got.State != "TASK_STATE_COMPLETED" {
				t.Errorf("getTask: got %+v, want the completed task", out.Got)
			}

			out = js.run(t, f.base, version, "stream", "ticker", `{"every": "150ms", "count": 4}`)
			var chunks []string
			var times []int64
			for _, ev := range out.Events {
				if ev.Artifact == "output" {
					chunks = append(chunks, ev.Parts[0]["text"].(string))
					times = append(times, ev.At)
				}
			}
			if len(out.Events) == 0 || out.Events[len(out.Events)-1].State != "TASK_STATE_COMPLETED" {
				t.Errorf("stream: got %+v, want it to end completed", out.Events)
			}
			if len(chunks) < 3 || !strings.HasSuffix(strings.Join(chunks, ""), "tick 4 of 4\n") {
				t.Errorf("stream: got output chunks %q, want the ticks one by one", chunks)
			} else if times[len(times)-1]-times[0] < 200 {
				t.Errorf("stream: got the chunks within %d ms, want them as the command wrote them (150 ms apart)", times[len(times)-1]-times[0])
			}

			pidfile := filepath.Join(t.TempDir(), "child.pid")
			args, _ := json.Marshal(map[string]any{"duration": "1m", "pidfile": pidfile})
			out = js.run(t, f.base, version, "cancel", string(args))
			b, err := os.ReadFile(pidfile)
			grandchild, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || grandchild == 0 {
				t.Fatalf("the spawned command's pid file: %q, %v", b, err)
			}
			if out.Started.State != "TASK_STATE_WORKING" || out.Running.State != "TASK_STATE_WORKING" || out.Cancelled.State != "TASK_STATE_CANCELED" {
				t.Errorf("cancel: got started %s, running %s, cancelled %s, want working, working, canceled", out.Started.State, out.Running.State, out.Cancelled.State)
			}
			fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
			if !strings.Contains(out.Again, "TaskNotCancelable") {
				t.Errorf("a second cancel: got %q, want the SDK's TaskNotCancelableError", out.Again)
			}

			if out := js.run(t, f.base, version, "unknown"); !strings.Contains(out.Error, "TaskNotFound") {
				t.Errorf("getTask of an unknown id: got %q, want the SDK's TaskNotFoundError", out.Error)
			}
			out = js.run(t, f.base, version, "text")
			if len(out.Result.Message) != 1 || !strings.Contains(out.Result.Message[0]["text"].(string), "Not called") {
				t.Errorf("a message without a DataPart: got %+v, want the agent's message saying how to call", out.Result)
			}

			out = js.run(t, f.base+"/a2a/demo/", version, "send", "demo_echo", `{"message": "via demo"}`)
			if out.Result.Task == nil {
				t.Fatalf("demo_echo through demo's card: got %+v, want a task", out.Result)
			}
			if _, text := out.Result.Task.envelope(t); text != "via demo\n" {
				t.Errorf("demo_echo through demo's card: got %q", text)
			}
		})
	}
}
