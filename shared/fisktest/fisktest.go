// Package fisktest gives tests across the workspace the programs they run:
// the demo fisk application and the services, built once per test binary
// from the go.work workspace, and the real nats CLI. Like natstest it is
// imported only by _test.go files, so no production binary links it.
package fisktest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// Packages the tests build. shared must not import the integration module
// or the services, so they are built with the go command instead.
const (
	FiskDemoPackage   = "github.com/fiskfleet/fiskfleet/integration/fiskdemo"
	A2AAgentPackage   = "github.com/fiskfleet/fiskfleet/services/a2a-agent"
	MCPGatewayPackage = "github.com/fiskfleet/fiskfleet/services/mcp-gateway"
)

// binDir holds the binaries of this test binary; set by [Main].
var binDir string

// Main runs the tests of m, removes the binaries built for them, and exits
// with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { fisktest.Main(m) }
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "fisktest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fisktest: creating the build directory:", err)
		os.Exit(1)
	}
	binDir = dir
	// The knowledge index defaults to the user's cache directory: no test
	// of this binary, nor any process it starts, may write there. The go
	// command keeps its build cache there too, so it is pinned first:
	// builds must stay cached.
	if os.Getenv("GOCACHE") == "" {
		if user, err := os.UserCacheDir(); err == nil {
			_ = os.Setenv("GOCACHE", filepath.Join(user, "go-build"))
		}
	}
	if err := os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache")); err != nil {
		fmt.Fprintln(os.Stderr, "fisktest: setting XDG_CACHE_HOME:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// builds holds one build per package: built at most once per test binary.
var builds sync.Map // package path -> func() (string, error)

// Build returns the path of pkg built as name, building it on first use.
// Each binary is built on its own, so a test of one program does not depend
// on another compiling.
func Build(tb testing.TB, pkg, name string) string {
	tb.Helper()
	if binDir == "" {
		tb.Fatal("fisktest: binaries are built by fisktest.Main: add func TestMain(m *testing.M) { fisktest.Main(m) } to the package's tests")
	}
	f, _ := builds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) { return build(binDir, pkg, name) }))
	path, err := f.(func() (string, error))()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// FiskDemo returns the path of the demo fisk application.
func FiskDemo(tb testing.TB) string {
	tb.Helper()
	return Build(tb, FiskDemoPackage, "fiskdemo")
}

func build(dir, pkg, name string) (string, error) {
	root, err := WorkspaceRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	// Built as make build builds them (no cgo): tests run the binaries
	// operators run, and the compiled packages are shared with make build
	// in the build cache instead of compiled twice (the SQLite driver
	// alone takes minutes).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fisktest: building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// WorkspaceRoot returns the directory holding go.work, searched upwards
// from the working directory (a test's package directory).
func WorkspaceRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("fisktest: finding the working directory: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("fisktest: no go.work above %s: test binaries are built from the workspace", wd)
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
	return "", errors.New("fisktest: the nats CLI (natscli v0.5.0) is not in $(go env GOPATH)/bin or PATH: run make tools")
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

// Logger returns a logger for the code under test: silent unless -v is
// given, when it writes to the test log so a failing run shows the
// server's view.
func Logger(tb testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// WaitFor polls cond every 10 ms until it holds, failing tb naming what it
// waited for when timeout passes first.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// Buffer is a bytes.Buffer safe for concurrent use: a sink for the logs
// and output of code under test whose goroutines write while the test
// reads.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// DemoCommand loads the demo application with only the command name
// selected and returns it, for tests and benchmarks of a single command.
func DemoCommand(tb testing.TB, name string) *fiskapp.Command {
	tb.Helper()
	app, err := fiskapp.Load(tb.Context(), fiskapp.Options{Path: FiskDemo(tb), Include: config.Filter{Tools: []string{name}}})
	if err != nil {
		tb.Fatalf("fisktest: loading the demo app: %v", err)
	}
	if len(app.Commands) != 1 {
		tb.Fatalf("fisktest: demo app: got %d commands named %s, want 1", len(app.Commands), name)
	}
	return app.Commands[0]
}

// WaitPIDFile waits until the demo's spawn command has written its
// grandchild's PID to path, and returns it, failing tb after 20 s.
func WaitPIDFile(tb testing.TB, path string) int {
	tb.Helper()
	var pid int
	WaitFor(tb, 20*time.Second, "the spawned grandchild's pid file "+path, func() bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(raw))
		return err == nil
	})
	return pid
}

// ProcessGone reports whether pid no longer runs. A zombie counts as gone:
// it runs nothing, and whether it is reaped soon depends on the machine's
// init.
func ProcessGone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	s := string(stat)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// RequireInstalled skips tb when one of paths, which `make tools`
// installs, is missing, unless CI is set: there what, the tool the test
// drives, must be installed, and its absence fails the test. A test never
// passes silently for want of its real component.
func RequireInstalled(tb testing.TB, what string, paths ...string) {
	tb.Helper()
	var missing []string
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	SkipUnlessCI(tb, fmt.Sprintf("%s is not installed (no %s): run `make tools`", what, strings.Join(missing, ", ")))
}

// SkipUnlessCI skips tb with msg, naming what is missing, or fails it when
// CI is set, where every component the tests drive must be installed.
func SkipUnlessCI(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") == "" {
		tb.Skip(msg)
	}
	tb.Fatalf("%s; CI is set, where it must run", msg)
}
