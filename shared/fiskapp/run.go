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

	"github.com/fiskfleet/fiskfleet/shared/procs"
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

// waitDelayMargin is how long the output is still read, past the kill
// grace, once the command has exited or its context has ended. The group
// SIGKILL normally closes the pipe by then; the margin only matters for a
// descendant that left the group (setsid) and kept the pipe.
const waitDelayMargin = time.Second

// stderrSnippet caps the stderr kept from a failed introspection for the
// error message.
const stderrSnippet = 1 << 10

// devNull is the null device every command reads as its standard input,
// opened once for the process and never closed: os/exec would otherwise
// open and close it for each command. A child gets its own copy of the
// descriptor, so one file serves every command at once. Should it not
// open, os/exec opens the device itself, and reports the error.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// runner runs commands for the [Command]s of one [App].
type runner struct {
	outputCap int
	killGrace time.Duration
	// scrub is the set of environment variable names removed from every
	// child's environment.
	scrub map[string]struct{}
	// portable, set by tests, collects as on systems without pidfds.
	portable bool
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
//
// The calling goroutine does all the waiting: it reads the output and sees
// the exit itself (see [collection]), and the context's end is handled by
// [context.AfterFunc], so a call starts no goroutine unless its context
// ends. On a small virtual machine every hand-off between goroutines can be
// a thread wake-up, and those cost more than the work of a short call.
func (r *runner) run(ctx context.Context, argv []string, live io.Writer) (*tool.CommandResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	// One pipe for both streams keeps the output in the order the command
	// wrote it.
	rfd, w, err := outputPipe()
	if err != nil {
		return nil, fmt.Errorf("%w %s: creating the output pipe: %w", ErrStart, argv[0], err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if f, err := devNull(); err == nil {
		cmd.Stdin = f
	}
	cmd.Stdout = w
	cmd.Stderr = w
	cmd.Env = scrubbedEnv(r.scrub)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The caller's span, when it records, gets the stage events around
	// the process's own run (see tracing.EventStarting).
	span := trace.SpanFromContext(ctx)
	tracing.Event(span, tracing.EventStarting)
	err = procs.StartChild(cmd.Start)
	// The child has its own copy of the write end; ours would keep the
	// pipe from ever reaching end of file.
	_ = w.Close()
	if err != nil {
		_ = syscall.Close(rfd)
		return nil, fmt.Errorf("%w %s: %w", ErrStart, argv[0], err)
	}
	tracing.Event(span, tracing.EventStarted)

	c := &collection{
		cmd:      cmd,
		rfd:      rfd,
		out:      &capWriter{limit: r.outputCap, live: live},
		g:        &groupKill{grace: r.killGrace},
		delay:    r.killGrace + waitDelayMargin,
		span:     span,
		portable: r.portable,
	}
	pid := cmd.Process.Pid
	stop := context.AfterFunc(ctx, func() {
		if err := c.g.kill(pid); !errors.Is(err, errExited) {
			// The command may have left the group, or a descendant
			// that did may hold the pipe: either way the call ends
			// within the delay.
			c.bound.within(c.delay)
		}
	})
	err = c.collect()
	stop()
	if c.g.interrupted() {
		c.g.settle(pid)
		return nil, fmt.Errorf("%w: %w", ErrInterrupted, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("collecting %s: %w", argv[0], err)
	}
	return &tool.CommandResult{
		ExitCode:  exitCode(cmd.ProcessState),
		Output:    c.out.String(),
		Truncated: c.out.dropped > 0,
	}, nil
}

// collection is one started command whose output and exit are being
// collected. Its output is read until end of file, or, once the command has
// exited or its context has ended, for at most delay more: a descendant that
// left the process group may hold the pipe for ever, and the command's own
// result then stands.
type collection struct {
	cmd *exec.Cmd
	// rfd is the non-blocking read end of the output pipe. The collection
	// owns it: collect closes it.
	rfd   int
	out   *capWriter
	g     *groupKill
	delay time.Duration
	bound drainBound
	span  trace.Span
	// portable skips poll.
	portable bool
}

// collect reads the output and waits for the exit, then reaps the command,
// leaving its state in cmd.ProcessState. An error means the output could
// not be read or the command not waited for; a non-zero exit is not one.
func (c *collection) collect() error {
	if !c.portable {
		if ok, err := c.poll(); ok {
			return err
		}
	}
	return c.waitAside()
}

// waitAside collects with a goroutine that waits for the exit while the
// calling one reads: for systems without pidfds. The exit is only seen once
// the command is reaped, so a kill racing with it may, as with os/exec,
// signal a group id already free for reuse.
func (c *collection) waitAside() error {
	f := os.NewFile(uintptr(c.rfd), "output")
	defer f.Close()
	c.bound.attach(f.SetReadDeadline)
	waited := make(chan error, 1)
	go func() {
		err := c.cmd.Wait()
		c.exited()
		c.bound.within(c.delay)
		waited <- err
	}()
	_, rerr := c.out.ReadFrom(f)
	if errors.Is(rerr, os.ErrDeadlineExceeded) {
		rerr = nil
		// Past the bound: a command still running has left its group
		// and outlived the kill.
		_ = c.cmd.Process.Kill()
	}
	return waitResult(<-waited, rerr)
}

// exited records that the command has exited: from now on its context
// ending no longer interrupts it. The caller bounds the rest of the read.
func (c *collection) exited() {
	tracing.Event(c.span, tracing.EventExited)
	c.g.exited()
}

// waitResult is the error of a collection from that of Wait and that of
// reading the output.
func waitResult(werr, rerr error) error {
	var exitErr *exec.ExitError
	switch {
	case werr != nil && !errors.As(werr, &exitErr):
		return fmt.Errorf("waiting: %w", werr)
	case rerr != nil:
		return fmt.Errorf("reading output: %w", rerr)
	}
	return nil
}

// drainBound is the time after which the output is no longer read, set
// once the command exits or its context ends, whichever comes first.
type drainBound struct {
	mu  sync.Mutex // guards at and set
	at  time.Time
	set func(time.Time) error
}

// within bounds the reading to d from now, unless it is bounded earlier.
func (b *drainBound) within(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := time.Now().Add(d)
	if !b.at.IsZero() && !t.Before(b.at) {
		return
	}
	b.at = t
	if b.set != nil {
		_ = b.set(t)
	}
}

// attach makes set, a read deadline setter, apply the bound, now and when
// it is set later.
func (b *drainBound) attach(set func(time.Time) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set = set
	if !b.at.IsZero() {
		_ = set(b.at)
	}
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
	if err := procs.StartChild(cmd.Start); err != nil {
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
	mu    sync.Mutex // guards fired, done and timer
	fired bool
	// done is set once the command is seen to have exited, before it is
	// reaped: a kill after that would come too late to matter, and after
	// the reaping its group id may belong to another group.
	done  bool
	timer *time.Timer
}

// errExited is what kill returns once the command has exited.
var errExited = fmt.Errorf("command exited: %w", os.ErrProcessDone)

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
	if g.done {
		return errExited
	}
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

// exited records that the command has exited, so a later kill does nothing.
func (g *groupKill) exited() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
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
// use.
type capWriter struct {
	limit   int
	buf     []byte
	dropped int64
	// discard is the scratch buffer output past the limit is read into.
	discard []byte
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

// discardSize is the scratch buffer dropped output is counted through.
const discardSize = 8 << 10

// ReadFrom reads r to EOF straight into the kept buffer, then counts the
// rest through a small scratch buffer. io.Copy would otherwise allocate a
// 32 KiB buffer per call, most of the memory a small call costs.
func (w *capWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		n, err := w.fill(r.Read)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// fill calls read once with the space the next bytes go to, never empty,
// and keeps or counts what it read.
func (w *capWriter) fill(read func([]byte) (int, error)) (int, error) {
	var p []byte
	keeping := len(w.buf) < w.limit
	if keeping {
		if len(w.buf) == cap(w.buf) {
			// Grow by doubling from 512 bytes, never past the cap.
			w.buf = slices.Grow(w.buf, min(w.limit-len(w.buf), max(512, len(w.buf))))
		}
		p = w.buf[len(w.buf):min(cap(w.buf), w.limit)]
	} else {
		if w.discard == nil {
			w.discard = make([]byte, discardSize)
		}
		p = w.discard
	}
	n, err := read(p)
	n = max(n, 0)
	if keeping {
		w.buf = w.buf[:len(w.buf)+n]
		w.pass(p[:n])
	} else {
		w.dropped += int64(n)
	}
	return n, err
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
