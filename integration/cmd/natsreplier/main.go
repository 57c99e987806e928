// Command natsreplier is the transport floor of the benchmark report: a
// NATS replier in a process of its own that answers every request on one
// subject with the same fixed bytes, without decoding anything.
//
// `make bench` measures a discovery round trip to a real a2a-agent against
// a round trip to this process answering with the bytes that agent sent
// (same client, same connection, same request and reply sizes), so the
// difference is what the agent's discovery handler costs over NATS alone.
//
// Usage:
//
//	natsreplier --url nats://127.0.0.1:4222 --subject SUBJECT --payload FILE
//
// It prints "ready" on stdout once its subscription is registered on the
// server, and runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
)

// readyLine is what natsreplier prints once requests reach it.
const readyLine = "ready"

func main() {
	url := flag.String("url", nats.DefaultURL, "NATS server URL")
	subject := flag.String("subject", "", "subject to answer on (required)")
	payloadPath := flag.String("payload", "", "file holding the reply bytes (required)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *subject, *payloadPath, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "natsreplier: %v\n", err)
		os.Exit(1)
	}
}

// run answers requests on subject with the bytes of the file at
// payloadPath until ctx is done, writing readyLine to ready once the
// subscription is registered on the server.
func run(ctx context.Context, url, subject, payloadPath string, ready io.Writer) error {
	if subject == "" || payloadPath == "" {
		return errors.New("--subject and --payload are required")
	}
	payload, err := os.ReadFile(payloadPath)
	if err != nil {
		return fmt.Errorf("reading the payload: %w", err)
	}
	nc, err := nats.Connect(url, nats.Name("natsreplier"))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", url, err)
	}
	defer nc.Close()
	// No decoding and no allocation per request beyond what nats.go
	// itself does: the floor under any real handler.
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(payload) })
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("registering the subscription: %w", err)
	}
	fmt.Fprintln(ready, readyLine)
	<-ctx.Done()
	return nil
}
