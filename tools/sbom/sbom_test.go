package sbom_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/sbom"
)

// TestFromBinaries reads the test binary itself: a real Go binary with
// real build info, whose module list the test compares with its own.
func TestFromBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("test binary has no build info")
	}
	p := sbom.Product{Name: "fiskfleet", Version: "1.2.3", ModulePrefix: "github.com/fiskfleet/fiskfleet", Archive: "x.tar.gz", Time: time.Unix(1764748800, 0)}
	doc, err := sbom.FromBinaries(p, self)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := doc.Metadata.Timestamp, "2025-12-03T08:00:00Z"; got != want {
		t.Errorf("got timestamp %s, want %s", got, want)
	}
	if got, want := doc.Components[0].Version, "1.2.3"; got != want {
		t.Errorf("got the binary's version %s, want the product's %s for its (devel) main module", got, want)
	}
	names := map[string]string{}
	for _, c := range doc.Components {
		names[c.Name] = c.Version
	}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		want := m.Version
		if m.Path == "github.com/fiskfleet/fiskfleet/shared" || want == "(devel)" {
			want = "1.2.3"
		}
		if got, ok := names[m.Path]; !ok || got != want {
			t.Errorf("module %s: got version %q (listed %t), want %q", m.Path, got, ok, want)
		}
	}
	b1, err := doc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := sbom.FromBinaries(p, self)
	b2, _ := again.JSON()
	if string(b1) != string(b2) {
		t.Error("got two different documents from one binary, want identical bytes")
	}
	var generic map[string]any
	if err := json.Unmarshal(b1, &generic); err != nil {
		t.Fatal(err)
	}
	if got := generic["bomFormat"]; got != "CycloneDX" {
		t.Errorf("got bomFormat %v, want CycloneDX", got)
	}
	if !slices.ContainsFunc(doc.Dependencies, func(d sbom.Dependency) bool { return d.Ref == doc.Metadata.Component.BOMRef }) {
		t.Error("got no dependency entry for the product, want one naming its binaries")
	}
}

func TestFromBinariesRefusesNonGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := sbom.FromBinaries(sbom.Product{}, path); err == nil {
		t.Error("got no error for a shell script, want ErrNoBuildInfo")
	}
}
