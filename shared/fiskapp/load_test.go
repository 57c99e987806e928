package fiskapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/choria-io/fisk"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

var demoTools = []string{"echo", "sleep", "ticker", "fail", "flood", "spawn", "deploy", "restart", "cluster_node_status", "getenv", "noop"}

func TestLoadDemo(t *testing.T) {
	t.Parallel()
	app := loadDemo(t, fiskapp.Options{})

	if got := names(app.Commands); !slices.Equal(got, demoTools) {
		t.Fatalf("got tools %v, want %v", got, demoTools)
	}
	wantDropped := []tool.Dropped{
		{Name: "linger", Reason: "hidden command"},
		{Name: "destroy", Reason: "tagged ai:deny"},
	}
	if !slices.Equal(app.Dropped, wantDropped) {
		t.Errorf("got dropped %v, want %v", app.Dropped, wantDropped)
	}
	if app.Model == nil || app.Model.Name != "fiskdemo" {
		t.Errorf("got model %+v, want the fiskdemo model", app.Model)
	}

	byName := map[string]*fiskapp.Command{}
	for _, c := range app.Commands {
		byName[c.Name()] = c
		if c.Exposure() != tool.ExposeMCP|tool.ExposeA2A {
			t.Errorf("%s: got exposure %v, want mcp,a2a", c.Name(), c.Exposure())
		}
		if !json.Valid(c.InputSchema()) {
			t.Errorf("%s: input schema is not valid JSON: %s", c.Name(), c.InputSchema())
		}
		if len(c.Tags()) > 0 && !strings.Contains(c.ModelDescription(), "\n\nTags: ") {
			t.Errorf("%s: got model description %q, want a trailing Tags: line", c.Name(), c.ModelDescription())
		}
	}

	status := byName["cluster_node_status"]
	if got, want := status.Title(), "cluster node status"; got != want {
		t.Errorf("got title %q, want %q", got, want)
	}
	if got, want := status.Path(), []string{"cluster", "node", "status"}; !slices.Equal(got, want) {
		t.Errorf("got path %v, want %v", got, want)
	}
	if got, want := status.ModelDescription(), "Shows a node's status\n\nTags: impact:ro"; got != want {
		t.Errorf("got model description %q, want %q", got, want)
	}
	if got, want := byName["deploy"].ModelDescription(), "Deploys a service\n\nTags: ai:confirm, impact:rw"; got != want {
		t.Errorf("got model description %q, want %q", got, want)
	}
	if got, want := byName["spawn"].Description(), "Starts a child that ignores SIGTERM, then sleeps\n\nThe child re-executes"; !strings.HasPrefix(got, want) {
		t.Errorf("got description %q, want the help then the long help after a blank line", got)
	}
	if d := byName["noop"]; d.Description() != "" || d.ModelDescription() != "" || len(d.Tags()) != 0 {
		t.Errorf("got noop description %q, model description %q, tags %v, want all empty", d.Description(), d.ModelDescription(), d.Tags())
	}

	var schema struct {
		Type                 string                     `json:"type"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
	}
	if err := json.Unmarshal(byName["echo"].InputSchema(), &schema); err != nil {
		t.Fatalf("decoding echo schema: %v", err)
	}
	props := slices.Sorted(func(yield func(string) bool) {
		for k := range schema.Properties {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"count", "format", "label", "message", "prefix", "upper"}; !slices.Equal(props, want) {
		t.Errorf("got echo properties %v, want %v (the hidden trace flag left out)", props, want)
	}
	if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties || !slices.Equal(schema.Required, []string{"message"}) {
		t.Errorf("got echo schema %s, want a closed object requiring message", byName["echo"].InputSchema())
	}
}

func TestDenyNeverSelected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts fiskapp.Options
	}{
		{name: "no filters"},
		{name: "include tags ai:deny", opts: fiskapp.Options{Include: config.Filter{Tags: []string{"ai:deny"}}}},
		{name: "include tools destroy", opts: fiskapp.Options{Include: config.Filter{Tools: []string{"destroy"}}}},
		{name: "include tools star", opts: fiskapp.Options{Include: config.Filter{Tools: []string{"*"}}}},
		{name: "include tags impact:rw", opts: fiskapp.Options{Include: config.Filter{Tags: []string{"impact:rw"}}}},
		{name: "empty exclude with include destroy", opts: fiskapp.Options{Include: config.Filter{Tools: []string{"destroy"}}, Exclude: config.Filter{}}},
		{name: "expose include destroy", opts: fiskapp.Options{Expose: config.ToolsFilter{Include: config.Filter{Tools: []string{"destroy"}}}}},
		{name: "expose include tags ai:deny", opts: fiskapp.Options{Expose: config.ToolsFilter{Include: config.Filter{Tags: []string{"ai:deny"}}}}},
		{name: "include and expose include destroy", opts: fiskapp.Options{
			Include: config.Filter{Tools: []string{"d*"}},
			Expose:  config.ToolsFilter{Include: config.Filter{Tools: []string{"destroy"}}},
		}},
		{name: "confirm tags ai:deny", opts: fiskapp.Options{ConfirmTags: []string{"ai:deny"}}},
		{name: "exclude everything else", opts: fiskapp.Options{Exclude: config.Filter{Tags: []string{"impact:ro"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := loadDemo(t, tt.opts)
			if slices.Contains(names(app.Commands), "destroy") {
				t.Fatalf("got destroy among %v, want it never selected", names(app.Commands))
			}
			if got, want := droppedReasons(app)["destroy"], "tagged ai:deny"; got != want {
				t.Errorf("got destroy dropped for %q, want %q", got, want)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		opts        fiskapp.Options
		want        []string
		wantReasons map[string]string
	}{
		{
			name:        "include glob",
			opts:        fiskapp.Options{Include: config.Filter{Tools: []string{"cluster_*"}}},
			want:        []string{"cluster_node_status"},
			wantReasons: map[string]string{"echo": "not matched by include.tools [cluster_*]"},
		},
		{
			name:        "include tag",
			opts:        fiskapp.Options{Include: config.Filter{Tags: []string{"impact:rw"}}},
			want:        []string{"deploy", "restart"},
			wantReasons: map[string]string{"noop": "not matched by include.tags [impact:rw]"},
		},
		{
			name:        "include glob or tag",
			opts:        fiskapp.Options{Include: config.Filter{Tools: []string{"echo", "noop"}, Tags: []string{"impact:rw"}}},
			want:        []string{"echo", "deploy", "restart", "noop"},
			wantReasons: map[string]string{"sleep": "not matched by include.tools [echo, noop] or include.tags [impact:rw]"},
		},
		{
			name:        "exclude tag",
			opts:        fiskapp.Options{Exclude: config.Filter{Tags: []string{"impact:rw"}}},
			want:        []string{"echo", "sleep", "ticker", "fail", "flood", "spawn", "cluster_node_status", "getenv", "noop"},
			wantReasons: map[string]string{"deploy": "excluded by exclude.tags impact:rw", "restart": "excluded by exclude.tags impact:rw"},
		},
		{
			name:        "exclude glob",
			opts:        fiskapp.Options{Exclude: config.Filter{Tools: []string{"s*"}}},
			want:        []string{"echo", "ticker", "fail", "flood", "deploy", "restart", "cluster_node_status", "getenv", "noop"},
			wantReasons: map[string]string{"sleep": "excluded by exclude.tools s*", "spawn": "excluded by exclude.tools s*"},
		},
		{
			name:        "include tag then exclude glob",
			opts:        fiskapp.Options{Include: config.Filter{Tags: []string{"impact:ro"}}, Exclude: config.Filter{Tools: []string{"echo", "f*"}}},
			want:        []string{"sleep", "ticker", "spawn", "cluster_node_status", "getenv"},
			wantReasons: map[string]string{"echo": "excluded by exclude.tools echo", "flood": "excluded by exclude.tools f*", "deploy": "not matched by include.tags [impact:ro]"},
		},
		{
			name:        "expose include",
			opts:        fiskapp.Options{Expose: config.ToolsFilter{Include: config.Filter{Tools: []string{"echo", "sleep"}}}},
			want:        []string{"echo", "sleep"},
			wantReasons: map[string]string{"fail": "not matched by expose.agent.tools.include.tools [echo, sleep]"},
		},
		{
			name:        "expose exclude",
			opts:        fiskapp.Options{Expose: config.ToolsFilter{Exclude: config.Filter{Tags: []string{"impact:ro"}}}},
			want:        []string{"deploy", "restart", "noop"},
			wantReasons: map[string]string{"echo": "excluded by expose.agent.tools.exclude.tags impact:ro"},
		},
		{
			name: "expose only narrows",
			opts: fiskapp.Options{
				Include: config.Filter{Tools: []string{"echo", "sleep"}},
				Expose:  config.ToolsFilter{Include: config.Filter{Tools: []string{"sleep", "fail"}}},
			},
			want: []string{"sleep"},
			wantReasons: map[string]string{
				"echo": "not matched by expose.agent.tools.include.tools [sleep, fail]",
				"fail": "not matched by include.tools [echo, sleep]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := loadDemo(t, tt.opts)
			if got := names(app.Commands); !slices.Equal(got, tt.want) {
				t.Errorf("got tools %v, want %v", got, tt.want)
			}
			reasons := droppedReasons(app)
			for name, want := range tt.wantReasons {
				if got := reasons[name]; got != want {
					t.Errorf("got %s dropped for %q, want %q", name, got, want)
				}
			}
			if got, want := len(app.Commands)+len(app.Dropped), len(demoTools)+2; got != want {
				t.Errorf("got %d commands and drops, want every one of the %d leaves accounted for", got, want)
			}
		})
	}
}

func TestConfirmTags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		confirmTags []string
		wantGated   []string
	}{
		{name: "ai:confirm only", wantGated: []string{"deploy"}},
		{name: "impact:rw", confirmTags: []string{"impact:rw"}, wantGated: []string{"deploy", "restart"}},
		{name: "impact:ro", confirmTags: []string{"impact:ro"}, wantGated: []string{"echo", "sleep", "ticker", "fail", "flood", "spawn", "deploy", "cluster_node_status", "getenv"}},
		{name: "unused tag", confirmTags: []string{"scope:system"}, wantGated: []string{"deploy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app := loadDemo(t, fiskapp.Options{ConfirmTags: tt.confirmTags})
			var gated []string
			for _, c := range app.Commands {
				switch c.Confirmation() {
				case tool.ConfirmRequired:
					gated = append(gated, c.Name())
				case tool.ConfirmNone:
				default:
					t.Errorf("%s: got confirmation %v, want gated or ungated", c.Name(), c.Confirmation())
				}
			}
			if !slices.Equal(gated, tt.wantGated) {
				t.Errorf("got gated %v, want %v", gated, tt.wantGated)
			}
		})
	}
}

func TestLoadOptionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    fiskapp.Options
		wantErr error
		wantMsg string
	}{
		{name: "no path", opts: fiskapp.Options{}, wantErr: fiskapp.ErrNoApplication, wantMsg: "application_path"},
		{name: "bad include glob", opts: fiskapp.Options{Path: "x", Include: config.Filter{Tools: []string{"["}}}, wantErr: fiskapp.ErrInvalidFilter, wantMsg: "include.tools"},
		{name: "bad expose exclude glob", opts: fiskapp.Options{Path: "x", Expose: config.ToolsFilter{Exclude: config.Filter{Tools: []string{"a[b"}}}}, wantErr: fiskapp.ErrInvalidFilter, wantMsg: "expose.agent.tools.exclude.tools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := fiskapp.Load(t.Context(), tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got error %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

// writeScript writes an executable shell script into dir. Tests that call
// it do not run in parallel: a fork elsewhere while the file is open for
// writing would make exec fail with "text file busy".
func writeScript(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		tb.Fatalf("writing script: %v", err)
	}
	return p
}

func TestIntrospectionFailures(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		opts    fiskapp.Options
		wantErr []error
		wantMsg string
	}{
		{
			name:    "missing binary",
			path:    filepath.Join(dir, "missing"),
			wantErr: []error{fiskapp.ErrIntrospect},
			wantMsg: "no such file",
		},
		{
			name:    "prints nothing",
			path:    "/bin/true",
			wantErr: []error{fiskapp.ErrIntrospect, fiskapp.ErrNotFisk},
			wantMsg: "printed nothing",
		},
		{
			name:    "prints text",
			path:    writeScript(t, dir, "text", "echo hello"),
			wantErr: []error{fiskapp.ErrIntrospect, fiskapp.ErrNotFisk},
			wantMsg: "not a fisk application",
		},
		{
			name:    "exits non-zero",
			path:    writeScript(t, dir, "fails", "echo \"unknown flag $1\" >&2; exit 2"),
			wantErr: []error{fiskapp.ErrIntrospect},
			wantMsg: "unknown flag --fisk-introspect",
		},
		{
			name:    "no commands",
			path:    writeScript(t, dir, "empty", `echo '{"name":"empty","help":"nothing"}'`),
			wantErr: []error{fiskapp.ErrIntrospect},
			wantMsg: "declares no commands",
		},
		{
			name:    "too large",
			path:    writeScript(t, dir, "large", "head -c 5000 /dev/zero | tr '\\0' x"),
			opts:    fiskapp.Options{MaxIntrospectBytes: 4096},
			wantErr: []error{fiskapp.ErrIntrospect, fiskapp.ErrTooLarge},
			wantMsg: "more than 4096 bytes",
		},
		{
			name:    "endless output",
			path:    writeScript(t, dir, "endless", "yes '{\"name\":\"x\"}'"),
			opts:    fiskapp.Options{MaxIntrospectBytes: 1 << 20},
			wantErr: []error{fiskapp.ErrIntrospect, fiskapp.ErrTooLarge},
			wantMsg: "more than 1048576 bytes",
		},
		{
			name:    "hangs",
			path:    writeScript(t, dir, "hangs", "sleep 30"),
			opts:    fiskapp.Options{IntrospectTimeout: 300 * time.Millisecond},
			wantErr: []error{fiskapp.ErrIntrospect, context.DeadlineExceeded},
			wantMsg: "did not answer --fisk-introspect within 300ms",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Path = tt.path
			start := time.Now()
			app, err := fiskapp.Load(t.Context(), opts)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("got Load returning after %s, want it prompt", took)
			}
			if err == nil {
				t.Fatalf("got app with %d commands, want an error", len(app.Commands))
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("got error %v, want it to wrap %v", err, want)
				}
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("got error %q, want it to name %s", err, tt.path)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("got error %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

// TestSyntheticModel covers selection rules the demo app cannot show: group
// tags, name collisions, invalid names and a model without schemas.
func TestSyntheticModel(t *testing.T) {
	model := `{"name":"synth","help":"a synthetic model","commands":[
		{"name":"a_b","help":"one"},
		{"name":"a","help":"group","commands":[{"name":"b","help":"two"}]},
		{"name":"grp","help":"group","tags":["impact:rw"],"commands":[
			{"name":"plain","help":"inherits"},
			{"name":"own","help":"keeps its own","tags":["impact:ro"]}]},
		{"name":"danger","help":"group","tags":["ai:deny"],"commands":[{"name":"x","help":"denied","tags":["impact:ro"]}]},
		{"name":"secret","help":"group","hidden":true,"commands":[{"name":"y","help":"hidden"}]},
		{"name":"bad name","help":"invalid"},
		{"name":"bare"}]}`
	path := writeScript(t, t.TempDir(), "synth", "cat <<'EOF'\n"+model+"\nEOF")

	app, err := fiskapp.Load(t.Context(), fiskapp.Options{Path: path, ConfirmTags: []string{"impact:rw"}})
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
	if got, want := names(app.Commands), []string{"grp_plain", "grp_own", "bare"}; !slices.Equal(got, want) {
		t.Errorf("got tools %v, want %v", got, want)
	}
	wantDropped := []struct{ name, reasonPrefix string }{
		{"danger_x", `parent command "danger" tagged ai:deny`},
		{"secret_y", `parent command "secret" is hidden`},
		{"bad name", `name "bad name" does not match ^[a-zA-Z0-9_-]{1,64}$`},
		{"a_b", `name collides with command "a b"`},
		{"a_b", `name collides with command "a_b"`},
	}
	if got, want := len(app.Dropped), len(wantDropped); got != want {
		t.Fatalf("got dropped %v, want %d drops", app.Dropped, want)
	}
	for i, d := range app.Dropped {
		if w := wantDropped[i]; d.Name != w.name || !strings.HasPrefix(d.Reason, w.reasonPrefix) {
			t.Errorf("got drop %+v, want %s dropped for %q", d, w.name, w.reasonPrefix)
		}
	}

	byName := map[string]*fiskapp.Command{}
	for _, c := range app.Commands {
		byName[c.Name()] = c
	}
	if got, want := byName["grp_plain"].Tags(), []string{"impact:rw"}; !slices.Equal(got, want) {
		t.Errorf("got grp_plain tags %v, want the group's %v", got, want)
	}
	if got := byName["grp_plain"].Confirmation(); got != tool.ConfirmRequired {
		t.Errorf("got grp_plain %v, want gated through the inherited impact:rw", got)
	}
	if got, want := byName["grp_own"].Tags(), []string{"impact:ro"}; !slices.Equal(got, want) {
		t.Errorf("got grp_own tags %v, want its own %v", got, want)
	}
	if got, want := string(byName["bare"].InputSchema()), `{"type":"object","properties":{}}`; got != want {
		t.Errorf("got bare schema %s, want %s", got, want)
	}
	if got, err := byName["bare"].Argv(nil); err != nil || !slices.Equal(got, []string{path, "bare"}) {
		t.Errorf("got bare argv %v, %v, want [%s bare]", got, err, path)
	}
}

// natsLeaf is a leaf command of the nats CLI model as this test reads it.
type natsLeaf struct {
	tags           []string
	denied, hidden bool
}

// natsLeaves walks the model independently of Load, applying the documented
// rules: own tags, else the nearest tagged parent's; ai:deny and hidden
// carry down.
func natsLeaves(g *fisk.CmdGroupModel, prefix string, inherited natsLeaf, out map[string]natsLeaf) {
	if g == nil {
		return
	}
	for _, c := range g.Commands {
		l := natsLeaf{tags: inherited.tags, denied: inherited.denied, hidden: inherited.hidden || c.Hidden}
		if len(c.Tags) > 0 {
			l.tags = c.Tags
		}
		l.denied = l.denied || slices.Contains(c.Tags, tool.TagDeny)
		if c.CmdGroupModel != nil && len(c.Commands) > 0 {
			natsLeaves(c.CmdGroupModel, prefix+c.Name+"_", l, out)
			continue
		}
		out[prefix+c.Name] = l
	}
}

func TestNATSCLI(t *testing.T) {
	t.Parallel()
	nats := natsPath(t)

	app, err := fiskapp.Load(t.Context(), fiskapp.Options{Path: nats, ConfirmTags: []string{"impact:rw"}})
	if err != nil {
		t.Fatalf("loading the nats CLI: %v", err)
	}
	leaves := map[string]natsLeaf{}
	natsLeaves(app.Model.CmdGroupModel, "", natsLeaf{}, leaves)
	t.Logf("nats CLI: %d leaf commands, %d tools, %d dropped", len(leaves), len(app.Commands), len(app.Dropped))
	if len(leaves) < 200 || len(app.Commands) < 200 {
		t.Fatalf("got %d leaves and %d tools, want at least 200 of each", len(leaves), len(app.Commands))
	}
	if got := len(app.Commands) + len(app.Dropped); got != len(leaves) {
		t.Errorf("got %d tools and drops, want all %d leaves accounted for", got, len(leaves))
	}

	gated := 0
	for _, c := range app.Commands {
		if !tool.ValidName(c.Name()) {
			t.Errorf("got invalid tool name %q", c.Name())
		}
		l, ok := leaves[c.Name()]
		if !ok {
			t.Errorf("got tool %q that is no leaf of the model", c.Name())
			continue
		}
		if l.hidden || l.denied {
			t.Errorf("got %s served, want it dropped (hidden %t, denied %t)", c.Name(), l.hidden, l.denied)
		}
		wantGated := slices.Contains(l.tags, tool.TagReadWrite) || slices.Contains(l.tags, tool.TagConfirm)
		if got := c.Confirmation() == tool.ConfirmRequired; got != wantGated {
			t.Errorf("%s: got gated %t, want %t for tags %v", c.Name(), got, wantGated, l.tags)
		}
		if wantGated {
			gated++
		}
		if !slices.Equal(c.Tags(), l.tags) {
			t.Errorf("%s: got tags %v, want %v", c.Name(), c.Tags(), l.tags)
		}
	}
	if gated == 0 {
		t.Error("got no gated command, want every impact:rw command gated")
	}
	for _, d := range app.Dropped {
		if d.Reason == "" {
			t.Errorf("got %s dropped without a reason", d.Name)
		}
		if tool.ValidName(d.Name) && !leaves[d.Name].hidden && !leaves[d.Name].denied && !strings.HasPrefix(d.Reason, "name collides") {
			t.Errorf("got %s dropped for %q, want it served", d.Name, d.Reason)
		}
	}
	byName := map[string]*fiskapp.Command{}
	for _, c := range app.Commands {
		byName[c.Name()] = c
	}
	// "bench js" is tagged impact:rw and its subcommands are not: they
	// publish, so the gate must reach them.
	if c := byName["bench_js_pub_sync"]; c == nil || c.Confirmation() != tool.ConfirmRequired {
		t.Errorf("got bench_js_pub_sync %v, want it served and gated", c)
	}

	ro, err := fiskapp.Load(t.Context(), fiskapp.Options{Path: nats, Include: config.Filter{Tags: []string{tool.TagReadOnly}}})
	if err != nil {
		t.Fatalf("loading the nats CLI with include tags: %v", err)
	}
	wantRO := 0
	for name, l := range leaves {
		if slices.Contains(l.tags, tool.TagReadOnly) && !l.hidden && !l.denied && tool.ValidName(name) {
			wantRO++
		}
	}
	for _, c := range ro.Commands {
		if !slices.Contains(leaves[c.Name()].tags, tool.TagReadOnly) {
			t.Errorf("got %s with tags %v kept by include.tags [impact:ro]", c.Name(), leaves[c.Name()].tags)
		}
	}
	if len(ro.Commands) != wantRO || wantRO == 0 {
		t.Errorf("got %d impact:ro tools, want %d (non-zero)", len(ro.Commands), wantRO)
	}
}

func TestLoadBareName(t *testing.T) {
	// t.Setenv: not parallel.
	bin := demoPath(t)
	t.Setenv("PATH", filepath.Dir(bin))
	app, err := fiskapp.Load(t.Context(), fiskapp.Options{Path: filepath.Base(bin)})
	if err != nil {
		t.Fatalf("loading by bare name: %v", err)
	}
	argv, err := app.Commands[0].Argv(nil)
	if err != nil || argv[0] != bin {
		t.Errorf("got argv %q (%v), want it to start with the resolved %s", argv, err, bin)
	}
}
