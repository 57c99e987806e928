package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// Fixed by integration/examples/demo.yaml, which `make run` serves.
const (
	devFleetGatewayAddr = "127.0.0.1:8080"
	devFleetGatewayURL  = "http://" + devFleetGatewayAddr + "/mcp"
	// devFleetStopWithin is how long the launcher and every child may take
	// to be gone after one Ctrl-C: the launcher's own 5s stop budget and
	// a second of slack.
	devFleetStopWithin = 6 * time.Second
	// devFleetReadyTimeout bounds building the three binaries and
	// starting the fleet.
	devFleetReadyTimeout = 3 * time.Minute
)

var (
	devFleetAddRE  = regexp.MustCompile(`Claude Code:\s+claude mcp add --transport http demo (http://\S+/mcp)\n`)
	devFleetNATSRE = regexp.MustCompile(`NATS:\s+nats --context (\S+) micro ls\n`)
	devFleetLogsRE = regexp.MustCompile(`Logs:\s+(\S+)\n`)
)

// devFleet is a running launcher and what its printed block says.
type devFleet struct {
	*fleettest.Process
	home *fleettest.Home
	// context is the path of the fleet's nats context; logs its log
	// directory.
	context, logs string
}

// buildDevFleet builds the launcher as `make run` does, into a temporary
// directory of tb, and returns the binary's path.
func buildDevFleet(tb testing.TB) string {
	tb.Helper()
	root, err := fleettest.WorkspaceRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(tb.TempDir(), "devfleet")
	cmd := exec.Command("go", "build", "-o", bin, "./integration/cmd/devfleet")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building the devfleet launcher: %v\n%s", err, out)
	}
	return bin
}

// startDevFleet runs the launcher binary with --dir in a new temporary
// directory and waits for its block. It fails tb at once, naming the fix,
// when the gateway's fixed port is already taken.
func startDevFleet(tb testing.TB, bin string) *devFleet {
	tb.Helper()
	ln, err := net.Listen("tcp", devFleetGatewayAddr)
	if err != nil {
		tb.Fatalf("%s is taken before the dev fleet starts (%v): its gateway listens on this fixed port (integration/examples/demo.yaml expose.agent.mcp.port), so stop whatever listens there and rerun", devFleetGatewayAddr, err)
	}
	_ = ln.Close()

	home := fleettest.NewHome(tb)
	p := fleettest.Start(tb, home.Env(), bin, "--dir", tb.TempDir())
	p.WaitOutput(tb, "Stop:         Ctrl-C", devFleetReadyTimeout)
	out := p.Stdout()
	add, nats, logs := devFleetAddRE.FindStringSubmatch(out), devFleetNATSRE.FindStringSubmatch(out), devFleetLogsRE.FindStringSubmatch(out)
	if add == nil || nats == nil || logs == nil {
		tb.Fatalf("launcher block: got\n%s\nwant Claude Code, NATS and Logs lines", out)
	}
	if add[1] != devFleetGatewayURL {
		tb.Errorf("claude mcp add URL: got %s, want %s", add[1], devFleetGatewayURL)
	}
	return &devFleet{Process: p, home: home, context: nats[1], logs: logs[1]}
}

// nats runs the real nats CLI with the printed context path.
func (f *devFleet) nats(tb testing.TB, args ...string) string {
	tb.Helper()
	r := fleettest.Run(tb, f.home.Env(), fleettest.NATSCLI(tb), append([]string{"--context", f.context}, args...)...)
	if r.ExitCode != 0 {
		tb.Fatalf("nats --context %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", f.context, strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// agentPIDs returns the PIDs of the demo instances in `micro ls --json`,
// from their fiskfleet.pid metadata, sorted.
func (f *devFleet) agentPIDs(tb testing.TB) []int {
	tb.Helper()
	var pids []int
	for _, info := range decodeJSON[[]micro.Info](tb, "micro ls --json", f.nats(tb, "micro", "ls", "--json")) {
		if info.Name != "demo" {
			continue
		}
		pid, err := strconv.Atoi(info.Metadata["fiskfleet.pid"])
		if err != nil {
			tb.Fatalf("micro ls: demo instance %s: fiskfleet.pid %q is not a PID", info.ID, info.Metadata["fiskfleet.pid"])
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// procStat returns a process's parent PID and state from /proc.
func procStat(pid int) (ppid int, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	// The command name is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("/proc/%d/stat: cannot parse %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, "", fmt.Errorf("/proc/%d/stat: cannot parse %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err
}

// childrenOf lists the live processes whose parent is ppid.
func childrenOf(tb testing.TB, ppid int) []int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatalf("reading /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, state, err := procStat(pid); err == nil && parent == ppid && state != "Z" {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// waitGone polls until every pid is gone, failing tb with the ones still
// running after timeout.
func waitGone(tb testing.TB, timeout time.Duration, what string, pids map[int]string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for pid, name := range pids {
			if !fisktest.ProcessGone(pid) {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(left)
			tb.Fatalf("%s: still running after %s: %s", what, timeout, strings.Join(left, ", "))
		}
		<-time.After(20 * time.Millisecond)
	}
}

// fleetProcesses names the launcher's children: the agents from micro's
// metadata, and the gateway as the one other child.
func (f *devFleet) fleetProcesses(tb testing.TB) (agents []int, gateway int) {
	tb.Helper()
	agents = f.agentPIDs(tb)
	if len(agents) != 2 {
		tb.Fatalf("micro ls demo instances: got %v, want two", agents)
	}
	children := childrenOf(tb, f.PID)
	for _, pid := range agents {
		if !slices.Contains(children, pid) {
			tb.Fatalf("agent pid %d: got it outside the launcher's children %v, want it a child of the launcher (pid %d)", pid, children, f.PID)
		}
	}
	others := slices.DeleteFunc(slices.Clone(children), func(pid int) bool { return slices.Contains(agents, pid) })
	if len(others) != 1 {
		tb.Fatalf("launcher children: got %v beside the agents %v, want exactly one gateway", others, agents)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", others[0]))
	if err != nil || strings.TrimSpace(string(comm)) != "mcp-gateway" {
		tb.Fatalf("launcher child pid %d: got command %q (%v), want mcp-gateway", others[0], comm, err)
	}
	return agents, others[0]
}

// docAgent2AgentCall returns the body of the curl example of an
// Agent2Agent call in docs/agent2agent.md, as it is written there.
func docAgent2AgentCall(tb testing.TB) string {
	tb.Helper()
	page, err := os.ReadFile(filepath.Join("..", "docs", "agent2agent.md"))
	if err != nil {
		tb.Fatal(err)
	}
	const curl = "curl -s http://" + devFleetGatewayAddr + "/a2a -H 'Content-Type: application/json' -d '"
	_, rest, ok := strings.Cut(string(page), curl)
	body, _, closed := strings.Cut(rest, "'")
	if !ok || !closed {
		tb.Fatalf("docs/agent2agent.md: got no %s…' command, want the example of a call with make run", curl)
	}
	return body
}

// TestDevFleet runs the launcher as `make run` does (built with go build
// from the workspace root, then the binary run; here with the integration
// directory as its working directory, from which it finds go.work), and
// uses the fleet it starts the way an operator would.
func TestDevFleet(t *testing.T) {
	bin := buildDevFleet(t)

	t.Run("serves the fleet and stops it on Ctrl-C", func(t *testing.T) {
		f := startDevFleet(t, bin)
		// The client keeps a stream open, as Claude Code does, so the
		// gateway has to end it to stop in time.
		c := connectMCP(t, devFleetGatewayURL, func(mcp.JSONRPCNotification) {})

		names := listNames(t, c)
		var remote []string
		for _, n := range names {
			if strings.HasPrefix(n, "demo_") {
				remote = append(remote, n)
			}
		}
		wantRemote := []string{"demo_cluster_node_status", "demo_echo", "demo_fail", "demo_flood", "demo_getenv", "demo_sleep", "demo_spawn", "demo_ticker"}
		if !slices.Equal(remote, wantRemote) {
			t.Errorf("remote tools: got %v, want %v", remote, wantRemote)
		}
		if !slices.Contains(names, "echo") {
			t.Errorf("tools/list: got %v, want the local echo", names)
		}
		for _, name := range []string{"echo", "demo_echo"} {
			cr := mcpCommandResult(t, name, callMCP(t, c, name, map[string]any{"message": "hello fleet"}))
			if cr.ExitCode != 0 || cr.Output != "hello fleet\n" {
				t.Errorf("%s: got exit %d output %q, want 0 and %q", name, cr.ExitCode, cr.Output, "hello fleet\n")
			}
		}

		// The Agent2Agent example of docs/agent2agent.md, as it is written
		// there.
		card := getBody(t, "http://"+devFleetGatewayAddr+"/.well-known/agent-card.json")
		if !strings.Contains(string(card), `"url":"http://`+devFleetGatewayAddr+`/a2a"`) {
			t.Errorf("the Agent2Agent card: got %s, want its endpoint at /a2a", card)
		}
		resp, err := http.Post("http://"+devFleetGatewayAddr+"/a2a", "application/json", strings.NewReader(docAgent2AgentCall(t)))
		if err != nil {
			t.Fatal(err)
		}
		var sent struct {
			Result a2a.StreamResponse `json:"result"`
		}
		err = json.NewDecoder(resp.Body).Decode(&sent)
		resp.Body.Close()
		if task, ok := sent.Result.Event.(*a2a.Task); err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("the SendMessage of docs/agent2agent.md: got %+v, %v, want a completed task", sent.Result, err)
		} else if _, text := resultEnvelope(t, task); text != "hello\n" {
			t.Errorf("the SendMessage of docs/agent2agent.md: got output %q, want hello", text)
		}

		agents, gateway := f.fleetProcesses(t)
		info := decodeJSON[struct {
			Info micro.Info `json:"info"`
		}](t, "micro info demo --json", f.nats(t, "micro", "info", "demo", "--json"))
		if pid, _ := strconv.Atoi(info.Info.Metadata["fiskfleet.pid"]); !slices.Contains(agents, pid) {
			t.Errorf("micro info demo: got fiskfleet.pid %q, want one of %v", info.Info.Metadata["fiskfleet.pid"], agents)
		}

		pids := map[int]string{f.PID: "devfleet", gateway: "mcp-gateway", agents[0]: "a2a-agent", agents[1]: "a2a-agent"}
		f.Signal(t, syscall.SIGINT)
		start := time.Now()
		waitGone(t, devFleetStopWithin, "after SIGINT to the launcher", pids)
		t.Logf("launcher and its %d children gone %s after SIGINT", len(pids)-1, time.Since(start).Round(time.Millisecond))
		if code := f.Wait(t, fleettest.StopGrace); code != 0 {
			t.Errorf("launcher exit status: got %d, want 0\n%s", code, f.Output())
		}
		if out := f.Stderr(); !strings.Contains(out, "stopping the fleet") || strings.Contains(out, "did not stop") {
			t.Errorf("launcher stderr: got\n%s\nwant it stopping the fleet, with no child left to kill", out)
		}
	})

	t.Run("a crashed agent stops the fleet", func(t *testing.T) {
		f := startDevFleet(t, bin)
		agents, gateway := f.fleetProcesses(t)
		victim, survivor := agents[1], agents[0]
		if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", victim, err)
		}
		waitGone(t, devFleetStopWithin, "after an agent was killed", map[int]string{f.PID: "devfleet", gateway: "mcp-gateway", survivor: "a2a-agent"})
		if code := f.Wait(t, fleettest.StopGrace); code != 1 {
			t.Errorf("launcher exit status: got %d, want 1", code)
		}
		stderr := f.Stderr()
		m := regexp.MustCompile(fmt.Sprintf(`devfleet: (agent-\d) \(pid %d\) exited: signal: killed; its last log lines:\n`, victim)).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("launcher stderr: got\n%s\nwant the killed agent named with its pid %d and its log tail", stderr, victim)
		}
		log, err := os.ReadFile(filepath.Join(f.logs, m[1]+".log"))
		if err != nil {
			t.Fatalf("reading %s's log: %v", m[1], err)
		}
		lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
		serving := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "serving over A2A") })
		if serving < 0 {
			t.Fatalf("%s's log: got\n%s\nwant its serving line", m[1], log)
		}
		for _, line := range []string{lines[serving], lines[len(lines)-1]} {
			if !strings.Contains(stderr, "  "+line+"\n") {
				t.Errorf("launcher stderr: got\n%s\nwant %s's log line %q indented in the tail", stderr, m[1], line)
			}
		}
	})
}
