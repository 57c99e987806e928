package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// metric is one resource series sampled per process.
type metric int

// The sampled metrics. Threads stand in for goroutines: neither service
// exposes a goroutine count (no pprof, expvar or metrics endpoint), and
// /proc only knows the process's OS threads. A goroutine leak that blocks
// in syscalls grows threads; one parked on channels or the network poller
// shows only in memory.
const (
	metricRSS metric = iota
	metricThreads
	metricFDs
	metricCount
)

func (m metric) String() string {
	return [...]string{"rss_mib", "threads", "fds"}[m]
}

// limit is when a metric's growth fails the soak: the growth a linear fit
// of the second half of the run extrapolates over the whole run must
// exceed both a share of the series' mean and an absolute amount. The
// share keeps a large process from failing on noise, the absolute amount
// a small one (a process with 12 fds may well open one more).
type limit struct {
	// Share is a fraction of the mean of the fitted samples.
	Share float64
	// Abs is in the metric's unit (MiB, threads, fds).
	Abs float64
}

// limits are the thresholds per metric, chosen against the noise of an
// idle Go service on a busy two-core machine:
//
//   - rss_mib: 10 % and 4 MiB. The heap's sawtooth moves RSS by a MiB or
//     two; a leak of 1 KiB per call at 10 calls/s adds 6 MiB in 10 min.
//   - threads: 25 % and 6. The Go runtime keeps the threads it made for
//     blocking syscalls (fork/exec), so the count steps up under a load
//     spike and never comes down; it must not keep climbing.
//   - fds: 20 % and 8. Keep-alive HTTP connections and NATS come and go
//     by a few; a leak of one per call passes 8 within seconds.
var limits = [metricCount]limit{
	metricRSS:     {Share: 0.10, Abs: 4},
	metricThreads: {Share: 0.25, Abs: 6},
	metricFDs:     {Share: 0.20, Abs: 8},
}

// usage is one process's resources at one moment.
type usage [metricCount]float64

// readUsage reads pid's resident memory (MiB), thread count and open file
// descriptors from /proc.
func readUsage(pid int) (usage, error) {
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	found := 0
	for line := range bytes.Lines(status) {
		key, rest, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		switch key {
		case "VmRSS": // "VmRSS:	   18236 kB"
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return u, fmt.Errorf("pid %d: VmRSS %q: %w", pid, rest, err)
			}
			u[metricRSS] = kb / 1024
			found++
		case "Threads":
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return u, fmt.Errorf("pid %d: Threads %q: %w", pid, rest, err)
			}
			u[metricThreads] = float64(n)
			found++
		}
	}
	if found != 2 {
		return u, fmt.Errorf("pid %d: no VmRSS or Threads in /proc/%d/status (a zombie?)", pid, pid)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, fmt.Errorf("listing the fds of pid %d: %w", pid, err)
	}
	u[metricFDs] = float64(len(fds))
	return u, nil
}

// sample is every watched process's usage at one moment of the run.
type sample struct {
	at    time.Duration
	usage []usage // in the order of the watched processes
}

// fit is the least-squares line y = intercept + slope·x through the
// points; a single point or points at one x give slope 0.
func fit(xs, ys []float64) (slope, intercept float64) {
	n := float64(len(xs))
	if len(xs) == 0 || len(xs) != len(ys) {
		return 0, 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= n
	my /= n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, my
	}
	slope = sxy / sxx
	return slope, my - slope*mx
}

// minFitted is the fewest second-half samples a verdict is drawn from.
const minFitted = 3

// verdict is the growth judgement of one series.
type verdict struct {
	process string
	metric  metric
	// first and last are the run's first and last samples; mean the
	// mean of the fitted (second-half) samples.
	first, last, mean float64
	// perMinute is the fitted slope; growth that slope over the run.
	perMinute, growth float64
	// limitAt is the growth that fails: the larger of the share of the
	// mean and the absolute limit.
	limitAt float64
	judged  bool
	grows   bool
}

// judge fits the second half of ys (sampled at xs seconds) and decides
// whether the series grows without bound over a run of run: the
// extrapolated growth exceeds both of l's thresholds. The first half is
// warm-up (caches, pools, thread creation) and is left out. Fewer than
// minFitted points in the second half are not judged.
func judge(process string, m metric, xs, ys []float64, run time.Duration, l limit) verdict {
	v := verdict{process: process, metric: m}
	if len(ys) == 0 {
		return v
	}
	v.first, v.last = ys[0], ys[len(ys)-1]
	half := len(ys) / 2
	fx, fy := xs[half:], ys[half:]
	for _, y := range fy {
		v.mean += y
	}
	v.mean /= float64(len(fy))
	slope, _ := fit(fx, fy)
	v.perMinute = slope * 60
	v.growth = slope * run.Seconds()
	v.limitAt = math.Max(l.Share*v.mean, l.Abs)
	v.judged = len(fy) >= minFitted
	v.grows = v.judged && v.growth > v.limitAt
	return v
}

// judgeAll judges every metric of every process over samples.
func judgeAll(names []string, samples []sample, run time.Duration) []verdict {
	var out []verdict
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = s.at.Seconds()
	}
	for p, name := range names {
		for m := range metricCount {
			ys := make([]float64, len(samples))
			for i, s := range samples {
				ys[i] = s.usage[p][m]
			}
			out = append(out, judge(name, m, xs, ys, run, limits[m]))
		}
	}
	return out
}

// printSamples writes the samples as a table: one row per sample, for
// each process its RSS (MiB), threads and fds.
func printSamples(w io.Writer, names []string, samples []sample) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t\t\t", n)
	}
	fmt.Fprint(tw, "\nt\t")
	for range names {
		fmt.Fprint(tw, "rss MiB\tthreads\tfds\t")
	}
	fmt.Fprintln(tw)
	for _, s := range samples {
		fmt.Fprintf(tw, "%s\t", s.at.Round(time.Second))
		for _, u := range s.usage {
			fmt.Fprintf(tw, "%.1f\t%.0f\t%.0f\t", u[metricRSS], u[metricThreads], u[metricFDs])
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

// printVerdicts writes one row per series with its fit and verdict.
func printVerdicts(w io.Writer, vs []verdict) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "process\tmetric\tfirst\tlast\tmean (2nd half)\tslope /min\tgrowth over run\tfails above\tverdict")
	for _, v := range vs {
		word := "ok"
		switch {
		case !v.judged:
			word = "not judged (too few samples)"
		case v.grows:
			word = "GROWS"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%+.2f\t%+.1f\t%.1f\t%s\n",
			v.process, v.metric, v.first, v.last, v.mean, v.perMinute, v.growth, v.limitAt, word)
	}
	_ = tw.Flush()
}
