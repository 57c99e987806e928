package dist

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Unreleased is the CHANGELOG.md section that covers every build past the
// newest release, as Keep a Changelog names it.
const Unreleased = "Unreleased"

// pastRelease matches the suffix git describe adds to a build that is not
// itself a release: commits past the newest tag (-4-gabcdef1), local
// changes (-dirty), or both.
var pastRelease = regexp.MustCompile(`(-[0-9]+-g[0-9a-f]+(-dirty)?|-dirty)$`)

// ChangelogSection names the CHANGELOG.md section a build of version must
// have: the version itself for a release (1.2.3, 1.3.0-rc.1), and
// [Unreleased] for a build past one or with no release yet
// (1.2.3-4-gabcdef1, 0.0.0-522-g0123456789ab, 1.2.3-dirty).
func ChangelogSection(version string) string {
	if pastRelease.MatchString(version) {
		return Unreleased
	}
	return version
}

// changelogHeading matches a section heading, "## [1.2.3] - 2026-12-06"
// or "## [Unreleased]", capturing the name in the brackets.
var changelogHeading = regexp.MustCompile(`^## \[([^\]]+)\]`)

// CheckChangelog refuses a release whose version has no section in the
// changelog at path: a release is not cut before its changes are written
// down. The section must also say something: a heading alone is refused.
func CheckChangelog(path, version string) error {
	want := ChangelogSection(version)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: version %s needs a \"## [%s]\" section in the changelog: %w", ErrInvalidConfig, version, want, err)
	}
	found, lines := false, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if m := changelogHeading.FindStringSubmatch(line); m != nil {
			if found {
				break
			}
			found = m[1] == want
			continue
		}
		if found && strings.HasPrefix(strings.TrimSpace(line), "- ") {
			lines++
		}
	}
	switch {
	case !found:
		return fmt.Errorf("%w: version %s has no \"## [%s]\" section in %s: write down its changes first (keepachangelog.com)", ErrInvalidConfig, version, want, path)
	case lines == 0:
		return fmt.Errorf("%w: the \"## [%s]\" section of %s lists no change (\"- \" lines): write down version %s's changes first", ErrInvalidConfig, want, path, version)
	}
	return nil
}
