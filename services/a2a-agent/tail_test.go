package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// tailRecord is a record of a call on identity, numbered in its tool name.
func tailRecord(identity, tool string) *audit.Record {
	r := &audit.Record{
		Time:     time.Date(2026, 12, 3, 7, 30, 0, 250_000_000, time.UTC),
		Service:  audit.ServiceA2AAgent,
		Identity: identity,
		Instance: "host-7",
		Surface:  audit.SurfaceA2A,
		Caller:   audit.Caller{Name: "planner", Instance: "p1", Claimed: true},
		Tool:     tool,
		Gate:     audit.Gate{Decision: audit.DecisionNotGated},
		Outcome:  audit.Outcome{Result: audit.ResultFailed, ExitCode: audit.ExitCode(3), ErrorClass: "exit_nonzero", DurationMS: 12.5},
	}
	r.SetArguments(json.RawMessage(`{"code":3}`), false)
	return r
}

// TestAuditTail runs `a2a-agent audit tail` against an embedded NATS
// server and publishes records for two identities: it prints the records
// of the subject it follows, one line each (or their JSON), skips what is
// not a record, and ends with status 0 on Ctrl-C.
func TestAuditTail(t *testing.T) {
	ns := natstest.Start(t)
	env := []string{"XDG_CONFIG_HOME=" + ns.WriteContext(t, t.TempDir(), "tail-test", nil), "NATS_CONTEXT=tail-test"}
	const line = "2026-12-03T07:30:00.250Z  alpha/host-7  a2a  caller planner/p1 (claimed)  tool fail  gate not_gated  failed  exit 3  exit_nonzero  12.5ms"
	tests := []struct {
		name    string
		args    []string
		subject string // where records go; empty: each identity's default
		// want are the lines expected, in order, for the records of alpha
		// then beta; a trailing record of alpha marks the end.
		want []string
	}{
		{name: "every identity", want: []string{line, strings.Replace(line, "alpha/", "beta/", 1)}},
		{name: "one identity", args: []string{"--identity", "beta"}, want: []string{strings.Replace(line, "alpha/", "beta/", 1)}},
		{name: "a custom subject", args: []string{"--subject", "ops.audit.*"}, subject: "ops.audit.fleet", want: []string{line, strings.Replace(line, "alpha/", "beta/", 1)}},
		{name: "json", args: []string{"--json"}, want: []string{"json:alpha", "json:beta"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startAgent(t, env, append([]string{"audit", "tail"}, tt.args...)...)
			p.waitStderr(t, "following the audit trail on ")

			nc := ns.Connect(t)
			pub := audit.NewPublisher(nc, audit.PublisherConfig{Subject: tt.subject, Logger: fisktest.Logger(t)})
			garbage := audit.Subject("beta")
			if tt.subject != "" {
				garbage = tt.subject
			}
			if err := nc.Publish(garbage, []byte(`{"not":"a record"}`)); err != nil {
				t.Fatal(err)
			}
			pub.Publish(tailRecord("alpha", "fail"))
			pub.Publish(tailRecord("beta", "fail"))
			pub.Publish(tailRecord("beta", "end"))
			if err := pub.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				got := p.line(t)
				if identity, ok := strings.CutPrefix(want, "json:"); ok {
					r, err := audit.Decode([]byte(got))
					if err != nil || r.Identity != identity || string(r.Arguments) != `{"code":3}` {
						t.Errorf("json line: got %s (%v), want the record of %s", got, err, identity)
					}
					continue
				}
				if got != want {
					t.Errorf("line:\n got %q\nwant %q", got, want)
				}
			}
			if got := p.line(t); !strings.Contains(got, "tool end") && !strings.Contains(got, `"tool":"end"`) {
				t.Errorf("line: got %q, want the end marker and nothing before it", got)
			}
			p.waitStderr(t, "skipped a message on ")
			p.stop(t, syscall.SIGINT)
		})
	}
}

func TestAuditTailRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "identity and subject", args: []string{"--identity", "a", "--subject", "x"}, want: "--identity and --subject can't be used together"},
		{name: "invalid identity", args: []string{"--identity", "a.b"}, want: "--identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startAgent(t, []string{"NATS_CONTEXT=nosuch"}, append([]string{"audit", "tail"}, tt.args...)...)
			for range p.lines {
			}
			if err := <-p.done; err == nil {
				t.Fatalf("exit: got status 0, want a refusal")
			}
			if !strings.Contains(p.stderr.String(), tt.want) {
				t.Errorf("stderr: got %q, want it to contain %q", p.stderr, tt.want)
			}
		})
	}
}

// TestServeAuditTrail runs `a2a-agent serve` with audit.subject and
// audit.arguments: digest, follows the subject with `audit tail --json`,
// and makes a call: its record reaches the tail with the digest and
// without the arguments. The record of a call the drain lets finish is
// published before the agent's connection closes.
func TestServeAuditTrail(t *testing.T) {
	ns := natstest.Start(t)
	home := ns.WriteContext(t, t.TempDir(), "audit-test", nil)
	env := []string{"XDG_CONFIG_HOME=" + home, "NATS_CONTEXT=audit-test"}
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	body := "identity: audited\napplication_path: " + fisktest.FiskDemo(t) + "\nnats_context: audit-test\n" +
		"audit:\n  subject: ops.audit.audited\n  arguments: digest\n" +
		"expose:\n  agent:\n    a2a:\n      serve_tools: true\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tail := startAgent(t, env, "audit", "tail", "--json", "--subject", "ops.audit.audited")
	tail.waitStderr(t, "following the audit trail on ops.audit.audited")
	agent := startAgent(t, env, "serve", "--config", cfg)
	agent.waitStderr(t, "serving over A2A")

	c, err := a2a.NewClient(natsbus.NewTransport(ns.Connect(t)), a2a.Participant{Name: "tester", Instance: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	input := json.RawMessage(`{"message":"a secret"}`)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := c.CallTool(ctx, "audited", "echo", input); err != nil {
		t.Fatal(err)
	}
	checkRecord := func(line, tool string) {
		t.Helper()
		r, err := audit.Decode([]byte(line))
		if err != nil {
			t.Fatalf("record: %v\n%s", err, line)
		}
		if r.Identity != "audited" || r.Tool != tool || r.Surface != audit.SurfaceA2A || r.Caller.Name != "tester" || r.Caller.Instance != "t1" || !r.Caller.Claimed {
			t.Errorf("record: got %s, want a2a call of %s by tester/t1, claimed", line, tool)
		}
		if r.Arguments != nil || r.ArgumentsDigest == "" || r.Command != "" {
			t.Errorf("record: got arguments %s digest %q command %q, want the digest only", r.Arguments, r.ArgumentsDigest, r.Command)
		}
	}
	got := tail.line(t)
	checkRecord(got, "echo")
	if strings.Contains(got, "a secret") {
		t.Errorf("record: got %s, want no arguments", got)
	}

	// A call in flight when the agent is told to stop: the drain lets it
	// finish, and its record still reaches the trail.
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "audited", "sleep", json.RawMessage(`{"duration":"1s"}`))
		done <- err
	}()
	fisktest.WaitFor(t, 10*time.Second, "the sleep call to start", func() bool {
		return natstest.EndpointRequests(t, ns.Connect(t), "audited", "tool") >= 2
	})
	agent.stop(t, syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	checkRecord(tail.line(t), "sleep")
	tail.stop(t, syscall.SIGINT)
}

// readmeStreamAdd are the arguments of the `nats stream add` the audit
// trail's documentation tells operators to run (with one replica: the
// test has one server).
var readmeStreamAdd = []string{"stream", "add", "AUDIT", "--subjects", "choria.fisk-ai.audit.>",
	"--storage", "file", "--retention", "limits", "--discard", "old", "--max-age", "90d",
	"--max-bytes", "10GiB", "--max-msg-size", "1MiB", "--dupe-window", "2m",
	"--deny-delete", "--deny-purge", "--replicas", "1", "--defaults"}

// TestAuditTrailInJetStream creates the stream the documentation gives
// with the real nats CLI, serves with no audit key at all, and finds the
// record of every call in the stream, in order.
func TestAuditTrailInJetStream(t *testing.T) {
	ns := natstest.StartWithOptions(t, server.Options{JetStream: true, StoreDir: t.TempDir()})
	cli := exec.Command(fisktest.NATSCLI(t), append([]string{"--server", ns.URL()}, readmeStreamAdd...)...)
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("nats stream add: %v\n%s", err, out)
	}
	home := ns.WriteContext(t, t.TempDir(), "audit-test", nil)
	env := []string{"XDG_CONFIG_HOME=" + home, "NATS_CONTEXT=audit-test"}
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	body := "identity: kept\napplication_path: " + fisktest.FiskDemo(t) + "\nnats_context: audit-test\n" +
		"expose:\n  agent:\n    a2a:\n      serve_tools: true\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, env, "serve", "--config", cfg)
	agent.waitStderr(t, "serving over A2A")

	nc := ns.Connect(t)
	c, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct{ tool, input, result string }{
		{"echo", `{"message":"hi"}`, audit.ResultOK},
		{"fail", `{"code":2}`, audit.ResultFailed},
		{"nosuch", `{}`, audit.ResultUnknownTool},
	}
	for _, call := range calls {
		if _, err := c.CallTool(t.Context(), "kept", call.tool, json.RawMessage(call.input)); err != nil {
			t.Fatal(err)
		}
	}
	agent.stop(t, syscall.SIGTERM)

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), "AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.State.Msgs, uint64(len(calls)); got != want {
		t.Fatalf("records in AUDIT: got %d, want %d", got, want)
	}
	for i, call := range calls {
		m, err := stream.GetMsg(t.Context(), info.State.FirstSeq+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		r, err := audit.Decode(m.Data)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if m.Subject != "choria.fisk-ai.audit.kept" || r.Tool != call.tool || r.Outcome.Result != call.result || string(r.Arguments) != call.input {
			t.Errorf("record %d on %s: got tool %s result %s arguments %s, want %s %s %s", i, m.Subject, r.Tool, r.Outcome.Result, r.Arguments, call.tool, call.result, call.input)
		}
	}
}
