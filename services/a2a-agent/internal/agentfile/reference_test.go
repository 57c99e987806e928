package agentfile

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// referencePath is the configuration reference, from this package.
const referencePath = "../../../../docs/configuration.md"

// referenceDefaults reads the default column of every row of the
// configuration reference, by key.
func referenceDefaults(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		out[key] = strings.TrimSpace(cells[2])
	}
	return out
}

// literal returns the value a reference cell states as one code span
// ("`30s`"), with the units and placeholders it writes for people turned
// into what a file holds: "64 MiB" as bytes, "<identity>" as identity.
func literal(cell, identity string) (string, bool) {
	v, ok := strings.CutPrefix(cell, "`")
	if !ok || !strings.HasSuffix(v, "`") || strings.Count(cell, "`") != 2 {
		return "", false
	}
	v = strings.TrimSuffix(v, "`")
	if n, ok := strings.CutSuffix(v, " MiB"); ok {
		if i, err := strconv.Atoi(n); err == nil {
			v = strconv.Itoa(i << 20)
		}
	}
	return strings.ReplaceAll(v, "<identity>", identity), true
}

// placeholder reports whether a value the file writes stands for one the
// operator chooses (NAME, [GROUP]) or for no value at all.
func placeholder(v string) bool {
	v = strings.Trim(v, "[]")
	return v == "" || v == `""` || strings.ToUpper(v) == v && strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == ""
}

// TestDefaultsMatchReference holds the defaults init writes, which
// TestUncommented holds to the parser, to the ones the configuration
// reference states: a reader of either sees one value.
func TestDefaultsMatchReference(t *testing.T) {
	const identity = "demo"
	docs := referenceDefaults(t)
	compared := 0
	for key, en := range entries(identity) {
		cell, documented := docs[key]
		if en.skip != "" || placeholder(en.value) || !documented {
			continue
		}
		want, ok := literal(cell, identity)
		if !ok {
			continue // a default in words ("the listen URL"), not a value
		}
		compared++
		if en.value != want {
			t.Errorf("%s: init writes %s, %s states %q", key, en.value, referencePath, cell)
		}
	}
	// Every scalar default of the reference: durations, sizes, listen
	// addresses, booleans, names. Fewer means the table went unread.
	if compared < 25 {
		t.Fatalf("compared %d defaults, want at least 25: is %s's table still | key | default | meaning |?", compared, referencePath)
	}
}

func TestLiteral(t *testing.T) {
	for _, tt := range []struct {
		cell, want string
		ok         bool
	}{
		{cell: "`30s`", want: "30s", ok: true},
		{cell: "`64 MiB`", want: "67108864", ok: true},
		{cell: "`choria.fisk-ai.audit.<identity>`", want: "choria.fisk-ai.audit.demo", ok: true},
		{cell: "`[RS256, PS256]`", want: "[RS256, PS256]", ok: true},
		{cell: "the `resource`"},
		{cell: "the gateway's `nats_context`"},
		{cell: "required"},
		{cell: "—"},
	} {
		got, ok := literal(tt.cell, "demo")
		if got != tt.want || ok != tt.ok {
			t.Errorf("literal(%q) = %q, %v, want %q, %v", tt.cell, got, ok, tt.want, tt.ok)
		}
	}
}
