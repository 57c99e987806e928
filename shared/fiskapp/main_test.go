package fiskapp_test

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

func TestMain(m *testing.M) { fisktest.Main(m) }

// demoPath returns the demo binary, built once per test binary.
func demoPath(tb testing.TB) string {
	tb.Helper()
	return fisktest.FiskDemo(tb)
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

// natsPath returns the real nats CLI binary, failing tb with the fix when it
// is not installed.
func natsPath(tb testing.TB) string {
	tb.Helper()
	return fisktest.NATSCLI(tb)
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
