package mcpserver

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
)

// progressLog collects the notifications/progress a client receives.
type progressLog struct {
	mu   sync.Mutex // guards seen
	seen []progressNote
}

type progressNote struct {
	token    string
	progress float64
	message  string
}

func (l *progressLog) listen(c *client.Client) {
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		f := n.Params.AdditionalFields
		p, _ := f["progress"].(float64)
		m, _ := f["message"].(string)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.seen = append(l.seen, progressNote{token: fmt.Sprint(f["progressToken"]), progress: p, message: m})
	})
}

func (l *progressLog) of(token string) []progressNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []progressNote
	for _, n := range l.seen {
		if n.token == token {
			out = append(out, n)
		}
	}
	return out
}

// TestProgressLocalCommand calls the demo ticker with and without a
// progress token in both protocol eras: with one, several progress
// notifications arrive before the result, their byte counts grow, each
// message is a piece of the output, and there are fewer of them than
// lines (they are throttled); without one, none arrive and the result is
// the same.
func TestProgressLocalCommand(t *testing.T) {
	app := loadDemo(t, fiskapp.Options{})
	_, url := startServer(t, Config{}, app.Tools())
	const lines = 20
	args := map[string]any{"every": "50ms", "count": lines}

	for _, e := range eras {
		t.Run(e.name, func(t *testing.T) {
			c := connect(t, url, e, nil)
			var log progressLog
			log.listen(c)

			token := "tick-" + e.name
			req := mcp.CallToolRequest{}
			req.Params.Name = "ticker"
			req.Params.Arguments = args
			req.Params.Meta = &mcp.Meta{ProgressToken: token}
			start := time.Now()
			res, err := c.CallTool(t.Context(), req)
			if err != nil {
				t.Fatalf("calling ticker: %v", err)
			}
			elapsed := time.Since(start)
			notes := log.of(token)
			cr := commandResult(t, res)
			if !strings.HasSuffix(cr.Output, fmt.Sprintf("tick %d of %d\n", lines, lines)) {
				t.Fatalf("output: got %q, want %d ticks", cr.Output, lines)
			}

			if len(notes) < 2 {
				t.Fatalf("progress notifications before the result: got %d, want several", len(notes))
			}
			if limit := int(elapsed/progressInterval) + 2; len(notes) > limit {
				t.Errorf("progress notifications: got %d in %s, want at most %d (one per %s)", len(notes), elapsed, limit, progressInterval)
			}
			prev := 0.0
			for i, n := range notes {
				if n.progress <= prev {
					t.Errorf("notification %d: got progress %v after %v, want it to grow", i, n.progress, prev)
				}
				prev = n.progress
				if n.message == "" || !strings.Contains(cr.Output, n.message) {
					t.Errorf("notification %d: got message %q, want a piece of the output", i, n.message)
				}
			}
			// The result is authoritative: progress never counts past it.
			if got, limit := prev, float64(len(cr.Output)); got > limit {
				t.Errorf("last progress: got %v, want at most the output's %v bytes", got, limit)
			}

			plain := commandResult(t, callTool(t, c, "ticker", map[string]any{"every": "1ms", "count": 3}))
			if plain.Output != "tick 1 of 3\ntick 2 of 3\ntick 3 of 3\n" {
				t.Errorf("call without a token: got %q, want three ticks", plain.Output)
			}
			if got := len(log.of(token)); got != len(notes) {
				t.Errorf("notifications after a call without a token: got %d, want still %d", got, len(notes))
			}
			log.mu.Lock()
			total := len(log.seen)
			log.mu.Unlock()
			if total != len(notes) {
				t.Errorf("notifications in all: got %d, want only the %d of the call with a token", total, len(notes))
			}
		})
	}
}

func TestProgressMessage(t *testing.T) {
	tests := []struct {
		name, tail, want string
	}{
		{name: "empty", tail: "", want: ""},
		{name: "one line", tail: "tick 1\n", want: "tick 1"},
		{name: "newest three", tail: "a\nb\n\nc\nd\n", want: "b\nc\nd"},
		{name: "partial line", tail: "a\nb\nc\nhalf", want: "b\nc\nhalf"},
		{name: "crlf", tail: "a\r\nb\r\n", want: "a\nb"},
		{name: "cut character", tail: "caf\xc3", want: "caf"},
		{name: "long line", tail: strings.Repeat("x", 2*progressMessageMax), want: strings.Repeat("x", progressMessageMax)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressMessage([]byte(tt.tail)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestProgressWriterBounded checks that a writer fed far more than its
// tail keeps only the newest bytes and counts them all.
func TestProgressWriterBounded(t *testing.T) {
	var got []string
	var mu sync.Mutex
	p := newProgress(func(total int64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%d %s", total, msg))
	})
	for i := range 10_000 {
		fmt.Fprintf(p, "line %d\n", i)
	}
	p.mu.Lock()
	if len(p.tail) > progressTailMax {
		t.Errorf("tail: got %d bytes, want at most %d", len(p.tail), progressTailMax)
	}
	total := p.total
	p.mu.Unlock()
	p.stop(true)
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("%d line 9997\nline 9998\nline 9999", total) {
		t.Errorf("last notification: got %q, want the total and the newest three lines", got)
	}
}
