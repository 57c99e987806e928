package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// issuerMetadataURLs are where the issuer's metadata may be, in the order
// tried: OpenID discovery appended to the issuer, then RFC 8414 with the
// issuer's path inserted after the well-known prefix, then (for an issuer
// with a path) OpenID discovery inserted the same way, which some
// providers serve.
func issuerMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/")
	at := func(p string) string {
		c := *u
		c.Path, c.RawPath, c.RawQuery, c.Fragment = p, "", "", ""
		return c.String()
	}
	urls := []string{
		at(path + "/.well-known/openid-configuration"),
		at("/.well-known/oauth-authorization-server" + path),
	}
	if path != "" {
		urls = append(urls, at("/.well-known/openid-configuration"+path))
	}
	return urls, nil
}

// fetchJWKSURL reads the issuer's metadata from the first place that has
// it and returns its jwks_uri. A document naming another issuer is
// refused outright (RFC 8414 section 3.3): it is not this issuer's.
func (v *Verifier) fetchJWKSURL(ctx context.Context) (string, error) {
	urls, err := issuerMetadataURLs(v.cfg.Auth.Issuer)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrDiscovery, err)
	}
	var errs []error
	for _, u := range urls {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err := v.getJSON(ctx, u, &meta)
		if errors.Is(err, errNotThere) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrDiscovery, err)
		}
		if meta.Issuer != v.cfg.Auth.Issuer {
			return "", fmt.Errorf("%w: %s names issuer %q, want exactly %q", ErrDiscovery, u, meta.Issuer, v.cfg.Auth.Issuer)
		}
		if err := AbsoluteURL(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("%w: %s: jwks_uri: %w", ErrDiscovery, u, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("%w: no metadata at %s: %w", ErrDiscovery, strings.Join(urls, " or "), errors.Join(errs...))
}

// errNotThere marks a metadata URL that answered, but not with metadata:
// the next one is tried.
var errNotThere = errors.New("no metadata here")

// getJSON decodes the JSON document at u into dst. A connection failure
// is returned as is (the issuer is down: trying elsewhere on it is
// pointless); a non-200 answer wraps errNotThere.
func (v *Verifier) getJSON(ctx context.Context, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxMetadataBytes))
		return fmt.Errorf("%w: %s answered %s", errNotThere, u, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(dst); err != nil {
		return fmt.Errorf("%w: decoding %s: %w", errNotThere, u, err)
	}
	return nil
}

// WellKnownPath is the RFC 9728 well-known prefix of protected resource
// metadata.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// metadataURL is where RFC 9728 puts the metadata of resource: the
// well-known prefix inserted between its host and its path.
func metadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", err
	}
	c := *u
	c.Path, c.RawPath, c.Fragment = WellKnownPath+strings.TrimSuffix(u.Path, "/"), "", ""
	return c.String(), nil
}

// MetadataPaths are the paths to serve [Verifier.MetadataHandler] on: the
// RFC 9728 one for the resource (well-known prefix plus the resource's
// path, as [Verifier.MetadataURL] says) and the bare prefix, which clients
// that ignore the resource path ask for.
func (v *Verifier) MetadataPaths() []string {
	u, _ := url.Parse(v.metadataURL)
	paths := []string{u.Path}
	if !slices.Contains(paths, WellKnownPath) {
		paths = append(paths, WellKnownPath)
	}
	return paths
}
