package fiskapp_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// demoPackage is the demo fisk application every test serves. shared must
// not import integration, so it is built with the go command instead.
const demoPackage = "github.com/fiskfleet/fiskfleet/integration/fiskdemo"

// demo is the demo binary built once per test binary by TestMain.
var demo struct {
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fiskapp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating build directory:", err)
		os.Exit(1)
	}
	demo.path, demo.err = buildDemo(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildDemo builds the demo app from the workspace root, where go.work makes
// the integration module visible.
func buildDemo(dir string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding working directory: %w", err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.work")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("no go.work above %s: the demo app is built from the workspace", wd)
		}
		root = parent
	}
	out := filepath.Join(dir, "fiskdemo")
	cmd := exec.Command("go", "build", "-o", out, demoPackage)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s in %s: %w\n%s", demoPackage, root, err, b)
	}
	return out, nil
}

// demoPath returns the demo binary, failing tb when it could not be built.
func demoPath(tb testing.TB) string {
	tb.Helper()
	if demo.err != nil {
		tb.Fatal(demo.err)
	}
	return demo.path
}

// loadDemo loads the demo app with opts (Path is filled in).
func loadDemo(tb testing.TB, opts fiskapp.Options) *fiskapp.App {
	tb.Helper()
	opts.Path = demoPath(tb)
	app, err := fiskapp.Load(tb.Context(), opts)
	if err != nil {
		tb.Fatalf("loading the demo app: %v", err)
	}
	return app
}

// demoCommand loads the demo app with opts and returns the named command.
func demoCommand(tb testing.TB, opts fiskapp.Options, name string) *fiskapp.Command {
	tb.Helper()
	app := loadDemo(tb, opts)
	for _, c := range app.Commands {
		if c.Name() == name {
			return c
		}
	}
	tb.Fatalf("demo app has no command %q", name)
	return nil
}

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
	return "", errors.New("nats CLI (natscli v0.5.0) not found in $(go env GOPATH)/bin or PATH: run make tools")
})

// natsPath returns the real nats CLI binary, failing tb with the fix when it
// is not installed.
func natsPath(tb testing.TB) string {
	tb.Helper()
	p, err := natsCLI()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func names(cmds []*fiskapp.Command) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Name()
	}
	return out
}

func droppedReasons(app *fiskapp.App) map[string]string {
	out := make(map[string]string, len(app.Dropped))
	for _, d := range app.Dropped {
		out[d.Name] = d.Reason
	}
	return out
}
