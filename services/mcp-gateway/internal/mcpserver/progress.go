package mcpserver

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// progressInterval is the least time between two progress
	// notifications of one call: a few a second is what a human watching
	// can read, and it keeps a command that prints a line per byte from
	// turning into a notification per byte.
	progressInterval = 250 * time.Millisecond
	// progressLines and progressMessageMax bound a notification's message:
	// the newest lines of output, never more than this many bytes.
	progressLines      = 3
	progressMessageMax = 1024
	// progressTailMax bounds what a call keeps of its output between two
	// notifications; only the newest lines are ever sent.
	progressTailMax = 4 * progressMessageMax
)

// progressToken returns the call's progress token, or nil when the client
// asked for no progress.
func progressToken(req mcp.CallToolRequest) mcp.ProgressToken {
	if req.Params.Meta == nil {
		return nil
	}
	return req.Params.Meta.ProgressToken
}

// progress relays a running call's output to the client that asked for
// it, as notifications/progress: `progress` is the number of output bytes
// so far (so it only grows), `message` the newest output lines. Writes only
// record; a ticker sends at most one notification per [progressInterval],
// and only when output arrived since the last one. A write never blocks
// on the client: mcp-go drops a notification its session cannot take.
//
// It is an io.Writer for [tool.Request.Output]; Write is safe for use
// concurrently with the ticker, and [progress.stop] must be called once
// the call returns.
type progress struct {
	send func(total int64, message string)

	mu sync.Mutex // guards total, tail and sent
	// total is the number of bytes written; sent is total at the last
	// notification.
	total, sent int64
	// tail holds the newest output since the last notification, at most
	// progressTailMax bytes.
	tail []byte

	done    chan struct{}
	stopped sync.WaitGroup
}

// newProgress starts relaying for one call; send delivers a notification.
func newProgress(send func(total int64, message string)) *progress {
	p := &progress{send: send, done: make(chan struct{})}
	p.stopped.Add(1)
	go p.run()
	return p
}

// notifier returns the send function for the call behind ctx: a
// notifications/progress to the requesting client, in either protocol
// era (mcp-go binds the requesting session to ctx in both, the session of
// a 2026-07-28 request living as long as that request).
func (s *Server) notifier(ctx context.Context, token mcp.ProgressToken) func(int64, string) {
	return func(total int64, message string) {
		params := map[string]any{
			"progressToken": token,
			"progress":      total,
		}
		if message != "" {
			params["message"] = message
		}
		// A client that cannot take it (gone, or its stream full) loses one
		// notification; the result still carries all the output.
		_ = s.mcp.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params)
	}
}

// Write records output; it never fails and never blocks on the client.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += int64(len(b))
	if len(b) >= progressTailMax {
		p.tail = append(p.tail[:0], b[len(b)-progressTailMax:]...)
		return len(b), nil
	}
	if over := len(p.tail) + len(b) - progressTailMax; over > 0 {
		p.tail = append(p.tail[:0], p.tail[over:]...)
	}
	p.tail = append(p.tail, b...)
	return len(b), nil
}

func (p *progress) run() {
	defer p.stopped.Done()
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.flush()
		}
	}
}

// flush sends one notification if output arrived since the last.
func (p *progress) flush() {
	p.mu.Lock()
	if p.total == p.sent {
		p.mu.Unlock()
		return
	}
	total, msg := p.total, progressMessage(p.tail)
	p.sent, p.tail = total, p.tail[:0]
	p.mu.Unlock()
	p.send(total, msg)
}

// stop ends the ticker. With final set, output not yet reported gets one
// last notification, so the client sees the full byte count before the
// result; a call the client gave up on gets none. The last one is best
// effort: mcp-go v1.2.1 may drop a notification sent in the instant before
// the result when it answers a 2026-07-28 request (its forwarder loses the
// race to the response), and the result carries the output anyway.
func (p *progress) stop(final bool) {
	close(p.done)
	p.stopped.Wait()
	if final {
		p.flush()
	}
}

// progressMessage is the notification text for the newest output: its
// last [progressLines] non-empty lines, at most [progressMessageMax]
// bytes, valid UTF-8 (a piece of output may end inside a character).
func progressMessage(tail []byte) string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(tail), "\r\n", "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	msg := strings.Join(lines[max(0, len(lines)-progressLines):], "\n")
	if len(msg) > progressMessageMax {
		msg = msg[len(msg)-progressMessageMax:]
	}
	return strings.ToValidUTF8(msg, "")
}
