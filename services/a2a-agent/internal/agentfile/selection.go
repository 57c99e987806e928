package agentfile

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Selection is what the file lists in comments: the application's commands
// as `a2a-agent info` lists them for the same file.
type Selection struct {
	// Application names the application, as its own model does.
	Application string
	// Listing holds the served commands and the dropped ones with the
	// reasons of the selection that made it; they are written as given,
	// so the file cannot disagree with info or serve.
	tool.Listing
	// Loaded are the commands the application's load kept, whose tags a
	// dropped row shows when the selection dropped it: the tags say which
	// one gates a gated command.
	Loaded []tool.Tool
}

// write writes the selection as comments: the served commands with their
// tags, then the dropped ones grouped by reason, in the application's
// order within each reason.
func (s *Selection) write(b *bytes.Buffer) {
	tags := make(map[string][]string, len(s.Loaded))
	for _, t := range s.Loaded {
		tags[t.Name()] = t.Tags()
	}
	var body bytes.Buffer
	fmt.Fprintf(&body, "The commands of %s as a2a-agent info lists them for this file:\n", s.Application)
	body.WriteString("what a2a-agent serve serves, and why it drops the others. The keys\n")
	body.WriteString("include, exclude, expose.agent.tools, confirm_tags and\n")
	body.WriteString("approvals.operator change it. Over MCP, mcp-gateway serve serves the\n")
	body.WriteString("gated commands too, approved as expose.agent.mcp.confirm_over_mcp\n")
	body.WriteString("says; mcp-gateway info --config FILE lists its choice.\n\n")

	tw := tabwriter.NewWriter(&body, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Served over A2A (%d):\n", len(s.Served))
	for _, t := range s.Served {
		desc, _, _ := strings.Cut(t.Description(), "\n")
		if t.Confirmation() == tool.ConfirmRequired {
			desc += " (gated: an operator approves each call)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name(), strings.Join(t.Tags(), ","), desc)
	}
	_ = tw.Flush()

	if len(s.Dropped) > 0 {
		fmt.Fprintf(&body, "\nNot served (%d), by reason:\n", len(s.Dropped))
		var reasons []string
		byReason := map[string][]string{}
		for _, d := range s.Dropped {
			if !slices.Contains(reasons, d.Reason) {
				reasons = append(reasons, d.Reason)
			}
			byReason[d.Reason] = append(byReason[d.Reason], d.Name)
		}
		for _, reason := range reasons {
			fmt.Fprintf(&body, "  %s\n", reason)
			tw := tabwriter.NewWriter(&body, 0, 4, 2, ' ', 0)
			for _, name := range byReason[reason] {
				fmt.Fprintf(tw, "    %s\t%s\n", name, strings.Join(tags[name], ","))
			}
			_ = tw.Flush()
		}
	}
	// A carriage return would end the comment for a YAML reader: what
	// the application says of itself must stay inside it.
	for l := range strings.Lines(strings.ReplaceAll(body.String(), "\r", " ")) {
		l = strings.TrimRight(l, " \n")
		if l == "" {
			b.WriteString("#\n")
			continue
		}
		b.WriteString("# " + l + "\n")
	}
}
