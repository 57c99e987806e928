package linuxpkg_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/linuxpkg"
)

const yaml = `name: demo
arch: ${ARCH}
version: ${VERSION}
maintainer: nobody <nobody@example.invalid>
rpm:
  buildhost: fixed
contents:
  - src: ${BINDIR}/demo
    dst: /usr/bin/demo
    file_info: {mode: 0755}
`

func setup(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "demo"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "nfpm.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// TestWriteIsReproducible builds each format twice at one time, the
// second after touching the source, and wants identical bytes and the
// conventional names.
func TestWriteIsReproducible(t *testing.T) {
	dir, file := setup(t)
	c := linuxpkg.Config{File: file, Vars: map[string]string{"ARCH": "arm64", "VERSION": "1.2.3-rc1", "BINDIR": dir}, MTime: time.Unix(1764748800, 0)}
	wantNames := map[string]string{"deb": "demo_1.2.3~rc1_arm64.deb", "rpm": "demo-1.2.3~rc1-1.aarch64.rpm"}
	for _, format := range linuxpkg.Formats {
		t.Run(format, func(t *testing.T) {
			var a, b bytes.Buffer
			name, err := linuxpkg.Write(&a, format, c)
			if err != nil {
				t.Fatal(err)
			}
			if name != wantNames[format] {
				t.Errorf("got name %s, want %s", name, wantNames[format])
			}
			now := time.Now()
			if err := os.Chtimes(filepath.Join(dir, "demo"), now, now); err != nil {
				t.Fatal(err)
			}
			if _, err := linuxpkg.Write(&b, format, c); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("got two different %s packages (%d and %d bytes), want identical bytes", format, a.Len(), b.Len())
			}
		})
	}
}

func TestWriteRefusesUnknownVariables(t *testing.T) {
	dir, file := setup(t)
	_, err := linuxpkg.Write(&bytes.Buffer{}, "deb", linuxpkg.Config{File: file, Vars: map[string]string{"ARCH": "amd64", "BINDIR": dir}, MTime: time.Unix(1, 0)})
	if !errors.Is(err, linuxpkg.ErrUnknownVariable) {
		t.Errorf("got %v, want an error wrapping ErrUnknownVariable (VERSION is not set)", err)
	}
}
