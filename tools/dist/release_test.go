package dist_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/tools/dist"
	"github.com/fiskfleet/fiskfleet/tools/sbom"
)

// release is the release under test: the directory `make dist` wrote and
// the version it stamped, from the environment `make dist-test` sets.
type release struct {
	dir, version, commit string
}

// releaseUnderTest skips the test when no release was built: these tests
// check the files of `make dist` and run from `make dist-test` (in CI, a
// step of its own after make test), not from make test.
func releaseUnderTest(tb testing.TB) release {
	tb.Helper()
	r := release{dir: os.Getenv("FISKFLEET_DIST_DIR"), version: os.Getenv("FISKFLEET_DIST_VERSION"), commit: os.Getenv("FISKFLEET_DIST_COMMIT")}
	if r.dir == "" {
		tb.Skip("no release to check: run make dist, then make dist-test (which sets FISKFLEET_DIST_DIR)")
	}
	if r.version == "" || r.commit == "" {
		tb.Fatal("FISKFLEET_DIST_DIR is set without FISKFLEET_DIST_VERSION and FISKFLEET_DIST_COMMIT: run make dist-test")
	}
	return r
}

// files returns the release's file names by kind.
func (r release) files(tb testing.TB) map[string][]string {
	tb.Helper()
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		tb.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".cdx.json"):
			kinds["sbom"] = append(kinds["sbom"], n)
		case strings.HasSuffix(n, ".tar.gz"):
			kinds["tar.gz"] = append(kinds["tar.gz"], n)
		case strings.HasSuffix(n, ".deb"):
			kinds["deb"] = append(kinds["deb"], n)
		case strings.HasSuffix(n, ".rpm"):
			kinds["rpm"] = append(kinds["rpm"], n)
		case strings.HasSuffix(n, ".oci.tar"):
			kinds["oci"] = append(kinds["oci"], n)
		default:
			kinds["other"] = append(kinds["other"], n)
		}
	}
	return kinds
}

func (r release) path(name string) string { return filepath.Join(r.dir, name) }

// TestReleaseFiles checks that make dist wrote what the issue lists, no
// more, and that SHA256SUMS covers every file and verifies.
func TestReleaseFiles(t *testing.T) {
	r := releaseUnderTest(t)
	kinds := r.files(t)
	var want []string
	for _, tg := range dist.DefaultTargets {
		want = append(want, "fiskfleet_"+r.version+"_"+tg.OS+"_"+tg.Arch+".tar.gz")
	}
	slices.Sort(want)
	if !slices.Equal(kinds["tar.gz"], want) {
		t.Errorf("got archives %v, want %v", kinds["tar.gz"], want)
	}
	wantOCI := []string{"fiskfleet_" + r.version + "_linux_amd64.oci.tar", "fiskfleet_" + r.version + "_linux_arm64.oci.tar"}
	if !slices.Equal(kinds["oci"], wantOCI) {
		t.Errorf("got images %v, want %v", kinds["oci"], wantOCI)
	}
	if len(kinds["deb"]) != 2 || len(kinds["rpm"]) != 2 {
		t.Errorf("got packages %v %v, want a .deb and an .rpm for each of amd64 and arm64", kinds["deb"], kinds["rpm"])
	}
	if !slices.Equal(kinds["other"], []string{"SHA256SUMS"}) {
		t.Errorf("got other files %v, want only SHA256SUMS", kinds["other"])
	}
	archives := slices.Concat(kinds["tar.gz"], kinds["deb"], kinds["rpm"], kinds["oci"])
	if got, want := len(kinds["sbom"]), len(archives); got != want {
		t.Errorf("got %d SBOMs, want one per archive (%d)", got, want)
	}
	for _, a := range archives {
		if !slices.Contains(kinds["sbom"], a+".cdx.json") {
			t.Errorf("got no SBOM for %s, want %s.cdx.json", a, a)
		}
	}

	sums := readSums(t, r.path("SHA256SUMS"))
	listed := make([]string, 0, len(sums))
	for name, sum := range sums {
		listed = append(listed, name)
		if got := sha256File(t, r.path(name)); got != sum {
			t.Errorf("%s: got sha256 %s, want %s as SHA256SUMS says", name, got, sum)
		}
	}
	slices.Sort(listed)
	all := slices.Concat(archives, kinds["sbom"])
	slices.Sort(all)
	if !slices.Equal(listed, all) {
		t.Errorf("got SHA256SUMS over %v, want every archive and SBOM %v", listed, all)
	}
}

// TestReleaseArchives opens every tar.gz: both services, README,
// CHANGELOG, LICENSE, docs/ and the examples under one top directory;
// binaries static, built for their target without cgo, -trimpath and the
// release's version; the one this machine can run says that version for
// --version.
func TestReleaseArchives(t *testing.T) {
	r := releaseUnderTest(t)
	for _, tg := range dist.DefaultTargets {
		name := "fiskfleet_" + r.version + "_" + tg.OS + "_" + tg.Arch + ".tar.gz"
		t.Run(tg.String(), func(t *testing.T) {
			dir := t.TempDir()
			members := extractTarGz(t, r.path(name), dir)
			prefix := strings.TrimSuffix(name, ".tar.gz") + "/"
			for _, m := range []string{"a2a-agent", "mcp-gateway", "README.md", "CHANGELOG.md", "examples/demo.yaml", "examples/nats-cli.yaml"} {
				if _, ok := members[prefix+m]; !ok {
					t.Errorf("got no %s%s in %s, want it", prefix, m, name)
				}
			}
			// README links docs/: every page of the checkout ships beside it.
			pages, _ := filepath.Glob("../../docs/*.md")
			if len(pages) == 0 {
				t.Fatal("got no docs/*.md in the checkout")
			}
			for _, p := range pages {
				if _, ok := members[prefix+"docs/"+filepath.Base(p)]; !ok {
					t.Errorf("got no %sdocs/%s in %s, want every page README links", prefix, filepath.Base(p), name)
				}
			}
			if _, ok := members[prefix+"LICENSE"]; !ok {
				t.Logf("%s has no LICENSE: the checkout has none yet", name)
			}
			for _, svc := range dist.Services {
				if got := members[prefix+svc.Name]; got != 0o755 {
					t.Errorf("%s: got mode %o, want 755", svc.Name, got)
				}
				bin := filepath.Join(dir, prefix, svc.Name)
				checkBuild(t, bin, tg, r.commit)
				if tg.OS == runtime.GOOS && tg.Arch == runtime.GOARCH {
					checkVersionOutput(t, bin, svc.Name, r)
				}
			}
		})
	}
}

// checkBuild reads the Go build info of bin: target, no cgo, -trimpath;
// looks for the release's commit stamped in; and, for Linux, wants no
// dynamic loader.
func checkBuild(tb testing.TB, bin string, tg dist.Target, commit string) {
	tb.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		tb.Fatalf("reading build info of %s: %v", bin, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{"GOOS": tg.OS, "GOARCH": tg.Arch, "CGO_ENABLED": "0", "-trimpath": "true"}
	for k, v := range want {
		if settings[k] != v {
			tb.Errorf("%s: got %s=%q, want %q", bin, k, settings[k], v)
		}
	}
	// -trimpath leaves -ldflags out of the build info, so the stamped
	// commit is looked for in the binary itself.
	if b, err := os.ReadFile(bin); err != nil || !bytes.Contains(b, []byte(commit)) {
		tb.Errorf("%s: got no commit %s stamped in (%v), want -X main.commit", bin, commit, err)
	}
	if tg.OS != "linux" {
		return
	}
	f, err := elf.Open(bin)
	if err != nil {
		tb.Fatalf("%s: %v", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			tb.Errorf("%s: got a PT_INTERP program header, want a static binary", bin)
		}
	}
}

// checkVersionOutput runs bin --version.
func checkVersionOutput(tb testing.TB, bin, name string, r release) {
	tb.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		tb.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	got := string(out)
	for _, want := range []string{name + " " + r.version + "\n", "commit: " + r.commit + "\n", "built:  20", "go:     go1."} {
		if !strings.Contains(got, want) {
			tb.Errorf("%s --version: got %q, want a line with %q", bin, got, want)
		}
	}
}

// TestReleaseSBOMs reads every SBOM: CycloneDX, the release's version,
// and every module linked into the target's binaries (read back from the
// binaries in the target's archive) named at its version.
func TestReleaseSBOMs(t *testing.T) {
	r := releaseUnderTest(t)
	linked := map[string]map[string]string{} // target -> module -> version
	for _, tg := range dist.DefaultTargets {
		name := "fiskfleet_" + r.version + "_" + tg.OS + "_" + tg.Arch + ".tar.gz"
		dir := t.TempDir()
		extractTarGz(t, r.path(name), dir)
		mods := map[string]string{}
		for _, svc := range dist.Services {
			info, err := buildinfo.ReadFile(filepath.Join(dir, strings.TrimSuffix(name, ".tar.gz"), svc.Name))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range info.Deps {
				if m.Replace != nil {
					m = m.Replace
				}
				mods[m.Path] = m.Version
			}
		}
		linked[tg.String()] = mods
	}
	for _, name := range r.files(t)["sbom"] {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(r.path(name))
			if err != nil {
				t.Fatal(err)
			}
			var doc sbom.Document
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.5" || doc.Metadata.Component.Version != r.version {
				t.Errorf("got %s %s for version %s, want CycloneDX 1.5 for %s", doc.BOMFormat, doc.SpecVersion, doc.Metadata.Component.Version, r.version)
			}
			// The target is the one the SBOM's binaries say they were
			// built for.
			var goos, goarch string
			for _, p := range doc.Components[0].Properties {
				switch p.Name {
				case "go:build:GOOS":
					goos = p.Value
				case "go:build:GOARCH":
					goarch = p.Value
				}
			}
			tg := goos + "/" + goarch
			if linked[tg] == nil {
				t.Fatalf("got binaries built for %q, want one of the release targets", tg)
			}
			got := map[string]string{}
			for _, c := range doc.Components {
				if c.Type == "library" {
					got[c.Name] = c.Version
				}
			}
			if len(got) < 20 {
				t.Errorf("got %d modules, want the module graph of two services (dozens)", len(got))
			}
			for path, v := range linked[tg] {
				want := v
				if strings.HasPrefix(path, dist.ModulePrefix) {
					want = r.version
				}
				if got[path] != want {
					t.Errorf("module %s: got %q, want %q (linked into the %s binaries)", path, got[path], want, tg)
				}
			}
			if got["github.com/nats-io/nats.go"] == "" {
				t.Error("got no github.com/nats-io/nats.go, want the NATS client named")
			}
		})
	}
}

func readSums(tb testing.TB, path string) map[string]string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			tb.Fatalf("SHA256SUMS: got line %q, want HEX  NAME", sc.Text())
		}
		out[name] = sum
	}
	return out
}

func sha256File(tb testing.TB, path string) string {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// extractTarGz unpacks path into dir and returns each member's mode by
// name (directories with a trailing slash).
func extractTarGz(tb testing.TB, path, dir string) map[string]os.FileMode {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return extractTar(tb, zr, dir)
}

func extractTar(tb testing.TB, r io.Reader, dir string) map[string]os.FileMode {
	tb.Helper()
	members := map[string]os.FileMode{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return members
		}
		if err != nil {
			tb.Fatal(err)
		}
		members[hdr.Name] = os.FileMode(hdr.Mode).Perm()
		if strings.Contains(hdr.Name, "..") || filepath.IsAbs(hdr.Name) {
			tb.Fatalf("got member %q, want a relative name inside the archive", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				tb.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				tb.Fatal(err)
			}
			w, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode).Perm()|0o600)
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				tb.Fatal(err)
			}
			w.Close()
		}
	}
}
