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

// IssuerMetadata is what the gateway reads of an issuer's metadata
// document: the key set for the verifier, the endpoints for the approvals
// page's sign-in.
type IssuerMetadata struct {
	Issuer                string `json:"issuer"`
	JWKSURI               string `json:"jwks_uri"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
}

// DiscoverIssuer reads the metadata of issuer from the first place that
// has it (see issuerMetadataURLs) and returns it with the URL it came
// from. A document naming another issuer is refused outright (RFC 8414
// section 3.3): it is not this issuer's. Errors wrap [ErrDiscovery]; the
// caller checks the fields it needs.
func DiscoverIssuer(ctx context.Context, client *http.Client, issuer string) (IssuerMetadata, string, error) {
	urls, err := issuerMetadataURLs(issuer)
	if err != nil {
		return IssuerMetadata{}, "", fmt.Errorf("%w: %w", ErrDiscovery, err)
	}
	var errs []error
	for _, u := range urls {
		var meta IssuerMetadata
		err := getJSON(ctx, client, u, &meta)
		if errors.Is(err, errNotThere) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return IssuerMetadata{}, u, fmt.Errorf("%w: %w", ErrDiscovery, err)
		}
		if meta.Issuer != issuer {
			return IssuerMetadata{}, u, fmt.Errorf("%w: %s names issuer %q, want exactly %q", ErrDiscovery, u, meta.Issuer, issuer)
		}
		return meta, u, nil
	}
	return IssuerMetadata{}, "", fmt.Errorf("%w: no metadata at %s: %w", ErrDiscovery, strings.Join(urls, " or "), errors.Join(errs...))
}

// fetchJWKSURL discovers the issuer and returns its jwks_uri.
func (v *Verifier) fetchJWKSURL(ctx context.Context) (string, error) {
	meta, u, err := DiscoverIssuer(ctx, v.cfg.HTTPClient, v.cfg.Auth.Issuer)
	if err != nil {
		return "", err
	}
	if err := AbsoluteURL(meta.JWKSURI); err != nil {
		return "", fmt.Errorf("%w: %s: jwks_uri: %w", ErrDiscovery, u, err)
	}
	return meta.JWKSURI, nil
}

// errNotThere marks a metadata URL that answered, but not with metadata:
// the next one is tried.
var errNotThere = errors.New("no metadata here")

// getJSON decodes the JSON document at u into dst. A connection failure
// is returned as is (the issuer is down: trying elsewhere on it is
// pointless); a non-200 answer wraps errNotThere.
func getJSON(ctx context.Context, client *http.Client, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
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
