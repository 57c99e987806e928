package agentfile

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// Spec is what a written file sets; every other key is written commented
// out.
type Spec struct {
	// Identity and ApplicationPath are always set.
	Identity        string
	ApplicationPath string
	// NATSContext is set when not empty; otherwise nats_context is
	// written commented out, since only A2A serving needs it and no name
	// would be right for every machine.
	NATSContext string
	// ConfirmTags are set when not empty.
	ConfirmTags []string
	// A2A sets expose.agent.a2a.serve_tools: true, and MCP writes
	// expose.agent.mcp, whose presence enables the gateway.
	A2A bool
	MCP bool
}

// set returns the keys s sets, by path, with their YAML values; a mapping
// written with nothing under it has the value "".
func (s Spec) set() map[string]string {
	m := map[string]string{
		"identity":         scalar(s.Identity),
		"application_path": scalar(s.ApplicationPath),
	}
	if s.NATSContext != "" {
		m["nats_context"] = scalar(s.NATSContext)
	}
	if len(s.ConfirmTags) > 0 {
		m["confirm_tags"] = list(s.ConfirmTags)
	}
	if s.A2A {
		m["expose.agent.a2a.serve_tools"] = "true"
	}
	if s.MCP {
		m["expose.agent.mcp"] = ""
	}
	return m
}

// Render returns the file for s. sel, when not nil, is listed in comments
// before the filters that change it. Render fails only when the table of
// keys does not describe a key of [config.Config]: a key added to the
// parser and not to [entries].
func Render(s Spec, sel *Selection) ([]byte, error) {
	root, err := tree(reflect.TypeFor[config.Config](), "", entries(s.Identity))
	if err != nil {
		return nil, err
	}
	r := &renderer{set: s.set()}
	blocks := make([][]line, len(root))
	for i, n := range root {
		blocks[i] = r.lines(n)
		if !r.active(n) {
			comment(blocks[i])
		}
	}
	widths := noteWidths(slices.Concat(blocks...))
	var b bytes.Buffer
	header(&b, s)
	prevScalar := false
	for i, n := range root {
		if n.path == "include" && sel != nil {
			b.WriteString("\n")
			sel.write(&b)
			prevScalar = false
		}
		if n.kind != kindScalar || !prevScalar {
			b.WriteString("\n")
		}
		prevScalar = n.kind == kindScalar
		for _, l := range blocks[i] {
			b.WriteString(l.text)
			if l.note != "" {
				b.WriteString(strings.Repeat(" ", max(widths[l.group]-len(l.text), 0)+2))
				b.WriteString("# ")
				b.WriteString(l.note)
			}
			b.WriteString("\n")
		}
	}
	return b.Bytes(), nil
}

// header opens the file: what it is for and the commands that read it.
func header(b *bytes.Buffer, s Spec) {
	var surfaces []string
	if s.A2A {
		surfaces = append(surfaces, "over A2A (a2a-agent serve)")
	}
	if s.MCP {
		surfaces = append(surfaces, "over MCP (mcp-gateway serve)")
	}
	fmt.Fprintf(b, "# Agent %s serves the commands of %s\n", s.Identity, scalar(s.ApplicationPath))
	if len(surfaces) > 0 {
		fmt.Fprintf(b, "# %s.\n", strings.Join(surfaces, " and "))
	}
	b.WriteString("#\n")
	b.WriteString("# Written by a2a-agent init. Every key it does not set is below,\n")
	b.WriteString("# commented out with its default; uncomment a key to change it.\n")
	b.WriteString("# a2a-agent info --config FILE lists what the file serves.\n")
}

// kind is the shape of a key's value.
type kind int

const (
	kindScalar  kind = iota // a value written on the key's line
	kindMapping             // keys under it
	kindList                // a list of mappings, written with one entry
	kindNamed               // a mapping of names the operator chooses to mappings
)

// node is one key of the file.
type node struct {
	key      string
	path     string // as the configuration reference writes it
	kind     kind
	entry    entry
	children []*node
}

// tree returns the keys of struct type t, in declaration order, below
// prefix. Parse decodes strictly by yaml tags, so the tags are exactly the
// keys it accepts.
func tree(t reflect.Type, prefix string, table map[string]entry) ([]*node, error) {
	var nodes []*node
	for f := range deref(t).Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" || key == "" || !f.IsExported() {
			continue
		}
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		en, ok := table[path]
		switch {
		case !ok:
			return nil, fmt.Errorf("agentfile: key %s of config.Config has no entry: describe it in entries", path)
		case en.skip != "":
			continue
		}
		n := &node{key: key, path: path, entry: en}
		ft := deref(f.Type)
		_, ownDecoder := reflect.PointerTo(ft).MethodByName("UnmarshalYAML")
		var err error
		switch {
		case ownDecoder:
			n.kind = kindScalar
		case ft.Kind() == reflect.Struct:
			n.kind = kindMapping
			n.children, err = tree(ft, path, table)
		case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
			n.kind = kindList
			n.children, err = tree(ft.Elem(), path+"[]", table)
		case ft.Kind() == reflect.Map && deref(ft.Elem()).Kind() == reflect.Struct:
			n.kind = kindNamed
			name, ok := table[path+".NAME"]
			if !ok {
				return nil, fmt.Errorf("agentfile: key %s.NAME of config.Config has no entry: describe it in entries", path)
			}
			var children []*node
			children, err = tree(ft.Elem(), path+".NAME", table)
			n.children = []*node{{key: "NAME", path: path + ".NAME", kind: kindMapping, entry: name, children: children}}
		default:
			n.kind = kindScalar
		}
		if err != nil {
			return nil, err
		}
		if n.kind == kindScalar && en.value == "" {
			return nil, fmt.Errorf("agentfile: key %s has no value in entries: give its default or a placeholder", path)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// line is one key's line of the file: its text, indented, and a note
// written after it as a comment. The notes of one group, the keys of one
// mapping, are aligned.
type line struct {
	text  string
	note  string
	group int
}

// renderer writes keys, set or commented out.
type renderer struct {
	set map[string]string
	// groups counts the mappings written, numbering their groups of
	// lines from 1; the top-level keys are group 0.
	groups int
}

// active reports whether n is written uncommented: it or a key under it
// is set.
func (r *renderer) active(n *node) bool {
	if _, ok := r.set[n.path]; ok {
		return true
	}
	for _, c := range n.children {
		if r.active(c) {
			return true
		}
	}
	return false
}

// lines returns n's lines at indentation 0, its own first. Keys under an
// active n that are not active themselves are commented out where they
// start, so removing the first "# " of a line restores it.
func (r *renderer) lines(n *node) []line {
	value, set := r.set[n.path]
	if !set {
		value = n.entry.value
	}
	out := []line{{text: n.key + ":", note: n.entry.note}}
	if n.kind == kindScalar {
		out[0].text += " " + value
		return out
	}
	r.groups++
	group := r.groups
	var under []line
	for _, c := range n.children {
		ls := r.lines(c)
		ls[0].group = group
		if r.active(n) && !r.active(c) {
			comment(ls)
		}
		under = append(under, ls...)
	}
	if n.kind == kindList {
		// One entry: its first key after the dash, the others under it.
		for i := range under {
			if i == 0 {
				under[i].text = "- " + under[i].text
			} else {
				under[i].text = "  " + under[i].text
			}
		}
	}
	return append(out, indent(under)...)
}

func indent(ls []line) []line {
	for i := range ls {
		ls[i].text = "  " + ls[i].text
	}
	return ls
}

func comment(ls []line) {
	for i := range ls {
		ls[i].text = "# " + ls[i].text
	}
}

// maxNoteColumn bounds the column notes are aligned to, so one long line
// does not push every note of its block to the right.
const maxNoteColumn = 48

// noteWidths returns, by group, the column the notes of the group's lines
// are aligned to: past the longest of its lines, up to [maxNoteColumn].
func noteWidths(ls []line) map[int]int {
	widths := map[int]int{}
	for _, l := range ls {
		if l.note != "" && len(l.text) <= maxNoteColumn {
			widths[l.group] = max(widths[l.group], len(l.text))
		}
	}
	return widths
}
