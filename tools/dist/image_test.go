package dist_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fiskfleet/fiskfleet/tools/dist"
)

// TestReleaseImage reads each OCI image tarball as an OCI layout: one
// image for linux on its arch, named by the version; a non-root user, no
// entrypoint and every service on PATH; two layers holding the CA
// certificates, the user and the binaries. The binary for this machine is
// taken out of its layer and run; with podman on the machine, the image
// is loaded and run too.
func TestReleaseImage(t *testing.T) {
	r := releaseUnderTest(t)
	for _, arch := range []string{"amd64", "arm64"} {
		name := "fiskfleet_" + r.version + "_linux_" + arch + ".oci.tar"
		t.Run(arch, func(t *testing.T) {
			dir := t.TempDir()
			f, err := os.Open(r.path(name))
			if err != nil {
				t.Fatal(err)
			}
			extractTar(t, f, dir)
			f.Close()
			idx, err := layout.ImageIndexFromPath(dir)
			if err != nil {
				t.Fatalf("reading %s as an OCI layout: %v", name, err)
			}
			im, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(im.Manifests) != 1 {
				t.Fatalf("got %d manifests, want 1", len(im.Manifests))
			}
			desc := im.Manifests[0]
			if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != r.version {
				t.Errorf("got ref name %q, want %q", got, r.version)
			}
			if desc.MediaType != types.OCIManifestSchema1 || desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != arch {
				t.Errorf("got %s for %v, want an OCI manifest for linux/%s", desc.MediaType, desc.Platform, arch)
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if c.User == "" || c.User == "0" || strings.HasPrefix(c.User, "0:") || c.User == "root" {
				t.Errorf("got user %q, want a non-root user", c.User)
			}
			if len(c.Entrypoint) != 0 || len(c.Cmd) == 0 || c.Cmd[0] != "a2a-agent" {
				t.Errorf("got entrypoint %q cmd %q, want no entrypoint (the command picks the service) and a2a-agent by default", c.Entrypoint, c.Cmd)
			}
			if !slices.Contains(c.Env, "PATH=/usr/bin") || !slices.Contains(c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
				t.Errorf("got env %q, want PATH=/usr/bin and SSL_CERT_FILE", c.Env)
			}
			if cf.OS != "linux" || cf.Architecture != arch || c.Labels["org.opencontainers.image.version"] != r.version {
				t.Errorf("got %s/%s version label %q, want linux/%s %s", cf.OS, cf.Architecture, c.Labels["org.opencontainers.image.version"], arch, r.version)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 2 {
				t.Errorf("got %d layers, want 2 (base, app)", len(layers))
			}
			root := t.TempDir()
			members := map[string]os.FileMode{}
			for _, l := range layers {
				if mt, _ := l.MediaType(); mt != types.OCILayer {
					t.Errorf("got layer media type %s, want %s", mt, types.OCILayer)
				}
				rc, err := l.Uncompressed()
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range extractTar(t, rc, root) {
					members[k] = v
				}
				rc.Close()
			}
			for _, want := range []string{"usr/bin/a2a-agent", "usr/bin/mcp-gateway", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", "etc/fiskfleet/examples/demo.yaml", "var/lib/fiskfleet/"} {
				if _, ok := members[want]; !ok {
					t.Errorf("got no %s in the layers, want it", want)
				}
			}
			passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
			uid, _, _ := strings.Cut(c.User, ":")
			if !strings.Contains(string(passwd), ":x:"+uid+":") {
				t.Errorf("got /etc/passwd %q, want the user %s in it", passwd, uid)
			}
			for _, svc := range dist.Services {
				bin := filepath.Join(root, "usr/bin", svc.Name)
				checkBuild(t, bin, dist.Target{OS: "linux", Arch: arch}, r.commit)
				if arch == runtime.GOARCH && runtime.GOOS == "linux" {
					checkVersionOutput(t, bin, svc.Name, r)
				}
			}
			if arch == runtime.GOARCH {
				runWithPodman(t, r, name, desc)
			}
		})
	}
}

// runWithPodman loads the image into podman and runs each service's
// --version in it, when podman is on the machine.
func runWithPodman(t *testing.T, r release, name string, desc v1.Descriptor) {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Log("podman is not installed: the image was checked from its manifest, config and layers, and its binary run outside a container")
		return
	}
	out, err := exec.Command(podman, "load", "-i", r.path(name)).CombinedOutput()
	if err != nil {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	ref := desc.Digest.String()
	if i := strings.LastIndex(string(out), "sha256:"); i >= 0 {
		ref = strings.TrimSpace(string(out)[i:])
	}
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", ref).Run() })
	for _, svc := range dist.Services {
		out, err := exec.Command(podman, "run", "--rm", "--network=none", ref, svc.Name, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), svc.Name+" "+r.version+"\n") {
			t.Errorf("podman run %s --version: got %q (%v), want %s %s first", svc.Name, out, err, svc.Name, r.version)
		}
	}
}
