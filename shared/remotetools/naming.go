// Package remotetools imports the tools of A2A agents on the bus as local
// tools: deterministic naming across every host, strict import for serving,
// lenient import for info, and the remote tool whose call goes over NATS.
//
// A remote call is unary (one request, one reply) when it wants no output
// while it runs, is not made for an MCP task ([tool.Remote.Streamed]), is not of a
// tool its agent gates behind an operator's approval, and the agent
// honours the cancel of a unary call ([a2a.ProtocolCallCancel]); it is
// streamed otherwise. Either way a call whose context ends (the MCP
// client's cancel, its connection lost, the gateway's tool_timeout) sends
// the agent a cancel, and answers at most a second (cancelGrace) later.
package remotetools

import (
	"fmt"
	"sort"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// HostTools is what one host advertises, after its include and exclude.
type HostTools struct {
	Host  string
	Tools []a2a.ToolDescriptor
	// CommandResults is set when the host's card promises a command
	// result for every call of its tools that runs
	// ([a2a.ProtocolCommandResult]).
	CommandResults bool
}

// Named is one remote tool with its final local name.
type Named struct {
	// Host is the identity serving the tool.
	Host string
	// Local is the name clients see; Remote is the name on the wire.
	Local, Remote string
	Tool          a2a.ToolDescriptor
	// CommandResult is its host's promise of a command result
	// ([HostTools.CommandResults]).
	CommandResult bool
}

// Resolve names every host's tools in three passes, so the outcome does not
// depend on the order hosts or tools arrive in:
//
//  1. count each bare name over all hosts;
//  2. compute final names: "<host>_<name>" when a local tool holds the bare
//     name or more than one host exposes it (so two hosts sharing a name are
//     prefixed symmetrically), the bare name otherwise;
//  3. count final names with the local ones, and drop every remote tool
//     whose final name is still taken more than once (both sides of a
//     residual collision, never one arbitrarily), or that is not a valid
//     tool name.
//
// Collisions and invalid names are returned apart because a serving import
// aborts on a collision but only reports an invalid name. The result is
// sorted by host, then remote name. A host listed twice or a tool listed
// twice by one host counts as a collision.
func Resolve(local []string, hosts []HostTools) (named []Named, collided, invalid []tool.Dropped) {
	localSet := make(map[string]bool, len(local))
	for _, n := range local {
		localSet[n] = true
	}
	// Pass 1: bare names over all hosts.
	bare := map[string]int{}
	for _, h := range hosts {
		for _, t := range h.Tools {
			bare[t.Name]++
		}
	}
	// Pass 2: final names.
	var all []Named
	for _, h := range hosts {
		for _, t := range h.Tools {
			final := t.Name
			if localSet[t.Name] || bare[t.Name] > 1 {
				final = h.Host + "_" + t.Name
			}
			all = append(all, Named{Host: h.Host, Local: final, Remote: t.Name, Tool: t, CommandResult: h.CommandResults})
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Host != all[j].Host {
			return all[i].Host < all[j].Host
		}
		return all[i].Remote < all[j].Remote
	})
	// Pass 3: final names counted with the local ones.
	final := map[string]int{}
	for _, n := range all {
		final[n.Local]++
	}
	for _, n := range all {
		label := n.Host + "/" + n.Remote
		switch {
		case final[n.Local] > 1 || localSet[n.Local]:
			collided = append(collided, tool.Dropped{Name: label, Reason: fmt.Sprintf("name %q collides after prefixing; every claimant is dropped", n.Local)})
		case !tool.ValidName(n.Local):
			invalid = append(invalid, tool.Dropped{Name: label, Reason: fmt.Sprintf("name %q does not match %s", n.Local, tool.NamePattern())})
		default:
			named = append(named, n)
		}
	}
	return named, collided, invalid
}
