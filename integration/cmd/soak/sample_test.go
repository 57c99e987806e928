package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/fiskfleet/fiskfleet/integration/internal/workspace"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

func TestFit(t *testing.T) {
	tests := []struct {
		name                     string
		xs, ys                   []float64
		wantSlope, wantIntercept float64
	}{
		{"empty", nil, nil, 0, 0},
		{"mismatched lengths", []float64{1, 2}, []float64{1}, 0, 0},
		{"one point", []float64{5}, []float64{7}, 0, 7},
		{"all at one x", []float64{3, 3, 3}, []float64{1, 2, 3}, 0, 2},
		{"flat", []float64{0, 10, 20, 30}, []float64{12, 12, 12, 12}, 0, 12},
		{"exact line", []float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}, 2, 1},
		{"falling line", []float64{10, 20, 30}, []float64{30, 20, 10}, -1, 40},
		{"noisy rise", []float64{0, 1, 2, 3}, []float64{0, 2, 1, 3}, 0.8, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slope, intercept := fit(tt.xs, tt.ys)
			if math.Abs(slope-tt.wantSlope) > 1e-9 || math.Abs(intercept-tt.wantIntercept) > 1e-9 {
				t.Errorf("fit: got slope %v intercept %v, want %v and %v", slope, intercept, tt.wantSlope, tt.wantIntercept)
			}
		})
	}
}

// series is n samples one every step seconds, y = f(i).
func series(n int, step float64, f func(i int) float64) (xs, ys []float64) {
	for i := range n {
		xs = append(xs, float64(i)*step)
		ys = append(ys, f(i))
	}
	return xs, ys
}

func TestJudge(t *testing.T) {
	const run = 10 * time.Minute
	rss := limits[metricRSS]
	tests := []struct {
		name       string
		f          func(i int) float64
		n          int
		l          limit
		wantJudged bool
		wantGrows  bool
		wantGrowth float64
	}{
		{
			name: "flat after warm-up",
			f: func(i int) float64 {
				if i < 30 {
					return 10 + float64(i) // start-up growth in the first half only
				}
				return 40
			},
			n: 61, l: rss, wantJudged: true, wantGrowth: 0,
		},
		{
			// 0.1 MiB per 10 s sample is 6 MiB over 10 min: above 4 MiB
			// and 10 % of ~20 MiB.
			name: "steady leak", f: func(i int) float64 { return 17 + 0.1*float64(i) },
			n: 61, l: rss, wantJudged: true, wantGrows: true, wantGrowth: 6,
		},
		{
			// 6 MiB over the run on a 200 MiB process is 3 %: under the
			// share, so not a failure however large in MiB.
			name: "growth small for a large process", f: func(i int) float64 { return 200 + 0.1*float64(i) },
			n: 61, l: rss, wantJudged: true, wantGrowth: 6,
		},
		{
			// 3 MiB over the run is 25 % of a 12 MiB process but under
			// the absolute 4 MiB.
			name: "growth small in MiB", f: func(i int) float64 { return 10 + 0.05*float64(i) },
			n: 61, l: rss, wantJudged: true, wantGrowth: 3,
		},
		{
			name: "sawtooth without trend", f: func(i int) float64 { return 20 + float64(i%2)*2 },
			n: 61, l: rss, wantJudged: true, wantGrowth: 0,
		},
		{
			name: "shrinking", f: func(i int) float64 { return 30 - 0.1*float64(i) },
			n: 61, l: rss, wantJudged: true, wantGrowth: -6,
		},
		{
			name: "too few samples", f: func(i int) float64 { return float64(100 * i) },
			n: 4, l: rss, wantJudged: false,
		},
		{
			name: "fd leak", f: func(i int) float64 { return 12 + float64(i) },
			n: 61, l: limits[metricFDs], wantJudged: true, wantGrows: true, wantGrowth: 60,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xs, ys := series(tt.n, 10, tt.f)
			v := judge("p", metricRSS, xs, ys, run, tt.l)
			if v.judged != tt.wantJudged || v.grows != tt.wantGrows {
				t.Errorf("judge: got judged %t grows %t (growth %.2f, limit %.2f), want judged %t grows %t", v.judged, v.grows, v.growth, v.limitAt, tt.wantJudged, tt.wantGrows)
			}
			if tt.wantJudged && math.Abs(v.growth-tt.wantGrowth) > 0.2 {
				t.Errorf("growth: got %.3f, want %.1f ± 0.2", v.growth, tt.wantGrowth)
			}
			if v.first != ys[0] || v.last != ys[len(ys)-1] {
				t.Errorf("first/last: got %v/%v, want %v/%v", v.first, v.last, ys[0], ys[len(ys)-1])
			}
		})
	}
}

func TestJudgeAll(t *testing.T) {
	var samples []sample
	for i := range 20 {
		samples = append(samples, sample{
			at: time.Duration(i) * 10 * time.Second,
			usage: []usage{
				{20, 10, 15},                          // steady
				{20, 10, 15 + float64(i)},             // an fd per sample
				{20 + float64(i), 10 + float64(i), 9}, // memory and threads
			},
		})
	}
	vs := judgeAll([]string{"a", "b", "c"}, samples, 200*time.Second)
	var got []string
	for _, v := range vs {
		if v.grows {
			got = append(got, v.process+" "+v.metric.String())
		}
	}
	want := []string{"b fds", "c rss_mib", "c threads"}
	if !slices.Equal(got, want) {
		t.Errorf("growing series: got %v, want %v", got, want)
	}
	var out bytes.Buffer
	printVerdicts(&out, vs)
	if n := strings.Count(out.String(), "GROWS"); n != 3 {
		t.Errorf("verdict table: got %d GROWS rows, want 3:\n%s", n, out.String())
	}
	out.Reset()
	printSamples(&out, []string{"a", "b", "c"}, samples)
	if lines := strings.Count(out.String(), "\n"); lines != 2+len(samples) {
		t.Errorf("sample table: got %d lines, want 2 header lines and one per sample (%d):\n%s", lines, 2+len(samples), out.String())
	}
}

// TestReadUsage reads this test process's own /proc entries, and fails
// for a process that does not exist.
func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u[metricRSS] <= 0 || u[metricThreads] < 1 || u[metricFDs] < 3 {
		t.Errorf("own usage: got rss %.1f MiB, %v threads, %v fds; want positive memory, a thread and stdin/out/err", u[metricRSS], u[metricThreads], u[metricFDs])
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	more, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if more[metricFDs] < u[metricFDs]+1 {
		t.Errorf("fds after opening a file: got %v, want at least %v", more[metricFDs], u[metricFDs]+1)
	}
	if _, err := readUsage(math.MaxInt32); err == nil {
		t.Error("readUsage of a missing pid: got nil, want an error")
	}
}

// TestChildrenOf finds a child this test starts, by its PID.
func TestChildrenOf(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	kids, err := childrenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Errorf("children: got %v, want them to hold %d", kids, cmd.Process.Pid)
	}
}

// TestSoakConfig keeps the dev fleet's config but for the gateway's
// address, which moves to a free loopback port; the result still loads.
func TestSoakConfig(t *testing.T) {
	root, err := workspace.Root("soak")
	if err != nil {
		t.Fatal(err)
	}
	path, err := soakConfig(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	want, err := config.Load(filepath.Join(root, "integration", "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Identity != want.Identity || got.NATSContext != want.NATSContext || len(got.RemoteTools) != len(want.RemoteTools) {
		t.Errorf("soak config: got identity %q context %q %d remote hosts, want %q %q %d", got.Identity, got.NATSContext, len(got.RemoteTools), want.Identity, want.NATSContext, len(want.RemoteTools))
	}
	mcp := got.Expose.Agent.MCP
	if mcp == nil || mcp.Address != "127.0.0.1" || mcp.Port == 0 || mcp.Port == want.Expose.Agent.MCP.Port {
		t.Errorf("soak config mcp: got %+v, want 127.0.0.1 on a port other than %d", mcp, want.Expose.Agent.MCP.Port)
	}
	var doc map[string]any
	b, _ := os.ReadFile(path)
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["remote_refresh_interval"]; !ok {
		t.Errorf("soak config: got keys %v, want remote_refresh_interval kept", doc)
	}
}
