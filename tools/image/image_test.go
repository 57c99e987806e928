package image_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fiskfleet/fiskfleet/tools/archive"
	"github.com/fiskfleet/fiskfleet/tools/image"
)

func config(t *testing.T) image.Config {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "a2a-agent")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	return image.Config{
		Arch:     "arm64",
		Binaries: map[string]string{"a2a-agent": bin},
		Examples: []archive.Entry{{Name: "demo.yaml", Body: []byte("identity: demo\n")}},
		Version:  "1.2.3", Revision: "abc", Created: time.Unix(1764748800, 0),
	}
}

func TestBuild(t *testing.T) {
	img, err := image.Build(config(t))
	if err != nil {
		t.Fatal(err)
	}
	mt, _ := img.MediaType()
	if mt != types.OCIManifestSchema1 {
		t.Errorf("got media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Architecture != "arm64" || cf.OS != "linux" || !cf.Created.Time.Equal(time.Unix(1764748800, 0)) {
		t.Errorf("got user %q %s/%s created %v, want 65532:65532 linux/arm64 at the given time", cf.Config.User, cf.OS, cf.Architecture, cf.Created)
	}
	if len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) == 0 || cf.Config.Cmd[0] != "a2a-agent" {
		t.Errorf("got entrypoint %q cmd %q, want none and a2a-agent", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("got %d layers (%v), want 2", len(layers), err)
	}
	if len(cf.History) != 2 {
		t.Errorf("got %d history entries, want one per layer", len(cf.History))
	}
}

// TestWriteIsReproducible writes one image twice, after touching the
// binary, and wants identical bytes.
func TestWriteIsReproducible(t *testing.T) {
	c := config(t)
	var a, b bytes.Buffer
	if err := image.Write(&a, c, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.Chtimes(c.Binaries["a2a-agent"], now, now); err != nil {
		t.Fatal(err)
	}
	if err := image.Write(&b, c, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("got two different image tarballs (%d and %d bytes), want identical bytes", a.Len(), b.Len())
	}
}

// TestCABundle reads the CA file of the base layer back: PEM
// certificates that parse, and many of them.
func TestCABundle(t *testing.T) {
	img, err := image.Build(config(t))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := readTar(t, rc)
	pemData, ok := files[image.CAFile]
	if !ok {
		t.Fatalf("got no %s in the base layer", image.CAFile)
	}
	n := 0
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("certificate %d: %v", n, err)
		}
		n++
	}
	if n < 100 {
		t.Errorf("got %d CA certificates, want Mozilla's root set (over 100)", n)
	}
}
