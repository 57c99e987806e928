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
// With --relay-url, it is the floor of a remote call instead: every POST
// is relayed as one NATS request (the bytes of --relay-request, to
// --relay-subject, a natsreplier's) and answered once its reply is in. A
// remote MCP call crosses HTTP to the gateway and NATS from the
// gateway's own process, through the broker to the agent and back; the
// NATS floor's requests are sent from the process that hosts the broker,
// so one HTTP and one NATS floor added together leave the gateway's hops
// to and from the broker out. Relaying does nothing else a gateway does,
// so what a remote call costs beyond this floor is fiskfleet's.
//
// Usage:
//
//	httpreplier --listen 127.0.0.1:0 --payload FILE
//	httpreplier --listen 127.0.0.1:0 --payload FILE --relay-url nats://127.0.0.1:4222 --relay-subject SUBJECT --relay-request FILE
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

	"github.com/nats-io/nats.go"
)

// readyPrefix starts the line httpreplier prints once it listens.
const readyPrefix = "ready "

// maxBody bounds a request body: the floor reads what an MCP call sends.
const maxBody = 1 << 20

// relayTimeout bounds the wait for a relayed request's reply.
const relayTimeout = 10 * time.Second

// options are httpreplier's flags.
type options struct {
	listen  string
	payload string // path of the reply bytes
	// relayURL, when set, makes every POST a NATS request of the bytes
	// of the file at relayRequest to relaySubject on that server.
	relayURL, relaySubject, relayRequest string
}

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on")
	flag.StringVar(&o.payload, "payload", "", "file holding the reply bytes (required)")
	flag.StringVar(&o.relayURL, "relay-url", "", "NATS server to relay every POST to as a request (optional)")
	flag.StringVar(&o.relaySubject, "relay-subject", "", "subject of the relayed request (required with --relay-url)")
	flag.StringVar(&o.relayRequest, "relay-request", "", "file holding the relayed request's bytes (required with --relay-url)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "httpreplier: %v\n", err)
		os.Exit(1)
	}
}

// run answers POSTs on o.listen with the bytes of the file at o.payload,
// relaying each first when o.relayURL is set, until ctx is done, writing
// the ready line to ready once it listens.
func run(ctx context.Context, o options, ready io.Writer) error {
	if o.payload == "" {
		return errors.New("--payload is required")
	}
	payload, err := os.ReadFile(o.payload)
	if err != nil {
		return fmt.Errorf("reading the payload: %w", err)
	}
	relay, err := dialRelay(o)
	if err != nil {
		return err
	}
	if relay != nil {
		defer relay.nc.Close()
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.listen, err)
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
			if relay != nil {
				if err := relay.request(r.Context()); err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
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

// relay is the NATS leg of a remote call's floor.
type relay struct {
	nc      *nats.Conn
	subject string
	data    []byte
}

// dialRelay connects the relay o asks for, or returns nil for none.
func dialRelay(o options) (*relay, error) {
	if o.relayURL == "" {
		if o.relaySubject != "" || o.relayRequest != "" {
			return nil, errors.New("--relay-subject and --relay-request need --relay-url")
		}
		return nil, nil
	}
	if o.relaySubject == "" || o.relayRequest == "" {
		return nil, errors.New("--relay-url needs --relay-subject and --relay-request")
	}
	data, err := os.ReadFile(o.relayRequest)
	if err != nil {
		return nil, fmt.Errorf("reading the relayed request: %w", err)
	}
	nc, err := nats.Connect(o.relayURL, nats.Name("httpreplier"))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", o.relayURL, err)
	}
	return &relay{nc: nc, subject: o.relaySubject, data: data}, nil
}

// request sends the relayed request and waits for its reply, whose bytes
// it does not read: an empty one, or none, is an error.
func (r *relay) request(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	msg, err := r.nc.RequestWithContext(ctx, r.subject, r.data)
	if err != nil {
		return fmt.Errorf("relaying to %s: %w", r.subject, err)
	}
	if len(msg.Data) == 0 {
		return fmt.Errorf("relaying to %s: empty reply", r.subject)
	}
	return nil
}
