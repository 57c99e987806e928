package procs_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/procs"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestSingle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(2)
	procs.Single(env(map[string]string{"GOMAXPROCS": "2"}))
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS set: got %d Ps, want the 2 it says", got)
	}
	procs.Single(env(nil))
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS unset: got %d Ps, want 1", got)
	}
}

func TestGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	procs.GC(env(map[string]string{"GOGC": "80"}), 50)
	if got := procs.GCPercent(); got != 100 {
		t.Errorf("GOGC set: got %d, want it left at 100", got)
	}
	procs.GC(env(nil), 50)
	if got := procs.GCPercent(); got != 50 {
		t.Errorf("GOGC unset: got %d, want 50", got)
	}
	if got := procs.GCPercent(); got != 50 {
		t.Errorf("GCPercent changed the setting: got %d, want 50", got)
	}
}
