package fiskapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fiskfleet/fiskfleet/shared/fiskapp"
	"github.com/fiskfleet/fiskfleet/shared/fisktest"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// call runs a command and fails tb unless it produced a command result.
func call(tb testing.TB, c *fiskapp.Command, input string) *tool.CommandResult {
	tb.Helper()
	out, err := c.Call(tb.Context(), tool.Request{Input: json.RawMessage(input)})
	if err != nil {
		tb.Fatalf("calling %s with %s: %v", c.Name(), input, err)
	}
	if out.IsError || out.Result == nil {
		tb.Fatalf("calling %s with %s: got outcome %+v, want a command result", c.Name(), input, out)
	}
	return out.Result
}

func TestArgvEcho(t *testing.T) {
	t.Parallel()
	echo := demoCommand(t, fiskapp.Options{}, "echo")
	bin := demoPath(t)
	tests := []struct {
		name       string
		input      string
		want       []string
		wantLine   string
		wantOutput string
	}{
		{
			name:       "every flag type",
			input:      `{"message":"hello world","prefix":"> ","count":2,"upper":true,"format":"json","label":["a","b"]}`,
			want:       []string{bin, "echo", "--prefix=> ", "--count=2", "--upper", "--format=json", "--label=a", "--label=b", "--", "hello world"},
			wantLine:   bin + ` echo '--prefix=> ' --count=2 --upper --format=json --label=a --label=b -- 'hello world'`,
			wantOutput: "{\"message\":\"> HELLO WORLD\",\"labels\":[\"a\",\"b\"]}\n{\"message\":\"> HELLO WORLD\",\"labels\":[\"a\",\"b\"]}\n",
		},
		{
			name:       "negated bool",
			input:      `{"message":"Mixed","upper":false}`,
			want:       []string{bin, "echo", "--no-upper", "--", "Mixed"},
			wantLine:   bin + " echo --no-upper -- Mixed",
			wantOutput: "Mixed\n",
		},
		{
			name:       "message that looks like a flag",
			input:      `{"message":"--count=9"}`,
			want:       []string{bin, "echo", "--", "--count=9"},
			wantLine:   bin + " echo -- --count=9",
			wantOutput: "--count=9\n",
		},
		{
			name:       "quote in a value",
			input:      `{"message":"it's"}`,
			want:       []string{bin, "echo", "--", "it's"},
			wantLine:   bin + ` echo -- 'it'\''s'`,
			wantOutput: "it's\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := echo.Argv(json.RawMessage(tt.input))
			if err != nil {
				t.Fatalf("argv: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got argv %q, want %q", got, tt.want)
			}
			line, err := echo.CommandLine(json.RawMessage(tt.input))
			if err != nil || line != tt.wantLine {
				t.Errorf("got command line %q (%v), want %q", line, err, tt.wantLine)
			}
			res := call(t, echo, tt.input)
			if res.Output != tt.wantOutput || res.ExitCode != 0 || res.Truncated {
				t.Errorf("got result %+v, want exit 0 and output %q", res, tt.wantOutput)
			}
			if res.Command != tt.wantLine {
				t.Errorf("got result command %q, want %q", res.Command, tt.wantLine)
			}
		})
	}
}

func TestEmptyInputs(t *testing.T) {
	t.Parallel()
	status := demoCommand(t, fiskapp.Options{}, "cluster_node_status")
	want := []string{demoPath(t), "cluster", "node", "status"}
	for _, input := range []string{"", "null", "{}", " null\n", " { } "} {
		t.Run(strconv.Quote(input), func(t *testing.T) {
			t.Parallel()
			got, err := status.Argv(json.RawMessage(input))
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("got argv %q (%v), want %q", got, err, want)
			}
			if res := call(t, status, input); res.Output != "node n1: status ok\n" || res.ExitCode != 0 {
				t.Errorf("got result %+v, want the default node's status", res)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		t.Parallel()
		out, err := status.Call(t.Context(), tool.Request{})
		if err != nil || out.Result == nil || out.Result.Output != "node n1: status ok\n" {
			t.Errorf("got %+v, %v, want the default node's status", out, err)
		}
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	echo := demoCommand(t, fiskapp.Options{}, "echo")
	tests := []struct {
		name    string
		input   string
		wantMsg string
	}{
		{name: "array", input: `["hi"]`, wantMsg: "input must be a JSON object, got an array"},
		{name: "string", input: `"hi"`, wantMsg: "input must be a JSON object, got a string"},
		{name: "number", input: `42`, wantMsg: "input must be a JSON object, got a number"},
		{name: "boolean", input: `true`, wantMsg: "input must be a JSON object, got a boolean"},
		{name: "truncated object", input: `{"message":`, wantMsg: "got invalid JSON"},
		{name: "trailing data", input: `{"message":"hi"} {}`, wantMsg: "got invalid JSON"},
		{name: "unknown property", input: `{"message":"hi","nope":1}`, wantMsg: `unknown property "nope"`},
		{name: "hidden flag", input: `{"message":"hi","trace":true}`, wantMsg: `unknown property "trace"`},
		{name: "wrong type", input: `{"message":"hi","upper":"yes"}`, wantMsg: "expected boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := echo.Argv(json.RawMessage(tt.input)); !errors.Is(err, fiskapp.ErrInvalidInput) {
				t.Errorf("got argv error %v, want %v", err, fiskapp.ErrInvalidInput)
			}
			out, err := echo.Call(t.Context(), tool.Request{Input: json.RawMessage(tt.input)})
			if err != nil {
				t.Fatalf("got error %v, want an in-band failure", err)
			}
			if !out.IsError || out.Result != nil || !strings.Contains(out.Message, tt.wantMsg) {
				t.Errorf("got outcome %+v, want an in-band error containing %q", out, tt.wantMsg)
			}
		})
	}
}

func TestCallExitCodeAndStderr(t *testing.T) {
	t.Parallel()
	fail := demoCommand(t, fiskapp.Options{}, "fail")
	tests := []struct {
		input    string
		wantCode int
	}{
		{input: `{}`, wantCode: 3},
		{input: `{"code":7}`, wantCode: 7},
		{input: `{"code":0}`, wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			t.Parallel()
			res := call(t, fail, tt.input)
			if res.ExitCode != tt.wantCode {
				t.Errorf("got exit code %d, want %d", res.ExitCode, tt.wantCode)
			}
			want := fmt.Sprintf("about to fail\nfailing with exit code %d\n", tt.wantCode)
			if res.Output != want {
				t.Errorf("got output %q, want stdout then stderr interleaved: %q", res.Output, want)
			}
		})
	}
}

func TestCallOutputCap(t *testing.T) {
	t.Parallel()
	const limit = 4096
	flood := demoCommand(t, fiskapp.Options{OutputCap: limit}, "flood")
	tests := []struct {
		bytes         int
		wantLen       int
		wantTruncated bool
	}{
		{bytes: 1000, wantLen: 1000},
		{bytes: limit, wantLen: limit},
		{bytes: limit + 1, wantLen: limit, wantTruncated: true},
		{bytes: 1 << 20, wantLen: limit, wantTruncated: true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.bytes), func(t *testing.T) {
			t.Parallel()
			res := call(t, flood, fmt.Sprintf(`{"bytes":%d}`, tt.bytes))
			if len(res.Output) != tt.wantLen || res.Truncated != tt.wantTruncated {
				t.Errorf("got %d bytes, truncated %t, want %d, %t", len(res.Output), res.Truncated, tt.wantLen, tt.wantTruncated)
			}
			if res.ExitCode != 0 {
				t.Errorf("got exit code %d, want 0: capping must not fail the command", res.ExitCode)
			}
			if !utf8.ValidString(res.Output) {
				t.Error("got invalid UTF-8 output")
			}
		})
	}
}

func TestCallInterruptKillsGroup(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	spawn := demoCommand(t, fiskapp.Options{KillGrace: grace}, "spawn")
	tests := []struct {
		name    string
		ctx     func(tb testing.TB) context.Context
		wantErr error
	}{
		{
			name: "timeout",
			ctx: func(tb testing.TB) context.Context {
				ctx, cancel := context.WithTimeout(tb.Context(), time.Second)
				tb.Cleanup(cancel)
				return ctx
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "cancel",
			ctx: func(tb testing.TB) context.Context {
				ctx, cancel := context.WithCancel(tb.Context())
				tb.Cleanup(cancel)
				time.AfterFunc(500*time.Millisecond, cancel)
				return ctx
			},
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "child.pid")
			input, _ := json.Marshal(map[string]string{"pidfile": pidfile, "duration": "1m"})

			start := time.Now()
			out, err := spawn.Call(tt.ctx(t), tool.Request{Input: input})
			took := time.Since(start)
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, fiskapp.ErrInterrupted) {
				t.Fatalf("got %+v, %v, want an error wrapping %v and %v", out, err, fiskapp.ErrInterrupted, tt.wantErr)
			}
			if took > time.Second+grace+2*time.Second {
				t.Errorf("got Call returning after %s, want it within the timeout plus the kill grace", took)
			}

			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatalf("reading the child's pidfile: %v", err)
			}
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatalf("parsing pidfile %q: %v", b, err)
			}
			// The grandchild ignores SIGTERM: only the group SIGKILL ends it.
			fisktest.WaitFor(t, 5*time.Second, fmt.Sprintf("grandchild %d to die", pid), func() bool { return fisktest.ProcessGone(pid) })
		})
	}
}

func TestCallOnDoneContext(t *testing.T) {
	t.Parallel()
	echo := demoCommand(t, fiskapp.Options{}, "echo")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := echo.Call(ctx, tool.Request{Input: json.RawMessage(`{"message":"hi"}`)}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want %v without starting the command", err, context.Canceled)
	}
}

func TestCallScrubsCredentials(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	t.Setenv("GITHUB_TOKEN", "ghp-test")
	t.Setenv("FISKAPP_TEST_TOKEN", "operator-secret")
	t.Setenv("FISKAPP_TEST_VISIBLE", "plain")
	getenv := demoCommand(t, fiskapp.Options{CredentialEnv: []string{"FISKAPP_TEST_TOKEN"}}, "getenv")
	tests := []struct {
		name string
		want string
	}{
		{name: "ANTHROPIC_API_KEY", want: "ANTHROPIC_API_KEY unset\n"},
		{name: "GITHUB_TOKEN", want: "GITHUB_TOKEN unset\n"},
		{name: "FISKAPP_TEST_TOKEN", want: "FISKAPP_TEST_TOKEN unset\n"},
		{name: "FISKAPP_TEST_VISIBLE", want: "FISKAPP_TEST_VISIBLE=plain\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input, _ := json.Marshal(map[string]string{"name": tt.name})
			if res := call(t, getenv, string(input)); res.Output != tt.want {
				t.Errorf("got %q, want %q", res.Output, tt.want)
			}
		})
	}
	if got := fiskapp.DefaultCredentialEnv(); !slices.Contains(got, "ANTHROPIC_API_KEY") {
		t.Errorf("got default credential env %v, want it to name ANTHROPIC_API_KEY", got)
	}
}

func TestCallStartFailure(t *testing.T) {
	// Writes and removes an executable: not parallel (see writeScript).
	dir := t.TempDir()
	model := `{"name":"gone","help":"h","commands":[{"name":"run","help":"h"}]}`
	path := writeScript(t, dir, "gone", "echo '"+model+"'")
	app, err := fiskapp.Load(t.Context(), fiskapp.Options{Path: path})
	if err != nil {
		t.Fatalf("loading: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Commands[0].Call(t.Context(), tool.Request{}); !errors.Is(err, fiskapp.ErrStart) {
		t.Errorf("got %v, want %v", err, fiskapp.ErrStart)
	}
}

// liveBuffer collects what a command hands to tool.Request.Output, and the
// first piece on its own.
type liveBuffer struct {
	mu    sync.Mutex // guards all, first
	all   bytes.Buffer
	first string
}

func (b *liveBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.all.Len() == 0 {
		b.first = string(p)
	}
	return b.all.Write(p)
}

func TestCallLiveOutput(t *testing.T) {
	t.Parallel()
	t.Run("pieces arrive while the command runs", func(t *testing.T) {
		t.Parallel()
		ticker := demoCommand(t, fiskapp.Options{}, "ticker")
		var live liveBuffer
		out, err := ticker.Call(t.Context(), tool.Request{Input: json.RawMessage(`{"every":"200ms","count":4}`), Output: &live})
		if err != nil || out.Result == nil {
			t.Fatalf("got %+v, %v, want a result", out, err)
		}
		if live.first != "tick 1 of 4\n" {
			t.Errorf("first piece: got %q, want the first line alone, handed on before the next was printed", live.first)
		}
		if live.all.String() != out.Result.Output {
			t.Errorf("live output: got %q, want the result's %q", live.all.String(), out.Result.Output)
		}
	})
	t.Run("the same bytes as the capped output", func(t *testing.T) {
		t.Parallel()
		flood := demoCommand(t, fiskapp.Options{OutputCap: 4096}, "flood")
		var live liveBuffer
		out, err := flood.Call(t.Context(), tool.Request{Input: json.RawMessage(`{"bytes":100000}`), Output: &live})
		if err != nil || out.Result == nil || !out.Result.Truncated {
			t.Fatalf("got %+v, %v, want a truncated result", out, err)
		}
		if got := live.all.String(); !strings.HasPrefix(got, out.Result.Output) || len(got) > 4096 {
			t.Errorf("live output: got %d bytes, want the %d kept (at most the cap)", len(got), len(out.Result.Output))
		}
	})
}
