// Command soak drives the dev fleet at a fixed call rate for a long time
// and fails when a process's memory, threads or open files keep growing.
// `make soak` runs it (SOAK=10m by default; `SOAK=30s make soak` for a
// quick check; SOAK_RATE calls per second, 10 by default).
//
// It starts integration/cmd/devfleet as a child (an embedded NATS server
// in the launcher, two a2a-agent processes on identity demo, mcp-gateway
// importing their tools), on a free NATS port and with the gateway of
// integration/examples/demo.yaml moved to a free loopback port. It finds
// the launcher's children by PID through /proc and calls, in turn: the
// gateway's local echo and its remote demo_echo over one long-lived MCP
// client, echo over A2A, echo over a new MCP session each time (created
// and deleted, the legacy era), and A2A discovery. Every reply is checked
// against its own call.
//
// Every interval (10 s, or a twentieth of the run when that is shorter,
// so a short run still fits a line through ten points or more) it
// samples each process's resident memory, OS threads and open file
// descriptors from /proc. The services expose no goroutine count (no
// pprof, expvar or metrics endpoint), so threads are what is sampled; a
// leak of goroutines that block in syscalls shows there, one of parked
// goroutines only in memory.
//
// Judgement: the first half of the samples is warm-up. A straight line is
// fitted (least squares) through the second half of each series; its slope
// times the whole run's duration is the series' growth. The soak fails
// when a growth exceeds both a share of the series' mean and an absolute
// amount (see limits: RSS 10 % and 4 MiB, threads 25 % and 6, fds 20 % and
// 8), when any call fails, when calls pile up, or when a process dies. At
// the end it prints the samples, the calls per kind and the verdicts, and
// exits 1 on failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fiskfleet/fiskfleet/integration/internal/workspace"
)

type options struct {
	Duration     time.Duration
	Rate         float64
	Interval     time.Duration
	DevFleet     string
	Agents       int
	StartTimeout time.Duration
	Keep         bool
}

// minSamples is the fewest samples a run takes: a twentieth of the run
// is the longest interval. With ten points in the second half, one
// sample caught with a few calls in flight (their connections and fds)
// cannot tilt the fitted line past a limit.
const minSamples = 20

// errFailed is a soak that ran and found a problem; the report says which.
var errFailed = errors.New("soak failed")

func main() {
	var o options
	flag.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long to drive the fleet")
	flag.Float64Var(&o.Rate, "rate", 10, "calls per second")
	flag.DurationVar(&o.Interval, "interval", 10*time.Second, "how often to sample every process (at most a twentieth of -duration)")
	flag.StringVar(&o.DevFleet, "devfleet", "", "the dev fleet launcher binary (default: build integration/cmd/devfleet)")
	flag.IntVar(&o.Agents, "agents", 2, "a2a-agent processes the launcher starts")
	flag.DurationVar(&o.StartTimeout, "start-timeout", 3*time.Minute, "how long the fleet may take to build and start")
	flag.BoolVar(&o.Keep, "keep", false, "keep the fleet's directory (binaries, config, logs) afterwards")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o, os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, errFailed):
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
}

// run soaks the fleet as the package comment says, writing the report to
// stdout and progress to stderr. It returns errFailed when the soak found
// a problem, another error when it could not run.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.Duration <= 0 || o.Rate <= 0 || o.Interval <= 0 || o.Agents < 1 {
		return errors.New("-duration, -rate, -interval and -agents must be positive")
	}
	interval := min(o.Interval, o.Duration/minSamples)
	root, err := workspace.Root("soak")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fiskfleet-soak-")
	if err != nil {
		return err
	}
	if o.Keep {
		fmt.Fprintf(stderr, "soak: keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := o.DevFleet
	if bin == "" {
		fmt.Fprintln(stderr, "soak: building the dev fleet launcher …")
		bin = filepath.Join(dir, "devfleet")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./integration/cmd/devfleet")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building the dev fleet launcher: %w\n%s", err, out)
		}
	}
	cfg, err := soakConfig(root, dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "soak: starting the dev fleet …")
	f, err := startFleet(ctx, bin, filepath.Join(dir, "fleet"), cfg, o.Agents, o.StartTimeout)
	if err != nil {
		return err
	}
	defer func() {
		if err := f.stop(); err != nil {
			fmt.Fprintf(stderr, "soak: %v\n", err)
		}
	}()
	l, err := newLoad(ctx, f.natsURL, f.mcpURL, o.Rate)
	if err != nil {
		return err
	}
	defer l.close()

	names := make([]string, len(f.procs))
	for i, p := range f.procs {
		names[i] = fmt.Sprintf("%s (%d)", p.name, p.pid)
	}
	fmt.Fprintf(stderr, "soak: %s at %g calls/s through %s and %s, sampling %v every %s\n", o.Duration, o.Rate, f.mcpURL, f.natsURL, names, interval)

	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		l.run(loadCtx, o.Rate)
	}()
	samples, sampleErr := sampleFleet(ctx, f, interval, o.Duration, stderr)
	stopLoad()
	<-loadDone

	fmt.Fprintf(stdout, "\nSamples (rss MiB, OS threads, open fds; every %s):\n\n", interval)
	printSamples(stdout, names, samples)
	fmt.Fprintf(stdout, "\nCalls (%g/s for %s):\n\n", o.Rate, o.Duration)
	l.print(stdout)
	verdicts := judgeAll(names, samples, o.Duration)
	fmt.Fprintf(stdout, "\nGrowth (linear fit of the second half, extrapolated over %s):\n\n", o.Duration)
	printVerdicts(stdout, verdicts)
	fmt.Fprintln(stdout)

	var problems []string
	if sampleErr != nil {
		problems = append(problems, sampleErr.Error())
	}
	for _, v := range verdicts {
		if v.grows {
			problems = append(problems, fmt.Sprintf("%s %s grows: %+.1f over the run, limit %.1f", v.process, v.metric, v.growth, v.limitAt))
		}
	}
	if n, firsts := l.failures(); n > 0 {
		problems = append(problems, fmt.Sprintf("%d calls failed", n))
		problems = append(problems, firsts...)
	}
	if s := l.skipped.Load(); s > 0 {
		problems = append(problems, fmt.Sprintf("%d calls skipped: the fleet fell behind", s))
	}
	if len(problems) == 0 {
		fmt.Fprintln(stdout, "PASS: no series grows, every call succeeded")
		return nil
	}
	fmt.Fprintln(stdout, "FAIL:")
	for _, p := range problems {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	return errFailed
}

// sampleFleet samples every process at once and then every interval
// until run has passed, returning the samples so far and an error when a
// process died or ctx ended first.
func sampleFleet(ctx context.Context, f *fleet, interval, run time.Duration, stderr io.Writer) ([]sample, error) {
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var samples []sample
	for {
		s := sample{at: time.Since(start)}
		for _, p := range f.procs {
			u, err := readUsage(p.pid)
			if err != nil {
				return samples, fmt.Errorf("%s (pid %d) is gone: %w\n%s", p.name, p.pid, err, f.stderr)
			}
			s.usage = append(s.usage, u)
		}
		samples = append(samples, s)
		fmt.Fprintf(stderr, "soak: %s sampled\n", s.at.Round(time.Second))
		if s.at >= run-interval/2 {
			return samples, nil
		}
		select {
		case <-ctx.Done():
			return samples, fmt.Errorf("interrupted after %s", time.Since(start).Round(time.Second))
		case <-f.done:
			return samples, fmt.Errorf("the dev fleet stopped: %s", f.stderr)
		case <-tick.C:
		}
	}
}
