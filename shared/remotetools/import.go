package remotetools

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// ErrImport is a strict import that failed: a host did not answer, or a
// name collided.
var ErrImport = errors.New("importing remote tools")

// Importer discovers the configured hosts and builds their tools. It
// remembers each host's last good card, so a host that stops answering
// keeps its tools listed (calls fail in-band naming it) until it returns.
// It is safe for concurrent use.
type Importer struct {
	caller Caller
	hosts  []config.RemoteHost
	local  []string

	mu sync.Mutex // guards cards, reached and origin
	// cards is each host's last successfully discovered tool set, after
	// the host's include and exclude.
	cards map[string]HostTools
	// reached records which hosts answered the latest discovery.
	reached map[string]bool
	// origin maps a served local name to its host, for info.
	origin map[string]string
}

// NewImporter returns an importer of hosts over caller. local are the
// names local tools already hold; a remote tool sharing one is prefixed.
func NewImporter(caller Caller, hosts []config.RemoteHost, local []string) *Importer {
	return &Importer{
		caller:  caller,
		hosts:   slices.Clone(hosts),
		local:   slices.Clone(local),
		cards:   map[string]HostTools{},
		reached: map[string]bool{},
		origin:  map[string]string{},
	}
}

// HostStatus is what the importer knows of one configured host.
type HostStatus struct {
	Host string
	// Discovered is set once the host has answered discovery.
	Discovered bool
	// Reachable is whether it answered the latest discovery.
	Reachable bool
}

// Hosts returns the status of every configured host, in configuration
// order: what a readiness probe and the reachability metrics report.
func (im *Importer) Hosts() []HostStatus {
	im.mu.Lock()
	defer im.mu.Unlock()
	out := make([]HostStatus, len(im.hosts))
	for i, h := range im.hosts {
		_, discovered := im.cards[h.Host]
		out[i] = HostStatus{Host: h.Host, Discovered: discovered, Reachable: im.reached[h.Host]}
	}
	return out
}

// Result is one import: the tools to serve and what was left out.
type Result struct {
	Tools   []tool.Tool
	Dropped []tool.Dropped
	// Collided are the remote tools dropped because their names collide.
	Collided []tool.Dropped
	// Failed maps a host that did not answer to its error.
	Failed map[string]error
	// Changed reports whether the served set differs from the previous
	// import's.
	Changed bool
}

// ImportStrict discovers every host and fails if any host does not answer
// or any name collides, naming the host and the cause: what a serving
// gateway needs before it starts, since a client may depend on every tool.
func (im *Importer) ImportStrict(ctx context.Context) (Result, error) {
	res := im.Import(ctx)
	var errs []error
	for _, h := range im.hosts {
		if err, ok := res.Failed[h.Host]; ok {
			errs = append(errs, fmt.Errorf("remote_tools host %s: %w", h.Host, err))
		}
	}
	for _, d := range res.Collided {
		errs = append(errs, fmt.Errorf("remote_tools %s: %s (narrow it with remote_tools[].exclude.tools)", d.Name, d.Reason))
	}
	if len(errs) > 0 {
		return Result{}, fmt.Errorf("%w: %w", ErrImport, errors.Join(errs...))
	}
	return res, nil
}

// Import discovers every host and builds the tools of those that answer,
// plus the last good tools of those that do not. It never fails: info and
// periodic refreshes report Failed and carry on.
func (im *Importer) Import(ctx context.Context) Result {
	type answer struct {
		host  string
		tools HostTools
		err   error
	}
	answers := make([]answer, len(im.hosts))
	var wg sync.WaitGroup
	for i, h := range im.hosts {
		wg.Go(func() {
			reply, err := im.caller.Discover(ctx, h.Host)
			if err != nil {
				answers[i] = answer{host: h.Host, err: err}
				return
			}
			answers[i] = answer{host: h.Host, tools: HostTools{
				Host:           h.Host,
				Tools:          filterHost(h, reply.Tools),
				CommandResults: slices.Contains(reply.Protocols, a2a.ProtocolCommandResult),
			}}
		})
	}
	wg.Wait()

	im.mu.Lock()
	defer im.mu.Unlock()
	res := Result{Failed: map[string]error{}}
	changed := false
	for _, a := range answers {
		im.reached[a.host] = a.err == nil
		if a.err != nil {
			res.Failed[a.host] = a.err
			continue
		}
		if prev := im.cards[a.host]; prev.CommandResults != a.tools.CommandResults || !slices.EqualFunc(prev.Tools, a.tools.Tools, sameDescriptor) {
			changed = true
		}
		im.cards[a.host] = a.tools
	}
	hosts := make([]HostTools, 0, len(im.hosts))
	for _, h := range im.hosts {
		if card, ok := im.cards[h.Host]; ok {
			hosts = append(hosts, card)
		}
	}
	named, collided, invalid := Resolve(im.local, hosts)
	res.Collided = collided
	res.Dropped = append(slices.Clone(collided), invalid...)
	origin := make(map[string]string, len(named))
	for _, n := range named {
		t, err := newRemoteTool(im.caller, n)
		if err != nil {
			res.Dropped = append(res.Dropped, tool.Dropped{Name: n.Host + "/" + n.Remote, Reason: err.Error()})
			continue
		}
		origin[n.Local] = n.Host
		res.Tools = append(res.Tools, t)
	}
	res.Changed = changed || len(origin) != len(im.origin)
	im.origin = origin
	return res
}

// Origin returns the host a served remote tool comes from, or "local".
func (im *Importer) Origin(t tool.Tool) string {
	im.mu.Lock()
	defer im.mu.Unlock()
	if h, ok := im.origin[t.Name()]; ok {
		return h
	}
	return "local"
}

// filterHost applies a host's include and exclude name globs, and refuses
// tools without a description (a model would have nothing to decide on).
// Tag filters cannot be honoured: discovery carries no tags (config warns
// about an include and rejects an exclude).
func filterHost(h config.RemoteHost, tools []a2a.ToolDescriptor) []a2a.ToolDescriptor {
	var out []a2a.ToolDescriptor
	for _, t := range tools {
		if t.Description == "" {
			continue
		}
		if len(h.Include.Tools) > 0 && !matchAny(h.Include.Tools, t.Name) {
			continue
		}
		if matchAny(h.Exclude.Tools, t.Name) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

func sameDescriptor(a, b a2a.ToolDescriptor) bool {
	return a.Name == b.Name && a.Description == b.Description && string(a.InputSchema) == string(b.InputSchema)
}
