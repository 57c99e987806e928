package integration_test

// CPU time and context switches per call of each process a call path
// crosses: see procFigures.
//
// On a machine of two CPUs, what a call costs beyond its transport's
// round trip is mostly the waking of processes that were idle, not their
// CPU time. Counting, per process and per call, the CPU time and the
// context switches (voluntary: the process blocked and had to be woken;
// involuntary: it was preempted) shows which process wakes how often, so
// that work on a path can aim at its wake-ups.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procFigures are the per-call figures of the processes each call series
// crosses: <series>_cpu_us_per_call_<proc> is CPU time (user plus system,
// µs), <series>_vcsw_per_call_<proc> and <series>_ivcsw_per_call_<proc>
// voluntary and involuntary context switches, each summed over the
// process's threads across the series' timed batches and divided by its
// timed calls (warm-up excluded). The processes:
//
//   - bench: the test process, which holds the clients and the embedded
//     nats-server, so that its figures include the broker's routing of
//     every NATS message; read with getrusage(RUSAGE_SELF).
//   - agent: the a2a-agent serving "bench".
//   - gateway: the mcp-gateway.
//   - replier: natsreplier for call_floor, httpreplier for http_floor,
//     the relaying httpreplier for remote_floor (the gateway's stand-in;
//     the natsreplier it relays to is not counted).
//
// The other processes are read from /proc/PID/task/*/status
// (voluntary_ctxt_switches, nonvoluntary_ctxt_switches) and
// /proc/PID/task/*/schedstat (time on CPU, ns), summed over the threads
// alive at the reading. The command a call runs is a process of its own,
// counted in none of them.
type procFigures struct {
	ExecDirectCPUBench   float64 `json:"exec_direct_cpu_us_per_call_bench"`
	ExecDirectVCSWBench  float64 `json:"exec_direct_vcsw_per_call_bench"`
	ExecDirectIVCSWBench float64 `json:"exec_direct_ivcsw_per_call_bench"`

	CallFloorCPUBench     float64 `json:"call_floor_cpu_us_per_call_bench"`
	CallFloorVCSWBench    float64 `json:"call_floor_vcsw_per_call_bench"`
	CallFloorIVCSWBench   float64 `json:"call_floor_ivcsw_per_call_bench"`
	CallFloorCPUReplier   float64 `json:"call_floor_cpu_us_per_call_replier"`
	CallFloorVCSWReplier  float64 `json:"call_floor_vcsw_per_call_replier"`
	CallFloorIVCSWReplier float64 `json:"call_floor_ivcsw_per_call_replier"`

	HTTPFloorCPUBench     float64 `json:"http_floor_cpu_us_per_call_bench"`
	HTTPFloorVCSWBench    float64 `json:"http_floor_vcsw_per_call_bench"`
	HTTPFloorIVCSWBench   float64 `json:"http_floor_ivcsw_per_call_bench"`
	HTTPFloorCPUReplier   float64 `json:"http_floor_cpu_us_per_call_replier"`
	HTTPFloorVCSWReplier  float64 `json:"http_floor_vcsw_per_call_replier"`
	HTTPFloorIVCSWReplier float64 `json:"http_floor_ivcsw_per_call_replier"`

	RemoteFloorCPUBench     float64 `json:"remote_floor_cpu_us_per_call_bench"`
	RemoteFloorVCSWBench    float64 `json:"remote_floor_vcsw_per_call_bench"`
	RemoteFloorIVCSWBench   float64 `json:"remote_floor_ivcsw_per_call_bench"`
	RemoteFloorCPUReplier   float64 `json:"remote_floor_cpu_us_per_call_replier"`
	RemoteFloorVCSWReplier  float64 `json:"remote_floor_vcsw_per_call_replier"`
	RemoteFloorIVCSWReplier float64 `json:"remote_floor_ivcsw_per_call_replier"`

	A2ACallCPUBench     float64 `json:"a2a_call_cpu_us_per_call_bench"`
	A2ACallVCSWBench    float64 `json:"a2a_call_vcsw_per_call_bench"`
	A2ACallIVCSWBench   float64 `json:"a2a_call_ivcsw_per_call_bench"`
	A2ACallCPUAgent     float64 `json:"a2a_call_cpu_us_per_call_agent"`
	A2ACallVCSWAgent    float64 `json:"a2a_call_vcsw_per_call_agent"`
	A2ACallIVCSWAgent   float64 `json:"a2a_call_ivcsw_per_call_agent"`
	MCPCallCPUBench     float64 `json:"mcp_call_cpu_us_per_call_bench"`
	MCPCallVCSWBench    float64 `json:"mcp_call_vcsw_per_call_bench"`
	MCPCallIVCSWBench   float64 `json:"mcp_call_ivcsw_per_call_bench"`
	MCPCallCPUGateway   float64 `json:"mcp_call_cpu_us_per_call_gateway"`
	MCPCallVCSWGateway  float64 `json:"mcp_call_vcsw_per_call_gateway"`
	MCPCallIVCSWGateway float64 `json:"mcp_call_ivcsw_per_call_gateway"`

	MCPLegacyCallCPUBench     float64 `json:"mcp_legacy_call_cpu_us_per_call_bench"`
	MCPLegacyCallVCSWBench    float64 `json:"mcp_legacy_call_vcsw_per_call_bench"`
	MCPLegacyCallIVCSWBench   float64 `json:"mcp_legacy_call_ivcsw_per_call_bench"`
	MCPLegacyCallCPUGateway   float64 `json:"mcp_legacy_call_cpu_us_per_call_gateway"`
	MCPLegacyCallVCSWGateway  float64 `json:"mcp_legacy_call_vcsw_per_call_gateway"`
	MCPLegacyCallIVCSWGateway float64 `json:"mcp_legacy_call_ivcsw_per_call_gateway"`

	MCPRawCallCPUBench     float64 `json:"mcp_raw_call_cpu_us_per_call_bench"`
	MCPRawCallVCSWBench    float64 `json:"mcp_raw_call_vcsw_per_call_bench"`
	MCPRawCallIVCSWBench   float64 `json:"mcp_raw_call_ivcsw_per_call_bench"`
	MCPRawCallCPUGateway   float64 `json:"mcp_raw_call_cpu_us_per_call_gateway"`
	MCPRawCallVCSWGateway  float64 `json:"mcp_raw_call_vcsw_per_call_gateway"`
	MCPRawCallIVCSWGateway float64 `json:"mcp_raw_call_ivcsw_per_call_gateway"`

	MCPRemoteCallCPUBench     float64 `json:"mcp_remote_call_cpu_us_per_call_bench"`
	MCPRemoteCallVCSWBench    float64 `json:"mcp_remote_call_vcsw_per_call_bench"`
	MCPRemoteCallIVCSWBench   float64 `json:"mcp_remote_call_ivcsw_per_call_bench"`
	MCPRemoteCallCPUGateway   float64 `json:"mcp_remote_call_cpu_us_per_call_gateway"`
	MCPRemoteCallVCSWGateway  float64 `json:"mcp_remote_call_vcsw_per_call_gateway"`
	MCPRemoteCallIVCSWGateway float64 `json:"mcp_remote_call_ivcsw_per_call_gateway"`
	MCPRemoteCallCPUAgent     float64 `json:"mcp_remote_call_cpu_us_per_call_agent"`
	MCPRemoteCallVCSWAgent    float64 `json:"mcp_remote_call_vcsw_per_call_agent"`
	MCPRemoteCallIVCSWAgent   float64 `json:"mcp_remote_call_ivcsw_per_call_agent"`

	MCPRemoteLegacyCallCPUBench     float64 `json:"mcp_remote_legacy_call_cpu_us_per_call_bench"`
	MCPRemoteLegacyCallVCSWBench    float64 `json:"mcp_remote_legacy_call_vcsw_per_call_bench"`
	MCPRemoteLegacyCallIVCSWBench   float64 `json:"mcp_remote_legacy_call_ivcsw_per_call_bench"`
	MCPRemoteLegacyCallCPUGateway   float64 `json:"mcp_remote_legacy_call_cpu_us_per_call_gateway"`
	MCPRemoteLegacyCallVCSWGateway  float64 `json:"mcp_remote_legacy_call_vcsw_per_call_gateway"`
	MCPRemoteLegacyCallIVCSWGateway float64 `json:"mcp_remote_legacy_call_ivcsw_per_call_gateway"`
	MCPRemoteLegacyCallCPUAgent     float64 `json:"mcp_remote_legacy_call_cpu_us_per_call_agent"`
	MCPRemoteLegacyCallVCSWAgent    float64 `json:"mcp_remote_legacy_call_vcsw_per_call_agent"`
	MCPRemoteLegacyCallIVCSWAgent   float64 `json:"mcp_remote_legacy_call_ivcsw_per_call_agent"`

	MCPRemoteRawCallCPUBench     float64 `json:"mcp_remote_raw_call_cpu_us_per_call_bench"`
	MCPRemoteRawCallVCSWBench    float64 `json:"mcp_remote_raw_call_vcsw_per_call_bench"`
	MCPRemoteRawCallIVCSWBench   float64 `json:"mcp_remote_raw_call_ivcsw_per_call_bench"`
	MCPRemoteRawCallCPUGateway   float64 `json:"mcp_remote_raw_call_cpu_us_per_call_gateway"`
	MCPRemoteRawCallVCSWGateway  float64 `json:"mcp_remote_raw_call_vcsw_per_call_gateway"`
	MCPRemoteRawCallIVCSWGateway float64 `json:"mcp_remote_raw_call_ivcsw_per_call_gateway"`
	MCPRemoteRawCallCPUAgent     float64 `json:"mcp_remote_raw_call_cpu_us_per_call_agent"`
	MCPRemoteRawCallVCSWAgent    float64 `json:"mcp_remote_raw_call_vcsw_per_call_agent"`
	MCPRemoteRawCallIVCSWAgent   float64 `json:"mcp_remote_raw_call_ivcsw_per_call_agent"`
}

// baseProcFigures are procFigures of the base services (make bench
// BASE=<rev>), for the processes a change is made to: CPU time and wake-ups
// change far less from run to run than latency does, so a change too small
// for the round trips to show still shows here, side by side.
type baseProcFigures struct {
	BaseA2ACallCPUAgent     float64 `json:"base_a2a_call_cpu_us_per_call_agent"`
	BaseA2ACallVCSWAgent    float64 `json:"base_a2a_call_vcsw_per_call_agent"`
	BaseA2ACallIVCSWAgent   float64 `json:"base_a2a_call_ivcsw_per_call_agent"`
	BaseMCPCallCPUGateway   float64 `json:"base_mcp_call_cpu_us_per_call_gateway"`
	BaseMCPCallVCSWGateway  float64 `json:"base_mcp_call_vcsw_per_call_gateway"`
	BaseMCPCallIVCSWGateway float64 `json:"base_mcp_call_ivcsw_per_call_gateway"`

	BaseMCPLegacyCallCPUGateway   float64 `json:"base_mcp_legacy_call_cpu_us_per_call_gateway"`
	BaseMCPLegacyCallVCSWGateway  float64 `json:"base_mcp_legacy_call_vcsw_per_call_gateway"`
	BaseMCPLegacyCallIVCSWGateway float64 `json:"base_mcp_legacy_call_ivcsw_per_call_gateway"`

	BaseMCPRawCallCPUGateway   float64 `json:"base_mcp_raw_call_cpu_us_per_call_gateway"`
	BaseMCPRawCallVCSWGateway  float64 `json:"base_mcp_raw_call_vcsw_per_call_gateway"`
	BaseMCPRawCallIVCSWGateway float64 `json:"base_mcp_raw_call_ivcsw_per_call_gateway"`

	BaseMCPRemoteCallCPUGateway   float64 `json:"base_mcp_remote_call_cpu_us_per_call_gateway"`
	BaseMCPRemoteCallVCSWGateway  float64 `json:"base_mcp_remote_call_vcsw_per_call_gateway"`
	BaseMCPRemoteCallIVCSWGateway float64 `json:"base_mcp_remote_call_ivcsw_per_call_gateway"`
	BaseMCPRemoteCallCPUAgent     float64 `json:"base_mcp_remote_call_cpu_us_per_call_agent"`
	BaseMCPRemoteCallVCSWAgent    float64 `json:"base_mcp_remote_call_vcsw_per_call_agent"`
	BaseMCPRemoteCallIVCSWAgent   float64 `json:"base_mcp_remote_call_ivcsw_per_call_agent"`

	BaseMCPRemoteLegacyCallCPUGateway   float64 `json:"base_mcp_remote_legacy_call_cpu_us_per_call_gateway"`
	BaseMCPRemoteLegacyCallVCSWGateway  float64 `json:"base_mcp_remote_legacy_call_vcsw_per_call_gateway"`
	BaseMCPRemoteLegacyCallIVCSWGateway float64 `json:"base_mcp_remote_legacy_call_ivcsw_per_call_gateway"`
	BaseMCPRemoteLegacyCallCPUAgent     float64 `json:"base_mcp_remote_legacy_call_cpu_us_per_call_agent"`
	BaseMCPRemoteLegacyCallVCSWAgent    float64 `json:"base_mcp_remote_legacy_call_vcsw_per_call_agent"`
	BaseMCPRemoteLegacyCallIVCSWAgent   float64 `json:"base_mcp_remote_legacy_call_ivcsw_per_call_agent"`

	BaseMCPRemoteRawCallCPUGateway   float64 `json:"base_mcp_remote_raw_call_cpu_us_per_call_gateway"`
	BaseMCPRemoteRawCallVCSWGateway  float64 `json:"base_mcp_remote_raw_call_vcsw_per_call_gateway"`
	BaseMCPRemoteRawCallIVCSWGateway float64 `json:"base_mcp_remote_raw_call_ivcsw_per_call_gateway"`
	BaseMCPRemoteRawCallCPUAgent     float64 `json:"base_mcp_remote_raw_call_cpu_us_per_call_agent"`
	BaseMCPRemoteRawCallVCSWAgent    float64 `json:"base_mcp_remote_raw_call_vcsw_per_call_agent"`
	BaseMCPRemoteRawCallIVCSWAgent   float64 `json:"base_mcp_remote_raw_call_ivcsw_per_call_agent"`
}

// procMetrics are the figures of one process of one series, by the infix
// of their keys.
var procMetrics = []string{"cpu_us", "vcsw", "ivcsw"}

// procKey is the report key of a metric of process proc in series.
func procKey(series, metric, proc string) string {
	return series + "_" + metric + "_per_call_" + proc
}

// set writes the per-call figures of s, whose timed calls have all run,
// into f. It fails when f has no field for one of them: a process added
// to a series needs its three fields.
func (f *procFigures) set(s *benchSeries) error { return setProcFigures(reflect.ValueOf(f).Elem(), s) }

// set is procFigures.set for the base series.
func (f *baseProcFigures) set(s *benchSeries) error {
	return setProcFigures(reflect.ValueOf(f).Elem(), s)
}

// setProcFigures writes the per-call figures of s into v, a procFigures
// or a baseProcFigures.
func setProcFigures(v reflect.Value, s *benchSeries) error {
	calls := float64(len(s.samples))
	if calls == 0 {
		return fmt.Errorf("%s: no timed calls to divide by", s.name)
	}
	for i, p := range s.procs {
		u := s.usage[i]
		values := []float64{
			round(float64(u.cpu)/float64(time.Microsecond)/calls, 1),
			round(float64(u.vcsw)/calls, 2),
			round(float64(u.ivcsw)/calls, 2),
		}
		for j, metric := range procMetrics {
			key := procKey(s.name, metric, p.name)
			field, ok := fieldByTag(v, key)
			if !ok {
				return fmt.Errorf("no field of %s has the key %s", v.Type().Name(), key)
			}
			field.SetFloat(values[j])
		}
	}
	return nil
}

// fieldByTag returns the field of struct v whose json tag is key.
func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("json") == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

// benchProc is a process whose CPU time and context switches the timed
// batches of a series are charged with. name is the suffix of its keys in
// the report; pid 0 is this process.
type benchProc struct {
	name string
	pid  int
}

// benchSelf is the test process: the clients and the embedded NATS server.
var benchSelf = benchProc{name: "bench"}

// procUsage is what a process has used since it started, or between two
// readings.
type procUsage struct {
	cpu         time.Duration // on CPU, user plus system
	vcsw, ivcsw int64         // voluntary and involuntary context switches
}

func (u procUsage) add(v procUsage) procUsage {
	return procUsage{u.cpu + v.cpu, u.vcsw + v.vcsw, u.ivcsw + v.ivcsw}
}

func (u procUsage) sub(v procUsage) procUsage {
	return procUsage{u.cpu - v.cpu, u.vcsw - v.vcsw, u.ivcsw - v.ivcsw}
}

// procReader reads the usage of processes between the timed batches of
// [interleaveRounds]. It reuses one buffer for the /proc files, so that
// the readings leave little garbage for the test process to collect
// during the calls. It is not safe for concurrent use.
type procReader struct {
	buf []byte
}

// read returns the usage of each of procs, in their order. With
// selfFirst, this process is read before the others, otherwise after
// them: a batch is read around with selfFirst false before and true
// after it, so that this process's figure holds none of the reading of
// the others' /proc files.
func (r *procReader) read(procs []benchProc, selfFirst bool) ([]procUsage, error) {
	out := make([]procUsage, len(procs))
	readSelf := func() error {
		for i, p := range procs {
			if p.pid == 0 {
				u, err := selfUsage()
				if err != nil {
					return err
				}
				out[i] = u
			}
		}
		return nil
	}
	if selfFirst {
		if err := readSelf(); err != nil {
			return nil, err
		}
	}
	for i, p := range procs {
		if p.pid == 0 {
			continue
		}
		u, err := r.usage(p.pid)
		if err != nil {
			return nil, fmt.Errorf("%s (pid %d): %w", p.name, p.pid, err)
		}
		out[i] = u
	}
	if !selfFirst {
		if err := readSelf(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// selfUsage is this process's usage from getrusage(RUSAGE_SELF), which
// counts its threads that have exited too (not its children).
func selfUsage() (procUsage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return procUsage{}, fmt.Errorf("getrusage: %w", err)
	}
	return procUsage{
		cpu:   time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		vcsw:  int64(ru.Nvcsw),
		ivcsw: int64(ru.Nivcsw),
	}, nil
}

// hasSchedstat reports whether the kernel keeps /proc/PID/schedstat
// (CONFIG_SCHED_INFO): time on CPU to the nanosecond, where /proc/PID/stat
// counts clock ticks.
var hasSchedstat = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/schedstat")
	return err == nil
})

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// architecture Go runs Linux on.
const userHZ = 100

// usage sums the context switches and the time on CPU of pid's threads.
// A thread that exits between the listing and its reading is left out;
// one that exited before the listing is gone from /proc, so a process
// whose threads come and go is undercounted (Go's runtime keeps its
// threads). Without schedstat, CPU time comes from /proc/PID/stat, which
// counts exited threads but only in clock ticks.
func (r *procReader) usage(pid int) (procUsage, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, err := r.names(dir)
	if err != nil {
		return procUsage{}, err
	}
	var total procUsage
	for _, tid := range tids {
		status, err := r.load(dir + tid + "/status")
		if gone(err) {
			continue
		} else if err != nil {
			return procUsage{}, err
		}
		v, iv, err := parseCtxtSwitches(status)
		if err != nil {
			return procUsage{}, fmt.Errorf("%sstatus: %w", dir+tid+"/", err)
		}
		total.vcsw += v
		total.ivcsw += iv
		if !hasSchedstat() {
			continue
		}
		sched, err := r.load(dir + tid + "/schedstat")
		if gone(err) {
			continue
		} else if err != nil {
			return procUsage{}, err
		}
		cpu, err := parseSchedstat(sched)
		if err != nil {
			return procUsage{}, fmt.Errorf("%sschedstat: %w", dir+tid+"/", err)
		}
		total.cpu += cpu
	}
	if !hasSchedstat() {
		path := "/proc/" + strconv.Itoa(pid) + "/stat"
		stat, err := r.load(path)
		if err != nil {
			return procUsage{}, err
		}
		cpu, err := parseStatCPU(stat)
		if err != nil {
			return procUsage{}, fmt.Errorf("%s: %w", path, err)
		}
		total.cpu = cpu
	}
	return total, nil
}

// gone reports whether err says the thread read has exited.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// names lists the directory dir.
func (r *procReader) names(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// load returns the contents of the /proc file at path, in r.buf. A /proc
// file is made whole at its first read, so one read into a buffer larger
// than the file gets all of it: three system calls per file instead of
// os.ReadFile's five or six, which on a busy machine is most of the
// reading's time.
func (r *procReader) load(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 8<<10)
	}
	for {
		n, err := syscall.Read(fd, r.buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n < len(r.buf):
			return r.buf[:n], nil
		}
		// Larger than the buffer: read it again, whole, into a larger one.
		if _, err := syscall.Seek(fd, 0, io.SeekStart); err != nil {
			return nil, &fs.PathError{Op: "seek", Path: path, Err: err}
		}
		r.buf = make([]byte, 2*len(r.buf))
	}
}

// parseCtxtSwitches returns the voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches of a /proc status file.
func parseCtxtSwitches(status []byte) (voluntary, involuntary int64, err error) {
	var seen int
	for line := range bytes.Lines(status) {
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "voluntary_ctxt_switches":
			dst = &voluntary
		case "nonvoluntary_ctxt_switches":
			dst = &involuntary
		default:
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("%s: got %q, want a count", key, bytes.TrimSpace(value))
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return 0, 0, errors.New("no voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines")
	}
	return voluntary, involuntary, nil
}

// parseSchedstat returns the first field of a /proc schedstat line: the
// time the task has spent on a CPU, in nanoseconds.
func parseSchedstat(line []byte) (time.Duration, error) {
	f := strings.Fields(string(line))
	if len(f) != 3 {
		return 0, fmt.Errorf("got %q, want three fields", bytes.TrimSpace(line))
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("got %q, want nanoseconds on CPU", f[0])
	}
	return time.Duration(ns), nil
}

// parseStatCPU returns utime plus stime (fields 14 and 15) of a /proc
// stat line, in [userHZ] ticks, as a duration. The command name, field 2,
// is in parentheses and may hold spaces and parentheses itself, so the
// fields are counted from after its last ')'.
func parseStatCPU(line []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("got %.80q, want a stat line", line)
	}
	f := strings.Fields(string(line[i+1:]))
	// f[0] is field 3, the state: utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("got %d fields after the command, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("got %q, want clock ticks", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// logProcFigures logs the per-call figures of the counted series as a
// table: one line per series, one column per process.
func logProcFigures(tb testing.TB, series []*benchSeries) {
	tb.Helper()
	procs := []string{"bench", "agent", "gateway", "replier"}
	var sb strings.Builder
	sb.WriteString("per call, by process: CPU µs (user+system), voluntary / involuntary context switches:\n")
	fmt.Fprintf(&sb, "  %-27s", "series")
	for _, p := range procs {
		fmt.Fprintf(&sb, " %-22s", p)
	}
	sb.WriteByte('\n')
	for _, s := range series {
		if len(s.procs) == 0 || len(s.samples) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "  %-27s", s.name)
		calls := float64(len(s.samples))
		for _, name := range procs {
			cell := "-"
			for i, p := range s.procs {
				if p.name == name {
					u := s.usage[i]
					cell = fmt.Sprintf("%7.1f %6.2f / %5.2f", float64(u.cpu)/float64(time.Microsecond)/calls, float64(u.vcsw)/calls, float64(u.ivcsw)/calls)
				}
			}
			fmt.Fprintf(&sb, " %-22s", cell)
		}
		sb.WriteByte('\n')
	}
	tb.Log(sb.String())
}

func TestParseCtxtSwitches(t *testing.T) {
	status := `Name:	a2a-agent
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Pid:	4247
Threads:	9
VmRSS:	   14336 kB
Cpus_allowed_list:	0-1
voluntary_ctxt_switches:	15230
nonvoluntary_ctxt_switches:	87
`
	v, iv, err := parseCtxtSwitches([]byte(status))
	if err != nil || v != 15230 || iv != 87 {
		t.Errorf("parseCtxtSwitches: got %d, %d (%v), want 15230, 87", v, iv, err)
	}
	for _, bad := range []string{
		"",
		"Name:\tx\n",
		"voluntary_ctxt_switches:\t3\n",
		"nonvoluntary_ctxt_switches:\t3\n",
		"voluntary_ctxt_switches:\tmany\nnonvoluntary_ctxt_switches:\t3\n",
		"voluntary_ctxt_switches:\t-1\nnonvoluntary_ctxt_switches:\t3\n",
		"voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t99999999999999999999\n",
	} {
		if v, iv, err := parseCtxtSwitches([]byte(bad)); err == nil {
			t.Errorf("parseCtxtSwitches(%q): got %d, %d, want an error", bad, v, iv)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"618582 0 1\n", 618582, true},
		{"123456789012 3456 789\n", 123456789012, true},
		{"", 0, false},
		{"618582\n", 0, false},
		{"618582 0 1 7\n", 0, false},
		{"-5 0 1\n", 0, false},
		{"1.5 0 1\n", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSchedstat([]byte(tt.line))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("parseSchedstat(%q): got %v (%v), want %v, ok %v", tt.line, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// utime 250 and stime 50 ticks: three seconds. The command name holds
	// a space and a parenthesis, which splitting on spaces would miscount.
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 100 1000000 3500 18446744073709551615\n"
	if got, err := parseStatCPU([]byte(line)); err != nil || got != 3*time.Second {
		t.Errorf("parseStatCPU: got %v (%v), want 3s", got, err)
	}
	for _, bad := range []string{"", "4242 (cmd) S 1 2 3\n", "4242 (cmd) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 50 0\n", "no parenthesis 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"} {
		if got, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): got %v, want an error", bad, got)
		}
	}
}

// TestProcUsageOfSelf reads this process both ways: getrusage and the
// /proc files agree on a busy spell of CPU within a margin, and neither
// count runs backwards.
func TestProcUsageOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	var r procReader
	procs := []benchProc{benchSelf, {name: "self via /proc", pid: os.Getpid()}}
	before, err := r.read(procs, false)
	if err != nil {
		t.Fatal(err)
	}
	// Spin for 50 ms of CPU, then block once.
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	time.Sleep(time.Millisecond)
	after, err := r.read(procs, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		d := after[i].sub(before[i])
		if d.cpu < 20*time.Millisecond || d.vcsw < 0 || d.ivcsw < 0 {
			t.Errorf("%s: got %+v over a 50 ms spin, want at least 20 ms on CPU and no negative count", p.name, d)
		}
	}
}

// TestProcFiguresKeys keeps the keys of procFigures and baseProcFigures
// to the shape <series>_<metric>_per_call_<proc>, with all three metrics
// of every series and process named, and set filling each of them.
func TestProcFiguresKeys(t *testing.T) {
	// exec_direct, call_floor, http_floor and remote_floor, then the
	// paths.
	if n, want := procKeySeries(t, reflect.TypeFor[procFigures]()), 4+len(overheadPaths); n != want {
		t.Errorf("procFigures series: got %d, want %d", n, want)
	}
	if n := procKeySeries(t, reflect.TypeFor[baseProcFigures]()); n != len(overheadPaths) {
		t.Errorf("baseProcFigures series: got %d, want one per overhead path, %d", n, len(overheadPaths))
	}
	var f procFigures
	unknown := &benchSeries{name: "exec_guarded", samples: make([]time.Duration, 1), procs: []benchProc{benchSelf}, usage: make([]procUsage, 1)}
	if err := f.set(unknown); err == nil {
		t.Error("set of a series without fields: got no error, want one naming the missing key")
	}
}

// procKeySeries checks the keys of typ, a procFigures or a
// baseProcFigures, as TestProcFiguresKeys says, and returns how many
// series they name.
func procKeySeries(t *testing.T, typ reflect.Type) int {
	t.Helper()
	seen := map[string]map[string]int{} // series → proc → metrics
	for f := range typ.Fields() {
		key := f.Tag.Get("json")
		series, proc, ok := strings.Cut(key, "_per_call_")
		if !ok || !slices.Contains([]string{"bench", "agent", "gateway", "replier"}, proc) {
			t.Errorf("%s: key %q, want <series>_<metric>_per_call_<bench|agent|gateway|replier>", f.Name, key)
			continue
		}
		var metric string
		for _, m := range procMetrics {
			if s, ok := strings.CutSuffix(series, "_"+m); ok {
				series, metric = s, m
				break
			}
		}
		if metric == "" {
			t.Errorf("%s: key %q, want a metric of %v", f.Name, key, procMetrics)
			continue
		}
		if seen[series] == nil {
			seen[series] = map[string]int{}
		}
		seen[series][proc]++
	}
	for series, procs := range seen {
		s := &benchSeries{name: series, samples: make([]time.Duration, 4)}
		for proc, n := range procs {
			if n != len(procMetrics) {
				t.Errorf("%s of %s: got %d keys, want %d", proc, series, n, len(procMetrics))
			}
			s.procs = append(s.procs, benchProc{name: proc})
			s.usage = append(s.usage, procUsage{cpu: 1000 * time.Microsecond, vcsw: 50, ivcsw: 2})
		}
		v := reflect.New(typ).Elem()
		if err := setProcFigures(v, s); err != nil {
			t.Errorf("set %s: %v", series, err)
			continue
		}
		for proc := range procs {
			for j, want := range []float64{250, 12.5, 0.5} {
				key := procKey(series, procMetrics[j], proc)
				if got, _ := fieldByTag(v, key); got.Float() != want {
					t.Errorf("%s: got %v, want %v", key, got.Float(), want)
				}
			}
		}
	}
	return len(seen)
}

// TestInterleaveRoundsChargesBatches charges a series with its own timed
// batches only: not its warm-up, nor the batches of the series it takes
// turns with. Spins are of wall time, and CPU time can only fall short of
// them on a busy machine, so the bounds hold however loaded it is.
func TestInterleaveRoundsChargesBatches(t *testing.T) {
	spin := func(d time.Duration) {
		for start := time.Now(); time.Since(start) < d; {
		}
	}
	warm := true
	counted := &benchSeries{name: "counted", procs: []benchProc{benchSelf}, run: func(context.Context) error {
		if warm {
			warm = false
			spin(300 * time.Millisecond)
			return nil
		}
		spin(time.Millisecond)
		return nil
	}}
	other := &benchSeries{name: "other", run: func(context.Context) error {
		spin(30 * time.Millisecond)
		return nil
	}}
	interleaveRounds(t, []*benchSeries{counted, other}, 1, 10, 2, 2)
	if len(counted.usage) != 1 || len(other.usage) != 0 {
		t.Fatalf("usage: got %d and %d entries, want one for counted and none for other", len(counted.usage), len(other.usage))
	}
	// counted's ten timed calls spin 10 ms; its warm-up 300 ms and
	// other's calls 300 ms, neither of which it may be charged with.
	if got := counted.usage[0].cpu; got <= 0 || got >= 150*time.Millisecond {
		t.Errorf("counted CPU: got %v, want above 0 and well under its warm-up's or other's 300 ms", got)
	}
	if u := counted.usage[0]; u.vcsw < 0 || u.ivcsw < 0 {
		t.Errorf("counted context switches: got %+v, want no negative count", u)
	}
}
