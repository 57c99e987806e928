package natsconn

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/nats-io/nats.go"
)

// A NATS server drops a publish its user may not make and says so only
// asynchronously, as -ERR 'Permissions Violation for Publish to "subject"',
// which nats.go hands to the connection's async error handler rather than
// to the publish. Whoever waits for an answer to that publish would wait
// out its whole deadline; [OnPublishViolation] lets it hear of the refusal
// instead.

// publishViolation is how the server words a refused publish, before the
// subject; matched regardless of case.
const publishViolation = "permissions violation for publish to "

// PublishViolation returns the subject of a publish the server refused,
// when err is the permissions violation nats.go reports for one. The
// server quotes the subject Go-style ("subject"); a single-quoted or bare
// subject is taken as well. A refused subscription, or any other error,
// is not one.
func PublishViolation(err error) (subject string, ok bool) {
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return "", false
	}
	text := err.Error()
	i := strings.Index(strings.ToLower(text), publishViolation)
	if i < 0 {
		return "", false
	}
	rest := strings.TrimSpace(text[i+len(publishViolation):])
	switch {
	case rest == "":
		return "", false
	case rest[0] == '"':
		quoted, err := strconv.QuotedPrefix(rest)
		if err != nil {
			// An unterminated quote: what follows it, up to a space.
			return bare(rest[1:])
		}
		s, err := strconv.Unquote(quoted)
		if err != nil || s == "" {
			return "", false
		}
		return s, true
	case rest[0] == '\'':
		if end := strings.IndexByte(rest[1:], '\''); end >= 0 {
			return nonEmpty(rest[1 : 1+end])
		}
		return bare(rest[1:])
	}
	return bare(rest)
}

// bare returns s up to its first space or quote.
func bare(s string) (string, bool) {
	if end := strings.IndexAny(s, " \t\r\n\"'"); end >= 0 {
		s = s[:end]
	}
	return nonEmpty(s)
}

func nonEmpty(s string) (string, bool) { return s, s != "" }

// violations is the publish violation listeners of one connection.
type violations struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func(subject string, err error)
}

func (v *violations) dispatch(err error) {
	subject, ok := PublishViolation(err)
	if !ok {
		return
	}
	v.mu.Lock()
	fns := make([]func(string, error), 0, len(v.fns))
	for _, fn := range v.fns {
		fns = append(fns, fn)
	}
	v.mu.Unlock()
	for _, fn := range fns {
		fn(subject, err)
	}
}

// hubs are the listeners by connection. A connection is held weakly: its
// entry goes once it is garbage, so a closed connection costs nothing here.
var (
	hubsMu sync.Mutex
	hubs   = map[weak.Pointer[nats.Conn]]*violations{}
)

// OnPublishViolation calls fn with the subject and error of every publish
// the server refuses nc for lack of permission, until stop is called. The
// first listener of a connection installs an async error handler that
// hands every error on to the one nc had (that of [Connect], which logs
// it, or nats.go's default), so nothing that handler did is lost; a
// handler set on nc later with SetErrorHandler replaces both, and fn is
// then no longer called. fn runs on the connection's async callback
// goroutine: it must not block.
func OnPublishViolation(nc *nats.Conn, fn func(subject string, err error)) (stop func()) {
	v := hubOf(nc)
	v.mu.Lock()
	v.next++
	id := v.next
	v.fns[id] = fn
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		delete(v.fns, id)
		v.mu.Unlock()
	}
}

// hubOf returns the listeners of nc, installing its error handler on first
// use.
func hubOf(nc *nats.Conn) *violations {
	key := weak.Make(nc)
	hubsMu.Lock()
	defer hubsMu.Unlock()
	if v := hubs[key]; v != nil {
		return v
	}
	v := &violations{fns: map[uint64]func(string, error){}}
	// The handler holds v and the previous handler, never nc itself, so
	// the connection can still become garbage.
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		v.dispatch(err)
		if prev != nil {
			prev(c, sub, err)
		}
	})
	hubs[key] = v
	runtime.AddCleanup(nc, func(k weak.Pointer[nats.Conn]) {
		hubsMu.Lock()
		delete(hubs, k)
		hubsMu.Unlock()
	}, key)
	return v
}
