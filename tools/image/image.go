// Package image builds a container image of the fiskfleet services
// without a container daemon, with go-containerregistry, and writes it as
// an OCI image layout in a tar file (an oci-archive: `podman load -i`,
// `skopeo copy oci-archive:...`). The image has no base distribution:
// a layer with the CA certificates, /etc/passwd and /etc/group naming a
// non-root fiskfleet user, and the state directory; and a layer with the
// static binaries in /usr/bin. Every byte follows from its inputs and one
// timestamp, so two builds of one commit are identical.
package image

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"

	"github.com/fiskfleet/fiskfleet/tools/archive"
)

// UID and GID of the image's fiskfleet user: the conventional "nonroot"
// id of distroless images, so volume permissions set up for those fit.
const (
	UID = 65532
	GID = 65532
)

// Paths inside the image.
const (
	BinDir   = "usr/bin"
	StateDir = "var/lib/fiskfleet"
	ConfDir  = "etc/fiskfleet"
	CAFile   = "etc/ssl/certs/ca-certificates.crt"
)

// Config describes one image.
type Config struct {
	// Arch is the GOARCH of the binaries; the OS is always linux.
	Arch string
	// Binaries maps a command name (a2a-agent) to the binary on disk.
	// Each goes to /usr/bin, on PATH; the image has no entrypoint, so
	// the command given to the container picks the service.
	Binaries map[string]string
	// Examples are copied to /etc/fiskfleet/examples.
	Examples []archive.Entry
	// Version labels the image and names it in the layout's index.
	Version string
	// Revision is the git commit, labelled as the OCI revision.
	Revision string
	// Created is the commit time: the image's and every file's time.
	Created time.Time
}

// Build returns the image described by c.
func Build(c Config) (v1.Image, error) {
	base, err := baseLayer(c)
	if err != nil {
		return nil, err
	}
	app, err := appLayer(c)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: c.Created}, CreatedBy: "fiskdist: CA certificates, fiskfleet user, state directory", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: c.Created}, CreatedBy: "fiskdist: fiskfleet binaries and examples", Comment: "app"}},
	)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = c.Arch
	cf.Created = v1.Time{Time: c.Created}
	cf.Config = v1.Config{
		// No entrypoint: the command picks the service, as in
		// `podman run IMAGE mcp-gateway serve --config ...`.
		Cmd:        []string{"a2a-agent", "--help"},
		User:       fmt.Sprintf("%d:%d", UID, GID),
		WorkingDir: "/" + StateDir,
		Env: []string{
			"PATH=/" + BinDir,
			"HOME=/" + StateDir,
			// nats contexts are read from /etc/fiskfleet/nats/context,
			// the knowledge store is kept under the state directory.
			"XDG_CONFIG_HOME=/" + ConfDir,
			"XDG_CACHE_HOME=/" + StateDir,
			"SSL_CERT_FILE=/" + CAFile,
		},
		StopSignal: "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":    "fiskfleet",
			"org.opencontainers.image.version":  c.Version,
			"org.opencontainers.image.revision": c.Revision,
			"org.opencontainers.image.created":  c.Created.UTC().Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting image config: %w", err)
	}
	return img, nil
}

// Write builds the image described by c and writes it to w as an OCI
// image layout in a tar file, the image named by c.Version in the
// layout's index. scratch is an empty directory the layout is assembled
// in; the caller removes it.
func Write(w io.Writer, c Config, scratch string) error {
	img, err := Build(c)
	if err != nil {
		return err
	}
	p, err := layout.Write(scratch, empty.Index)
	if err != nil {
		return fmt.Errorf("starting image layout: %w", err)
	}
	err = p.AppendImage(img,
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: c.Arch}),
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": c.Version}))
	if err != nil {
		return fmt.Errorf("writing image layout: %w", err)
	}
	entries, err := archive.Dir(scratch, ".")
	if err != nil {
		return err
	}
	// The layout's own root needs no entry; its members do.
	entries = slices.DeleteFunc(entries, func(e archive.Entry) bool { return e.Name == "." })
	return archive.WriteTar(w, entries, c.Created)
}

func baseLayer(c Config) (v1.Layer, error) {
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nfiskfleet:x:%d:%d:fiskfleet:/%s:/sbin/nologin\n", UID, GID, StateDir)
	group := fmt.Sprintf("root:x:0:\nfiskfleet:x:%d:\n", GID)
	entries := []archive.Entry{
		{Name: "etc", Dir: true},
		{Name: "etc/passwd", Body: []byte(passwd)},
		{Name: "etc/group", Body: []byte(group)},
		{Name: "etc/ssl", Dir: true},
		{Name: "etc/ssl/certs", Dir: true},
		{Name: CAFile, Body: ca},
		{Name: "tmp", Dir: true, Mode: 0o1777},
		{Name: "var", Dir: true},
		{Name: "var/lib", Dir: true},
		{Name: StateDir, Dir: true, Mode: 0o700, UID: UID, GID: GID},
	}
	return layer(entries, c.Created)
}

func appLayer(c Config) (v1.Layer, error) {
	entries := []archive.Entry{
		{Name: "usr", Dir: true},
		{Name: BinDir, Dir: true},
		{Name: ConfDir, Dir: true},
		{Name: ConfDir + "/examples", Dir: true},
	}
	for name, src := range c.Binaries {
		entries = append(entries, archive.Entry{Name: path.Join(BinDir, name), Source: src, Mode: 0o755})
	}
	for _, e := range c.Examples {
		e.Name = path.Join(ConfDir, "examples", e.Name)
		entries = append(entries, e)
	}
	return layer(entries, c.Created)
}

func layer(entries []archive.Entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := archive.WriteTar(&buf, entries, mtime); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}
	return l, nil
}

// caBundle is the Mozilla root set that golang.org/x/crypto's
// x509roots/fallback module carries, as PEM. It comes from a pinned Go
// module, not from the build machine's /etc/ssl, so every machine builds
// the same image. Roots that carry an extra constraint (a distrust date,
// say) are left out: a PEM file cannot express the constraint.
func caBundle() ([]byte, error) {
	var out bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if _, err := x509.ParseCertificate(r.Certificate); err != nil {
			return nil, fmt.Errorf("parsing a CA root of the fallback bundle: %w", err)
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, fmt.Errorf("encoding CA roots: %w", err)
		}
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("the fallback bundle has no CA roots")
	}
	return out.Bytes(), nil
}
