package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
)

// natsFlags are shared by the commands that connect to NATS.
type natsFlags struct {
	Context string `help:"nats context to connect with (default: the selected one)." env:"NATS_CONTEXT"`
}

// clientFlags are shared by the commands that talk to agents on the bus.
type clientFlags struct {
	natsFlags
	Timeout time.Duration `help:"How long to wait for the agent; longer than the agent's own tool_timeout, so a slow command is reported as its timeout rather than as an unavailable agent." default:"60s"`
	As      string        `help:"Sender label on requests (a label for logs, not an authorization)." default:"operator"`
}

func (f clientFlags) client(log *slog.Logger) (*a2a.Client, func(), error) {
	nc, err := natsconn.Connect(natsconn.Options{Context: f.Context, Name: "a2a-agent client " + f.As, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	c, err := a2a.NewClient(natsbus.NewTransport(nc, natsbus.WithTimeout(f.Timeout)), a2a.Participant{Name: f.As})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc.Close, nil
}

type discoverCmd struct {
	clientFlags
	Identity string `arg:"" help:"Agent identity."`
	JSON     bool   `help:"Print the card as JSON."`
}

func (c *discoverCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	client, done, err := c.client(log)
	if err != nil {
		return err
	}
	defer done()
	reply, err := client.Discover(ctx, c.Identity)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reply.AgentCard)
	}
	fmt.Fprintf(e.stdout, "agent %s version %s (instance %s)\n\n", reply.Name, reply.Version, reply.Sender.Instance)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TOOL (%d)\tDESCRIPTION\n", len(reply.Tools))
	for _, t := range reply.Tools {
		first, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, first)
	}
	return tw.Flush()
}

type callCmd struct {
	clientFlags
	Follow   bool   `help:"Print the command's output as it runs (a streamed call); the first Ctrl-C stops the command and waits for its final reply, a second one exits at once."`
	Identity string `arg:"" help:"Agent identity."`
	Tool     string `arg:"" help:"Tool name, as discover lists it."`
	Input    string `arg:"" optional:"" help:"Tool input as a JSON object (default {})."`
}

func (c *callCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	var input json.RawMessage
	if c.Input != "" {
		if !json.Valid([]byte(c.Input)) {
			return fmt.Errorf("input is not valid JSON: %q", c.Input)
		}
		input = json.RawMessage(c.Input)
	}
	client, done, err := c.client(log)
	if err != nil {
		return err
	}
	defer done()
	var reply *a2a.ToolReply
	if c.Follow {
		reply, err = c.follow(ctx, client, input, e)
	} else {
		// Streamed where the agent streams, unary otherwise: a streamed
		// call that this process gives up (its --timeout, Ctrl-C) is
		// canceled at the agent, and a gated call's approval request
		// is withdrawn, where a unary one would wait on without a caller.
		reply, err = client.StreamTool(ctx, c.Identity, c.Tool, input, nil)
	}
	if err != nil {
		return err
	}
	if c.Follow && !reply.IsError {
		// The output was printed as it came; what is left to say is how
		// the command ended.
		if res, ok := reply.CommandResult(); ok {
			note := ""
			if res.Truncated {
				note = " (output truncated)"
			}
			fmt.Fprintf(e.stderr, "exit code %d%s\n", res.ExitCode, note)
			if res.ExitCode != 0 {
				return exitCode(min(max(res.ExitCode, 1), 125))
			}
		}
		return nil
	}
	if reply.IsError {
		fmt.Fprintf(e.stdout, "error: %s\n", reply.Output)
		return exitCode(1)
	}
	res, ok := reply.CommandResult()
	if !ok {
		fmt.Fprintln(e.stdout, reply.Output)
		return nil
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return exitCode(min(max(res.ExitCode, 1), 125))
	}
	return nil
}

// follow makes a streamed call, printing output as it arrives. ctx ends at
// the first Ctrl-C: the agent is told to stop the command, and follow
// waits for the final reply. A second Ctrl-C exits at once.
func (c *callCmd) follow(ctx context.Context, client *a2a.Client, input json.RawMessage, e env) (*a2a.ToolReply, error) {
	go func() {
		<-ctx.Done()
		fmt.Fprintln(e.stderr, "stopping the command; Ctrl-C again to leave at once")
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		<-again
		os.Exit(130)
	}()
	var printed strings.Builder
	// A phase other than running (an operator's approval awaited) is
	// told once, on stderr, as the output is not.
	last := "running"
	ctx = a2a.WithStatus(ctx, func(phase string) {
		if phase != last {
			last = phase
			if phase != "running" {
				fmt.Fprintln(e.stderr, phase)
			}
		}
	})
	reply, err := client.StreamTool(ctx, c.Identity, c.Tool, input, func(text string) {
		printed.WriteString(text)
		fmt.Fprint(e.stdout, text)
	})
	if reply != nil && reply.IsError {
		// An error reply repeats the output so far: it is on the screen.
		reply.Output = strings.TrimPrefix(reply.Output, printed.String())
	}
	if reply != nil && ctx.Err() != nil {
		// Canceled on request: the reply says so; it is not a failure to
		// reach the agent.
		return reply, nil
	}
	return reply, err
}
