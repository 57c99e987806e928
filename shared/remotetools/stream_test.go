package remotetools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// streamingFleet is a fake [Caller] that is also a [Streamer]: it hands
// chunks to onOutput, then answers with their concatenation, and records
// the context error a streamed call ended with.
type streamingFleet struct {
	*fleet
	chunks   []string
	streamed int
	ctxErr   error
}

func (f *streamingFleet) StreamTool(ctx context.Context, identity, name string, input json.RawMessage, onOutput func(string)) (*a2a.ToolReply, error) {
	f.streamed++
	for _, c := range f.chunks {
		if onOutput != nil {
			onOutput(c)
		}
	}
	if err := ctx.Err(); err != nil {
		f.ctxErr = err
		return &a2a.ToolReply{IsError: true, Output: "canceled"}, err
	}
	return &a2a.ToolReply{Output: strings.Join(f.chunks, ""), Exec: &a2a.Exec{Command: "fiskdemo ticker", ExitCode: 0}}, nil
}

// TestRemoteToolStreams checks the streamed path of a remote tool: output
// reaches the request's writer as it comes, the result is the final reply
// alone, a call without a writer still streams when the caller cannot
// make a cancelable unary call (so a cancel can reach the agent), and an
// ended context reaches the stream.
func TestRemoteToolStreams(t *testing.T) {
	base := &fleet{cards: map[string][]a2a.ToolDescriptor{"demo": desc("ticker")}}
	base.reply = func(string, string, json.RawMessage) (*a2a.ToolReply, error) {
		return nil, errors.New("the unary call was used")
	}
	f := &streamingFleet{fleet: base, chunks: []string{"tick 1\n", "tick 2\n", "tick 3\n"}}
	res, err := NewImporter(f, []config.RemoteHost{{Host: "demo"}}, nil).ImportStrict(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ticker := res.Tools[0]
	want := `{"command":"fiskdemo ticker","exit_code":0,"output":"tick 1\ntick 2\ntick 3\n","truncated":false}`

	tests := []struct {
		name   string
		output bool
	}{
		{name: "with a writer", output: true},
		{name: "without a writer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			req := tool.Request{}
			if tt.output {
				req.Output = &buf
			}
			before := f.streamed
			out, err := ticker.Call(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.streamed - before; got != 1 {
				t.Errorf("streamed calls: got %d, want 1", got)
			}
			if out.IsError || out.Text() != want {
				t.Errorf("result: got %q (error %t), want %q", out.Text(), out.IsError, want)
			}
			if tt.output && buf.String() != "tick 1\ntick 2\ntick 3\n" {
				t.Errorf("relayed output: got %q, want the three chunks in order", buf.String())
			}
		})
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	out, err := ticker.Call(ctx, tool.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if !out.IsError || !errors.Is(f.ctxErr, context.Canceled) {
		t.Errorf("canceled call: got %+v with stream context error %v, want an in-band error and the cancel passed on", out, f.ctxErr)
	}
}
