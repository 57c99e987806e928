// Package linuxpkg builds the Debian and RPM packages of fiskfleet with
// nfpm, used as a Go library at the version tools/go.mod pins, from the
// declarative packaging/nfpm.yaml. Nothing of the build machine reaches a
// package: file times are the commit's, the RPM build host is fixed in the
// YAML, so two builds of one commit are identical.
package linuxpkg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Formats are the package formats [Write] builds.
var Formats = []string{"deb", "rpm"}

// ErrUnknownVariable is wrapped when the YAML names a ${VAR} that
// [Config.Vars] does not define: a typo there would otherwise build a
// package with an empty path in it.
var ErrUnknownVariable = errors.New("unknown variable in nfpm config")

// Config describes the packages of one architecture.
type Config struct {
	// File is the nfpm YAML (packaging/nfpm.yaml).
	File string
	// Vars fill the ${NAME} references of File before it is parsed:
	// VERSION, ARCH, BINDIR and SRCDIR in packaging/nfpm.yaml.
	Vars map[string]string
	// MTime is every file's time and the package's build time.
	MTime time.Time
}

// Write builds the package of format (deb or rpm) described by c into w
// and returns its conventional file name (fiskfleet_1.2.3_amd64.deb,
// fiskfleet-1.2.3-1.x86_64.rpm).
func Write(w io.Writer, format string, c Config) (string, error) {
	raw, err := os.ReadFile(c.File)
	if err != nil {
		return "", fmt.Errorf("reading nfpm config: %w", err)
	}
	var missing []string
	expanded := os.Expand(string(raw), func(name string) string {
		v, ok := c.Vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: %s: %s", ErrUnknownVariable, c.File, strings.Join(missing, ", "))
	}
	cfg, err := nfpm.ParseWithEnvMapping(bytes.NewReader([]byte(expanded)), func(string) string { return "" })
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", c.File, err)
	}
	info, err := cfg.Get(format)
	if err != nil {
		return "", fmt.Errorf("reading %s for %s: %w", c.File, format, err)
	}
	// Parse has applied nfpm's defaults already; only the time is ours.
	info.MTime = c.MTime.UTC()
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", fmt.Errorf("preparing %s contents: %w", format, err)
	}
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return "", fmt.Errorf("getting %s packager: %w", format, err)
	}
	info.Target = pkgr.ConventionalFileName(info)
	if err := pkgr.Package(info, w); err != nil {
		return "", fmt.Errorf("building %s: %w", format, err)
	}
	return info.Target, nil
}
