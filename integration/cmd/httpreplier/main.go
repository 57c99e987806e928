// Command httpreplier is the HTTP transport's floor in the benchmark
// report: an HTTP server in a process of its own that answers every POST
// with the same fixed bytes, reading the request body and decoding
// nothing.
//
// The overhead of an MCP call is counted in NATS round trips (natsreplier),
// the unit every path shares; but an MCP call crosses HTTP, not NATS. A
// POST of an MCP call's size to this process, answered with the bytes a
// gateway answered that call with, is what HTTP itself costs, so the
// report can say how much of an MCP call's overhead is the transport's and
// how much the gateway's.
//
// Usage:
//
//	httpreplier --listen 127.0.0.1:0 --payload FILE
//
// It prints "ready http://ADDR" on stdout once it listens, and runs until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// readyPrefix starts the line httpreplier prints once it listens.
const readyPrefix = "ready "

// maxBody bounds a request body: the floor reads what an MCP call sends.
const maxBody = 1 << 20

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	payloadPath := flag.String("payload", "", "file holding the reply bytes (required)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *payloadPath, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "httpreplier: %v\n", err)
		os.Exit(1)
	}
}

// run answers POSTs on listen with the bytes of the file at payloadPath
// until ctx is done, writing the ready line to ready once it listens.
func run(ctx context.Context, listen, payloadPath string, ready io.Writer) error {
	if payloadPath == "" {
		return errors.New("--payload is required")
	}
	payload, err := os.ReadFile(payloadPath)
	if err != nil {
		return fmt.Errorf("reading the payload: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", listen, err)
	}
	length := strconv.Itoa(len(payload))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				http.Error(w, "POST only", http.StatusMethodNotAllowed)
				return
			}
			// Read the request as any server must, then answer.
			if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBody)); err != nil {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", length)
			_, _ = w.Write(payload)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(ready, "%shttp://%s\n", readyPrefix, ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shut)
}
