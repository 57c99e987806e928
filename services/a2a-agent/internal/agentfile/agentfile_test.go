package agentfile

import (
	"context"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// specs are the files init writes, one per combination of its choices.
var specs = []struct {
	name string
	spec Spec
}{
	{name: "a2a", spec: Spec{Identity: "demo", ApplicationPath: "/usr/local/bin/fiskdemo", A2A: true}},
	{name: "a2a with a context", spec: Spec{Identity: "demo", ApplicationPath: "/usr/local/bin/fiskdemo", NATSContext: "prod", A2A: true}},
	{name: "mcp", spec: Spec{Identity: "demo", ApplicationPath: "fiskdemo", MCP: true}},
	{name: "both, gated by a tag", spec: Spec{Identity: "nats_cli-1", ApplicationPath: "/opt/my tools/nats", NATSContext: "/etc/nats/ctx.json", ConfirmTags: []string{"impact:rw", "scope:system"}, A2A: true, MCP: true}},
}

// TestRenderParses checks that every file init can write is taken by the
// strict parser, with and without its comments, says what the spec set,
// and is valid for each mode it enables.
func TestRenderParses(t *testing.T) {
	for _, tt := range specs {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Render(tt.spec, selection(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range []struct {
				name string
				data []byte
			}{{"as written", data}, {"without comments", stripComments(data)}} {
				cfg, err := config.Parse(file.data, "agent.yaml")
				if err != nil {
					t.Fatalf("%s: %v\n%s", file.name, err, file.data)
				}
				checkSpec(t, cfg, tt.spec)
				modes := []config.Mode{config.ModeInfo}
				if tt.spec.A2A && tt.spec.NATSContext != "" {
					modes = append(modes, config.ModeA2AServe)
				}
				if tt.spec.MCP {
					modes = append(modes, config.ModeMCP)
				}
				for _, m := range modes {
					if _, err := cfg.Validate(m); err != nil {
						t.Errorf("%s: validating for %s: got %v, want it valid", file.name, m, err)
					}
				}
			}
		})
	}
}

func checkSpec(t *testing.T, cfg *config.Config, s Spec) {
	t.Helper()
	if cfg.Identity != s.Identity || cfg.ApplicationPath != s.ApplicationPath || cfg.NATSContext != s.NATSContext {
		t.Errorf("got identity %q application_path %q nats_context %q, want %q %q %q",
			cfg.Identity, cfg.ApplicationPath, cfg.NATSContext, s.Identity, s.ApplicationPath, s.NATSContext)
	}
	if !slices.Equal(cfg.ConfirmTags, s.ConfirmTags) {
		t.Errorf("confirm_tags: got %q, want %q", cfg.ConfirmTags, s.ConfirmTags)
	}
	if a := cfg.Expose.Agent.A2A; (a != nil && a.ServeTools) != s.A2A {
		t.Errorf("expose.agent.a2a: got %+v, want serve_tools %t", a, s.A2A)
	}
	if m := cfg.Expose.Agent.MCP; (m != nil) != s.MCP {
		t.Errorf("expose.agent.mcp: got %+v, want present %t", m, s.MCP)
	}
	// Nothing else is set: the rest of the file is commented out.
	want := config.Config{Identity: cfg.Identity, ApplicationPath: cfg.ApplicationPath, NATSContext: cfg.NATSContext,
		ConfirmTags: cfg.ConfirmTags, Expose: cfg.Expose, RemoteRefreshInterval: cfg.RemoteRefreshInterval, File: cfg.File}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("got %+v, want only the spec's keys set", *cfg)
	}
}

// commentedKey is a line of the file holding a key commented out: "# "
// where the key starts, then the key, then its value or nothing.
var commentedKey = regexp.MustCompile(`^( *)# ((?:- | )*[A-Za-z_][A-Za-z0-9_]*:(?: |$))`)

// uncomment returns data with every key commented out restored.
func uncomment(data []byte) []byte {
	var b strings.Builder
	for l := range strings.Lines(string(data)) {
		if m := commentedKey.FindStringSubmatchIndex(l); m != nil {
			l = l[:m[3]] + l[m[3]+2:]
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// stripComments returns data without its comment lines and notes.
func stripComments(data []byte) []byte {
	note := regexp.MustCompile(` +#.*$`)
	var b strings.Builder
	for l := range strings.Lines(string(data)) {
		l = strings.TrimRight(l, "\n")
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		b.WriteString(note.ReplaceAllString(l, "") + "\n")
	}
	return []byte(b.String())
}

// TestUncommented restores every commented-out key of each file and
// checks that the strict parser takes the result, which holds every key
// of config.Config but the ones the table skips, with its value: the file
// cannot offer a key the parser refuses, nor fall behind one it gained.
func TestUncommented(t *testing.T) {
	for _, tt := range specs {
		t.Run(tt.name, func(t *testing.T) {
			table := entries(tt.spec.Identity)
			data, err := Render(tt.spec, selection(t))
			if err != nil {
				t.Fatal(err)
			}
			full := uncomment(data)
			if _, err := config.Parse(full, "agent.yaml"); err != nil {
				t.Fatalf("got %v parsing the file with every key uncommented, want it taken:\n%s", err, full)
			}
			file, err := parser.ParseBytes(full, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range slices.Sorted(maps.Keys(keyPaths(t))) {
				if skipped(table, key) {
					continue
				}
				p, err := yaml.PathString("$." + strings.ReplaceAll(key, "[]", "[0]"))
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				node, err := p.FilterFile(file)
				if err != nil || node == nil {
					t.Errorf("got no %s in the file with every key uncommented (%v), want every key of config.Config there", key, err)
					continue
				}
				want := table[key].value
				if v, ok := tt.spec.set()[key]; ok {
					want = v
				}
				if got := strings.TrimSpace(node.String()); want != "" && got != want {
					t.Errorf("%s: got %s, want %s", key, got, want)
				}
			}
		})
	}
}

// skipped reports whether the table leaves key out, or a key above it.
func skipped(table map[string]entry, key string) bool {
	for p := key; ; {
		if table[p].skip != "" {
			return true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// TestEntriesNameKeys holds the table to the parser the other way: each of
// its entries names a key of config.Config, so a renamed or removed key
// cannot linger in it.
func TestEntriesNameKeys(t *testing.T) {
	keys := keyPaths(t)
	for _, key := range slices.Sorted(maps.Keys(entries("demo"))) {
		if !keys[key] {
			t.Errorf("entries: got %s, which config.Config has no key for; want only its keys", key)
		}
	}
}

// keyPaths returns the path of every key config.Config decodes, walked
// from its yaml tags, as the configuration reference writes them.
func keyPaths(tb testing.TB) map[string]bool {
	tb.Helper()
	keys := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range deref(t).Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" || !f.IsExported() {
				continue
			}
			if prefix != "" {
				key = prefix + "." + key
			}
			keys[key] = true
			ft := deref(f.Type)
			if _, own := reflect.PointerTo(ft).MethodByName("UnmarshalYAML"); own {
				continue
			}
			switch {
			case ft.Kind() == reflect.Struct:
				walk(ft, key)
			case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
				walk(ft.Elem(), key+"[]")
			case ft.Kind() == reflect.Map && deref(ft.Elem()).Kind() == reflect.Struct:
				keys[key+".NAME"] = true
				walk(ft.Elem(), key+".NAME")
			}
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	if len(keys) < 50 {
		tb.Fatalf("got %d keys walking config.Config, want its whole tree", len(keys))
	}
	return keys
}

// TestRenderNeedsEveryKey shows that a key without an entry stops Render
// rather than being left out of the file silently.
func TestRenderNeedsEveryKey(t *testing.T) {
	table := entries("demo")
	delete(table, "expose.agent.mcp.port")
	_, err := tree(reflect.TypeFor[config.Config](), "", table)
	if err == nil || !strings.Contains(err.Error(), "expose.agent.mcp.port") {
		t.Errorf("got %v, want an error naming expose.agent.mcp.port", err)
	}
}

func TestScalar(t *testing.T) {
	tests := []string{
		"demo", "/usr/local/bin/fiskdemo", "nats", "impact:rw", "a b", "a: b", "#x", "x #y",
		"yes", "No", "null", "~", "123", "1e3", "0x10", "-", "- x", "[x]", "{x}", "*x", "&x", "!x",
		"'q'", `"q"`, "tab\there", "line\nbreak", "ünïcode", "@x", "`x", "%x", "|x", ">x", "",
	}
	for _, s := range tests {
		t.Run(s, func(t *testing.T) {
			var got struct {
				V *string `yaml:"v"`
			}
			if err := yaml.UnmarshalWithOptions([]byte("v: "+scalar(s)+"\n"), &got, yaml.Strict()); err != nil {
				t.Fatalf("v: %s: %v", scalar(s), err)
			}
			if got.V == nil || *got.V != s {
				t.Errorf("v: %s: got %v, want %q", scalar(s), got.V, s)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct{ in, want string }{{"30s", "30s"}, {"2m", "2m"}, {"1m30s", "1m30s"}, {"1h", "1h"}, {"1h30m", "1h30m"}, {"90m", "1h30m"}} {
		d, err := time.ParseDuration(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := duration(d); got != tt.want {
			t.Errorf("duration(%s): got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestSelection checks the comments listing a selection: each served
// command with its tags, each dropped one under its reason with the tags
// that explain a gate, reasons in the order first met.
func TestSelection(t *testing.T) {
	data, err := Render(Spec{Identity: "demo", ApplicationPath: "/bin/app", A2A: true}, selection(t))
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	want := `# Served over A2A (2):
#   status  impact:ro  Shows the status
#   push    impact:rw  Pushes a change (gated: an operator approves each call)
#
# Not served (3), by reason:
#   tagged ai:deny
#     wipe
#   gated (test): nobody can approve it
#     deploy  ai:confirm
#     apply   impact:rw
`
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant it to contain\n%s", got, want)
	}
	if i, j := strings.Index(got, "# Served over A2A"), strings.Index(got, "# include:"); i < 0 || j < i {
		t.Errorf("got the selection at %d and include at %d, want the selection before the filters that change it", i, j)
	}
}

// selection is a small selection as a2a-agent info would list it.
func selection(tb testing.TB) *Selection {
	tb.Helper()
	mk := func(name, desc string, confirm tool.Confirmation, tags ...string) tool.Tool {
		t, err := tool.NewFunc(tool.FuncSpec{
			Name: name, Description: desc, Tags: tags, Exposure: tool.ExposeA2A, Confirmation: confirm,
			Call: func(context.Context, tool.Request) (tool.Outcome, error) { return tool.Outcome{}, nil },
		})
		if err != nil {
			tb.Fatal(err)
		}
		return t
	}
	status := mk("status", "Shows the status\nin detail", tool.ConfirmNone, "impact:ro")
	push := mk("push", "Pushes a change", tool.ConfirmRequired, "impact:rw")
	deploy := mk("deploy", "Deploys", tool.ConfirmRequired, "ai:confirm")
	apply := mk("apply", "Applies", tool.ConfirmRequired, "impact:rw")
	return &Selection{
		Application: "app",
		Listing: tool.Listing{
			Served: []tool.Tool{status, push},
			Dropped: []tool.Dropped{
				{Name: "wipe", Reason: "tagged ai:deny"},
				{Name: "deploy", Reason: "gated (test): nobody can approve it"},
				{Name: "apply", Reason: "gated (test): nobody can approve it"},
			},
		},
		Loaded: []tool.Tool{status, push, deploy, apply},
	}
}

// TestCommentsHoldWhatTheApplicationSays renders a selection whose
// descriptions and tags hold line breaks and keys, and a path holding one:
// they stay in comments and quotes, and the file sets nothing else.
func TestCommentsHoldWhatTheApplicationSays(t *testing.T) {
	sel := selection(t)
	hostile, err := tool.NewFunc(tool.FuncSpec{
		Name: "hostile", Description: "Looks fine\rmemory: injected", Tags: []string{"x\nhuman_in_the_loop: injected", "y\r\nmemory: injected"},
		Exposure: tool.ExposeA2A, Confirmation: tool.ConfirmNone,
		Call: func(context.Context, tool.Request) (tool.Outcome, error) { return tool.Outcome{}, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	sel.Served = append(sel.Served, hostile)
	sel.Dropped = append(sel.Dropped, tool.Dropped{Name: "other", Reason: "odd\rmemory: injected"})
	sel.Application = "app\rmemory: injected"
	s := Spec{Identity: "demo", ApplicationPath: "/opt/x\nmemory: injected", A2A: true}
	data, err := Render(s, sel)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "agent.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	checkSpec(t, cfg, s)
}
