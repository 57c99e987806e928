package dist_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// installMarker marks an /etc/fiskfleet that this test made, so a run
// that died half way can be cleaned up by the next one without ever
// touching an operator's real configuration.
const installMarker = ".fiskfleet-install-test"

// watched are the trees compared before the install and after the purge:
// everything the package or its scripts could leave behind.
var watched = []string{"/etc", "/usr/bin", "/usr/lib/systemd", "/usr/share/doc", "/var/lib"}

// TestReleaseDebInstall installs the .deb of this machine's arch with
// dpkg -i, as an operator would on a clean machine, and uses it: the
// installed binaries' --version, systemd-analyze verify on the installed
// units, the installed a2a-agent serving an example config as the
// fiskfleet user (the unit's user and environment, without systemd, which
// a container does not run) against a test NATS server, a tool called
// with the installed a2a-agent call, and the version on the card, in the
// micro metadata and in the installed mcp-gateway's MCP serverInfo. Then
// dpkg --purge, and nothing may be left but /etc/fiskfleet with the
// operator's own config in it.
//
// It needs root. Outside CI it is skipped for anyone else; under CI=true
// it fails instead, so CI cannot pass without it.
func TestReleaseDebInstall(t *testing.T) {
	r := releaseUnderTest(t)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("installing the .deb needs root, and CI runs as root: run make dist-test as root")
		}
		t.Skip("installing the .deb needs root: run make dist-test as root (CI does)")
	}
	dpkg := tool(t, "dpkg", "dpkg")
	if out, err := exec.Command(dpkg, "-s", "fiskfleet").CombinedOutput(); err == nil && strings.Contains(string(out), "Status: install ok installed") {
		t.Fatal("fiskfleet is installed on this machine already: this test installs and purges it, so it will not run here (dpkg --purge fiskfleet first, if it is yours to remove)")
	}
	if _, err := os.Stat("/etc/fiskfleet"); err == nil {
		if _, err := os.Stat("/etc/fiskfleet/" + installMarker); err != nil {
			t.Fatal("/etc/fiskfleet exists and was not made by this test: it may be an operator's configuration, so the test will not run here")
		}
		if err := os.RemoveAll("/etc/fiskfleet"); err != nil { // left by an earlier run of this test
			t.Fatal(err)
		}
	}
	before := snapshot(t)
	pkg := r.packageFor(t, "deb", runtime.GOARCH)

	// Whatever happens below, the machine is left as it was found.
	t.Cleanup(func() {
		if out, err := exec.Command(dpkg, "--purge", "fiskfleet").CombinedOutput(); err != nil {
			t.Errorf("cleaning up: dpkg --purge: %v\n%s", err, out)
		}
		if err := os.RemoveAll("/etc/fiskfleet"); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	if err := os.MkdirAll("/etc/fiskfleet", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/fiskfleet/"+installMarker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(dpkg, "-i", pkg).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i %s: %v\n%s", filepath.Base(pkg), err, out)
	}

	t.Run("files", func(t *testing.T) {
		for _, f := range packageFiles {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("got %v, want %s installed", err, f)
			}
		}
		st, err := os.Stat("/etc/fiskfleet")
		if err != nil {
			t.Fatal(err)
		}
		grp, err := user.LookupGroupId(strconv.Itoa(int(st.Sys().(*syscall.Stat_t).Gid)))
		if err != nil || grp.Name != "fiskfleet" || st.Mode().Perm() != 0o750 {
			t.Errorf("got /etc/fiskfleet mode %o group %v (%v), want 750 root:fiskfleet", st.Mode().Perm(), grp, err)
		}
		out, _ := exec.Command("dpkg-query", "-W", "-f", "${Conffiles}", "fiskfleet").CombinedOutput()
		if !strings.Contains(string(out), "/etc/fiskfleet/examples/demo.yaml") {
			t.Errorf("got conffiles %q, want the examples among them", out)
		}
	})
	t.Run("version", func(t *testing.T) {
		for _, b := range []string{"a2a-agent", "mcp-gateway"} {
			checkVersionOutput(t, "/usr/bin/"+b, b, r)
		}
	})
	t.Run("units", func(t *testing.T) {
		verifyUnits(t, tool(t, "systemd-analyze", "systemd"))
	})
	t.Run("serve", func(t *testing.T) { serveInstalled(t, r) })

	if out, err := exec.Command(dpkg, "--purge", "fiskfleet").CombinedOutput(); err != nil {
		t.Fatalf("dpkg --purge: %v\n%s", err, out)
	}
	after := snapshot(t)
	for p := range after {
		if _, ok := before[p]; !ok && p != "/etc/fiskfleet" && !strings.HasPrefix(p, "/etc/fiskfleet/") {
			t.Errorf("got %s after the purge, want nothing left outside /etc/fiskfleet", p)
		}
	}
	for _, want := range []string{"/etc/fiskfleet/ops.yaml", "/etc/fiskfleet/nats/context/fiskfleet-test.json"} {
		if _, ok := after[want]; !ok {
			t.Errorf("got no %s after the purge, want the operator's files in /etc/fiskfleet kept", want)
		}
	}
	if _, ok := after["/etc/fiskfleet/examples/demo.yaml"]; ok {
		t.Error("got /etc/fiskfleet/examples/demo.yaml after the purge, want the package's examples removed")
	}
	for _, db := range []string{"/etc/passwd", "/etc/group"} {
		b, _ := os.ReadFile(db)
		if strings.Contains(string(b), "\nfiskfleet:") || strings.HasPrefix(string(b), "fiskfleet:") {
			t.Errorf("got a fiskfleet entry in %s after the purge, want it removed", db)
		}
	}
}

// serveInstalled runs the installed a2a-agent and mcp-gateway on an
// example config against a test NATS server.
func serveInstalled(t *testing.T, r release) {
	ns := natstest.Start(t)
	fsk, err := user.Lookup("fiskfleet")
	if err != nil {
		t.Fatalf("got %v, want the fiskfleet user the package made", err)
	}
	uid, _ := strconv.Atoi(fsk.Uid)
	gid, _ := strconv.Atoi(fsk.Gid)

	// The demo application, where the fiskfleet user can run it.
	appDir, err := os.MkdirTemp("", "fiskfleet-deb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(appDir) })
	if err := os.Chmod(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(appDir, "fiskdemo")
	root, err := fisktest.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", app, "./integration/fiskdemo")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building fiskdemo: %v\n%s", err, out)
	}

	// The operator's part, as docs/install.md says: a nats
	// context under /etc/fiskfleet/nats/context and /etc/fiskfleet/ops.yaml
	// made from the example the package installed.
	writeOperatorFile(t, "/etc/fiskfleet/nats/context/fiskfleet-test.json", fmt.Sprintf(`{"url":%q}`, ns.URL()), gid)
	example, err := os.ReadFile("/etc/fiskfleet/examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(example), "identity: demo", "identity: ops", 1)
	cfg = strings.Replace(cfg, "application_path: fiskdemo", "application_path: "+app, 1)
	cfg = strings.Replace(cfg, "nats_context: fiskfleet-dev", "nats_context: fiskfleet-test", 1)
	cfg = regexp.MustCompile(`(?m)^remote_tools:\n  - host: demo\n`).ReplaceAllString(cfg, "remote_tools:\n  - host: ops\n")
	writeOperatorFile(t, "/etc/fiskfleet/ops.yaml", cfg, gid)

	// The state directory systemd would make (StateDirectory=), where the
	// fiskfleet user can reach it: t.TempDir's parents are root's alone.
	state := filepath.Join(appDir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	// The unit's environment (packaging/systemd/fiskfleet-agent@.service).
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + state, "XDG_CONFIG_HOME=/etc/fiskfleet", "XDG_CACHE_HOME=" + state}
	start := func(bin string, extraEnv ...string) (*exec.Cmd, *fisktest.Buffer, *fisktest.Buffer) {
		cmd := exec.Command(bin, "serve", "--config", "/etc/fiskfleet/ops.yaml")
		cmd.Env = append(slices.Clone(env), extraEnv...)
		cmd.Dir = state
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		stdout, stderr := &fisktest.Buffer{}, &fisktest.Buffer{}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
		return cmd, stdout, stderr
	}
	_, _, agentErr := start("/usr/bin/a2a-agent")

	// The operator's client: the installed a2a-agent, with the context.
	cli := func(args ...string) (string, error) {
		cmd := exec.Command("/usr/bin/a2a-agent", append(args[:1:1], append([]string{"--context", "fiskfleet-test"}, args[1:]...)...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + state, "XDG_CONFIG_HOME=/etc/fiskfleet"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	var card string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := cli("discover", "ops", "--json")
		if err == nil {
			card = out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a2a-agent discover ops: got %v\n%s\nwant the installed agent's card within 30s; agent stderr:\n%s", err, out, agentErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var c struct {
		Version string `json:"version"`
		Tools   []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(card), &c); err != nil {
		t.Fatalf("decoding the card: %v\n%s", err, card)
	}
	if c.Version != r.version {
		t.Errorf("got card version %q, want %q", c.Version, r.version)
	}
	out, err := cli("call", "ops", "echo", `{"message":"installed from the deb"}`)
	if err != nil || !strings.Contains(out, "installed from the deb") {
		t.Errorf("a2a-agent call ops echo: got %v\n%s\nwant the echoed message; agent stderr:\n%s", err, out, agentErr)
	}

	nc := ns.Connect(t)
	subj, err := micro.ControlSubject(micro.InfoVerb, "ops", "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subj, nil, 5*time.Second)
	if err != nil {
		t.Fatalf("micro INFO ops: %v", err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.Version != "0.0.0" || info.Metadata["fiskfleet.version"] != r.version {
		t.Errorf("got micro version %q metadata fiskfleet.version %q, want 0.0.0 (the service's own, as designed) and %q", info.Version, info.Metadata["fiskfleet.version"], r.version)
	}

	// The installed gateway, its port picked by the system, on loopback.
	_, gwOut, gwErr := start("/usr/bin/mcp-gateway", "MCP_GATEWAY_PORT=0")
	url := waitForLine(t, gwOut, regexp.MustCompile(`claude mcp add --transport http ops (http://127\.0\.0\.1:\d+/mcp)`), gwErr)
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	mc := client.NewClient(tr)
	if err := mc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "deb-install-test", Version: "0"}
	res, err := mc.Initialize(t.Context(), req)
	if err != nil {
		t.Fatalf("initialising: %v; gateway stderr:\n%s", err, gwErr)
	}
	if res.ServerInfo.Version != r.version {
		t.Errorf("got MCP serverInfo.version %q, want %q", res.ServerInfo.Version, r.version)
	}
}

// writeOperatorFile writes a file into /etc/fiskfleet as an operator
// would: root's, readable by the fiskfleet group.
func writeOperatorFile(t *testing.T, path, body string, gid int) {
	t.Helper()
	for d := filepath.Dir(path); d != "/etc/fiskfleet"; d = filepath.Dir(d) {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, 0, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte(body), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, gid); err != nil {
		t.Fatal(err)
	}
}

// waitForLine polls buf until a line matches re and returns its first
// group.
func waitForLine(t *testing.T, buf *fisktest.Buffer, re *regexp.Regexp, stderr *fisktest.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(buf.String()))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				return m[1]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("got no line matching %s within 30s; stdout:\n%s\nstderr:\n%s", re, buf, stderr)
	return ""
}

// snapshot lists every path under the watched trees.
func snapshot(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, top := range watched {
		_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished while walking, or unreadable: not ours
			}
			out[p] = true
			return nil
		})
	}
	return out
}
