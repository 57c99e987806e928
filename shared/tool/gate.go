package tool

import (
	"slices"
	"strings"
)

// Gated reports whether a tool with tags needs approval: it carries
// [TagConfirm] or one of the operator's confirmTags.
func Gated(tags, confirmTags []string) bool {
	for _, t := range tags {
		if t == TagConfirm || slices.Contains(confirmTags, t) {
			return true
		}
	}
	return false
}

// Denied reports whether tags carry [TagDeny].
func Denied(tags []string) bool { return slices.Contains(tags, TagDeny) }

// ModelDescription appends a trailing "Tags: a, b" line to description
// when there are tags, so what a command says about itself reaches a model
// as text on every surface.
func ModelDescription(description string, tags []string) string {
	if len(tags) == 0 {
		return description
	}
	line := "Tags: " + strings.Join(tags, ", ")
	if description == "" {
		return line
	}
	return description + "\n\n" + line
}
