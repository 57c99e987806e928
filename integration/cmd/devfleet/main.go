// Command devfleet runs the whole fiskfleet architecture on loopback for
// development: an embedded NATS server, two a2a-agent processes serving the
// demo fisk application as identity "demo", and mcp-gateway in front of
// them, ready for `claude mcp add`. `make run` starts it.
//
// Everything it writes (binaries, the nats context, logs) goes into one
// private directory, so nothing in the user's own nats contexts changes.
// Ctrl-C or SIGTERM stops every child by PID; a child that dies is reported
// with its last log lines and the fleet stops.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.Dir, "dir", "", "private directory for binaries, the nats context and logs (default: a new temporary directory)")
	flag.IntVar(&o.NATSPort, "nats-port", 4222, "NATS port on 127.0.0.1; a free port is used when it is taken")
	flag.IntVar(&o.Agents, "agents", 2, "a2a-agent processes to start on identity demo")
	flag.StringVar(&o.Config, "config", "", "agent configuration (default: integration/examples/demo.yaml)")
	flag.BoolVar(&o.Knowledge, "knowledge", false, "serve the repository's docs/ as knowledge with the vector tier on (starts tools/embedder; default config: integration/examples/knowledge.yaml)")
	flag.IntVar(&o.EmbedderPort, "embedder-port", 8090, "port of the embeddings server on 127.0.0.1 with -knowledge (the one knowledge.yaml names)")
	flag.DurationVar(&o.StartTimeout, "start-timeout", 60*time.Second, "how long each child may take to become ready")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil && !errors.Is(err, errStopped) {
		fmt.Fprintf(os.Stderr, "devfleet: %v\n", err)
		os.Exit(1)
	}
}
