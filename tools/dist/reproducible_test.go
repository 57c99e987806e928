package dist_test

import (
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/tools/dist"
)

// TestReleaseReproducible builds the whole release a second time, at the
// same commit into another directory, and compares it with the one make
// dist wrote: every file, SBOMs and SHA256SUMS included, must be identical
// byte for byte. The second build reuses Go's build cache, so it costs
// the links and the packaging, not the compiles: about a minute a target.
func TestReleaseReproducible(t *testing.T) {
	r := releaseUnderTest(t)
	epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		t.Fatalf("SOURCE_DATE_EPOCH %q: %v (make dist-test sets it)", os.Getenv("SOURCE_DATE_EPOCH"), err)
	}
	root, err := fisktest.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	start := time.Now()
	files, err := dist.Run(t.Context(), dist.Config{
		Root: root, Out: again, Version: r.version, Commit: r.commit, Time: time.Unix(epoch, 0).UTC(),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second build of %d files took %s", len(files), time.Since(start).Round(time.Second))
	first := readSums(t, r.path("SHA256SUMS"))
	second := readSums(t, again+"/SHA256SUMS")
	if len(first) != len(second) {
		t.Errorf("got %d files in the second build, want %d as in the first", len(second), len(first))
	}
	for name, sum := range first {
		if second[name] != sum {
			t.Errorf("%s: got sha256 %s in the second build, want %s as in the first", name, second[name], sum)
		}
	}
	if a, b := sha256File(t, r.path("SHA256SUMS")), sha256File(t, again+"/SHA256SUMS"); a != b {
		t.Errorf("got SHA256SUMS %s in the second build, want %s", b, a)
	}
}
