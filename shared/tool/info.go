package tool

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Dropped is a tool left out of a served set, with the reason an operator
// reads in `info` and in the startup log.
type Dropped struct {
	Name   string
	Reason string
}

// Listing is what an operator's `info` shows: the served tools with their
// origin, and the dropped ones with their reasons.
type Listing struct {
	Served  []Tool
	Dropped []Dropped
	// Origin names where a served tool comes from ("local" or the remote
	// host); nil means every tool is local.
	Origin func(Tool) string
}

// Write renders the listing as two aligned tables. It is the only surface
// that shows the plain description with tags in a column of their own.
func (l Listing) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SERVED (%d)\tORIGIN\tGATED\tTAGS\tDESCRIPTION\n", len(l.Served))
	for _, t := range l.Served {
		origin := "local"
		if l.Origin != nil {
			origin = l.Origin(t)
		}
		desc, _, _ := strings.Cut(t.Description(), "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name(), origin, yesNo(t.Confirmation()), strings.Join(t.Tags(), ","), desc)
	}
	if len(l.Dropped) > 0 {
		fmt.Fprintf(tw, "\nDROPPED (%d)\tREASON\n", len(l.Dropped))
		for _, d := range l.Dropped {
			fmt.Fprintf(tw, "%s\t%s\n", d.Name, d.Reason)
		}
	}
	return tw.Flush()
}

func yesNo(c Confirmation) string {
	switch c {
	case ConfirmRequired:
		return "yes"
	case ConfirmNone:
		return "no"
	}
	return "unknown"
}
