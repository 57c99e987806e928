package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// referencePage is the configuration reference, relative to this package's
// directory. Its tables list every key Parse accepts, one key per row.
const referencePage = "../../docs/configuration.md"

// referenceHeader is the header row of the reference's key tables.
const referenceHeader = "| key | default | meaning |"

// acceptedKeys returns every key path Parse accepts, derived from the types
// it decodes into: Parse decodes strictly by yaml tags, so a key is
// accepted exactly when a tagged field holds it. Paths are written as the
// reference writes them: mapping keys joined by dots, "[]" for each entry
// of a list, "NAME" for the operator's own names in a map (policy roles).
// A path maps to true when the reference must list it: every value, and
// every mapping whose presence means something on its own (a pointer to a
// struct: absent until written), list of entries or map of named entries.
// Plain mappings that only group keys (expose, expose.agent, include) map
// to false: they are accepted, and may be listed.
func acceptedKeys(tb testing.TB) map[string]bool {
	tb.Helper()
	keys := map[string]bool{}
	walkKeys(tb, reflect.TypeFor[Config](), "", keys)
	return keys
}

func walkKeys(tb testing.TB, t reflect.Type, prefix string, keys map[string]bool) {
	tb.Helper()
	for f := range deref(t).Fields() {
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" || strings.Contains(opts, "inline") {
			// The decoder would take a key this walk cannot name: give the
			// field a key of its own, or teach the walk its rule.
			tb.Fatalf("%s.%s: got yaml tag %q, want one naming its key", t, f.Name, tag)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		ft := f.Type
		optional := ft.Kind() == reflect.Pointer
		ft = deref(ft)
		_, ownDecoder := reflect.PointerTo(ft).MethodByName("UnmarshalYAML")
		switch {
		case ownDecoder: // a value decoded by its own method, such as Duration
			keys[path] = true
		case ft.Kind() == reflect.Struct:
			keys[path] = optional
			walkKeys(tb, ft, path, keys)
		case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
			keys[path] = true
			keys[path+"[]"] = false
			walkKeys(tb, ft.Elem(), path+"[]", keys)
		case ft.Kind() == reflect.Map && deref(ft.Elem()).Kind() == reflect.Struct:
			keys[path] = true
			keys[path+".NAME"] = false
			walkKeys(tb, ft.Elem(), path+".NAME", keys)
		default: // scalars, lists and maps of scalars, and any
			keys[path] = true
		}
	}
}

// referenceRow is one row of a key table of the reference.
type referenceRow struct {
	key, def string
	line     int
}

// referenceRows returns the rows of every table in the reference whose
// header is [referenceHeader], failing on a row that does not name exactly
// one key.
func referenceRows(tb testing.TB) []referenceRow {
	tb.Helper()
	data, err := os.ReadFile(referencePage)
	if err != nil {
		tb.Fatal(err)
	}
	oneKey := regexp.MustCompile("^`([^`]+)`$")
	var rows []referenceRow
	inTable := false
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == referenceHeader:
			inTable = true
			continue
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		case !inTable || strings.HasPrefix(line, "|---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			tb.Errorf("%s:%d: got %d cells, want key, default and meaning", referencePage, i+1, len(cells))
			continue
		}
		m := oneKey.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			tb.Errorf("%s:%d: got key cell %q, want one key in backticks", referencePage, i+1, strings.TrimSpace(cells[0]))
			continue
		}
		rows = append(rows, referenceRow{key: m[1], def: strings.TrimSpace(cells[1]), line: i + 1})
	}
	if len(rows) == 0 {
		tb.Fatalf("%s: got no rows under %q, want the key tables", referencePage, referenceHeader)
	}
	return rows
}

// TestReferenceListsEveryKey holds the reference to the parser: every key
// Parse accepts that the reference must list has a row, with a default.
func TestReferenceListsEveryKey(t *testing.T) {
	documented := map[string]bool{}
	for _, r := range referenceRows(t) {
		if documented[r.key] {
			t.Errorf("%s:%d: %s: got a second row, want one per key", referencePage, r.line, r.key)
		}
		documented[r.key] = true
		if r.def == "" {
			t.Errorf("%s:%d: %s: got an empty default, want one (—, required or absent when there is none)", referencePage, r.line, r.key)
		}
	}
	keys := acceptedKeys(t)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if keys[k] && !documented[k] {
			t.Errorf("%s: got no row for %s, which Parse accepts; want one with its default", referencePage, k)
		}
	}
}

// TestReferenceKeysAreAccepted holds the reference to the parser the other
// way: every key it lists is one the walk of the types found, and Parse
// takes a file setting it.
func TestReferenceKeysAreAccepted(t *testing.T) {
	keys := acceptedKeys(t)
	for _, r := range referenceRows(t) {
		if _, ok := keys[r.key]; !ok {
			t.Errorf("%s:%d: %s: got no such key in Config, want only keys Parse accepts", referencePage, r.line, r.key)
		}
		if _, err := Parse(yamlSetting(t, r.key), testFile); err != nil {
			t.Errorf("%s:%d: %s: got %v parsing a file setting it, want it accepted", referencePage, r.line, r.key, err)
		}
	}
}

// TestYAMLSettingUnknownKeys shows that the files TestReferenceKeysAreAccepted
// parses reach the strict decoder at every kind of level: a key it does not
// know is refused inside a mapping, a list entry and a named map entry.
func TestYAMLSettingUnknownKeys(t *testing.T) {
	tests := []struct {
		name, key, want string
	}{
		{name: "top level", key: "no_such_key", want: "unknown key no_such_key"},
		{name: "nested mapping", key: "expose.agent.mcp.no_such_key", want: "unknown key expose.agent.mcp.no_such_key"},
		{name: "list entry", key: "remote_tools[].no_such_key", want: "unknown key remote_tools[0].no_such_key"},
		{name: "named entry", key: "expose.agent.mcp.policy.roles.NAME.no_such_key", want: "unknown key expose.agent.mcp.policy.roles.NAME.no_such_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(yamlSetting(t, tt.key), testFile)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// yamlSetting returns a file that sets key, as the reference writes it, to
// null: enough for the strict decoder to see the key, and a value every
// field takes.
func yamlSetting(tb testing.TB, key string) []byte {
	tb.Helper()
	var value any
	segs := strings.Split(key, ".")
	for i := len(segs) - 1; i >= 0; i-- {
		name, list := strings.CutSuffix(segs[i], "[]")
		if list {
			value = []any{value}
		}
		value = map[string]any{name: value}
	}
	data, err := yaml.Marshal(value)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// keyMention is a key path as prose names it: `approvals.web`,
// `remote_tools[].exclude.tools`, `expose.agent.mcp.policy.roles.*.nats_context`,
// `approvals.operator: true`. Only dotted paths count.
var keyMention = regexp.MustCompile(`^([a-z_]+(?:\[\d*\])?(?:\.[A-Za-z0-9_*-]+(?:\[\d*\])?)+)(?:$|[: =])`)

// listIndex is a list index in a key path as prose writes it: [0] or [].
var listIndex = regexp.MustCompile(`\[\d*\]`)

// TestDocsNameAcceptedKeys checks that every configuration key the README
// and the docs pages name in backticks is one Parse accepts, so a renamed
// key cannot live on in prose. A dotted path counts when its first part is
// a top-level key; NAME in a map stands for any name, and a list index for
// "[]".
func TestDocsNameAcceptedKeys(t *testing.T) {
	keys := acceptedKeys(t)
	top := map[string]bool{}
	for k := range keys {
		first, _, _ := strings.Cut(k, ".")
		top[listIndex.ReplaceAllString(first, "")] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"../../README.md"}, pages...)
	code := regexp.MustCompile("`([^`]+)`")
	for _, page := range pages {
		prose := withoutFences(t, page)
		for _, loc := range code.FindAllStringSubmatchIndex(prose, -1) {
			span := strings.ReplaceAll(prose[loc[2]:loc[3]], "\n", " ")
			m := keyMention.FindStringSubmatch(span)
			if m == nil {
				continue
			}
			first, _, _ := strings.Cut(m[1], ".")
			if !top[listIndex.ReplaceAllString(first, "")] {
				continue
			}
			if !mentionAccepted(m[1], keys) {
				line := strings.Count(prose[:loc[0]], "\n") + 1
				t.Errorf("%s:%d: got key %s, which Parse does not accept; want it renamed to a key in %s", page, line, m[1], referencePage)
			}
		}
	}
}

// withoutFences returns the Markdown page at path with the lines of its
// fenced code blocks emptied, so the code spans of its prose pair up.
func withoutFences(tb testing.TB, path string) string {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// mentionAccepted reports whether the key path mention names one of keys,
// with a list index matching "[]" and any part (such as "*") a map's
// "NAME".
func mentionAccepted(mention string, keys map[string]bool) bool {
	got := strings.Split(listIndex.ReplaceAllString(mention, "[]"), ".")
	for k := range keys {
		if pathMatches(strings.Split(k, "."), got) {
			return true
		}
	}
	return false
}

func pathMatches(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] != got[i] && want[i] != "NAME" {
			return false
		}
	}
	return true
}
