package dist_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/dist"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		in      string
		want    []dist.Target
		wantErr bool
	}{
		{"linux/amd64", []dist.Target{{OS: "linux", Arch: "amd64"}}, false},
		{"linux/amd64, darwin/arm64", []dist.Target{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}, false},
		{"linux", nil, true},
		{"/amd64", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := dist.ParseTargets(tt.in)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, dist.ErrInvalidConfig) {
				t.Errorf("got %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := dist.Config{Root: ".", Out: "dist", Version: "1.2.3", Commit: "abc", Time: time.Unix(1, 0)}
	tests := []struct {
		name   string
		change func(*dist.Config)
	}{
		{"no root", func(c *dist.Config) { c.Root = "" }},
		{"no out", func(c *dist.Config) { c.Out = "" }},
		{"no version", func(c *dist.Config) { c.Version = "" }},
		{"leading v", func(c *dist.Config) { c.Version = "v1.2.3" }},
		{"no commit", func(c *dist.Config) { c.Commit = "" }},
		{"no time", func(c *dist.Config) { c.Time = time.Time{} }},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("got %v for a complete config, want nil", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			if err := c.Validate(); !errors.Is(err, dist.ErrInvalidConfig) {
				t.Errorf("got %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

func TestChangelogSection(t *testing.T) {
	for version, want := range map[string]string{
		"1.2.3":                   "1.2.3",
		"1.3.0-rc.1":              "1.3.0-rc.1",
		"1.2.3-4-gabcdef1":        dist.Unreleased,
		"1.2.3-4-gabcdef1-dirty":  dist.Unreleased,
		"1.2.3-dirty":             dist.Unreleased,
		"0.0.0-522-g0123456789ab": dist.Unreleased,
	} {
		if got := dist.ChangelogSection(version); got != want {
			t.Errorf("ChangelogSection(%q): got %q, want %q", version, got, want)
		}
	}
}

func TestCheckChangelog(t *testing.T) {
	const changelog = `# Changelog

## [Unreleased]

### Added
- Something new.

## [1.2.3] - 2026-12-01

## [1.2.2] - 2026-11-01

### Fixed
- A bug.
`
	path := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(path, []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		version string
		want    string // in the error; "" for none
	}{
		{"1.2.2", ""},
		{"1.2.2-3-gabcdef1", ""},
		{"0.0.0-9-gabcdef1", ""},
		{"1.2.3", `section of ` + path + ` lists no change`},
		{"1.2.4", `version 1.2.4 has no "## [1.2.4]" section`},
		{"1.2", `no "## [1.2]" section`},
	} {
		err := dist.CheckChangelog(path, tt.version)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got %v, want nil", tt.version, err)
		case tt.want != "" && (!errors.Is(err, dist.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), tt.want)):
			t.Errorf("%s: got %v, want an ErrInvalidConfig saying %q", tt.version, err, tt.want)
		}
	}
	if err := dist.CheckChangelog(filepath.Join(t.TempDir(), "none.md"), "1.2.3"); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, dist.ErrInvalidConfig) {
		t.Errorf("no changelog: got %v, want ErrInvalidConfig and ErrNotExist", err)
	}
}

// TestRunRefusesUnlistedVersion holds make dist to the changelog: a
// version without its section is refused before anything is built, and
// the checkout's own changelog covers the builds between releases.
func TestRunRefusesUnlistedVersion(t *testing.T) {
	out := t.TempDir()
	c := dist.Config{Root: "../..", Out: out, Version: "99.0.0", Commit: "abc", Time: time.Unix(1, 0)}
	if _, err := dist.Run(context.Background(), c); !errors.Is(err, dist.ErrInvalidConfig) || !strings.Contains(err.Error(), `"## [99.0.0]"`) {
		t.Fatalf("got %v, want the missing section named", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("got %d files in %s, want none written", len(entries), out)
	}
	if err := dist.CheckChangelog("../../CHANGELOG.md", "0.0.0-1-gabcdef1"); err != nil {
		t.Errorf("the checkout's CHANGELOG.md: %v", err)
	}
}
