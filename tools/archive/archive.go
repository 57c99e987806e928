// Package archive writes tar and tar.gz streams whose bytes depend only on
// the entries given: names sorted, one fixed modification time, numeric
// owners without user names, and no fields read from the build machine.
// Release archives and image layers are built with it so that two builds
// of one commit give identical files (and identical checksums).
package archive

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Entry is one member of an archive. Exactly one of Body and Source gives
// a regular file's content; an entry with Dir set is a directory and has
// neither.
type Entry struct {
	// Name is the slash-separated path inside the archive, without a
	// leading slash.
	Name string
	// Mode holds the permission bits; zero means 0644 for files and 0755
	// for directories.
	Mode fs.FileMode
	// UID and GID own the entry; zero is root.
	UID, GID int
	// Dir marks a directory.
	Dir bool
	// Body is the content of a file given in memory.
	Body []byte
	// Source is the path of a file on disk whose content is copied; its
	// own mode and times are ignored, so the build machine's umask and
	// clock never reach the archive.
	Source string
}

// ErrInvalidEntry is wrapped by errors about an entry that cannot be
// written: an empty or absolute name, a duplicate, or a file with both or
// neither of Body and Source.
var ErrInvalidEntry = errors.New("invalid archive entry")

// WriteTar writes entries to w as a tar stream, sorted by name, every
// entry dated mtime. Parent directories are not added implicitly: list
// them when the consumer needs them (image layers do). w is not closed.
func WriteTar(w io.Writer, entries []Entry, mtime time.Time) error {
	sorted, err := sortEntries(entries)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, e := range sorted {
		if err := writeEntry(tw, e, mtime.UTC()); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteTarGz writes entries as [WriteTar] does, gzip-compressed at the best
// compression with an empty gzip header (no name, no time), so the stream
// is as reproducible as the tar inside it. w is not closed.
func WriteTarGz(w io.Writer, entries []Entry, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("starting gzip: %w", err)
	}
	if err := WriteTar(zw, entries, mtime); err != nil {
		return err
	}
	return zw.Close()
}

// Dir returns the entries for a directory tree on disk, placed under
// prefix in the archive (prefix included as a directory), files 0644 and
// directories 0755 whatever their modes on disk.
func Dir(src, prefix string) ([]Entry, error) {
	var out []Entry
	err := fs.WalkDir(os.DirFS(src), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := path.Join(prefix, p)
		switch {
		case d.IsDir():
			out = append(out, Entry{Name: name, Dir: true})
		case d.Type().IsRegular():
			out = append(out, Entry{Name: name, Source: src + "/" + p})
		default:
			return fmt.Errorf("%w: %s is neither a file nor a directory", ErrInvalidEntry, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", src, err)
	}
	return out, nil
}

func sortEntries(entries []Entry) ([]Entry, error) {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for i, e := range sorted {
		if e.Name == "" || strings.HasPrefix(e.Name, "/") {
			return nil, fmt.Errorf("%w: name %q must be relative", ErrInvalidEntry, e.Name)
		}
		if i > 0 && sorted[i-1].Name == e.Name {
			return nil, fmt.Errorf("%w: %s listed twice", ErrInvalidEntry, e.Name)
		}
		if !e.Dir && (e.Body != nil) == (e.Source != "") {
			return nil, fmt.Errorf("%w: %s needs exactly one of Body and Source", ErrInvalidEntry, e.Name)
		}
	}
	return sorted, nil
}

func writeEntry(tw *tar.Writer, e Entry, mtime time.Time) error {
	hdr := &tar.Header{
		Name:    e.Name,
		Mode:    int64(e.Mode.Perm()),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	if e.Dir {
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		if hdr.Mode == 0 {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing %s: %w", e.Name, err)
		}
		return nil
	}
	hdr.Typeflag = tar.TypeReg
	if hdr.Mode == 0 {
		hdr.Mode = 0o644
	}
	body := e.Body
	if e.Source != "" {
		b, err := os.ReadFile(e.Source)
		if err != nil {
			return fmt.Errorf("reading %s for %s: %w", e.Source, e.Name, err)
		}
		body = b
	}
	hdr.Size = int64(len(body))
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing %s: %w", e.Name, err)
	}
	if _, err := tw.Write(body); err != nil {
		return fmt.Errorf("writing %s: %w", e.Name, err)
	}
	return nil
}
