package fiskapp_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
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
	for b.Loop() {
		out, err := echo.Call(b.Context(), req)
		if err != nil || out.Result == nil || out.Result.ExitCode != 0 {
			b.Fatalf("got %+v, %v", out, err)
		}
	}
}

// BenchmarkExecEchoDirect runs the argv Call would run with a plain
// exec.Command and combined output: the floor Call is measured against.
func BenchmarkExecEchoDirect(b *testing.B) {
	argv, err := demoCommand(b, fiskapp.Options{}, "echo").Argv(echoInput)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatal(err)
		}
	}
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
