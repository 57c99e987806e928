package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// callTimeout bounds one call of the load; a call that takes longer is a
// failure of the soak.
const callTimeout = 30 * time.Second

// identity is the dev fleet's agent identity (integration/examples/demo.yaml).
const identity = "demo"

// kind is one way the load reaches the fleet.
type kind struct {
	name string
	call func(ctx context.Context, n int64) error
	// mu guards the counters below.
	mu       sync.Mutex
	ok, fail int
	total    time.Duration
	slowest  time.Duration
	firstErr error
}

func (k *kind) record(d time.Duration, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.fail++
		if k.firstErr == nil {
			k.firstErr = err
		}
		return
	}
	k.ok++
	k.total += d
	k.slowest = max(k.slowest, d)
}

// load drives the fleet at a fixed rate, taking the kinds in turn.
type load struct {
	kinds []*kind
	// inflight counts calls running; skipped counts ticks dropped because
	// maxInflight calls were still running (the fleet fell behind).
	inflight, skipped atomic.Int64
	maxInflight       int64
	wg                sync.WaitGroup
	// elapsed is how long run ran, set when it returns.
	elapsed time.Duration
	closers []func()
}

// newLoad connects to the fleet: one NATS connection for A2A, one MCP
// client kept for the whole run (the current protocol era), and a fresh
// MCP client per session call (the legacy era, which has sessions the
// gateway must create and delete).
func newLoad(ctx context.Context, natsURL, mcpURL string, rate float64) (*load, error) {
	l := &load{maxInflight: int64(max(rate*callTimeout.Seconds(), 10))}
	nc, err := nats.Connect(natsURL, nats.Name("soak"))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", natsURL, err)
	}
	l.closers = append(l.closers, nc.Close)
	ac, err := a2a.NewClient(natsbus.NewTransport(nc), a2a.Participant{Name: "soak"})
	if err != nil {
		l.close()
		return nil, err
	}
	mc, err := connectMCP(ctx, mcpURL)
	if err != nil {
		l.close()
		return nil, err
	}
	l.closers = append(l.closers, func() { _ = mc.Close() })

	l.kinds = []*kind{
		{name: "mcp local echo", call: func(ctx context.Context, n int64) error { return mcpEcho(ctx, mc, "echo", n) }},
		{name: "mcp remote demo_echo", call: func(ctx context.Context, n int64) error { return mcpEcho(ctx, mc, "demo_echo", n) }},
		{name: "a2a call echo", call: func(ctx context.Context, n int64) error {
			msg := message(n)
			input, _ := json.Marshal(map[string]string{"message": msg})
			r, err := ac.CallTool(ctx, identity, "echo", input)
			if err != nil {
				return err
			}
			if r.IsError || r.Output != msg+"\n" {
				return fmt.Errorf("a2a echo %s: got %+v, want output %q", msg, r, msg+"\n")
			}
			return nil
		}},
		{name: "mcp new session echo", call: func(ctx context.Context, n int64) error {
			c, err := connectMCP(ctx, mcpURL, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
			if err != nil {
				return err
			}
			defer c.Close()
			return mcpEcho(ctx, c, "echo", n)
		}},
		{name: "a2a discover", call: func(ctx context.Context, _ int64) error {
			r, err := ac.Discover(ctx, identity)
			if err != nil {
				return err
			}
			if len(r.Tools) == 0 {
				return fmt.Errorf("discover %s: got no tools", identity)
			}
			return nil
		}},
	}
	return l, nil
}

// connectMCP starts and initialises an mcp-go client of url.
func connectMCP(ctx context.Context, url string, opts ...client.ClientOption) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, fmt.Errorf("creating the MCP transport for %s: %w", url, err)
	}
	c := client.NewClient(tr, opts...)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the MCP client of %s: %w", url, err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "soak", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialising the MCP client of %s: %w", url, err)
	}
	return c, nil
}

// message is the text call n echoes, so a reply is checked against its
// own call.
func message(n int64) string { return fmt.Sprintf("soak-%d", n) }

// mcpEcho calls an echo tool and checks the command result.
func mcpEcho(ctx context.Context, c *client.Client, name string, n int64) error {
	msg := message(n)
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = map[string]any{"message": msg}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var text string
	for _, content := range res.Content {
		if t, ok := mcp.AsTextContent(content); ok {
			text += t.Text
		}
	}
	var cr tool.CommandResult
	if res.IsError || json.Unmarshal([]byte(text), &cr) != nil || cr.Output != msg+"\n" {
		return fmt.Errorf("%s %s: got %q (isError %t), want a command result with output %q", name, msg, text, res.IsError, msg+"\n")
	}
	return nil
}

// run makes calls at rate per second until ctx is done, then waits for
// the calls still running. Call n is due at n/rate seconds from the
// start; a dispatcher that was not scheduled in time catches up at once,
// so a busy machine delays calls but does not drop them.
func (l *load) run(ctx context.Context, rate float64) {
	period := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for n := int64(0); ; {
		select {
		case <-ctx.Done():
			l.wg.Wait()
			l.elapsed = time.Since(start)
			return
		case <-timer.C:
		}
		for due := int64(time.Since(start)/period) + 1; n < due; n++ {
			l.dispatch(ctx, n)
		}
		timer.Reset(time.Until(start.Add(time.Duration(n) * period)))
	}
}

// dispatch starts call n in its own goroutine, unless maxInflight calls
// are still running.
func (l *load) dispatch(ctx context.Context, n int64) {
	if l.inflight.Load() >= l.maxInflight {
		l.skipped.Add(1)
		return
	}
	k := l.kinds[n%int64(len(l.kinds))]
	l.inflight.Add(1)
	l.wg.Go(func() {
		defer l.inflight.Add(-1)
		// Calls started before the end finish on their own deadline.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		start := time.Now()
		err := k.call(cctx, n)
		k.record(time.Since(start), err)
	})
}

func (l *load) close() {
	for i := len(l.closers) - 1; i >= 0; i-- {
		l.closers[i]()
	}
}

// failures is how many calls failed, and the first error of each kind
// that had one.
func (l *load) failures() (int, []string) {
	n := 0
	var firsts []string
	for _, k := range l.kinds {
		k.mu.Lock()
		n += k.fail
		if k.firstErr != nil {
			firsts = append(firsts, fmt.Sprintf("%s: %v", k.name, k.firstErr))
		}
		k.mu.Unlock()
	}
	return n, firsts
}

// print writes the calls made per kind.
func (l *load) print(w io.Writer) {
	total := 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "calls\tok\tfailed\tmean\tslowest")
	for _, k := range l.kinds {
		k.mu.Lock()
		total += k.ok + k.fail
		mean := time.Duration(0)
		if k.ok > 0 {
			mean = k.total / time.Duration(k.ok)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", k.name, k.ok, k.fail, mean.Round(100*time.Microsecond), k.slowest.Round(100*time.Microsecond))
		k.mu.Unlock()
	}
	_ = tw.Flush()
	if l.elapsed > 0 {
		fmt.Fprintf(w, "%d calls in %s: %.2f/s\n", total, l.elapsed.Round(time.Second), float64(total)/l.elapsed.Seconds())
	}
	if s := l.skipped.Load(); s > 0 {
		fmt.Fprintf(w, "%d calls skipped: %d calls were still running\n", s, l.maxInflight)
	}
}
