// Package dist builds a fiskfleet release into one directory: per target
// a tar.gz of both services (with README, CHANGELOG, LICENSE, docs/ and
// the examples), per Linux architecture a .deb, an .rpm and an OCI image
// tarball, a CycloneDX SBOM beside each of those, and SHA256SUMS over all
// of them.
//
// Everything is reproducible: binaries are built with -trimpath, no build
// id and no VCS stamping, the version, commit and date come from the
// caller (the Makefile takes them from git), and every file time is the
// commit's. Two runs at one commit give byte-identical files.
package dist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/archive"
	"github.com/fiskfleet/fiskfleet/tools/image"
	"github.com/fiskfleet/fiskfleet/tools/linuxpkg"
	"github.com/fiskfleet/fiskfleet/tools/sbom"
)

// ModulePrefix is the module path prefix of the fiskfleet modules.
const ModulePrefix = "github.com/fiskfleet/fiskfleet"

// Target is one GOOS/GOARCH pair.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "/" + t.Arch }

// DefaultTargets are the release targets: Linux and macOS on amd64 and
// arm64. Linux targets also get packages and an image.
var DefaultTargets = []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// ParseTargets reads "linux/amd64,darwin/arm64".
func ParseTargets(s string) ([]Target, error) {
	var out []Target
	for _, p := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("%w: target %q is not OS/ARCH", ErrInvalidConfig, p)
		}
		out = append(out, Target{goos, goarch})
	}
	return out, nil
}

// Services are the commands released, by name and package.
var Services = []struct{ Name, Package string }{
	{"a2a-agent", "./services/a2a-agent"},
	{"mcp-gateway", "./services/mcp-gateway"},
}

// ErrInvalidConfig is wrapped by [Config.Validate]'s errors.
var ErrInvalidConfig = errors.New("invalid dist config")

// Config is one release build.
type Config struct {
	// Root is the checkout: the directory holding go.work.
	Root string
	// Out is the directory written to; it is created, and files of a
	// previous run with the same names are replaced.
	Out string
	// Version is the release version without a leading v (1.2.3).
	Version string
	// Commit is the full git commit.
	Commit string
	// Time is the commit time (SOURCE_DATE_EPOCH): the build date
	// stamped into the binaries and every file's time.
	Time time.Time
	// Targets defaults to [DefaultTargets].
	Targets []Target
	// Logger gets a line per file written; nil means slog.Default().
	Logger *slog.Logger
}

// Validate says what is missing.
func (c *Config) Validate() error {
	switch {
	case c.Root == "":
		return fmt.Errorf("%w: Root (the checkout) is empty", ErrInvalidConfig)
	case c.Out == "":
		return fmt.Errorf("%w: Out is empty", ErrInvalidConfig)
	case c.Version == "" || strings.HasPrefix(c.Version, "v"):
		return fmt.Errorf("%w: Version %q must be set, without a leading v", ErrInvalidConfig, c.Version)
	case c.Commit == "":
		return fmt.Errorf("%w: Commit is empty", ErrInvalidConfig)
	case c.Time.IsZero():
		return fmt.Errorf("%w: Time (SOURCE_DATE_EPOCH) is zero", ErrInvalidConfig)
	}
	return nil
}

// Run builds the release described by c and returns the names of the
// files written to c.Out, SHA256SUMS last.
func Run(ctx context.Context, c Config) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := CheckChangelog(filepath.Join(c.Root, "CHANGELOG.md"), c.Version); err != nil {
		return nil, err
	}
	if len(c.Targets) == 0 {
		c.Targets = DefaultTargets
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, fmt.Errorf("making %s: %w", c.Out, err)
	}
	work, err := os.MkdirTemp("", "fiskdist-")
	if err != nil {
		return nil, fmt.Errorf("making a work directory: %w", err)
	}
	defer os.RemoveAll(work)

	examples, err := c.tree("integration", "examples")
	if err != nil {
		return nil, err
	}
	docs, err := c.tree("docs")
	if err != nil {
		return nil, err
	}

	var files []string
	targetOf := map[string]Target{} // file name -> the target whose binaries it holds
	for _, t := range c.Targets {
		bindir := filepath.Join(work, t.OS+"_"+t.Arch)
		bins, err := c.buildTarget(ctx, t, bindir)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("fiskfleet_%s_%s_%s.tar.gz", c.Version, t.OS, t.Arch)
		if err := c.writeFile(name, func(w io.Writer) error { return c.writeArchive(w, name, bins, examples, docs) }); err != nil {
			return nil, err
		}
		files = append(files, name)
		targetOf[name] = t
		if t.OS != "linux" {
			continue
		}
		for _, format := range linuxpkg.Formats {
			var buf bytes.Buffer
			pkgName, err := linuxpkg.Write(&buf, format, linuxpkg.Config{
				File:  filepath.Join(c.Root, "packaging", "nfpm.yaml"),
				Vars:  map[string]string{"VERSION": c.Version, "ARCH": t.Arch, "BINDIR": bindir, "SRCDIR": c.Root},
				MTime: c.Time,
			})
			if err != nil {
				return nil, err
			}
			if err := c.writeFile(pkgName, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
				return nil, err
			}
			files = append(files, pkgName)
			targetOf[pkgName] = t
		}
		imgName := fmt.Sprintf("fiskfleet_%s_%s_%s.oci.tar", c.Version, t.OS, t.Arch)
		scratch := filepath.Join(work, "oci_"+t.Arch)
		err = c.writeFile(imgName, func(w io.Writer) error {
			return image.Write(w, image.Config{
				Arch: t.Arch, Binaries: bins, Examples: examples,
				Version: c.Version, Revision: c.Commit, Created: c.Time,
			}, scratch)
		})
		if err != nil {
			return nil, err
		}
		files = append(files, imgName)
		targetOf[imgName] = t
	}
	// One SBOM per archive, each from the binaries of its target.
	var sboms []string
	for _, f := range files {
		t := targetOf[f]
		var paths []string
		for _, s := range Services {
			paths = append(paths, filepath.Join(work, t.OS+"_"+t.Arch, s.Name))
		}
		doc, err := sbom.FromBinaries(sbom.Product{Name: "fiskfleet", Version: c.Version, ModulePrefix: ModulePrefix, Archive: f, Time: c.Time}, paths...)
		if err != nil {
			return nil, err
		}
		b, err := doc.JSON()
		if err != nil {
			return nil, err
		}
		name := f + ".cdx.json"
		if err := c.writeFile(name, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
			return nil, err
		}
		sboms = append(sboms, name)
	}
	files = append(files, sboms...)
	slices.Sort(files)
	if err := c.writeFile("SHA256SUMS", func(w io.Writer) error { return c.writeSums(w, files) }); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

// buildTarget builds every service for t into dir and returns their paths
// by name.
func (c Config) buildTarget(ctx context.Context, t Target, dir string) (map[string]string, error) {
	ldflags := strings.Join([]string{
		"-s", "-w", "-buildid=",
		"-X", "main.version=" + c.Version,
		"-X", "main.commit=" + c.Commit,
		"-X", "main.date=" + c.Time.UTC().Format(time.RFC3339),
	}, " ")
	out := map[string]string{}
	for _, s := range Services {
		bin := filepath.Join(dir, s.Name)
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, s.Package)
		cmd.Dir = c.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s for %s: %w\n%s", s.Name, t, err, b)
		}
		c.Logger.Info("built", "binary", s.Name, "target", t.String(), "took", time.Since(start).Round(time.Millisecond))
		out[s.Name] = bin
	}
	return out, nil
}

// tree lists the files under a directory of the checkout, named
// relative to it.
func (c Config) tree(dir ...string) ([]archive.Entry, error) {
	entries, err := archive.Dir(filepath.Join(append([]string{c.Root}, dir...)...), ".")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(entries, func(e archive.Entry) bool { return e.Name == "." }), nil
}

func (c Config) writeArchive(w io.Writer, name string, bins map[string]string, examples, docs []archive.Entry) error {
	prefix := strings.TrimSuffix(name, ".tar.gz")
	entries := []archive.Entry{{Name: prefix, Dir: true}}
	for _, s := range Services {
		entries = append(entries, archive.Entry{Name: prefix + "/" + s.Name, Source: bins[s.Name], Mode: 0o755})
	}
	entries = append(entries, archive.Entry{Name: prefix + "/README.md", Source: filepath.Join(c.Root, "README.md")},
		archive.Entry{Name: prefix + "/CHANGELOG.md", Source: filepath.Join(c.Root, "CHANGELOG.md")})
	if lic := filepath.Join(c.Root, "LICENSE"); fileExists(lic) {
		entries = append(entries, archive.Entry{Name: prefix + "/LICENSE", Source: lic})
	} else {
		c.Logger.Warn("no LICENSE in the checkout: the archive has none", "archive", name)
	}
	// In a fixed order: two builds of one commit are byte for byte equal.
	for _, tree := range []struct {
		dir   string
		files []archive.Entry
	}{{"examples", examples}, {"docs", docs}} {
		entries = append(entries, archive.Entry{Name: prefix + "/" + tree.dir, Dir: true})
		for _, e := range tree.files {
			e.Name = prefix + "/" + tree.dir + "/" + e.Name
			entries = append(entries, e)
		}
	}
	return archive.WriteTarGz(w, entries, c.Time)
}

func (c Config) writeSums(w io.Writer, files []string) error {
	for _, f := range files {
		h := sha256.New()
		fh, err := os.Open(filepath.Join(c.Out, f))
		if err != nil {
			return fmt.Errorf("hashing %s: %w", f, err)
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("hashing %s: %w", f, err)
		}
		// The format sha256sum -c reads: two spaces, then the name.
		if _, err := fmt.Fprintf(w, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), f); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes name in c.Out through a temporary file renamed into
// place, so an interrupted run never leaves a truncated file under a
// final name.
func (c Config) writeFile(name string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(c.Out, "."+name+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.Out, name)); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	st, _ := os.Stat(filepath.Join(c.Out, name))
	c.Logger.Info("wrote", "file", name, "bytes", st.Size())
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
