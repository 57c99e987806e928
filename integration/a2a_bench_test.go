package integration_test

// Benchmarks of the A2A path, side by side so ratios read off one run:
//
//	go test -run '^$' -bench 'A2A|NATSRequestRaw|EchoDirect|FiskappCallEcho' -benchmem .
//
// NATSRequestRaw is the floor (a bare request-reply), A2ADiscover adds the
// protocol (stamping, schema validation both ways, the precomputed card),
// and A2ACallEcho against ExecEchoDirect is what serving a command over
// NATS adds to running it.

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// echoInput is the call every echo benchmark makes.
var echoInput = json.RawMessage(`{"message":"hi"}`)

// BenchmarkNATSRequestRaw is a bare request-reply with an echo responder:
// the floor under every A2A round trip.
func BenchmarkNATSRequestRaw(b *testing.B) {
	bs := newBus(b)
	responder := bs.ns.Connect(b)
	if _, err := responder.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}
	nc := bs.ns.Connect(b)
	payload := []byte(`{"message":"hi"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nc.Request("bench.echo", payload, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkA2ADiscover is a discovery round trip for the demo card: to an
// in-process responder making the same calls the agent's handler makes
// (decode, splice the precomputed card, reply), and to a real agent
// process.
func BenchmarkA2ADiscover(b *testing.B) {
	bs := newBus(b)
	bs.startAgents(b, 1, bs.demoAgent(b, "benchcard", 2))
	reply, err := bs.client.Discover(b.Context(), "benchcard")
	if err != nil {
		b.Fatal(err)
	}
	card := reply.AgentCard
	card.Name = "benchlocal"
	cr, err := a2a.NewCardReply(card)
	if err != nil {
		b.Fatal(err)
	}
	self := a2a.Participant{Name: "benchlocal"}
	svc, err := natsbus.Serve(bs.ns.Connect(b), natsbus.ServiceConfig{
		Identity: "benchlocal",
		Discovery: func(r *natsbus.Request) {
			req := &a2a.DiscoveryRequest{}
			if err := a2a.Decode(r.Data(), req); err != nil {
				_ = r.Reject("400", err.Error())
				return
			}
			data, err := cr.Reply(req, self)
			if err != nil {
				_ = r.Reject("500", err.Error())
				return
			}
			_ = r.Reply(data)
		},
		Tool: func(r *natsbus.Request) { _ = r.Reject("404", "no tools here") },
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Stop() })

	for _, bm := range []struct{ name, identity string }{{"in-process", "benchlocal"}, {"agent-process", "benchcard"}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bs.client.Discover(b.Context(), bm.identity); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkA2ACallEcho calls the demo's echo through NATS on a real agent
// process: a fork/exec on the agent plus the round trip. It also reports
// the agent's resident memory after the run.
func BenchmarkA2ACallEcho(b *testing.B) {
	bs := newBus(b)
	agent := bs.startAgents(b, 1, bs.demoAgent(b, "benchecho", 2))[0]
	b.ReportAllocs()
	for b.Loop() {
		r, err := bs.client.CallTool(b.Context(), "benchecho", "echo", echoInput)
		if err != nil {
			b.Fatal(err)
		}
		if r.IsError || r.Output != "hi\n" {
			b.Fatalf("reply: got %+v", r)
		}
	}
	if rss, ok := rssMiB(agent.PID); ok {
		b.ReportMetric(rss, "agent-RSS-MiB")
	}
}

// BenchmarkExecEchoDirect execs the argv A2ACallEcho's agent runs, with
// its output captured: the cost of the command itself.
func BenchmarkExecEchoDirect(b *testing.B) {
	argv, err := fisktest.DemoCommand(b, "echo").Argv(echoInput)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil || string(out) != "hi\n" {
			b.Fatalf("exec %v: %v, output %q", argv, err, out)
		}
	}
}

// BenchmarkFiskappCallEcho runs the same command through fiskapp's guarded
// runner (argv from the schema, process group, scrubbed environment,
// capped output) without NATS: what the agent does per call besides the
// round trip.
func BenchmarkFiskappCallEcho(b *testing.B) {
	cmd := fisktest.DemoCommand(b, "echo")
	b.ReportAllocs()
	for b.Loop() {
		out, err := cmd.Call(b.Context(), tool.Request{Input: echoInput})
		if err != nil || out.Result == nil || out.Result.Output != "hi\n" {
			b.Fatalf("call: %+v, %v", out, err)
		}
	}
}

// rssMiB reads a process's resident set size from /proc.
func rssMiB(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err == nil
			}
		}
	}
	return 0, false
}
