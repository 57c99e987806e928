package server_test

// Benchmarks of the serving engine in one process, side by side so ratios
// read off one run:
//
//	go test -run '^$' -bench . -benchmem -count 5 .
//
// ServerCallEcho is a whole A2A call of the demo's echo (client encode,
// NATS, server decode, exec, reply encode, client decode); NATSExecEcho is
// the same exec behind a bare NATS request-reply, with no protocol at all;
// CommandCallEcho is the command through the guarded runner alone; and
// ExecEchoDirect is a plain exec of the same argv, the floor all are read
// against. ServerDiscover is a discovery round trip to the same server.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/a2a-agent/internal/server"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// benchEchoInput is the call every echo benchmark makes.
var benchEchoInput = json.RawMessage(`{"message":"hi"}`)

func BenchmarkServerCallEcho(b *testing.B) {
	_, c, _ := serveDemo(b, server.Config{Identity: "bench"}, fiskapp.Options{})
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.CallTool(b.Context(), "bench", "echo", benchEchoInput)
		if err != nil {
			b.Fatal(err)
		}
		if r.IsError || r.Output != "hi\n" {
			b.Fatalf("reply: got %+v", r)
		}
	}
}

func BenchmarkNATSExecEcho(b *testing.B) {
	argv, err := fisktest.DemoCommand(b, "echo").Argv(benchEchoInput)
	if err != nil {
		b.Fatal(err)
	}
	ns := natstest.Start(b)
	responder := ns.Connect(b)
	if _, err := responder.Subscribe("bench.exec", func(m *nats.Msg) {
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		_ = m.Respond(out)
	}); err != nil {
		b.Fatal(err)
	}
	if err := responder.Flush(); err != nil {
		b.Fatal(err)
	}
	nc := ns.Connect(b)
	b.ReportAllocs()
	for b.Loop() {
		m, err := nc.Request("bench.exec", benchEchoInput, 20*time.Second)
		if err != nil || string(m.Data) != "hi\n" {
			b.Fatalf("got %v, %v", m, err)
		}
	}
}

func BenchmarkServerDiscover(b *testing.B) {
	_, c, _ := serveDemo(b, server.Config{Identity: "bench"}, fiskapp.Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Discover(b.Context(), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommandCallEcho(b *testing.B) {
	echo := fisktest.DemoCommand(b, "echo")
	req := tool.Request{Input: benchEchoInput}
	b.ReportAllocs()
	for b.Loop() {
		out, err := echo.Call(b.Context(), req)
		if err != nil || out.Result == nil || out.Result.Output != "hi\n" {
			b.Fatalf("call: %+v, %v", out, err)
		}
	}
}

func BenchmarkExecEchoDirect(b *testing.B) {
	argv, err := fisktest.DemoCommand(b, "echo").Argv(benchEchoInput)
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

// BenchmarkServerStreamEcho is BenchmarkServerCallEcho as a streamed call
// (ack, output event, final reply): read against ServerCallEcho, it is the
// price of streaming a call that ends at once.
func BenchmarkServerStreamEcho(b *testing.B) {
	_, c, _ := serveDemo(b, server.Config{Identity: "bench"}, fiskapp.Options{})
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.StreamTool(b.Context(), "bench", "echo", benchEchoInput, nil)
		if err != nil {
			b.Fatal(err)
		}
		if r.IsError || r.Output != "hi\n" {
			b.Fatalf("reply: got %+v", r)
		}
	}
}

// BenchmarkServerStreamOverCall alternates a unary and a streamed echo on
// one server and reports the streamed call's median over the unary one's
// (stream/call-p50): load from elsewhere on the machine falls on both
// alike, which two separate benchmarks cannot promise.
func BenchmarkServerStreamOverCall(b *testing.B) {
	_, c, _ := serveDemo(b, server.Config{Identity: "bench"}, fiskapp.Options{})
	var unary, streamed []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		r, err := c.CallTool(b.Context(), "bench", "echo", benchEchoInput)
		unary = append(unary, time.Since(start))
		if err != nil || r.IsError || r.Output != "hi\n" {
			b.Fatalf("call: got %+v, %v", r, err)
		}
		start = time.Now()
		r, err = c.StreamTool(b.Context(), "bench", "echo", benchEchoInput, nil)
		streamed = append(streamed, time.Since(start))
		if err != nil || r.IsError || r.Output != "hi\n" {
			b.Fatalf("stream: got %+v, %v", r, err)
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	b.ReportMetric(median(streamed)/median(unary), "stream/call-p50")
}

// BenchmarkServerFirstEvent alternates a direct exec of the demo's ticker,
// timed to its first line, with a streamed call of it timed to its first
// output event, and reports the ratio of their medians
// (first-event/first-line-p50). Each run is stopped once its first line is
// in: killed, or cancelled over A2A.
func BenchmarkServerFirstEvent(b *testing.B) {
	_, c, _ := serveDemo(b, server.Config{Identity: "bench"}, fiskapp.Options{})
	input := json.RawMessage(`{"every":"1m","count":2}`)
	argv, err := fisktest.DemoCommand(b, "ticker").Argv(input)
	if err != nil {
		b.Fatal(err)
	}
	var direct, streamed []time.Duration
	for b.Loop() {
		cmd := exec.Command(argv[0], argv[1:]...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		direct = append(direct, time.Since(start))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil || !strings.HasPrefix(line, "tick 1 ") {
			b.Fatalf("first line: got %q, %v", line, err)
		}

		ctx, cancel := context.WithCancel(b.Context())
		var first time.Duration
		start = time.Now()
		_, err = c.StreamTool(ctx, "bench", "ticker", input, func(string) {
			if first == 0 {
				first = time.Since(start)
				cancel()
			}
		})
		cancel()
		if first == 0 || !errors.Is(err, context.Canceled) {
			b.Fatalf("stream: first event after %v, then %v", first, err)
		}
		streamed = append(streamed, first)
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	b.ReportMetric(median(streamed)/median(direct), "first-event/first-line-p50")
	b.ReportMetric(median(direct)/1e3, "first-line-p50-µs")
	b.ReportMetric(median(streamed)/1e3, "first-event-p50-µs")
}

// BenchmarkServerCallAudit is a whole A2A call of an in-process tool (no
// exec, so the protocol's own cost is all there is), without and with an
// audit trail: the record is built and handed over after the reply, so
// the two should read the same.
func BenchmarkServerCallAudit(b *testing.B) {
	for _, audited := range []bool{false, true} {
		name := "off"
		if audited {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			ns := natstest.Start(b)
			nc := ns.Connect(b)
			cfg := server.Config{Identity: "bench"}
			if audited {
				pub := audit.NewPublisher(nc, audit.PublisherConfig{Logger: testLogger(b)})
				b.Cleanup(func() { _ = pub.Close(context.Background()) })
				cfg.Audit = pub
			}
			srv := newServer(b, cfg, []tool.Tool{funcTool(b, tool.FuncSpec{
				Name: "status", Description: "Reports status", Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
			})})
			startServer(b, srv, nc)
			c := newClient(b, ns.Connect(b), "bench")
			b.ReportAllocs()
			for b.Loop() {
				r, err := c.CallTool(b.Context(), "bench", "status", benchEchoInput)
				if err != nil || r.IsError {
					b.Fatalf("got %+v, %v", r, err)
				}
			}
		})
	}
}
