package fiskapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/choria-io/fisk"

	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Defaults for the zero values of [Options].
const (
	// DefaultIntrospectTimeout bounds --fisk-introspect. A fisk application
	// answers in milliseconds; one that takes seconds is not answering at
	// all (it ignored the flag and started doing something else), and a
	// server must not hang at startup waiting for it.
	DefaultIntrospectTimeout = 10 * time.Second
	// DefaultMaxIntrospectBytes caps the introspection output. The nats CLI,
	// among the largest fisk applications, prints under 600 KiB; the cap
	// only stops a misbehaving binary from filling memory.
	DefaultMaxIntrospectBytes = 16 << 20
	// DefaultOutputCap caps one call's combined output. A model cannot use
	// megabytes of text, and the result must fit a NATS message (768 KiB)
	// with room for framing.
	DefaultOutputCap = 256 << 10
	// DefaultKillGrace is how long a process group has between SIGTERM and
	// SIGKILL once a call's context ends: long enough for a CLI to clean up
	// a connection, short enough that a timed-out call frees its slot
	// promptly.
	DefaultKillGrace = 2 * time.Second
)

// Options configures [Load]. The zero value of every field but Path means
// its default.
type Options struct {
	// Path is the fisk application binary. A bare name is looked up in
	// PATH once, by [Load], so every call runs the binary that was
	// introspected.
	Path string
	// Include keeps only tools that match one of its name globs
	// (path.Match syntax) or carry one of its tags; empty keeps all.
	Include config.Filter
	// Exclude drops tools that match one of its globs or carry one of its
	// tags, after Include.
	Exclude config.Filter
	// Expose is expose.agent.tools, applied after Include and Exclude the
	// same way: it can only narrow what they kept.
	Expose config.ToolsFilter
	// ConfirmTags gate tools carrying them, as ai:confirm does.
	ConfirmTags []string
	// CredentialEnv names environment variables scrubbed from every child's
	// environment, on top of [DefaultCredentialEnv].
	CredentialEnv []string
	// IntrospectTimeout bounds --fisk-introspect; 0 means
	// [DefaultIntrospectTimeout].
	IntrospectTimeout time.Duration
	// MaxIntrospectBytes caps the introspection output; 0 means
	// [DefaultMaxIntrospectBytes]. More output is an [ErrTooLarge] error.
	MaxIntrospectBytes int64
	// OutputCap caps one call's combined stdout and stderr; 0 means
	// [DefaultOutputCap]. Output past it is counted, not kept, and the
	// result is marked truncated.
	OutputCap int
	// KillGrace is the SIGTERM to SIGKILL grace for a call's process group
	// when its context ends; 0 means [DefaultKillGrace].
	KillGrace time.Duration
}

func (o Options) withDefaults() Options {
	if o.IntrospectTimeout <= 0 {
		o.IntrospectTimeout = DefaultIntrospectTimeout
	}
	if o.MaxIntrospectBytes <= 0 {
		o.MaxIntrospectBytes = DefaultMaxIntrospectBytes
	}
	if o.OutputCap <= 0 {
		o.OutputCap = DefaultOutputCap
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	return o
}

// App is a loaded fisk application: its model and the commands selected as
// tools. It is immutable after [Load] and safe for concurrent use.
type App struct {
	// Model is the application model as the application described itself.
	// Callers must not modify it: the commands share its parts.
	Model *fisk.ApplicationModel
	// Commands are the selected tools, in the application's declared order.
	Commands []*Command
	// Dropped lists every leaf command that is not a tool, with why, in the
	// application's declared order.
	Dropped []tool.Dropped
}

// Tools returns the commands as [tool.Tool] values, for servers that take
// a mixed list.
func (a *App) Tools() []tool.Tool {
	out := make([]tool.Tool, len(a.Commands))
	for i, c := range a.Commands {
		out[i] = c
	}
	return out
}

// Load introspects the application at opts.Path and selects its tools.
//
// Selection drops, in this order and recording a reason for each: commands
// tagged ai:deny (or under a parent tagged so), before any filter so that no
// filter can bring one back; hidden commands (or under a hidden parent);
// names that are not valid tool names; then whatever Include, Exclude,
// Expose.Include and Expose.Exclude drop; and last both sides of any name
// collision among the survivors. ctx bounds the introspection together with
// opts.IntrospectTimeout.
func Load(ctx context.Context, opts Options) (*App, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("%w: set application_path to a fisk application binary", ErrNoApplication)
	}
	opts = opts.withDefaults()
	filters := []filter{
		{key: "include", f: opts.Include, include: true},
		{key: "exclude", f: opts.Exclude},
		{key: "expose.agent.tools.include", f: opts.Expose.Include, include: true},
		{key: "expose.agent.tools.exclude", f: opts.Expose.Exclude},
	}
	for _, fl := range filters {
		if err := fl.validate(); err != nil {
			return nil, err
		}
	}

	bin, err := exec.LookPath(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: finding %s: %w", ErrIntrospect, opts.Path, err)
	}
	opts.Path = bin

	r := newRunner(opts)
	out, err := introspect(ctx, opts.Path, r.scrub, opts.IntrospectTimeout, opts.MaxIntrospectBytes)
	if err != nil {
		return nil, err
	}
	model, err := decodeModel(opts.Path, out)
	if err != nil {
		return nil, err
	}

	app := &App{Model: model}
	var kept []*Command
	var walkErr error
	walkLeaves(model.CmdGroupModel, leaf{}, func(l leaf) {
		name := strings.Join(l.path, "_")
		reason := ""
		switch {
		case l.deniedBy != "":
			reason = l.deniedBy
		case l.hiddenBy != "":
			reason = l.hiddenBy
		case !tool.ValidName(name):
			reason = fmt.Sprintf("name %q does not match %s", name, tool.NamePattern())
		default:
			for _, fl := range filters {
				if reason = fl.drop(name, l.tags); reason != "" {
					break
				}
			}
		}
		if reason != "" {
			app.Dropped = append(app.Dropped, tool.Dropped{Name: name, Reason: reason})
			return
		}
		cmd, err := newCommand(l, name, opts, r)
		if err != nil {
			walkErr = errors.Join(walkErr, err)
			return
		}
		kept = append(kept, cmd)
	})
	if walkErr != nil {
		return nil, walkErr
	}
	app.Commands = dropCollisions(kept, &app.Dropped)
	return app, nil
}

// leaf is one leaf command found by walkLeaves.
type leaf struct {
	cmd  *fisk.CmdModel
	path []string
	// tags are the command's effective tags: its own, or when it has none,
	// those of its nearest tagged ancestor.
	tags []string
	// deniedBy and hiddenBy say why the command is denied or hidden,
	// either by itself or through an ancestor; empty when it is not.
	deniedBy string
	hiddenBy string
}

// walkLeaves calls visit for every leaf command under g, in declared order.
//
// What a group says applies to the commands under it: ai:deny on a group
// denies everything below it, a hidden group hides its children, and a
// command without tags of its own takes the tags of its nearest tagged
// ancestor. The nats CLI, for one, tags "bench js" impact:rw and leaves its
// publishing subcommands untagged; without inheritance confirm_tags and tag
// filters would silently miss them.
func walkLeaves(g *fisk.CmdGroupModel, parent leaf, visit func(leaf)) {
	if g == nil {
		return
	}
	for _, c := range g.Commands {
		l := leaf{
			cmd:      c,
			path:     append(slices.Clip(parent.path), c.Name),
			tags:     parent.tags,
			deniedBy: parent.deniedBy,
			hiddenBy: parent.hiddenBy,
		}
		if len(c.Tags) > 0 {
			l.tags = c.Tags
		}
		group := isGroup(c)
		if l.deniedBy == "" && tool.Denied(c.Tags) {
			l.deniedBy = "tagged " + tool.TagDeny
			if group {
				l.deniedBy = fmt.Sprintf("parent command %q tagged %s", strings.Join(l.path, " "), tool.TagDeny)
			}
		}
		if l.hiddenBy == "" && c.Hidden {
			l.hiddenBy = "hidden command"
			if group {
				l.hiddenBy = fmt.Sprintf("parent command %q is hidden", strings.Join(l.path, " "))
			}
		}
		if group {
			walkLeaves(c.CmdGroupModel, l, visit)
			continue
		}
		visit(l)
	}
}

func isGroup(c *fisk.CmdModel) bool { return c.CmdGroupModel != nil && len(c.Commands) > 0 }

// dropCollisions drops both sides of any name shared by two commands
// (possible since "a_b" and "a b" join to the same name): keeping either
// would make which command a name runs depend on declaration order.
func dropCollisions(cmds []*Command, dropped *[]tool.Dropped) []*Command {
	byName := make(map[string][]*Command, len(cmds))
	for _, c := range cmds {
		byName[c.name] = append(byName[c.name], c)
	}
	kept := cmds[:0:0]
	for _, c := range cmds {
		same := byName[c.name]
		if len(same) == 1 {
			kept = append(kept, c)
			continue
		}
		var others []string
		for _, o := range same {
			if o != c {
				others = append(others, fmt.Sprintf("%q", o.title))
			}
		}
		*dropped = append(*dropped, tool.Dropped{Name: c.name, Reason: "name collides with command " + strings.Join(others, ", ")})
	}
	return kept
}

// filter is one of the four name/tag filters, with the configuration key it
// came from for drop reasons and errors.
type filter struct {
	key     string
	f       config.Filter
	include bool
}

func (fl filter) validate() error {
	for _, g := range fl.f.Tools {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%w: %s.tools %q: %w", ErrInvalidFilter, fl.key, g, err)
		}
	}
	return nil
}

// drop returns why the filter drops a tool named name with tags, or "" when
// it keeps it. An empty filter keeps everything.
func (fl filter) drop(name string, tags []string) string {
	if fl.f.Empty() {
		return ""
	}
	glob, tag := fl.match(name, tags)
	switch {
	case fl.include && glob == "" && tag == "":
		var parts []string
		if len(fl.f.Tools) > 0 {
			parts = append(parts, fmt.Sprintf("%s.tools [%s]", fl.key, strings.Join(fl.f.Tools, ", ")))
		}
		if len(fl.f.Tags) > 0 {
			parts = append(parts, fmt.Sprintf("%s.tags [%s]", fl.key, strings.Join(fl.f.Tags, ", ")))
		}
		return "not matched by " + strings.Join(parts, " or ")
	case fl.include:
		return ""
	case glob != "":
		return fmt.Sprintf("excluded by %s.tools %s", fl.key, glob)
	case tag != "":
		return fmt.Sprintf("excluded by %s.tags %s", fl.key, tag)
	}
	return ""
}

// match returns the first glob matching name and the first filter tag in
// tags.
func (fl filter) match(name string, tags []string) (glob, tag string) {
	for _, g := range fl.f.Tools {
		if ok, _ := path.Match(g, name); ok { // patterns were validated at Load
			glob = g
			break
		}
	}
	for _, t := range fl.f.Tags {
		if slices.Contains(tags, t) {
			tag = t
			break
		}
	}
	return glob, tag
}

// decodeModel decodes introspection output into fisk's own model type, so
// the model is exactly what fisk's ArgsFromJSON expects.
func decodeModel(appPath string, out []byte) (*fisk.ApplicationModel, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %w: %s printed nothing for --fisk-introspect (it must be built with github.com/choria-io/fisk)", ErrIntrospect, ErrNotFisk, appPath)
	}
	var m fisk.ApplicationModel
	if err := json.Unmarshal(out, &m); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || out[0] != '{' {
			return nil, fmt.Errorf("%w: %w: %s printed something other than a fisk application model for --fisk-introspect: %w", ErrIntrospect, ErrNotFisk, appPath, err)
		}
		return nil, fmt.Errorf("%w: decoding the model %s printed: %w", ErrIntrospect, appPath, err)
	}
	if m.Name == "" {
		return nil, fmt.Errorf("%w: %w: the model %s printed for --fisk-introspect has no application name", ErrIntrospect, ErrNotFisk, appPath)
	}
	if m.CmdGroupModel == nil || len(m.Commands) == 0 {
		return nil, fmt.Errorf("%w: %s (%s) declares no commands to serve", ErrIntrospect, appPath, m.Name)
	}
	return &m, nil
}
