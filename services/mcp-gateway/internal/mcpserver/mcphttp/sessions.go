package mcphttp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// sessionPrefix starts every session id the gateway issues.
const sessionPrefix = "mcp-session-"

// errUnknownSession is a session id the gateway did not issue, or has
// forgotten (deleted or expired).
var errUnknownSession = errors.New("unknown session")

// Sessions is the gateway's record of the sessions it issued to clients of
// the session-based protocol eras, and mcp-go's [server.SessionIdManager].
//
// It exists because mcp-go's own stateful manager keeps every terminated
// id for ever (a client that deletes its session still costs memory) and
// knows nothing of idle time or limits. Here a session is forgotten when
// it is deleted or has been idle longer than the idle timeout with no
// request open (a GET stream counts as open), and at most max live at
// once. A forgotten id is as unknown as one never issued: 404 on every
// method.
//
// It is safe for concurrent use.
type Sessions struct {
	idle time.Duration
	max  int
	now  func() time.Time

	// onEnd, when set, is told of every session forgotten, after the fact
	// and without the lock: the session's tasks go with it.
	OnEnd func(id string)

	mu sync.Mutex
	// live holds the sessions issued and not yet forgotten; guarded by mu.
	live map[string]*session
}

// session is what is known of one live session; guarded by Sessions.mu.
type session struct {
	// lastActive is when a request last began or ended.
	lastActive time.Time
	// open counts the requests in progress, long-lived streams included.
	open int
	// owner is the subject of the caller that created the session; every
	// later request must come from the same subject (see
	// [Sessions.Bind]).
	owner string
}

func NewSessions(idle time.Duration, max int, now func() time.Time) *Sessions {
	return &Sessions{idle: idle, max: max, now: now, live: map[string]*session{}}
}

// Generate issues a new session id: 128 random bits, so ids cannot be
// guessed from one another.
func (s *Sessions) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	id := sessionPrefix + hex.EncodeToString(b[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[id] = &session{lastActive: s.now()}
	return id
}

// Validate reports an error for an id that is not live. Nothing is kept of
// terminated sessions, so it never reports isTerminated.
func (s *Sessions) Validate(id string) (isTerminated bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[id] == nil {
		return false, errUnknownSession
	}
	return false, nil
}

// Terminate forgets id.
func (s *Sessions) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	_, was := s.live[id]
	delete(s.live, id)
	s.mu.Unlock()
	if was && s.OnEnd != nil {
		s.OnEnd(id)
	}
	return false, nil
}

// full reports whether a new session would exceed the cap.
func (s *Sessions) Full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live) >= s.max
}

// count returns the live sessions.
func (s *Sessions) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// bind records subject as the owner of the session id, once, when its
// initialize is answered. Binding is what keeps one caller's token from
// riding another caller's session: the session's capabilities and tasks
// belong to whoever opened it.
func (s *Sessions) Bind(id, subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live[id]; e != nil && e.owner == "" {
		e.owner = subject
	}
}

// owns reports whether id is live and owned by subject.
func (s *Sessions) Owns(id, subject string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live[id]
	return e != nil && e.owner == subject
}

// begin records a request of id by subject starting, reporting false for
// an id that is not live or is owned by another subject: to a caller that
// did not open it, a session does not exist. Every true must be followed
// by one [Sessions.End].
func (s *Sessions) Begin(id, subject string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live[id]
	if e == nil || e.owner != subject {
		return false
	}
	e.open++
	e.lastActive = s.now()
	return true
}

// end records a request of id ending.
func (s *Sessions) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.live[id]; e != nil {
		e.open--
		e.lastActive = s.now()
	}
}

// idleOnes returns the live sessions with no request open that have been
// idle longer than the idle timeout. The caller ends them.
func (s *Sessions) IdleOnes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	cutoff := s.now().Add(-s.idle)
	var out []string
	for id, e := range s.live {
		if e.open == 0 && e.lastActive.Before(cutoff) {
			out = append(out, id)
		}
	}
	return out
}

// Max is the cap on live sessions.
func (s *Sessions) Max() int { return s.max }

// Idle is the idle timeout after which a session without a request open
// is forgotten.
func (s *Sessions) Idle() time.Duration { return s.idle }

// Binding returns w, through which the answer to an initialize of subject
// is to be written: the session the answer issues is bound to subject as
// its header goes out.
func (s *Sessions) Binding(w http.ResponseWriter, subject string) http.ResponseWriter {
	return &bindSession{ResponseWriter: w, sessions: s, subject: subject}
}

// bindSession binds the session an initialize answer issues to the
// caller that asked for it, as the header goes out.
type bindSession struct {
	http.ResponseWriter
	sessions *Sessions
	subject  string
	bound    bool
}

func (b *bindSession) WriteHeader(code int) {
	if !b.bound {
		b.bound = true
		if id := b.Header().Get(server.HeaderKeySessionID); id != "" {
			b.sessions.Bind(id, b.subject)
		}
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bindSession) Write(p []byte) (int, error) {
	if !b.bound {
		b.WriteHeader(http.StatusOK)
	}
	return b.ResponseWriter.Write(p)
}

// Flush passes on to the connection: an initialize answered as an event
// stream is flushed.
func (b *bindSession) Flush() {
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (b *bindSession) Unwrap() http.ResponseWriter { return b.ResponseWriter }
