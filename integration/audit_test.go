package integration_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// auditStreamAdd returns the arguments of the `nats stream add` command the
// audit trail section of docs/security.md gives operators, with --replicas
// 1 as it says for a single server.
func auditStreamAdd(tb testing.TB) []string {
	tb.Helper()
	page, err := os.ReadFile(filepath.Join("..", "docs", "security.md"))
	if err != nil {
		tb.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "\nnats stream add AUDIT ")
	if !ok {
		tb.Fatal("docs/security.md: got no `nats stream add AUDIT` command, want the audit trail section to give one")
	}
	var line strings.Builder
	line.WriteString("stream add AUDIT ")
	for _, l := range strings.Split(rest, "\n") {
		cont, more := strings.CutSuffix(strings.TrimSpace(l), `\`)
		line.WriteString(cont + " ")
		if !more {
			break
		}
	}
	var args []string
	for _, f := range strings.Fields(line.String()) {
		args = append(args, strings.Trim(f, `'`))
	}
	i := slices.Index(args, "--replicas")
	if i < 0 || i+1 >= len(args) {
		tb.Fatalf("docs/security.md: got nats %v, want a --replicas value", args)
	}
	args[i+1] = "1"
	if !slices.Contains(args, "choria.fisk-ai.audit.>") || !slices.Contains(args, "--deny-delete") {
		tb.Fatalf("docs/security.md: got nats %v, want the stream on choria.fisk-ai.audit.> with --deny-delete", args)
	}
	return args
}

// TestAuditTrail runs the trail as an operator sets it up: a NATS server
// with JetStream and the AUDIT stream of docs/security.md made with the
// real nats CLI, `a2a-agent audit tail` (readable and --json) started
// before anything else, an `a2a-agent serve` on demo and an `mcp-gateway serve` on gw
// importing demo's tools behind a static token and a policy. Calls over
// MCP (local, remote, refused by the policy) and over A2A with the
// `a2a-agent call` CLI (ok, a non-zero exit, --follow; the CLI streams
// every call, so each is recorded on the stream surface) each leave their
// records: in the stream, schema-valid, with the fields each call
// implies; a remote call leaves one on each service with the same digest;
// both tails print every record.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	ns := natstest.StartWithOptions(t, server.Options{JetStream: true, StoreDir: t.TempDir()})
	home := fleettest.NewHome(t)
	home.AddContext(t, ns, fleetContext, nil)
	nats := func(args ...string) fleettest.Result {
		t.Helper()
		r := fleettest.Run(t, home.Env(), fleettest.NATSCLI(t), append([]string{"--context", fleetContext}, args...)...)
		if r.ExitCode != 0 {
			t.Fatalf("nats %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
		}
		return r
	}
	nats(auditStreamAdd(t)...)

	agentBin := fleettest.A2AAgent(t)
	tail := fleettest.Start(t, home.Env(), agentBin, "audit", "tail", "--context", fleetContext)
	tailJSON := fleettest.Start(t, home.Env(), agentBin, "audit", "tail", "--json", "--context", fleetContext)
	for _, p := range []*fleettest.Process{tail, tailJSON} {
		p.WaitOutput(t, "following the audit trail on choria.fisk-ai.audit.>", fleettest.ReadyTimeout)
	}

	agent := fleettest.StartAgent(t, home.Env(), fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "demo",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		A2A:             &fleettest.A2A{ServeTools: true},
	}))
	const tokenEnv, token = "AUDIT_MCP_TOKEN", "audit-trail-token"
	gwCfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "gw",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP: map[string]any{
			"auth_token_env": tokenEnv,
			// The static caller has the role default, which may run
			// anything but restart.
			"policy": map[string]any{"roles": map[string]any{"default": map[string]any{"exclude": map[string]any{"tools": []string{"restart"}}}}},
		},
		Extra: map[string]any{"remote_tools": []map[string]any{{"host": "demo"}}},
	})
	gw := startPolicyGateway(t, home.Env(tokenEnv+"="+token), gwCfg)
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token})}
	c := newMCPClient(t, gw.URL, topts, nil, nil)
	fisktest.WaitFor(t, 20*time.Second, "gw to import demo_echo", func() bool {
		return slices.Contains(listNames(t, c), "demo_echo")
	})

	// The calls, one after another.
	if cr := mcpCommandResult(t, "echo", callMCP(t, c, "echo", map[string]any{"message": "local"})); cr.Output != "local\n" {
		t.Errorf("echo over MCP: got %q, want local", cr.Output)
	}
	if cr := mcpCommandResult(t, "demo_echo", callMCP(t, c, "demo_echo", map[string]any{"upper": true, "message": "remote"})); cr.Output != "REMOTE\n" {
		t.Errorf("demo_echo over MCP: got %q, want REMOTE", cr.Output)
	}
	marker := filepath.Join(t.TempDir(), "restarted")
	requireHiddenAsUnknown(t, c, "restart", map[string]any{"marker": marker})
	if _, err := os.Stat(marker); err == nil {
		t.Error("restart over MCP: got its marker written, want the refused command never run")
	}
	a2aCall := func(wantExit int, args ...string) {
		t.Helper()
		r := fleettest.Run(t, home.Env(), agentBin, append([]string{"call", "--context", fleetContext, "--as", "planner"}, args...)...)
		if r.ExitCode != wantExit {
			t.Fatalf("a2a-agent call %s: got exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.ExitCode, wantExit, r.Stdout, r.Stderr)
		}
	}
	a2aCall(0, "demo", "echo", `{"message":"a2a"}`)
	a2aCall(3, "demo", "fail", `{"code":3}`)
	a2aCall(0, "--follow", "demo", "echo", `{"message":"streamed"}`)

	// What each call must have left, in the order they were made (the
	// remote call's two records may come in either order).
	type want struct {
		service, identity, surface, tool string
		caller                           string // subject, or the claimed name
		decision, result                 string
		exit                             *int
		arguments                        string
	}
	wants := []want{
		{audit.ServiceMCPGateway, "gw", audit.SurfaceMCP, "echo", "static-token", audit.DecisionNotGated, audit.ResultOK, audit.ExitCode(0), `{"message":"local"}`},
		{audit.ServiceMCPGateway, "gw", audit.SurfaceMCP, "demo_echo", "static-token", audit.DecisionNotGated, audit.ResultOK, audit.ExitCode(0), `{"message":"remote","upper":true}`},
		{audit.ServiceA2AAgent, "demo", "", "echo", "gw", audit.DecisionNotGated, audit.ResultOK, audit.ExitCode(0), `{"message":"remote","upper":true}`},
		{audit.ServiceMCPGateway, "gw", audit.SurfaceMCP, "restart", "static-token", audit.DecisionPolicy, audit.ResultRefused, nil, `{"marker":"` + marker + `"}`},
		{audit.ServiceA2AAgent, "demo", audit.SurfaceA2AStream, "echo", "planner", audit.DecisionNotGated, audit.ResultOK, audit.ExitCode(0), `{"message":"a2a"}`},
		{audit.ServiceA2AAgent, "demo", audit.SurfaceA2AStream, "fail", "planner", audit.DecisionNotGated, audit.ResultFailed, audit.ExitCode(3), `{"code":3}`},
		{audit.ServiceA2AAgent, "demo", audit.SurfaceA2AStream, "echo", "planner", audit.DecisionNotGated, audit.ResultOK, audit.ExitCode(0), `{"message":"streamed"}`},
	}

	// The agent's instance as its replies name it, for its records.
	disc := fleettest.Run(t, home.Env(), agentBin, "discover", "--context", fleetContext, "demo")
	if disc.ExitCode != 0 {
		t.Fatalf("a2a-agent discover demo: exit %d\n%s%s", disc.ExitCode, disc.Stdout, disc.Stderr)
	}

	// Both services stop as an operator stops them, publishing and
	// flushing what they hold first: after that no record can come. A
	// message of the test's own, stored after theirs, then marks the end
	// of the trail in the stream and in the tails.
	for _, p := range []*fleettest.Process{gw.Process, agent} {
		p.Signal(t, syscall.SIGTERM)
		if code := p.Wait(t, fleettest.StopGrace); code != 0 {
			t.Errorf("%s (pid %d): got exit status %d on SIGTERM, want 0", p.Name, p.PID, code)
		}
	}
	js, err := jetstream.New(ns.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	const endSubject = "choria.fisk-ai.audit.end-of-test"
	end, err := js.Publish(t.Context(), endSubject, []byte("end of the test's calls"))
	if err != nil {
		t.Fatalf("publishing the end marker: %v", err)
	}
	if end.Stream != "AUDIT" {
		t.Fatalf("end marker: got stream %q, want AUDIT", end.Stream)
	}
	stream, err := js.Stream(t.Context(), "AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := end.Sequence - info.State.FirstSeq; n != uint64(len(wants)) {
		t.Errorf("stream: got %d records before the end marker, want %d (one per call, two for the remote call)", n, len(wants))
	}
	var raws [][]byte
	var got []*audit.Record
	for seq := info.State.FirstSeq; seq < end.Sequence; seq++ {
		m, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("getting record %d: %v", seq, err)
		}
		if err := audit.Validate(m.Data); err != nil {
			t.Errorf("record %d: %v\n%s", seq, err, m.Data)
			continue
		}
		r := &audit.Record{}
		if err := json.Unmarshal(m.Data, r); err != nil {
			t.Fatalf("decoding record %d: %v", seq, err)
		}
		if m.Subject != audit.Subject(r.Identity) {
			t.Errorf("record %d: got subject %q, want %q", seq, m.Subject, audit.Subject(r.Identity))
		}
		raws = append(raws, m.Data)
		got = append(got, r)
	}

	// Match each record to the call it stands for, in call order.
	remaining := slices.Clone(got)
	matched := make([]*audit.Record, len(wants))
	for k, w := range wants {
		i := slices.IndexFunc(remaining, func(r *audit.Record) bool {
			return r.Service == w.service && r.Tool == w.tool && (w.surface == "" || r.Surface == w.surface) && string(r.Arguments) == w.arguments
		})
		if i < 0 {
			t.Errorf("got no record of %s %s %s %s in the stream", w.service, w.surface, w.tool, w.arguments)
			continue
		}
		r := remaining[i]
		remaining = slices.Delete(remaining, i, i+1)
		matched[k] = r
		name := w.service + " " + w.tool + " " + r.Surface
		if r.Identity != w.identity || r.Instance == "" {
			t.Errorf("%s: got identity %q instance %q, want %q and an instance", name, r.Identity, r.Instance, w.identity)
		}
		if r.Gate.Decision != w.decision || r.Outcome.Result != w.result {
			t.Errorf("%s: got decision %q result %q, want %q %q", name, r.Gate.Decision, r.Outcome.Result, w.decision, w.result)
		}
		switch {
		case w.exit == nil && r.Outcome.ExitCode != nil:
			t.Errorf("%s: got exit code %d, want none", name, *r.Outcome.ExitCode)
		case w.exit != nil && (r.Outcome.ExitCode == nil || *r.Outcome.ExitCode != *w.exit):
			t.Errorf("%s: got exit code %v, want %d", name, r.Outcome.ExitCode, *w.exit)
		}
		if want := audit.Digest(json.RawMessage(w.arguments)); r.ArgumentsDigest != want {
			t.Errorf("%s: got digest %s, want %s", name, r.ArgumentsDigest, want)
		}
		switch w.service {
		case audit.ServiceMCPGateway:
			// The static token's one caller, with the policy's role; a
			// verified caller, never a claimed one.
			if r.Caller.Subject != w.caller || !slices.Equal(r.Caller.Roles, []string{"default"}) || r.Caller.Claimed || r.Caller.Name != "" {
				t.Errorf("%s: got caller %+v, want subject %s with role default, not claimed", name, r.Caller, w.caller)
			}
		default:
			// Whoever the request says sent it: a label, claimed. Neither
			// the CLI nor the gateway names an instance of its own.
			if r.Caller.Name != w.caller || !r.Caller.Claimed || r.Caller.Subject != "" || len(r.Caller.Roles) > 0 {
				t.Errorf("%s: got caller %+v, want only the claimed name %s", name, r.Caller, w.caller)
			}
		}
	}
	for _, r := range remaining {
		t.Errorf("got a record of no call: %+v", r)
	}

	// The remote call: one record on each service, naming the same
	// arguments by the same digest; the agent was called by the gateway.
	gwRemote, agentRemote := matched[1], matched[2]
	if gwRemote == nil || agentRemote == nil {
		t.Fatalf("remote call: got gateway record %v and agent record %v, want both", gwRemote, agentRemote)
	}
	if gwRemote.ArgumentsDigest != agentRemote.ArgumentsDigest {
		t.Errorf("remote call digests: got gateway %s and agent %s, want them equal", gwRemote.ArgumentsDigest, agentRemote.ArgumentsDigest)
	}
	if gwRemote.Time.After(agentRemote.Time) {
		t.Errorf("remote call: got the gateway's call at %s after the agent's at %s, want it first", gwRemote.Time, agentRemote.Time)
	}
	if agentRemote.Instance == gwRemote.Instance {
		t.Errorf("remote call: got instance %q on both services, want each its own", agentRemote.Instance)
	}
	// The agent's records name the serving process as its replies do.
	for _, r := range got {
		if r.Service == audit.ServiceA2AAgent && !strings.Contains(disc.Stdout, "(instance "+r.Instance+")") {
			t.Errorf("agent record instance %q: want the one discover names:\n%s", r.Instance, disc.Stdout)
		}
	}

	// The read-back docs/security.md gives works on what the services
	// published.
	if r := nats("stream", "get", "AUDIT", "--last-for", audit.Subject("demo")); !strings.Contains(r.Stdout, `"surface":"a2a-stream"`) {
		t.Errorf("nats stream get --last-for %s: got\n%s\nwant the streamed call's record", audit.Subject("demo"), r.Stdout)
	}

	// Each tail saw the end marker, after every record, and said it
	// skipped a message that is no record.
	for _, p := range []*fleettest.Process{tail, tailJSON} {
		p.WaitOutput(t, "skipped a message on "+endSubject, 10*time.Second)
	}

	// tail --json printed every record as published, byte for byte, and
	// nothing else.
	fisktest.WaitFor(t, 10*time.Second, "audit tail --json to print every record", func() bool {
		return strings.Count(tailJSON.Stdout(), "\n") >= len(raws)
	})
	lines := strings.Split(strings.TrimSuffix(tailJSON.Stdout(), "\n"), "\n")
	if len(lines) != len(raws) {
		t.Errorf("audit tail --json: got %d lines, want %d:\n%s", len(lines), len(raws), tailJSON.Stdout())
	}
	for _, l := range lines {
		if err := audit.Validate([]byte(l)); err != nil {
			t.Errorf("audit tail --json line %s: %v", l, err)
		}
		if !slices.ContainsFunc(raws, func(b []byte) bool { return bytes.Equal(b, []byte(l)) }) {
			t.Errorf("audit tail --json line %s: got a record the stream does not hold", l)
		}
	}

	// tail printed one readable line per record.
	fisktest.WaitFor(t, 10*time.Second, "audit tail to print every record", func() bool {
		return strings.Count(tail.Stdout(), "\n") >= len(got)
	})
	readable := strings.Split(strings.TrimSuffix(tail.Stdout(), "\n"), "\n")
	if len(readable) != len(got) {
		t.Errorf("audit tail: got %d lines, want %d:\n%s", len(readable), len(got), tail.Stdout())
	}
	for _, r := range got {
		parts := []string{
			r.Time.UTC().Format("2006-01-02T15:04:05.000Z"),
			"  " + r.Identity + "/" + r.Instance + "  " + r.Surface + "  ",
			"  tool " + r.Tool + "  gate " + r.Gate.Decision + "  " + r.Outcome.Result,
		}
		if r.Caller.Claimed {
			label := r.Caller.Name
			if r.Caller.Instance != "" {
				label += "/" + r.Caller.Instance
			}
			parts = append(parts, "caller "+label+" (claimed)  ")
		} else {
			parts = append(parts, "caller "+r.Caller.Subject+" ["+strings.Join(r.Caller.Roles, ",")+"]  ")
		}
		if r.Outcome.ExitCode != nil {
			parts = append(parts, fmt.Sprintf("  exit %d", *r.Outcome.ExitCode))
		}
		if !slices.ContainsFunc(readable, func(l string) bool {
			return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) })
		}) {
			t.Errorf("audit tail: got no line with %q in\n%s", parts, tail.Stdout())
		}
	}
}
