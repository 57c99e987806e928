package audit_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// logLine is one line a publisher logged.
type logLine struct {
	Level  string          `json:"level"`
	Msg    string          `json:"msg"`
	Reason string          `json:"reason"`
	Record json.RawMessage `json:"record"`
}

// logSink captures a publisher's log as JSON lines.
type logSink struct{ buf fisktest.Buffer }

func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&s.buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the lines logged so far.
func (s *logSink) lines(tb testing.TB) []logLine {
	tb.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(s.buf.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			tb.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// unpublished returns the records logged at error level as not published.
func (s *logSink) unpublished(tb testing.TB) []logLine {
	tb.Helper()
	var out []logLine
	for _, l := range s.lines(tb) {
		if l.Level == "ERROR" && l.Msg == "audit record not published" {
			out = append(out, l)
		}
	}
	return out
}

// sampleRecord is a complete record of an A2A call, numbered n in its
// tool name so tests can check order.
func sampleRecord(n int) *audit.Record {
	r := &audit.Record{
		Time:     time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.FixedZone("CET", 3600)),
		Service:  audit.ServiceA2AAgent,
		Identity: "demo",
		Instance: "host-42",
		Surface:  audit.SurfaceA2A,
		Caller:   audit.Caller{Name: "planner", Instance: "p1", Claimed: true},
		Tool:     fmt.Sprintf("tool-%05d", n),
		Command:  "/bin/demo echo --message hi && true",
		Gate:     audit.Gate{Decision: audit.DecisionNotGated},
		Outcome:  audit.Outcome{Result: audit.ResultOK, ExitCode: audit.ExitCode(0), DurationMS: 2.5},
		TraceID:  "0123456789abcdef0123456789abcdef",
	}
	r.SetArguments(json.RawMessage(fmt.Sprintf(`{"n":%d,"message":"hi"}`, n)), false)
	return r
}

// stallProxy forwards TCP connections to a NATS server and can stop
// reading from its clients, the way a stuck network or server does: a
// client's writes then fill the socket buffers and block.
type stallProxy struct {
	ln     net.Listener
	target string

	mu sync.Mutex
	// gate is closed while traffic flows, open (unclosed) while stalled;
	// guarded by mu.
	gate chan struct{}
}

func startStallProxy(tb testing.TB, target string) *stallProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	tb.Cleanup(func() { _ = ln.Close(); p.resume() })
	go p.serve(tb)
	return p
}

// URL is the proxy's client URL.
func (p *stallProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) serve(tb testing.TB) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		// Small buffers, so a stall blocks the client within a few records.
		_ = client.(*net.TCPConn).SetReadBuffer(64 << 10)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		tb.Cleanup(func() { _ = client.Close(); _ = server.Close() })
		go func() { _, _ = io.Copy(client, server) }()
		go p.forward(server, client)
	}
}

// forward copies from client to server, waiting at the gate before each
// read.
func (p *stallProxy) forward(server, client net.Conn) {
	buf := make([]byte, 4096)
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		<-gate
		n, err := client.Read(buf)
		if n > 0 {
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = server.Close()
			return
		}
	}
}

// stall stops reading from clients.
func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// resume reads from clients again.
func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// smallWriteBuffer dials with a small socket send buffer, so a stalled
// peer blocks the client's writes sooner.
type smallWriteBuffer struct{}

func (smallWriteBuffer) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10)
	return c, nil
}
