package fleettest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Packages of the binaries [A2AAgent], [MCPGateway] and [FiskDemo] build.
const (
	A2AAgentPackage   = "github.com/fiskfleet/fiskfleet/services/a2a-agent"
	MCPGatewayPackage = "github.com/fiskfleet/fiskfleet/services/mcp-gateway"
	FiskDemoPackage   = "github.com/fiskfleet/fiskfleet/integration/fiskdemo"
)

// binDir is the directory [Main] creates for the binaries of this test
// binary; empty until Main runs.
var binDir string

// Main runs the tests of m, removes the binaries built for them, and exits
// with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { fleettest.Main(m) }
//
// It exists so the binaries are built once per test binary, not once per
// test, and are not left behind in the temporary directory.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleettest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleettest: creating the build directory:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// builder builds one package at most once per test binary.
type builder struct {
	pkg, name string
	once      sync.Once
	path      string
	err       error
}

func (b *builder) get(tb testing.TB) string {
	tb.Helper()
	if binDir == "" {
		tb.Fatal("fleettest: binaries are built by fleettest.Main: add func TestMain(m *testing.M) { fleettest.Main(m) } to the package's tests")
	}
	b.once.Do(func() { b.path, b.err = build(binDir, b.pkg, b.name) })
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

var (
	a2aAgent   = &builder{pkg: A2AAgentPackage, name: "a2a-agent"}
	mcpGateway = &builder{pkg: MCPGatewayPackage, name: "mcp-gateway"}
	fiskDemo   = &builder{pkg: FiskDemoPackage, name: "fiskdemo"}
)

// A2AAgent returns the path of the a2a-agent binary, building it on first
// use. Each binary is built on its own, so a test of one service does not
// depend on another service compiling.
func A2AAgent(tb testing.TB) string { tb.Helper(); return a2aAgent.get(tb) }

// MCPGateway returns the path of the mcp-gateway binary, building it on
// first use.
func MCPGateway(tb testing.TB) string { tb.Helper(); return mcpGateway.get(tb) }

// FiskDemo returns the path of the fiskdemo application, building it on
// first use.
func FiskDemo(tb testing.TB) string { tb.Helper(); return fiskDemo.get(tb) }

// build runs go build for pkg from the workspace root, where go.work makes
// every module visible.
func build(dir, pkg, name string) (string, error) {
	root, err := WorkspaceRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fleettest: building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// WorkspaceRoot returns the directory holding go.work, searched upwards
// from the working directory (a test's package directory).
func WorkspaceRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("fleettest: finding the working directory: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("fleettest: no go.work above %s: the binaries are built from the workspace", wd)
		}
		dir = parent
	}
}

// natsCLI finds the nats CLI once.
var natsCLI = sync.OnceValues(func() (string, error) {
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "nats")
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p, nil
	}
	return "", errors.New("fleettest: the nats CLI (natscli v0.5.0) is not in $(go env GOPATH)/bin or PATH: run make tools")
})

// NATSCLI returns the path of the real nats CLI that `make tools`
// installs, failing tb with that fix when it is missing.
func NATSCLI(tb testing.TB) string {
	tb.Helper()
	p, err := natsCLI()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
