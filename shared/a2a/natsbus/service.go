package natsbus

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
)

// ServiceVersion is the micro service version. It is service metadata only;
// the agent card carries the real version, keeping the transport out of the
// versioning business.
const ServiceVersion = "0.0.0"

// ErrReplied is a second answer to a request that was already answered.
var ErrReplied = errors.New("request already answered")

// Request is one incoming request. Reply and Reject are single-shot and
// stay valid after the handler returns, so a worker started by the handler
// can answer. The answer only ever goes to the inbox NATS supplied with the
// request, never to an address taken from the body.
type Request struct {
	req     micro.Request
	nc      *nats.Conn
	replied atomic.Bool
}

// Data is the request body. It must not be modified.
func (r *Request) Data() []byte { return r.req.Data() }

// Header is the request's NATS headers (the caller's trace context among
// them); nil when it carried none. It must not be modified.
func (r *Request) Header() nats.Header { return nats.Header(r.req.Headers()) }

// Reply answers with data.
func (r *Request) Reply(data []byte) error {
	if !r.replied.CompareAndSwap(false, true) {
		return ErrReplied
	}
	if err := r.req.Respond(data); err != nil {
		return fmt.Errorf("replying: %w", err)
	}
	yieldToFlusher()
	return nil
}

// yieldToFlusher lets the connection write what was just published. A
// publish only buffers the message and wakes nats.go's flusher, which then
// waits for this goroutine's processor (one, by default): yielding it gets
// the answer written before the caller goes on to its audit record and log
// line, whose own goroutines would otherwise be scheduled first.
func yieldToFlusher() { runtime.Gosched() }

// Reject answers with a transport error in micro's error headers: for a
// malformed, mistyped or oversized message only. Every other failure is an
// in-band reply.
func (r *Request) Reject(code, description string) error {
	if !r.replied.CompareAndSwap(false, true) {
		return ErrReplied
	}
	if err := r.req.Error(code, description, nil); err != nil {
		return fmt.Errorf("rejecting: %w", err)
	}
	return nil
}

// Handler handles one request. It runs on the endpoint's subscription
// goroutine: while it blocks, NATS delivers nothing more to this endpoint,
// which is how a busy agent pushes back.
type Handler func(*Request)

// ServiceConfig configures [Serve].
type ServiceConfig struct {
	// Identity names the service, its subjects and its queue group.
	Identity string
	// Description is shown by `nats micro info`.
	Description string
	// Metadata is shown by `nats micro info` (served tool count, limits, …).
	Metadata map[string]string
	// Discovery and Tool handle the two endpoints.
	Discovery Handler
	Tool      Handler
	// Stream, when set, handles a third endpoint, "stream", on
	// [StreamSubject]: streamed calls, answered with [Request.Send] and
	// [Request.Probe] as many times as the call needs.
	Stream Handler
	// ErrorHandler, if set, receives asynchronous subscription errors such
	// as a slow consumer.
	ErrorHandler func(error)
}

// Service is a registered micro service.
type Service struct {
	svc micro.Service
}

// Serve registers the micro service for cfg.Identity on nc, which the
// caller owns: name = identity, version [ServiceVersion], queue group =
// identity (so processes sharing an identity share its load), endpoints
// "discovery" and "tool". On any error nothing stays registered.
func Serve(nc *nats.Conn, cfg ServiceConfig) (*Service, error) {
	if err := a2a.CheckIdentity(cfg.Identity); err != nil {
		return nil, err
	}
	if cfg.Discovery == nil || cfg.Tool == nil {
		return nil, errors.New("registering service: discovery and tool handlers are required")
	}
	mc := micro.Config{
		Name:        cfg.Identity,
		Version:     ServiceVersion,
		Description: cfg.Description,
		Metadata:    cfg.Metadata,
		QueueGroup:  cfg.Identity,
	}
	if cfg.ErrorHandler != nil {
		mc.ErrorHandler = func(_ micro.Service, err *micro.NATSError) { cfg.ErrorHandler(err) }
	}
	svc, err := micro.AddService(nc, mc)
	if err != nil {
		return nil, fmt.Errorf("registering service %s: %w", cfg.Identity, err)
	}
	endpoints := []struct {
		name, subject string
		h             Handler
	}{
		{"discovery", DiscoverySubject(cfg.Identity), cfg.Discovery},
		{"tool", ToolSubject(cfg.Identity), cfg.Tool},
	}
	if cfg.Stream != nil {
		endpoints = append(endpoints, struct {
			name, subject string
			h             Handler
		}{"stream", StreamSubject(cfg.Identity), cfg.Stream})
	}
	for _, e := range endpoints {
		h := e.h
		err := svc.AddEndpoint(e.name, micro.HandlerFunc(func(r micro.Request) {
			// A request without an inbox cannot be answered, and a reply
			// never goes anywhere else: do no work for it.
			if r.Reply() == "" {
				return
			}
			h(&Request{req: r, nc: nc})
		}),
			micro.WithEndpointSubject(e.subject))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("registering %s endpoint: %w", e.name, err)
		}
	}
	return &Service{svc: svc}, nil
}

// Stop drains the endpoints and deregisters the service. It is idempotent
// and accepts a closed connection.
func (s *Service) Stop() error {
	if err := s.svc.Stop(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("stopping service: %w", err)
	}
	return nil
}

// Info is what `nats micro info` shows.
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Stats is what `nats micro stats` shows.
func (s *Service) Stats() micro.Stats { return s.svc.Stats() }
