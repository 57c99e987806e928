package fiskapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/tool"
	"github.com/fiskfleet/fiskfleet/shared/tracing"
)

// defaultCredentialEnv are variables no command is given: the keys of the
// model providers and code hosts an agent host typically carries. A served
// command runs on a caller's behalf, and these grant far more than it needs.
// Application credentials (NATS_*, the nats context) are left alone, since
// the application needs them.
var defaultCredentialEnv = []string{
	"ANTHROPIC_API_KEY",
	"CLAUDE_API_KEY",
	"OPENAI_API_KEY",
	"GEMINI_API_KEY",
	"GOOGLE_API_KEY",
	"AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN",
	"GITHUB_TOKEN",
	"GH_TOKEN",
}

// DefaultCredentialEnv returns the environment variable names scrubbed from
// every command's environment whatever the configuration says; credential_env
// adds to them.
func DefaultCredentialEnv() []string { return slices.Clone(defaultCredentialEnv) }

// waitDelayMargin is how long Wait waits, past the kill grace, for the
// output pipe to close. The group SIGKILL normally closes it; the margin only
// matters for a descendant that left the group (setsid) and kept the pipe.
const waitDelayMargin = time.Second

// stderrSnippet caps the stderr kept from a failed introspection for the
// error message.
const stderrSnippet = 1 << 10

// runner runs commands for the [Command]s of one [App].
type runner struct {
	outputCap int
	killGrace time.Duration
	// scrub is the set of environment variable names removed from every
	// child's environment.
	scrub map[string]struct{}
}

func newRunner(opts Options) *runner {
	scrub := make(map[string]struct{}, len(defaultCredentialEnv)+len(opts.CredentialEnv))
	for _, n := range defaultCredentialEnv {
		scrub[n] = struct{}{}
	}
	for _, n := range opts.CredentialEnv {
		scrub[n] = struct{}{}
	}
	return &runner{outputCap: opts.OutputCap, killGrace: opts.KillGrace, scrub: scrub}
}

// run runs argv to completion in its own process group and returns its exit
// code and capped, interleaved output; Command is left for the caller. live,
// when not nil, is handed each piece of the kept output as it is read.
func (r *runner) run(ctx context.Context, argv []string, live io.Writer) (*tool.CommandResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	out := &capWriter{limit: r.outputCap, live: live}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// One writer for both streams: exec then shares a single pipe between
	// them, so the output keeps the order the command wrote it in, and at
	// most one goroutine calls Write.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = scrubbedEnv(r.scrub)
	g := inGroup(cmd, r.killGrace)
	// The caller's span, when it records, gets the stage events around
	// the process's own run (see tracing.EventStarting).
	span := trace.SpanFromContext(ctx)
	tracing.Event(span, tracing.EventStarting)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrStart, argv[0], err)
	}
	tracing.Event(span, tracing.EventStarted)
	awaitExit(cmd.Process)
	tracing.Event(span, tracing.EventExited)
	err := cmd.Wait()
	if g.interrupted() {
		g.settle(cmd.Process.Pid)
		return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay), errors.As(err, &exitErr):
		// ErrWaitDelay: the command exited but a descendant kept the
		// output pipe open past the delay; the command's own result stands.
	default:
		return nil, fmt.Errorf("reading output of %s: %w", argv[0], err)
	}
	return &tool.CommandResult{
		ExitCode:  exitCode(cmd.ProcessState),
		Output:    out.String(),
		Truncated: out.dropped > 0,
	}, nil
}

// exitCode is the process's exit status, or 128 plus the signal number when
// a signal ended it (the shell's convention, clearer to a reader than the
// -1 os/exec reports).
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// scrubbedEnv is this process's environment without the scrubbed names.
// It is computed per call because the environment may change.
func scrubbedEnv(scrub map[string]struct{}) []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		_, drop := scrub[name]
		return drop
	})
}

// introspect runs "appPath --fisk-introspect" and returns what it printed
// on stdout, bounded by timeout and maxBytes.
func introspect(ctx context.Context, appPath string, scrub map[string]struct{}, timeout time.Duration, maxBytes int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	stdout := &limitBuffer{limit: maxBytes, overflow: cancel}
	stderr := &capWriter{limit: stderrSnippet}
	cmd := exec.CommandContext(ctx, appPath, "--fisk-introspect")
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.Env = scrubbedEnv(scrub)
	// No grace: introspection has nothing to clean up, and a binary that
	// ignores the flag may be doing anything at all.
	g := inGroup(cmd, 0)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: running %s: %w", ErrIntrospect, appPath, err)
	}
	err := cmd.Wait()
	switch {
	case stdout.exceeded:
		return nil, fmt.Errorf("%w: %w: %s printed more than %d bytes for --fisk-introspect", ErrIntrospect, ErrTooLarge, appPath, maxBytes)
	case g.interrupted() && errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.settle(cmd.Process.Pid)
		return nil, fmt.Errorf("%w: %s did not answer --fisk-introspect within %s (a fisk application answers at once): %w", ErrIntrospect, appPath, timeout, ctx.Err())
	case g.interrupted():
		g.settle(cmd.Process.Pid)
		return nil, fmt.Errorf("%w: %s: %w", ErrIntrospect, appPath, ctx.Err())
	case err != nil:
		// The first line of stderr usually says it all ("unrecognized
		// option"); the rest is usage text.
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("%w: %s --fisk-introspect failed (it must be a fisk application): %w%s", ErrIntrospect, appPath, err, msg)
	}
	return stdout.buf, nil
}

// groupKill signals a command's whole process group when its context ends:
// SIGTERM, then SIGKILL after grace (at once when grace is 0). Signalling
// the group rather than the process reaches grandchildren too, which would
// otherwise outlive the call and could hold its output pipe open.
type groupKill struct {
	grace time.Duration
	mu    sync.Mutex // guards fired and timer
	fired bool
	timer *time.Timer
}

// inGroup puts cmd in a process group of its own and arranges for its
// context ending to kill that group.
func inGroup(cmd *exec.Cmd, grace time.Duration) *groupKill {
	g := &groupKill{grace: grace}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return g.kill(cmd.Process.Pid) }
	// Without a WaitDelay, Wait blocks for as long as any descendant holds
	// the pipe; with it, Wait gives up on the pipe after the grace and the
	// margin have passed.
	cmd.WaitDelay = grace + waitDelayMargin
	return g
}

func (g *groupKill) kill(pgid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fired = true
	if g.grace <= 0 {
		return signalGroup(pgid, syscall.SIGKILL)
	}
	err := signalGroup(pgid, syscall.SIGTERM)
	// The SIGKILL fires even when the command itself has exited by then: a
	// grandchild that ignores SIGTERM stays in the group until killed.
	g.timer = time.AfterFunc(g.grace, func() { _ = signalGroup(pgid, syscall.SIGKILL) })
	return err
}

func (g *groupKill) interrupted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fired
}

// settle cancels a pending SIGKILL once nothing is left in the group, so it
// cannot reach a later group that reuses the id.
func (g *groupKill) settle(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timer != nil && errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		g.timer.Stop()
	}
}

func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// capWriter keeps the first limit bytes written to it and counts the rest.
// It never fails a write, so a command producing too much output still runs
// to completion and reports its exit code. It is not safe for concurrent
// use; exec calls Write from one goroutine when stdout and stderr share it.
type capWriter struct {
	limit   int
	buf     []byte
	dropped int64
	// live, when set, is handed every piece kept, as it is kept; its
	// errors are ignored, so a reader going away never stops the command.
	live io.Writer
}

func (w *capWriter) Write(p []byte) (int, error) {
	n := min(w.limit-len(w.buf), len(p))
	if n > 0 {
		w.buf = append(w.buf, p[:n]...)
		w.pass(p[:n])
	}
	w.dropped += int64(len(p) - max(n, 0))
	return len(p), nil
}

// pass hands kept bytes to the live writer, if any.
func (w *capWriter) pass(p []byte) {
	if w.live != nil && len(p) > 0 {
		_, _ = w.live.Write(p)
	}
}

// discardSize is the scratch buffer ReadFrom counts dropped output through.
const discardSize = 8 << 10

// ReadFrom reads r to EOF straight into the kept buffer, then counts the
// rest through a small scratch buffer. exec copies the pipe with io.Copy,
// which would otherwise allocate a 32 KiB buffer per call, most of the
// memory a small call costs.
func (w *capWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	var discard []byte
	for {
		var p []byte
		keeping := len(w.buf) < w.limit
		if keeping {
			if len(w.buf) == cap(w.buf) {
				// Grow by doubling from 512 bytes, never past the cap.
				w.buf = slices.Grow(w.buf, min(w.limit-len(w.buf), max(512, len(w.buf))))
			}
			p = w.buf[len(w.buf):min(cap(w.buf), w.limit)]
		} else {
			if discard == nil {
				discard = make([]byte, discardSize)
			}
			p = discard
		}
		n, err := r.Read(p)
		total += int64(n)
		if keeping {
			w.buf = w.buf[:len(w.buf)+n]
			w.pass(p[:n])
		} else {
			w.dropped += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// String returns the kept output as valid UTF-8. When the cut at the cap
// split a character, the partial character is dropped rather than replaced,
// so the output never exceeds the cap for valid input.
func (w *capWriter) String() string {
	b := w.buf
	if w.dropped > 0 {
		for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// limitBuffer collects up to limit bytes; a write past the limit marks it
// exceeded, calls overflow (which kills the writer) and fails, so the
// output is refused rather than silently cut.
type limitBuffer struct {
	limit    int64
	buf      []byte
	exceeded bool
	overflow func()
}

var errLimit = errors.New("output limit exceeded")

func (b *limitBuffer) Write(p []byte) (int, error) {
	if int64(len(b.buf))+int64(len(p)) > b.limit {
		b.exceeded = true
		b.overflow()
		return 0, errLimit
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// shellJoin quotes argv for a POSIX shell: words made only of safe
// characters stay bare, anything else is single-quoted.
func shellJoin(argv []string) string {
	var sb strings.Builder
	for i, a := range argv {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(shellQuote(a))
	}
	return sb.String()
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, unsafeShellRune) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func unsafeShellRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./:=,+@%", r)
}
