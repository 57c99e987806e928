// Package sbom writes a CycloneDX 1.5 JSON bill of materials for a release
// archive from the module graph linked into its binaries: the build info
// the go command embeds in each binary (what `go version -m` prints) lists
// exactly the modules, at exactly the versions and sums, that were
// compiled in for that target. It is read from the binaries rather than
// from `go list -m all`, which also names modules only tests or other
// platforms use.
//
// The document has no random serial number and its timestamp is the
// commit's, so the SBOM of a reproducible archive is reproducible too.
package sbom

import (
	"cmp"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrNoBuildInfo is wrapped when a file has no Go build info: it is not a
// Go binary, or was built without module support.
var ErrNoBuildInfo = errors.New("no Go build info")

// Product names what the SBOM describes.
type Product struct {
	// Name and Version name the released product (fiskfleet, 1.2.3).
	Name, Version string
	// ModulePrefix marks the product's own modules, whose build info says
	// "(devel)": they are given Version instead.
	ModulePrefix string
	// Archive is the file name of the archive the SBOM describes.
	Archive string
	// Time is the commit time, used as the document's timestamp.
	Time time.Time
}

// Document is the subset of CycloneDX 1.5 this package writes.
type Document struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	Version      int          `json:"version"`
	Metadata     Metadata     `json:"metadata"`
	Components   []Component  `json:"components"`
	Dependencies []Dependency `json:"dependencies"`
}

// Metadata says when, by what and about what the document was written.
type Metadata struct {
	Timestamp  string     `json:"timestamp"`
	Tools      Tools      `json:"tools"`
	Component  Component  `json:"component"`
	Properties []Property `json:"properties,omitempty"`
}

// Tools lists the program that wrote the document.
type Tools struct {
	Components []Component `json:"components"`
}

// Component is an application (a binary, the product) or a library (a Go
// module).
type Component struct {
	Type       string     `json:"type"`
	BOMRef     string     `json:"bom-ref,omitempty"`
	Name       string     `json:"name"`
	Version    string     `json:"version,omitempty"`
	PURL       string     `json:"purl,omitempty"`
	Properties []Property `json:"properties,omitempty"`
}

// Property is a name/value pair; names in the go: namespace carry what
// CycloneDX has no field for (the module sum, the toolchain).
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Dependency says which components ref uses.
type Dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// FromBinaries builds the SBOM of an archive holding the Go binaries at
// paths: the product depends on each binary, each binary on the modules
// its build info lists. Modules shared by several binaries appear once.
func FromBinaries(p Product, paths ...string) (*Document, error) {
	root := purl(p.ModulePrefix, p.Version)
	doc := &Document{
		BOMFormat:   "CycloneDX",
		SpecVersion: "1.5",
		Version:     1,
		Metadata: Metadata{
			Timestamp:  p.Time.UTC().Format(time.RFC3339),
			Tools:      Tools{Components: []Component{{Type: "application", Name: "fiskdist"}}},
			Component:  Component{Type: "application", BOMRef: root, Name: p.Name, Version: p.Version, PURL: root},
			Properties: []Property{{Name: "fiskfleet:archive", Value: p.Archive}},
		},
	}
	modules := map[string]Component{}
	rootDep := Dependency{Ref: root, DependsOn: []string{}}
	var deps []Dependency
	for _, path := range paths {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrNoBuildInfo, path, err)
		}
		version := p.versionOf(info.Main.Path, info.Main.Version)
		ref := purl(info.Main.Path, version)
		bin := Component{
			Type: "application", BOMRef: ref, Name: filepath.Base(path), Version: version, PURL: ref,
			Properties: []Property{{Name: "go:toolchain", Value: info.GoVersion}, {Name: "go:package", Value: info.Path}},
		}
		for _, s := range info.Settings {
			if s.Key == "GOOS" || s.Key == "GOARCH" || s.Key == "CGO_ENABLED" || s.Key == "-trimpath" {
				bin.Properties = append(bin.Properties, Property{Name: "go:build:" + s.Key, Value: s.Value})
			}
		}
		doc.Components = append(doc.Components, bin)
		rootDep.DependsOn = append(rootDep.DependsOn, ref)
		binDep := Dependency{Ref: ref, DependsOn: []string{}}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			v := p.versionOf(m.Path, m.Version)
			c := Component{Type: "library", BOMRef: purl(m.Path, v), Name: m.Path, Version: v, PURL: purl(m.Path, v)}
			if m.Sum != "" {
				c.Properties = []Property{{Name: "go:module:sum", Value: m.Sum}}
			}
			modules[c.BOMRef] = c
			binDep.DependsOn = append(binDep.DependsOn, c.BOMRef)
		}
		slices.Sort(binDep.DependsOn)
		deps = append(deps, binDep)
	}
	libs := make([]Component, 0, len(modules))
	for _, c := range modules {
		libs = append(libs, c)
	}
	slices.SortFunc(libs, func(a, b Component) int { return cmp.Compare(a.BOMRef, b.BOMRef) })
	doc.Components = append(doc.Components, libs...)
	doc.Dependencies = append([]Dependency{rootDep}, deps...)
	return doc, nil
}

// JSON is the document as indented JSON with a trailing newline.
func (d *Document) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding SBOM: %w", err)
	}
	return append(b, '\n'), nil
}

func (p Product) versionOf(path, version string) string {
	if p.ModulePrefix != "" && (path == p.ModulePrefix || strings.HasPrefix(path, p.ModulePrefix+"/")) && (version == "(devel)" || version == "v0.0.0" || version == "") {
		return p.Version
	}
	return version
}

// purl is the package URL of a Go module version (purl-spec, type golang).
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}
