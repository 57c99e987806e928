// Package procs sets the Go runtime's defaults for a serving process of
// fiskfleet, and the kernel's timer slack it runs with, each unless the
// operator's environment sets it.
//
// One P (GOMAXPROCS=1): a call's own work in an agent or a gateway is
// tens of microseconds of decoding, checking and encoding; its command
// runs in a process of its own, and the runtime forks one child at a time
// whatever the number of Ps. What a second P adds is a second thread to
// wake for each goroutine hand-off of a call, and waking an idle CPU is
// what a call pays most for on small VMs: measured side by side (`make
// bench BASE=HEAD BASE_ENV=GOMAXPROCS=1`), the overhead of A2A and MCP
// calls fell by up to a round trip of the transport or more, with the same
// calls per second under 16 concurrent callers. An identity scales by
// running more processes, each of them one P.
//
// A millisecond of timer slack ([DefaultSlack], [ApplySlack]): fewer
// wake-ups of the runtime's monitor thread per call.
//
// A call's goroutine grows its stack once, as it starts ([GrowStack]),
// rather than step by step deep in the call.
package procs

import (
	"runtime"
	"runtime/debug"
)

// Single runs the process on one P unless lookupEnv (os.LookupEnv in the
// binaries) finds GOMAXPROCS set.
func Single(lookupEnv func(string) (string, bool)) {
	if _, set := lookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

// GC sets the runtime's GOGC to percent unless lookupEnv finds GOGC set.
func GC(lookupEnv func(string) (string, bool), percent int) {
	if _, set := lookupEnv("GOGC"); !set {
		debug.SetGCPercent(percent)
	}
}

// GCPercent is the runtime's GOGC setting, for the serving log line. The
// runtime has no getter: it is read by setting it and setting it back.
func GCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
