package fiskapp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// BenchmarkLoadNATSCLI measures tool loading for the largest fisk
// application at hand: one introspection run (about 600 KiB of model) plus
// selection and schema encoding for its ~246 leaves.
func BenchmarkLoadNATSCLI(b *testing.B) {
	opts := fiskapp.Options{Path: natsPath(b)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fiskapp.Load(b.Context(), opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadDemo measures tool loading for the demo application.
func BenchmarkLoadDemo(b *testing.B) {
	opts := fiskapp.Options{Path: demoPath(b)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fiskapp.Load(b.Context(), opts); err != nil {
			b.Fatal(err)
		}
	}
}

var echoInput = json.RawMessage(`{"message":"hello","count":2,"label":["a","b"]}`)

// BenchmarkCallEcho is a whole command call; read it beside
// BenchmarkExecEchoDirect, which runs the same argv with a plain exec, for
// what Call adds.
func BenchmarkCallEcho(b *testing.B) {
	echo := demoCommand(b, fiskapp.Options{}, "echo")
	req := tool.Request{Input: echoInput}
	b.ReportAllocs()
	sw := startSwitches(b)
	for b.Loop() {
		out, err := echo.Call(b.Context(), req)
		if err != nil || out.Result == nil || out.Result.ExitCode != 0 {
			b.Fatalf("got %+v, %v", out, err)
		}
	}
	sw.report(b)
}

// BenchmarkExecEchoDirect runs the argv Call would run with a plain
// exec.Command and combined output: the floor Call is measured against.
func BenchmarkExecEchoDirect(b *testing.B) {
	argv, err := demoCommand(b, fiskapp.Options{}, "echo").Argv(echoInput)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	sw := startSwitches(b)
	for b.Loop() {
		if _, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatal(err)
		}
	}
	sw.report(b)
}

// BenchmarkCallEchoStreamed is BenchmarkCallEcho with a live writer, as a
// streamed call runs it.
func BenchmarkCallEchoStreamed(b *testing.B) {
	echo := demoCommand(b, fiskapp.Options{}, "echo")
	var live bytes.Buffer
	req := tool.Request{Input: echoInput, Output: &live}
	b.ReportAllocs()
	sw := startSwitches(b)
	for b.Loop() {
		live.Reset()
		out, err := echo.Call(b.Context(), req)
		if err != nil || out.Result == nil || out.Result.ExitCode != 0 || live.String() != out.Result.Output {
			b.Fatalf("got %+v, %v, live %q", out, err, live.String())
		}
	}
	sw.report(b)
}

// BenchmarkCallEchoCollect is BenchmarkCallEcho with a recording span,
// as a traced agent runs it, and reports the median time from the exit
// being seen (tracing.EventExited) to Call returning: the "collect" stage
// of make bench's stage breakdown.
func BenchmarkCallEchoCollect(b *testing.B) {
	echo := demoCommand(b, fiskapp.Options{}, "echo")
	req := tool.Request{Input: echoInput}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	tracer := sdk.Tracer("bench")
	var collect []time.Duration
	sw := startSwitches(b)
	for b.Loop() {
		ctx, span := tracer.Start(b.Context(), "command run")
		out, err := echo.Call(ctx, req)
		returned := time.Now()
		if err != nil || out.Result == nil || out.Result.ExitCode != 0 {
			b.Fatalf("got %+v, %v", out, err)
		}
		for _, ev := range span.(sdktrace.ReadOnlySpan).Events() {
			if ev.Name == tracing.EventExited {
				collect = append(collect, returned.Sub(ev.Time))
			}
		}
		span.End()
	}
	sw.report(b)
	if len(collect) > 0 {
		slices.Sort(collect)
		b.ReportMetric(float64(collect[len(collect)/2].Microseconds()), "collect-p50-us")
	}
}

// switches counts the voluntary context switches of this process's
// threads across a benchmark loop: how often a thread blocked and had to be
// woken again. On a small virtual machine, waking an idle vCPU costs more
// than the work a call does, so this is reported beside ns/op.
type switches struct {
	start int64
	ok    bool
}

// startSwitches reads the count before the loop; call it right before
// b.Loop.
func startSwitches(b *testing.B) switches {
	n, ok := voluntarySwitches()
	return switches{start: n, ok: ok}
}

// report adds the switches per iteration as the metric "ctxsw/op", where
// /proc can tell (Linux).
func (s switches) report(b *testing.B) {
	n, ok := voluntarySwitches()
	if !s.ok || !ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64(n-s.start)/float64(b.N), "ctxsw/op")
}

// voluntarySwitches sums voluntary_ctxt_switches over the threads of this
// process. A thread that exited takes its count with it, which the Go
// runtime, keeping its threads, rarely does.
func voluntarySwitches() (int64, bool) {
	paths, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(paths) == 0 {
		return 0, false
	}
	var total int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited meanwhile
		}
		_, rest, ok := bytes.Cut(b, []byte("\nvoluntary_ctxt_switches:"))
		if !ok {
			return 0, false
		}
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 64)
		if err != nil {
			return 0, false
		}
		total += n
	}
	return total, true
}

// BenchmarkArgv is the in-process part of a call: input check and fisk's
// ArgsFromJSON.
func BenchmarkArgv(b *testing.B) {
	echo := demoCommand(b, fiskapp.Options{}, "echo")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := echo.Argv(echoInput); err != nil {
			b.Fatal(err)
		}
	}
}

// tickerInput is a ticker whose first line comes at once and whose second
// would come long after any iteration.
var tickerInput = json.RawMessage(`{"every":"1m","count":2}`)

// firstWrite closes ch on the first write to it.
type firstWrite struct {
	once sync.Once
	ch   chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

// BenchmarkCallTickerFirstLine is the time from calling a ticker to its
// first line reaching the live writer (what a streamed call sends first);
// read it beside BenchmarkExecTickerFirstLineDirect, the same argv started
// with a plain exec and its stdout read to the first newline. Stopping each
// run is not timed.
func BenchmarkCallTickerFirstLine(b *testing.B) {
	ticker := demoCommand(b, fiskapp.Options{}, "ticker")
	for b.Loop() {
		ctx, cancel := context.WithCancel(b.Context())
		w := &firstWrite{ch: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := ticker.Call(ctx, tool.Request{Input: tickerInput, Output: w})
			done <- err
		}()
		select {
		case <-w.ch:
		case err := <-done:
			b.Fatalf("ticker ended before its first line: %v", err)
		}
		b.StopTimer()
		cancel()
		<-done
		b.StartTimer()
	}
}

// BenchmarkExecTickerFirstLineDirect is the floor of
// BenchmarkCallTickerFirstLine.
func BenchmarkExecTickerFirstLineDirect(b *testing.B) {
	argv, err := demoCommand(b, fiskapp.Options{}, "ticker").Argv(tickerInput)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := exec.Command(argv[0], argv[1:]...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "tick 1 ") {
			b.Fatalf("got first line %q (%v), want tick 1", line, err)
		}
		b.StopTimer()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.StartTimer()
	}
}
