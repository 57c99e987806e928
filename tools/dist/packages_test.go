package dist_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// packageFiles are the files every package installs, besides the
// examples under /etc/fiskfleet/examples.
var packageFiles = []string{
	"/usr/bin/a2a-agent",
	"/usr/bin/mcp-gateway",
	"/usr/lib/systemd/system/fiskfleet-agent@.service",
	"/usr/lib/systemd/system/fiskfleet-gateway@.service",
	"/etc/fiskfleet/examples/demo.yaml",
	"/usr/share/doc/fiskfleet/README.md",
	"/usr/share/doc/fiskfleet/CHANGELOG.md",
	"/usr/share/doc/fiskfleet/docs/configuration.md",
	"/usr/share/doc/fiskfleet/docs/install.md",
}

// units are the template units, with the instance the tests start.
var units = []string{"fiskfleet-agent@ops.service", "fiskfleet-gateway@ops.service"}

// maxExposure is the highest `systemd-analyze security` exposure the
// units may have; docs/install.md states the measured score (1.2, "OK").
const maxExposure = 2.0

// tool returns the path of a program `make tools` installs, failing with
// that fix when it is missing.
func tool(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is not installed: run make tools (apt-get install %s)", name, pkg)
	}
	return p
}

func (r release) packageFor(tb testing.TB, kind, arch string) string {
	tb.Helper()
	for _, n := range r.files(tb)[kind] {
		if strings.Contains(n, "_"+arch+".deb") || strings.Contains(n, "."+map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[arch]+".rpm") {
			return r.path(n)
		}
	}
	tb.Fatalf("got no %s for %s in %s", kind, arch, r.dir)
	return ""
}

// TestReleaseRPM lists each .rpm with Debian's rpm (rpm -qpl), and reads
// its name, version, architecture, config files and scriptlets.
func TestReleaseRPM(t *testing.T) {
	r := releaseUnderTest(t)
	rpm := tool(t, "rpm", "rpm")
	for arch, rpmArch := range map[string]string{"amd64": "x86_64", "arm64": "aarch64"} {
		t.Run(arch, func(t *testing.T) {
			pkg := r.packageFor(t, "rpm", arch)
			out, err := exec.Command(rpm, "-qpl", pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("rpm -qpl: %v\n%s", err, out)
			}
			for _, want := range packageFiles {
				if !strings.Contains(string(out), want+"\n") {
					t.Errorf("rpm -qpl: got no %s in\n%s", want, out)
				}
			}
			out, err = exec.Command(rpm, "-qp", "--queryformat", "%{NAME} %{VERSION} %{ARCH}", pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("rpm -qp: %v\n%s", err, out)
			}
			// nfpm's semver mapping: the pre-release after "~" (sorting
			// below the release), an RPM version's forbidden "-" as "_".
			rpmVersion := strings.ReplaceAll(strings.Replace(r.version, "-", "~", 1), "-", "_")
			if got, want := string(out), "fiskfleet "+rpmVersion+" "+rpmArch; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
			out, _ = exec.Command(rpm, "-qpc", pkg).CombinedOutput()
			if !strings.Contains(string(out), "/etc/fiskfleet/examples/demo.yaml") {
				t.Errorf("rpm -qpc: got %q, want the examples marked as config", out)
			}
			out, _ = exec.Command(rpm, "-qp", "--scripts", pkg).CombinedOutput()
			for _, want := range []string{"useradd --system", "systemctl try-restart", "systemctl stop"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("rpm --scripts: got no %q in\n%s", want, out)
				}
			}
		})
	}
}

// TestReleaseUnits unpacks the .deb of this machine's arch into a root
// beside the host's own system units (the targets the units name) and
// runs systemd-analyze verify on instances of both templates, offline:
// --root points it at the unpacked tree, --man=no and --generators=no
// keep it from reading the host. Any warning fails, as does a security
// exposure above maxExposure (systemd-analyze security --offline=true).
func TestReleaseUnits(t *testing.T) {
	r := releaseUnderTest(t)
	sa := tool(t, "systemd-analyze", "systemd")
	root := t.TempDir()
	if out, err := exec.Command(tool(t, "dpkg-deb", "dpkg"), "-x", r.packageFor(t, "deb", runtime.GOARCH), root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	unitDir := filepath.Join(root, "usr/lib/systemd/system")
	hostUnits, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	if err != nil || len(hostUnits) == 0 {
		t.Fatalf("got no /usr/lib/systemd/system/*.target (%v): install Debian's systemd package (make tools)", err)
	}
	for _, u := range hostUnits {
		b, err := os.ReadFile(u)
		if err != nil {
			continue // a dangling alias
		}
		if err := os.WriteFile(filepath.Join(unitDir, filepath.Base(u)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verifyUnits(t, sa, "--root="+root)
}

// verifyUnits runs systemd-analyze verify and security on units with the
// extra arguments given (a --root, or none for the installed units).
func verifyUnits(t *testing.T, sa string, extra ...string) {
	t.Helper()
	args := append([]string{"verify", "--man=no", "--generators=no"}, extra...)
	out, err := exec.Command(sa, append(args, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze %s: got %v with output\n%s\nwant success and no output", strings.Join(args, " "), err, out)
	}
	score := regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)
	for _, u := range units {
		args := append([]string{"security", "--offline=true"}, extra...)
		out, err := exec.Command(sa, append(args, u)...).CombinedOutput()
		m := score.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Errorf("systemd-analyze security %s: got %v\n%s", u, err, out)
			continue
		}
		exposure, _ := strconv.ParseFloat(m[2], 64)
		t.Logf("systemd-analyze security --offline=true %s: %s %s", u, m[2], m[3])
		if exposure > maxExposure {
			t.Errorf("%s: got exposure %.1f, want at most %.1f", u, exposure, maxExposure)
		}
	}
}
