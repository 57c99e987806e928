package natsconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// saveContext runs the real nats CLI's `nats context save` into the
// nats configuration under home (XDG_CONFIG_HOME), so the tests read
// exactly what operators' contexts hold.
func saveContext(t *testing.T, home, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(fisktest.NATSCLI(t), append([]string{"context", "save", name}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+home)
	for _, v := range []string{"NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS", "NATS_NKEY", "NATS_CONTEXT"} {
		cmd.Env = append(cmd.Env, v+"=")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats context save %s: %v\n%s", name, err, out)
	}
}

// connect connects with context ref under home and checks the server
// answers a round trip.
func connect(t *testing.T, home, ref string) error {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", home)
	nc, err := natsconn.Connect(natsconn.Options{Context: ref, Name: "natsconn test"})
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.Flush()
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestContextsSavedByTheNATSCLI connects with contexts the nats CLI
// saved, one per kind of credentials, each against a server that demands
// exactly that kind, and fails the same contexts against a server that
// demands something else.
func TestContextsSavedByTheNATSCLI(t *testing.T) {
	dir := t.TempDir()

	userKey, _ := nkeys.CreateUser()
	userPub, _ := userKey.PublicKey()
	userSeed, _ := userKey.Seed()
	seedFile := writeFile(t, filepath.Join(dir, "user.nk"), string(userSeed))

	passwords := natstest.StartFromConfig(t, `authorization { users = [ { user: "agent", password: "s3cret" } ] }`)
	tokens := natstest.StartFromConfig(t, `authorization { token: "t0ken" }`)
	nkeyed := natstest.StartFromConfig(t, fmt.Sprintf(`authorization { users = [ { nkey: %q } ] }`, userPub))
	credsFile, operator := operatorServer(t, dir)
	tlsOpts, tlsFiles := tlsServer(t, dir)
	tlsFirst := natstest.StartWithOptions(t, tlsOpts)

	tests := []struct {
		name string
		url  string
		args []string
	}{
		{"user and password", passwords.URL(), []string{"--user", "agent", "--password", "s3cret"}},
		{"token as the user", tokens.URL(), []string{"--user", "t0ken"}},
		{"nkey file", nkeyed.URL(), []string{"--nkey", seedFile}},
		{"nkey embedded", nkeyed.URL(), []string{"--nkey", seedFile, "--embed"}},
		{"creds file", operator.URL(), []string{"--creds", credsFile}},
		{"creds file url", operator.URL(), []string{"--creds", "file://" + credsFile}},
		{"creds embedded", operator.URL(), []string{"--creds", credsFile, "--embed"}},
		{"tls client certificate, handshake first", tlsFirst.URL(), []string{"--tlscert", tlsFiles.cert, "--tlskey", tlsFiles.key, "--tlsca", tlsFiles.ca, "--tlsfirst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			saveContext(t, home, "fleet", append([]string{"--server", tt.url}, tt.args...)...)
			if err := connect(t, home, "fleet"); err != nil {
				t.Fatalf("connecting with the context the nats CLI saved: %v", err)
			}
			if err := connect(t, home, filepath.Join(home, "nats", "context", "fleet.json")); err != nil {
				t.Fatalf("connecting with the context's file: %v", err)
			}
			// The same credentials against a server that wants other ones:
			// the context was honoured, not ignored.
			other := passwords.URL()
			if tt.url == passwords.URL() {
				other = tokens.URL()
			}
			saveContext(t, home, "elsewhere", append([]string{"--server", other}, tt.args...)...)
			if err := connect(t, home, "elsewhere"); err == nil {
				t.Fatalf("connected to %s with credentials it does not accept", other)
			}
		})
	}

	t.Run("selected context", func(t *testing.T) {
		home := t.TempDir()
		saveContext(t, home, "fleet", "--server", passwords.URL(), "--user", "agent", "--password", "s3cret", "--select")
		if err := connect(t, home, ""); err != nil {
			t.Fatalf("connecting with the selected context: %v", err)
		}
	})
}

// TestContextReferences resolves secrets a context names rather than
// holds: env://, file:// and data: references, as the nats CLI does.
func TestContextReferences(t *testing.T) {
	srv := natstest.StartFromConfig(t, `authorization { users = [ { user: "agent", password: "s3cret" } ] }`)
	tokens := natstest.StartFromConfig(t, `authorization { token: "t0ken" }`)
	dir := t.TempDir()
	t.Setenv("FLEET_PASSWORD", "s3cret")
	pwFile := writeFile(t, filepath.Join(dir, "pw"), "s3cret\n")

	tests := []struct {
		name   string
		url    string
		fields map[string]string
	}{
		{"env password", srv.URL(), map[string]string{"user": "agent", "password": "env://FLEET_PASSWORD"}},
		{"file password", srv.URL(), map[string]string{"user": "agent", "password": "file://" + pwFile}},
		{"data token", tokens.URL(), map[string]string{"token": "data:;base64," + base64.StdEncoding.EncodeToString([]byte("t0ken"))}},
		{"literal password", srv.URL(), map[string]string{"user": "agent", "password": "s3cret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := natstest.WriteURLContext(t, t.TempDir(), "fleet", tt.url, tt.fields)
			if err := connect(t, home, "fleet"); err != nil {
				t.Fatal(err)
			}
		})
	}

}

// TestContextRefusals are contexts that cannot be honoured: each fails
// before connecting, naming nats_context and the reason.
func TestContextRefusals(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()

	tests := []struct {
		name   string
		fields map[string]string
		raw    string // written as is instead of fields
		want   string
	}{
		{name: "nsc lookup without nsc", fields: map[string]string{"nsc": "nsc://O/A/U"}, want: "nsc"},
		{name: "1Password creds without op", fields: map[string]string{"creds": "op://vault/item/creds"}, want: "creds: op"},
		{name: "nsc creds without nsc", fields: map[string]string{"creds": "nsc://O/A/U"}, want: "creds:"},
		{name: "Windows certificate store", fields: map[string]string{"windows_cert_store": "windowscurrentuser"}, want: "cert_store"},
		{name: "TLS CA from the environment", fields: map[string]string{"ca": "env://FLEET_CA"}, want: "ca:"},
		{name: "unset environment variable", fields: map[string]string{"user": "agent", "password": "env://FLEET_NOT_SET_ANYWHERE"}, want: "FLEET_NOT_SET_ANYWHERE"},
		{name: "data reference not base64", fields: map[string]string{"token": "data:,t0ken"}, want: "token:"},
		{name: "data creds not a creds file", fields: map[string]string{"creds": "data:;base64," + base64.StdEncoding.EncodeToString([]byte("hello"))}, want: "creds:"},
		{name: "missing nkey seed file", fields: map[string]string{"nkey": filepath.Join(dir, "absent.nk")}, want: "absent.nk"},
		{name: "not JSON", raw: "url = nats://x", want: "invalid character"},
		{name: "JSON of the wrong shape", raw: `{"url": 42}`, want: "url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.raw != "" {
				ctxDir := filepath.Join(home, "nats", "context")
				if err := os.MkdirAll(ctxDir, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(ctxDir, "fleet.json"), tt.raw)
			} else {
				natstest.WriteURLContext(t, home, "fleet", srv.URL(), tt.fields)
			}
			err := connect(t, home, "fleet")
			if !errors.Is(err, natsconn.ErrContext) {
				t.Fatalf("got %v, want ErrContext", err)
			}
			if !strings.Contains(err.Error(), "nats_context") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to name nats_context and %s", err, tt.want)
			}
		})
	}

	for _, name := range []string{"../fleet", "a/b", `a\b`, "missing"} {
		t.Run("name "+name, func(t *testing.T) {
			home := natstest.WriteURLContext(t, t.TempDir(), "fleet", srv.URL(), nil)
			err := connect(t, home, name)
			if !errors.Is(err, natsconn.ErrContext) {
				t.Fatalf("got %v, want ErrContext", err)
			}
		})
	}
}

// TestContextSOCKSProxy connects through the SOCKS5 proxy a context names.
func TestContextSOCKSProxy(t *testing.T) {
	srv := natstest.Start(t)
	proxyAddr, dialled := socks5(t)
	home := natstest.WriteURLContext(t, t.TempDir(), "fleet", srv.URL(), map[string]string{"socks_proxy": "socks5://" + proxyAddr})
	if err := connect(t, home, "fleet"); err != nil {
		t.Fatal(err)
	}
	if n := dialled.Load(); n != 1 {
		t.Errorf("the proxy carried %d connections, want 1", n)
	}

	// A proxy of a kind nobody speaks fails the connection, naming the
	// context, rather than connecting around it.
	home = natstest.WriteURLContext(t, t.TempDir(), "fleet", srv.URL(), map[string]string{"socks_proxy": "gopher://" + proxyAddr})
	err := connect(t, home, "fleet")
	if err == nil || !strings.Contains(err.Error(), `nats context "fleet"`) || !strings.Contains(err.Error(), "gopher") {
		t.Errorf("got %v, want a connection error naming the context and the proxy's scheme", err)
	}
	if n := dialled.Load(); n != 1 {
		t.Errorf("the proxy carried %d connections after the refused one, want still 1", n)
	}
}

// operatorServer starts a server in operator mode (JWT authentication)
// and writes a user's creds file for it, as nsc would.
func operatorServer(t *testing.T, dir string) (string, *natstest.Server) {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartWithOptions(t, server.Options{TrustedOperators: []*jwt.OperatorClaims{operator}, AccountResolver: resolver})
	return writeFile(t, filepath.Join(dir, "user.creds"), string(creds)), srv
}

type tlsFiles struct{ ca, cert, key string }

// tlsServer writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and returns options for a server that verifies clients
// and expects the TLS handshake first.
func tlsServer(t *testing.T, dir string) (server.Options, tlsFiles) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fleet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		cert := writeFile(t, filepath.Join(dir, name+".pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
		keyFile := writeFile(t, filepath.Join(dir, name+"-key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
		return cert, keyFile
	}
	caFile := writeFile(t, filepath.Join(dir, "ca.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	srvCert, srvKey := issue("server", 2, x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := issue("client", 3, x509.ExtKeyUsageClientAuth)
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: srvCert, KeyFile: srvKey, CaFile: caFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	return server.Options{TLSConfig: tc, TLSVerify: true, TLSHandshakeFirst: true, TLSTimeout: 2}, tlsFiles{ca: caFile, cert: cliCert, key: cliKey}
}

// socks5 serves the SOCKS5 CONNECT command without authentication on
// loopback, counting the connections it carries.
func socks5(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				target, err := socksHandshake(c)
				if err != nil {
					return
				}
				up, err := net.Dial("tcp", target)
				if err != nil {
					c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
					return
				}
				defer up.Close()
				n.Add(1)
				c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String(), &n
}

// socksHandshake reads the greeting and a CONNECT request (RFC 1928) and
// returns the address asked for.
func socksHandshake(c net.Conn) (string, error) {
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil || head[0] != 5 {
		return "", fmt.Errorf("not SOCKS5")
	}
	if _, err := io.ReadFull(c, make([]byte, head[1])); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return "", err
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[1] != 1 {
		return "", fmt.Errorf("not CONNECT")
	}
	var host string
	switch req[3] {
	case 1:
		var ip [4]byte
		if _, err := io.ReadFull(c, ip[:]); err != nil {
			return "", err
		}
		host = net.IP(ip[:]).String()
	case 3:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return "", err
		}
		name := make([]byte, l[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return "", err
		}
		host = string(name)
	default:
		return "", fmt.Errorf("address type %d", req[3])
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return "", err
	}
	return net.JoinHostPort(host, fmt.Sprint(binary.BigEndian.Uint16(port[:]))), nil
}
