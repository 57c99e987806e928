package call

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// SourceLocal is the source of this gateway's own tools: the application's
// commands, then the built-ins. It is registered before every other source,
// so a remote tool can never take a name a local tool holds. Tools of any
// other source are another agent's: they get no local input-schema check,
// since the serving agent decides what it accepts.
const SourceLocal = "local"

// ErrCollision is two tools claiming one name. The model addresses every
// tool by one flat name, so a strict core refuses to guess.
var ErrCollision = errors.New("tool name collision")

// ErrNoSource is a tool source without a name.
var ErrNoSource = errors.New("a tool source needs a name")

// Entry is one served tool with everything a call needs, computed once
// per registration. Entries are immutable: a call keeps the entry it
// started with even if the tools are replaced meanwhile.
type Entry struct {
	Tool   tool.Tool
	Source string
	Gated  bool
	// Liner is set for command tools: what the approval form shows.
	Liner tool.CommandLiner
	// schema checks the input of local tools; nil means no local check
	// (remote tools, or a schema that does not compile).
	schema *jsonschema.Schema
}

// Name is the name the entry is served under.
func (e *Entry) Name() string { return e.Tool.Name() }

// Remote reports whether the tool is another agent's.
func (e *Entry) Remote() bool { return e.Source != SourceLocal }

// Command reports whether the tool runs a command and answers with the
// command result ([tool.CommandResult]): a local command, or a remote tool
// whose agent's card promises it.
func (e *Entry) Command() bool { return e.Liner != nil || tool.ReturnsCommandResult(e.Tool) }

// CommandLine is what an approval form names: the exact command line for
// a command tool, else the tool name and its canonical input.
func (e *Entry) CommandLine(input json.RawMessage) (string, error) {
	if e.Liner != nil {
		return e.Liner.CommandLine(input)
	}
	return e.Name() + " " + string(Canonical(input)), nil
}

// registry is the served tool set: sources in order, the first claim of a
// name winning.
type registry struct {
	mu      sync.Mutex // guards sources, served and dropped; serialises SetTools
	sources map[string][]tool.Tool
	served  []*Entry
	dropped []tool.Dropped
	// byName maps each served name to its entry. It is replaced whole,
	// never modified, so a call reads it without a lock.
	byName atomic.Pointer[map[string]*Entry]
}

func (r *registry) init() {
	r.sources = map[string][]tool.Tool{}
	empty := map[string]*Entry{}
	r.byName.Store(&empty)
}

// Entry returns the served tool name, or nil: whatever the caller, so
// that a surface can tell a hidden tool from an unknown one in its own
// bookkeeping (never in an answer).
func (r *registry) Entry(name string) *Entry { return (*r.byName.Load())[name] }

// Served returns the served tools in registration order.
func (c *Core) Served() []*Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.served)
}

// Dropped returns the tools left out, with the reason for each.
func (c *Core) Dropped() []tool.Dropped {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dropped)
}

// SetTools replaces the tools of source (an empty list removes it) and
// selects anew: [SourceLocal] first, then the other sources by name, the
// first claim of a name winning, so the same inputs always give the same
// names. commit, when set, is handed the new served set before it takes
// effect, under the registry's lock, so that a surface's own view of it
// changes in step; an error from it leaves everything as it was. On a
// strict core a collision is an error wrapping [ErrCollision] and leaves
// the served set as it was. Calls already running keep the tool they
// started with.
func (c *Core) SetTools(source string, tools []tool.Tool, commit func(served []*Entry) error) error {
	if source == "" {
		return ErrNoSource
	}
	c.mu.Lock()
	defer c.mu.Unlock()

	next := maps.Clone(c.sources)
	if len(tools) == 0 {
		delete(next, source)
	} else {
		next[source] = slices.Clone(tools)
	}
	order := slices.Sorted(maps.Keys(next))
	if i := slices.Index(order, SourceLocal); i > 0 {
		order = slices.Insert(slices.Delete(order, i, i+1), 0, SourceLocal)
	}

	prev := *c.byName.Load()
	claims := map[string]claim{}
	var (
		served     []*Entry
		dropped    []tool.Dropped
		collisions []string
		schemaErrs []error
	)
	for _, src := range order {
		for _, t := range next[src] {
			reason, collision := consider(claims, src, t)
			if reason == "" && c.cfg.Refuse != nil {
				if reason = c.cfg.Refuse(t); reason != "" {
					delete(claims, t.Name())
				}
			}
			if reason != "" {
				dropped = append(dropped, tool.Dropped{Name: t.Name(), Reason: reason})
				if collision != "" {
					collisions = append(collisions, collision)
				}
				continue
			}
			e, err := newEntry(src, t, prev[t.Name()])
			if err != nil {
				schemaErrs = append(schemaErrs, err)
			}
			served = append(served, e)
		}
	}
	if c.cfg.Strict && len(collisions) > 0 {
		return fmt.Errorf("%w: %s", ErrCollision, strings.Join(collisions, "; "))
	}
	if commit != nil {
		if err := commit(served); err != nil {
			return err
		}
	}

	for _, err := range schemaErrs {
		c.log.Warn("input schema not checked locally", "agent", c.cfg.Identity, "error", err)
	}
	for _, d := range dropped {
		if !slices.Contains(c.dropped, d) {
			c.log.Warn("tool not served over MCP", "agent", c.cfg.Identity, "tool", d.Name, "reason", d.Reason)
		}
	}
	byName := make(map[string]*Entry, len(served))
	for _, e := range served {
		byName[e.Name()] = e
	}
	c.sources, c.served, c.dropped = next, served, dropped
	c.byName.Store(&byName)
	c.cfg.Metrics.SetTools(slices.Collect(maps.Keys(byName)))
	return nil
}

// Select splits tools into the served set and the dropped ones, each with
// its reason: the rules every server applies ([tool.DropReason] on
// [tool.ExposeMCP]), then a second tool claiming a name an earlier one
// holds (the first claim wins, and the reason names the holder). Order
// matters: put commands before built-ins.
func Select(tools []tool.Tool) (served []tool.Tool, dropped []tool.Dropped) {
	claims := make(map[string]claim, len(tools))
	for _, t := range tools {
		if reason, _ := consider(claims, SourceLocal, t); reason != "" {
			dropped = append(dropped, tool.Dropped{Name: t.Name(), Reason: reason})
			continue
		}
		served = append(served, t)
	}
	return served, dropped
}

// claim is the tool holding a name, and the source it came from.
type claim struct {
	source string
	tool   tool.Tool
}

// consider decides whether t, from source, is served given the names
// claimed so far, recording its claim when it is. It returns the reason it
// is dropped ("" when served) and, for a collision, a message naming both
// claimants. The rules are [tool.DropReason]'s; only the claims are the
// gateway's, since its names come from several sources and a collision
// must say which.
func consider(claims map[string]claim, source string, t tool.Tool) (reason, collision string) {
	if reason := tool.DropReason(t, tool.ExposeMCP); reason != "" {
		return reason, ""
	}
	name := t.Name()
	if first, taken := claims[name]; taken {
		return "name already claimed by " + describe(first.source, first.tool),
			fmt.Sprintf("%q is claimed by %s and by %s; the first claim wins, so rename, exclude or drop one of them",
				name, describe(first.source, first.tool), describe(source, t))
	}
	claims[name] = claim{source: source, tool: t}
	return "", ""
}

// describe names a claimant for collision messages: a command by its path
// as a user types it, any other tool by its name.
func describe(source string, t tool.Tool) string {
	s := fmt.Sprintf("in-process tool %q", t.Name())
	if _, ok := t.(tool.CommandLiner); ok {
		s = fmt.Sprintf("command %q", t.Title())
	}
	if source != SourceLocal {
		s += " from " + source
	}
	return s
}

// newEntry builds the registration of t. prev is the entry t had in the
// previous registration, if any, so an unchanged tool's schema is not
// compiled again.
func newEntry(source string, t tool.Tool, prev *Entry) (*Entry, error) {
	e := &Entry{
		Tool:   t,
		Source: source,
		Gated:  t.Confirmation() == tool.ConfirmRequired,
	}
	e.Liner, _ = t.(tool.CommandLiner)
	if source != SourceLocal {
		return e, nil
	}
	if prev != nil && prev.Tool == t {
		e.schema = prev.schema
		return e, nil
	}
	var err error
	e.schema, err = compileSchema(t.Name(), t.InputSchema())
	return e, err
}

// compileSchema compiles a tool's input schema once, so each call only
// validates.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decoding the input schema of %s: %w", name, err)
	}
	url := "mem:///tools/" + name + ".json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("loading the input schema of %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compiling the input schema of %s: %w", name, err)
	}
	return sch, nil
}

// validate checks input (an object, or empty for none) against the entry's
// schema and returns what is wrong as one line, or "".
func (e *Entry) validate(input json.RawMessage) string {
	if e.schema == nil {
		return ""
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return err.Error()
	}
	err = e.schema.Validate(v)
	if err == nil {
		return ""
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var parts []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, u.Error))
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*verr.BasicOutput())
	if len(parts) == 0 {
		return verr.Error()
	}
	return strings.Join(parts, "; ")
}

// Canonical re-encodes a JSON object with sorted keys and no insignificant
// space, so two encodings of the same arguments compare and digest alike.
// Numbers keep their literal text. Absent input is the empty object.
func Canonical(input json.RawMessage) []byte {
	if len(input) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return input
	}
	b, err := json.Marshal(v)
	if err != nil {
		return input
	}
	return b
}
