package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/archive"
)

var epoch = time.Unix(1764748800, 0)

func TestWriteTarGzIsReproducible(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "bin")
	if err := os.WriteFile(src, []byte("binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	entries := []archive.Entry{
		{Name: "p/z.txt", Body: []byte("z")},
		{Name: "p", Dir: true},
		{Name: "p/bin", Source: src, Mode: 0o755},
	}
	var first, second bytes.Buffer
	if err := archive.WriteTarGz(&first, entries, epoch); err != nil {
		t.Fatal(err)
	}
	// A changed on-disk time and mode must not reach the archive.
	if err := os.Chtimes(src, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := archive.WriteTarGz(&second, entries, epoch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatalf("got two different archives (%d and %d bytes), want identical bytes", first.Len(), second.Len())
	}

	zr, err := gzip.NewReader(&first)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("got gzip header time %v name %q, want zero and empty", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	want := []struct {
		name string
		mode int64
		body string
	}{{"p/", 0o755, ""}, {"p/bin", 0o755, "binary"}, {"p/z.txt", 0o644, "z"}}
	for _, w := range want {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("reading entry %s: %v", w.name, err)
		}
		body, _ := io.ReadAll(tr)
		if hdr.Name != w.name || hdr.Mode != w.mode || string(body) != w.body || !hdr.ModTime.Equal(epoch) || hdr.Uid != 0 || hdr.Uname != "" {
			t.Errorf("got %s mode %o body %q time %v uid %d uname %q, want %s mode %o body %q time %v uid 0 no uname",
				hdr.Name, hdr.Mode, body, hdr.ModTime, hdr.Uid, hdr.Uname, w.name, w.mode, w.body, epoch)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("got %v after the last entry, want io.EOF", err)
	}
}

func TestWriteTarRefusesBadEntries(t *testing.T) {
	tests := []struct {
		name    string
		entries []archive.Entry
	}{
		{"absolute name", []archive.Entry{{Name: "/etc/passwd", Body: []byte{}}}},
		{"duplicate", []archive.Entry{{Name: "a", Body: []byte{}}, {Name: "a", Body: []byte{}}}},
		{"no content", []archive.Entry{{Name: "a"}}},
		{"two contents", []archive.Entry{{Name: "a", Body: []byte{}, Source: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := archive.WriteTar(io.Discard, tt.entries, epoch)
			if !errors.Is(err, archive.ErrInvalidEntry) {
				t.Errorf("got %v, want an error wrapping ErrInvalidEntry", err)
			}
		})
	}
}
