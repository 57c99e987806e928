package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/config"
)

// shutdownTimeout bounds how long a stopping listener waits for scrapes
// and probes in progress: they are short reads, and the process is ending.
const shutdownTimeout = 2 * time.Second

// Listen binds addr (host:port; port 0 picks a free one) and serves h on
// it until ctx ends, then shuts the server down. It returns once the
// address is bound, with the address actually bound. done is closed when
// the server has stopped; a serving error after the bind is logged.
func Listen(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (bound net.Addr, done <-chan struct{}, err error) {
	if log == nil {
		log = slog.Default()
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		select {
		case err := <-served:
			if !errors.Is(err, http.ErrServerClosed) {
				log.Error("serving", "address", ln.Addr().String(), "error", err)
			}
			return
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			_ = hs.Close()
		}
		<-served
	}()
	return ln.Addr(), stopped, nil
}

// ListenMetrics serves m at [MetricsPath] on addr until ctx ends and logs
// where, warning when addr reaches beyond this host: the figures name
// every served tool and how it is used.
func ListenMetrics(ctx context.Context, addr string, m *Metrics, service, identity string, log *slog.Logger) (net.Addr, <-chan struct{}, error) {
	if log == nil {
		log = slog.Default()
	}
	bound, done, err := Listen(ctx, addr, m.Mux(), log)
	if err != nil {
		return nil, nil, fmt.Errorf("expose.agent.metrics: %w", err)
	}
	if host, _, _ := net.SplitHostPort(addr); !config.IsLoopback(host) {
		log.Warn("serving metrics on a non-loopback address: anyone who can reach it reads the tool names and how they are used; set expose.agent.metrics.address to 127.0.0.1 or firewall the port",
			"agent", identity, "address", bound.String())
	}
	log.Info("serving metrics", "agent", identity, "service", service, "address", bound.String(), "path", MetricsPath)
	return bound, done, nil
}
