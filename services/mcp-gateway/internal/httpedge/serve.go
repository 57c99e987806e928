package httpedge

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ShutdownTimeout is how long a stop waits for in-flight requests once
// the base context is cancelled: one Ctrl-C must end the process promptly
// even with clients attached.
const ShutdownTimeout = 5 * time.Second

// ServeOptions tune [Serve].
type ServeOptions struct {
	// ReadTimeout bounds a request's arrival, headers and body ([Edge.ReadTimeout]).
	ReadTimeout time.Duration
	// Logger receives the shutdown's lines; nil means slog.Default().
	Logger *slog.Logger
	// Attrs go on every line Serve logs (the gateway's identity).
	Attrs []any
	// Stopping, when set, is called as the shutdown begins, with its
	// budget: for work that outlives its requests (tasks), which the
	// base context does not reach.
	Stopping func(budget time.Duration)
}

// Serve serves h on ln, which the caller bound (to learn its own URL
// before serving, say), until ctx ends, then shuts down within
// [ShutdownTimeout]. The listener is closed when it returns.
//
// http.Server.Shutdown neither cancels request contexts nor ends held-open
// SSE streams, so a single Ctrl-C would wait on every attached client. The
// connections' base context is therefore cancelled first, which unblocks
// those streams (and interrupts running calls), then Shutdown gets
// [ShutdownTimeout].
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o ServeOptions) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	hs := &http.Server{
		Handler:     h,
		BaseContext: func(net.Listener) context.Context { return base },
		// Bound a client that opens a connection and dribbles its headers,
		// or its body. net/http clears the read deadline once a body has
		// been read to its end (or at once for a request without one), so
		// a long call or an event stream is not cut by it. No write
		// timeout, since event streams legitimately stay open.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       o.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	log.Info("stopping", append(o.Attrs, "timeout", ShutdownTimeout)...)
	cancelBase()
	if o.Stopping != nil {
		go o.Stopping(ShutdownTimeout)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(shutCtx)
	<-served // http.ErrServerClosed once Shutdown has begun
	if err != nil {
		_ = hs.Close()
		log.Warn("connections still open after the shutdown budget were closed", append(o.Attrs, "error", err)...)
	}
	log.Info("stopped", o.Attrs...)
	return nil
}
