// Package buildinfo describes how a fiskfleet binary was built: the
// version, commit and date a release build stamps into main with
// -ldflags, and the Go toolchain that compiled it. Both services print it
// for --version and advertise the same version on every surface (the
// agent card, the micro service metadata, MCP serverInfo), so an operator
// can tell from any of them which release answered.
package buildinfo

import (
	"fmt"
	"runtime"
	"strings"
)

// Unreleased is the version of a binary that no release build stamped
// (`go build`, `go run`, tests). Every surface must carry some version,
// and 0.0.0 sorts before every release, so it is never mistaken for one.
const Unreleased = "0.0.0"

// Unknown stands in for a commit or date that the build did not stamp.
const Unknown = "unknown"

// Info is the build of one binary. The zero value is not useful: build
// one with [New].
type Info struct {
	// Version is the release version without a leading "v" (1.2.3,
	// 1.2.3-4-gabcdef), or [Unreleased].
	Version string
	// Commit is the full git commit the binary was built from, or [Unknown].
	Commit string
	// Date is the commit's time in RFC 3339 UTC, not the time of the
	// build, so that two builds of one commit are identical; or [Unknown].
	Date string
	// Go is the toolchain version and target, e.g. "go1.26.8 linux/amd64".
	Go string
}

// New returns the Info of this binary from the strings main's -ldflags
// set. An empty version, or the "dev" placeholder a main declares, is
// [Unreleased]; a leading "v" is dropped so that a tag such as v1.2.3 and
// a package version 1.2.3 read the same.
func New(version, commit, date string) Info {
	version = strings.TrimPrefix(strings.TrimSpace(version), "v")
	if version == "" || version == "dev" {
		version = Unreleased
	}
	if commit == "" {
		commit = Unknown
	}
	if date == "" {
		date = Unknown
	}
	return Info{
		Version: version,
		Commit:  commit,
		Date:    date,
		Go:      runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is what `NAME --version` prints: the name and version on the
// first line, then the commit, the build date and the Go version, one per
// line, so scripts can take the first line and people can read the rest.
func (i Info) String(name string) string {
	return fmt.Sprintf("%s %s\ncommit: %s\nbuilt:  %s\ngo:     %s", name, i.Version, i.Commit, i.Date, i.Go)
}
