package natsconn

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/net/proxy"
)

// This file reads nats contexts itself, in the format the nats CLI saves
// them (`nats context save`): one JSON file per context under
// $XDG_CONFIG_HOME/nats/context (default ~/.config/nats/context), the
// selected context's name in nats/context.txt. The nats CLI's own reader
// comes with the JetStream management library, which links a good part
// of the NATS server and an expression language into every binary: three
// megabytes of resident memory per process for reading one small file.
//
// Fields that name secrets take what the CLI takes: a literal, or a
// reference env://VAR, file://PATH or data:;base64,... (what `nats
// context save --embed` writes). References that need another program
// to resolve (op:// for 1Password, nsc:// and the nsc field for the nsc
// tool) and the Windows certificate store are refused with an error that
// names the field, never ignored: a context that cannot be honoured in
// full must not connect with less than it asks for.

// maxContextBytes bounds a context file; real ones are a few hundred
// bytes, embedded credentials a few kilobytes.
const maxContextBytes = 1 << 20

// natsContext is a context file's fields this package honours or must
// refuse. Unknown fields (description, color_scheme, the JetStream
// prefixes) are ignored, as the nats CLI ignores what it does not use.
type natsContext struct {
	name string // the context's name, or its file's path

	URL         string `json:"url"`
	Token       string `json:"token"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	UserJWT     string `json:"user_jwt"`
	UserSeed    string `json:"user_seed"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	TLSFirst    bool   `json:"tls_first"`
	InboxPrefix string `json:"inbox_prefix"`
	SocksProxy  string `json:"socks_proxy"`

	NSC          string `json:"nsc"`
	WinCertStore string `json:"windows_cert_store"`
}

// load reads a context: the file ref names when it is a path to one, the
// named context otherwise, the CLI's selected context when ref is empty,
// and no context at all (the default local server, no credentials) when
// none is selected.
func load(ref string) (*natsContext, error) {
	if strings.ContainsRune(ref, filepath.Separator) || strings.HasSuffix(ref, ".json") {
		if _, err := os.Stat(ref); err == nil {
			return readContext(ref, ref)
		}
	}
	root, err := configRoot()
	if err != nil {
		return nil, err
	}
	name := ref
	if name == "" {
		b, err := os.ReadFile(filepath.Join(root, "nats", "context.txt"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reading the selected context: %w", err)
		}
		name = strings.TrimSpace(string(b))
		if name == "" {
			return &natsContext{}, nil
		}
	}
	if strings.Contains(name, "..") || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("invalid context name %q: it must not contain \"..\", \"/\" or \"\\\"", name)
	}
	return readContext(name, filepath.Join(root, "nats", "context", name+".json"))
}

// configRoot is where the nats CLI keeps its configuration.
func configRoot() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return x, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding nats contexts: %w (set XDG_CONFIG_HOME or HOME)", err)
	}
	return filepath.Join(home, ".config"), nil
}

func readContext(name, path string) (*natsContext, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no such context (no file %s)", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxContextBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxContextBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a nats context", path, maxContextBytes)
	}
	c := &natsContext{name: name}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: not a nats context: %w", path, err)
	}
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		*p = expandPath(*p)
	}
	return c, nil
}

// ServerURL is the context's server list, or the local default server
// when it names none.
func (c *natsContext) ServerURL() string {
	if c.URL == "" {
		return nats.DefaultURL
	}
	return c.URL
}

// NATSOptions turns the context's authentication, TLS and connection
// settings into nats.go options, followed by opts. The first set of user
// and password, creds, nkey and user JWT wins, in that order, as with
// the nats CLI; a token is sent besides.
func (c *natsContext) NATSOptions(opts ...nats.Option) ([]nats.Option, error) {
	if c.NSC != "" {
		return nil, fieldError("nsc", "nsc lookups need the nsc tool: save the context with the creds file nsc writes (nats context save --creds)")
	}
	if c.WinCertStore != "" {
		return nil, fieldError("windows_cert_store", "the Windows certificate store is not supported: use cert, key and ca files")
	}
	var out []nats.Option
	switch {
	case c.User != "":
		pw, err := secret("password", c.Password)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.UserInfo(c.User, pw))
	case c.Creds != "":
		o, err := credsOption(c.Creds)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	case c.NKey != "":
		o, err := nkeyOption(c.NKey)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	case c.UserJWT != "":
		jwt, err := secret("user_jwt", c.UserJWT)
		if err != nil {
			return nil, err
		}
		if c.UserSeed == "" {
			// A bearer JWT: the server checks no signature.
			out = append(out, nats.UserJWT(func() (string, error) { return jwt, nil }, func([]byte) ([]byte, error) { return nil, nil }))
			break
		}
		seed, err := secret("user_seed", c.UserSeed)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.UserJWTAndSeed(jwt, seed))
	}
	if c.Token != "" {
		tok, err := secret("token", c.Token)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.Token(tok))
	}
	if c.Cert != "" && c.Key != "" {
		cert, err := filePath("cert", c.Cert)
		if err != nil {
			return nil, err
		}
		key, err := filePath("key", c.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.ClientCert(cert, key))
	}
	if c.CA != "" {
		ca, err := filePath("ca", c.CA)
		if err != nil {
			return nil, err
		}
		out = append(out, nats.RootCAs(ca))
	}
	if c.SocksProxy != "" {
		u, err := url.Parse(c.SocksProxy)
		if err != nil {
			return nil, fieldError("socks_proxy", err.Error())
		}
		d, err := proxy.FromURL(u, proxy.Direct)
		if err != nil {
			return nil, fieldError("socks_proxy", err.Error())
		}
		out = append(out, nats.SetCustomDialer(socksDialer{d}))
	}
	if c.InboxPrefix != "" {
		out = append(out, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.TLSFirst {
		out = append(out, nats.TLSHandshakeFirst())
	}
	return append(out, opts...), nil
}

// socksDialer adapts a proxy dialer to nats.CustomDialer.
type socksDialer struct{ d proxy.Dialer }

func (s socksDialer) Dial(network, address string) (net.Conn, error) {
	return s.d.Dial(network, address)
}

func fieldError(field, why string) error {
	return fmt.Errorf("context field %q: %s", field, why)
}

// scheme is ref's reference scheme in lower case, or "" for a literal or
// a plain path. One-letter schemes are Windows drive letters, not
// references.
func scheme(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || len(u.Scheme) < 2 {
		return ""
	}
	return u.Scheme
}

// trimScheme cuts prefix off ref, ignoring case as URL schemes do.
func trimScheme(ref, prefix string) string {
	if len(ref) >= len(prefix) && strings.EqualFold(ref[:len(prefix)], prefix) {
		return ref[len(prefix):]
	}
	return ref
}

// expandPath expands environment variables and a leading ~ in a path
// field, as the nats CLI does.
func expandPath(p string) string {
	p = os.ExpandEnv(p)
	if strings.HasPrefix(p, "~") {
		if home, err := os.UserHomeDir(); err == nil {
			p = home + p[1:]
		}
	}
	return p
}

// resolve reads the material a env://, file:// or data: reference names;
// ok is false for anything else.
func resolve(field, ref string) (b []byte, ok bool, err error) {
	switch scheme(ref) {
	case "env":
		name := trimScheme(ref, "env://")
		v, set := os.LookupEnv(name)
		switch {
		case name == "":
			return nil, true, fieldError(field, "env:// names no variable")
		case !set:
			return nil, true, fieldError(field, fmt.Sprintf("environment variable %s is not set", name))
		case v == "":
			return nil, true, fieldError(field, fmt.Sprintf("environment variable %s is empty", name))
		}
		return []byte(v), true, nil
	case "file":
		b, err := os.ReadFile(expandPath(trimScheme(ref, "file://")))
		if err != nil {
			return nil, true, fieldError(field, err.Error())
		}
		return b, true, nil
	case "data":
		rest := trimScheme(ref, "data:")
		header, payload, found := strings.Cut(rest, ",")
		if !found {
			return nil, true, fieldError(field, "data: reference has no ','")
		}
		if !hasBase64(header) {
			return nil, true, fieldError(field, "data: reference is not ;base64")
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, true, fieldError(field, "data: reference: "+err.Error())
		}
		return b, true, nil
	case "op", "nsc":
		return nil, true, fieldError(field, fmt.Sprintf("%s:// references need another program to resolve and are not supported: use a file path, file://, env:// or data:", scheme(ref)))
	}
	return nil, false, nil
}

func hasBase64(header string) bool {
	for part := range strings.SplitSeq(header, ";") {
		if strings.TrimSpace(part) == "base64" {
			return true
		}
	}
	return false
}

// secret is a literal field's value, resolved when it is a reference.
func secret(field, v string) (string, error) {
	b, ok, err := resolve(field, v)
	if err != nil || !ok {
		return v, err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// filePath is a TLS field's file, which must be a path or file://.
func filePath(field, v string) (string, error) {
	switch s := scheme(v); s {
	case "":
		return v, nil
	case "file":
		return expandPath(trimScheme(v, "file://")), nil
	default:
		return "", fieldError(field, fmt.Sprintf("%s: references are not supported for TLS files: use a file path", s))
	}
}

// credsOption reads a creds file at connect time (so a rotated file is
// picked up on reconnect), or the JWT and seed a reference holds.
func credsOption(ref string) (nats.Option, error) {
	switch scheme(ref) {
	case "":
		return nats.UserCredentials(ref), nil
	case "file":
		return nats.UserCredentials(expandPath(trimScheme(ref, "file://"))), nil
	}
	b, _, err := resolve("creds", ref)
	if err != nil {
		return nil, err
	}
	jwt, err := nkeys.ParseDecoratedJWT(b)
	if err != nil {
		return nil, fieldError("creds", err.Error())
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fieldError("creds", err.Error())
	}
	return nats.UserJWT(func() (string, error) { return jwt, nil }, kp.Sign), nil
}

// nkeyOption signs with the seed a file or reference holds.
func nkeyOption(ref string) (nats.Option, error) {
	switch scheme(ref) {
	case "":
		return nkeyFromSeedFile(ref)
	case "file":
		return nkeyFromSeedFile(expandPath(trimScheme(ref, "file://")))
	}
	b, _, err := resolve("nkey", ref)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fieldError("nkey", err.Error())
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fieldError("nkey", err.Error())
	}
	return nats.Nkey(pub, kp.Sign), nil
}

func nkeyFromSeedFile(path string) (nats.Option, error) {
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fieldError("nkey", err.Error())
	}
	return o, nil
}
