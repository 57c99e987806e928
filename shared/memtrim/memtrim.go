// Package memtrim hands the memory a burst of work left behind back to
// the operating system once the process has gone quiet.
//
// The Go runtime keeps what a burst made it grow: the garbage of the
// last cycle until the next collection, and freed pages until its
// scavenger releases them, which it does slowly and, on a small heap,
// hardly at all. A service that serves a burst of calls and then idles
// would hold a few megabytes more than it needs for as long as it idles,
// in every process of a fleet. A [Trimmer] watches how much the process
// allocates and, once a burst is over, collects and releases that memory
// once, the work of [debug.FreeOSMemory].
package memtrim

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults of a [Trimmer]'s fields.
const (
	// DefaultPeriod is short enough that an agent between bursts
	// returns its memory within seconds, and long enough that a steady
	// trickle of calls is not a stream of forced collections.
	DefaultPeriod = 2 * time.Second
	// DefaultQuiet is far below what one tool call allocates in a
	// period of steady traffic, and far above what an idle process
	// allocates (connection pings, timers).
	DefaultQuiet = 64 << 10
	// DefaultChurn keeps trims rare: a trim collects, so at most one
	// per MiB of allocation, which is less than half of what the
	// runtime's own collections already cost at the smallest heap goal
	// (4 MiB).
	DefaultChurn = 1 << 20
)

// Metric names read by a [Trimmer].
const (
	allocsMetric   = "/gc/heap/allocs:bytes"
	releasedMetric = "/memory/classes/heap/released:bytes"
)

// A Trimmer returns memory to the operating system once the process is
// quiet after a burst: when, over one Period, it allocated less than
// Quiet bytes, after at least Churn bytes since the last trim. A trim
// happens between one and two periods after the burst ends, and once
// per burst. The zero value is ready to use with the defaults.
type Trimmer struct {
	// Period is how often the allocation counter is read: the quiet
	// spell a trim waits for. Zero means [DefaultPeriod].
	Period time.Duration
	// Quiet is the most a process may allocate in one period and still
	// count as quiet, in bytes. Zero means [DefaultQuiet].
	Quiet uint64
	// Churn is how much the process must have allocated since the last
	// trim, or since Run began, for a quiet spell to trim again, in
	// bytes. Zero means [DefaultChurn].
	Churn uint64
	// Free trims; nil means [debug.FreeOSMemory]. Tests count calls
	// through it.
	Free func()
	// Logger receives a debug record per trim; nil means
	// [slog.Default].
	Logger *slog.Logger

	// ticks replaces the period's ticker in tests, which then decide
	// when each period ends; handled, when set, is called once Run has
	// read its starting point and once each period has been handled.
	ticks   <-chan time.Time
	handled func()
}

func (t Trimmer) withDefaults() Trimmer {
	if t.Period <= 0 {
		t.Period = DefaultPeriod
	}
	if t.Quiet == 0 {
		t.Quiet = DefaultQuiet
	}
	if t.Churn == 0 {
		t.Churn = DefaultChurn
	}
	if t.Free == nil {
		t.Free = debug.FreeOSMemory
	}
	if t.Logger == nil {
		t.Logger = slog.Default()
	}
	return t
}

// Run watches the process until ctx ends, trimming after each burst. It
// counts from the moment it is called: a caller that has just trimmed
// (after start-up, say) starts it then. Run reads one runtime metric per
// period and allocates nothing while it watches.
func (t Trimmer) Run(ctx context.Context) {
	t = t.withDefaults()
	samples := []metrics.Sample{{Name: allocsMetric}, {Name: releasedMetric}}
	read := func() (allocs, released uint64) {
		metrics.Read(samples)
		return samples[0].Value.Uint64(), samples[1].Value.Uint64()
	}
	ticks := t.ticks
	if ticks == nil {
		tick := time.NewTicker(t.Period)
		defer tick.Stop()
		ticks = tick.C
	}
	last, _ := read()
	trimmed := last
	if t.handled != nil {
		t.handled()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		last, trimmed = t.period(read, last, trimmed)
		if t.handled != nil {
			t.handled()
		}
	}
}

// period handles the end of one period: last is the allocation count at
// its start, trimmed the count after the last trim. It returns both
// updated.
func (t Trimmer) period(read func() (allocs, released uint64), last, trimmed uint64) (uint64, uint64) {
	now, before := read()
	if now-last >= t.Quiet || now-trimmed < t.Churn {
		return now, trimmed
	}
	start := time.Now()
	t.Free()
	after, released := read()
	t.Logger.Debug("returned idle memory to the operating system",
		"released_bytes", int64(released)-int64(before), "took", time.Since(start))
	return after, after
}
