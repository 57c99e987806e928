// Package natsconn connects to NATS from a named nats context, as the nats
// CLI writes it (URL, credentials, nkey, user and password, token, TLS), so
// operators configure fiskfleet's connections with the tool they already
// use.
package natsconn

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"
)

// ErrContext is a nats context that cannot be loaded.
var ErrContext = errors.New("loading nats context")

// Reconnect backoff: quick at first so a restarted server is found within a
// second, then capped so a long outage costs little.
const (
	backoffBase = 100 * time.Millisecond
	backoffMax  = 5 * time.Second
)

// Options configure [Connect].
type Options struct {
	// Context is the nats context (nats_context in agent.yaml): a name
	// as `nats context ls` lists it, or the path of a context file, as the
	// nats CLI's --context also accepts. Empty means the CLI's selected
	// context.
	Context string
	// Name is the connection name servers show in monitoring; it should
	// carry the identity, e.g. "a2a-agent demo".
	Name string
	// Logger receives disconnect, reconnect and error events; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Connect loads the context and connects with unlimited reconnects and
// backoff, logging every disconnect and reconnect. The caller owns and
// closes the connection.
func Connect(opts Options) (*nats.Conn, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	nctx, err := load(opts.Context)
	if err != nil {
		return nil, fmt.Errorf("%w %q (set nats_context to a context listed by `nats context ls`): %w", ErrContext, opts.Context, err)
	}
	natsOpts, err := nctx.NATSOptions(
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(Backoff),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			// A deliberate Close disconnects with no error: not news.
			if err != nil {
				log.Warn("nats disconnected", "context", opts.Context, "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "context", opts.Context, "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats error", "context", opts.Context, "subject", subject, "error", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%w %q (nats_context): %w", ErrContext, opts.Context, err)
	}
	nc, err := nats.Connect(nctx.ServerURL(), natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s (nats context %q): %w", nctx.ServerURL(), opts.Context, err)
	}
	return nc, nil
}

// Backoff is the reconnect delay after attempts failed tries: exponential
// from 100 ms, capped at 5 s, with up to 20 % jitter so a fleet does not
// reconnect in lockstep.
func Backoff(attempts int) time.Duration {
	d := backoffMax
	if attempts < 16 {
		d = min(backoffBase<<attempts, backoffMax)
	}
	return d + rand.N(d/5+1)
}

// Check reports an error when the nats context named ctx (a name or a
// context file, as [Options.Context]) cannot be loaded, without
// connecting: for checking at start every context a configuration names.
func Check(ctx string) error {
	_, err := load(ctx)
	return err
}

// load reads a context by name, or from a file when ctx names one.
func load(ctx string) (*natscontext.Context, error) {
	if strings.ContainsRune(ctx, filepath.Separator) || strings.HasSuffix(ctx, ".json") {
		if _, err := os.Stat(ctx); err == nil {
			return natscontext.NewFromFile(ctx)
		}
	}
	return natscontext.New(ctx, true)
}

// Drain drains nc and waits, at most timeout, until it is closed. nats.go's
// own Drain only starts draining: messages already delivered to the
// client's buffers are still being handed to their handlers, and replies
// are still being flushed, when it returns. A process that closes its
// connection right after it (a deferred Close, or exiting) loses all of
// them, so a request that was queued for a stopping agent would get no
// answer at all. Past timeout the connection is closed as it is.
func Drain(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if nc.IsClosed() {
		return nil
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("draining nats connection: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-time.After(timeout):
		nc.Close()
		return fmt.Errorf("draining nats connection: not done after %s; closed it", timeout)
	}
}

// NKeyFile returns the nkey seed file the nats context ctx names (its
// nkey setting), or "" when it names none: the key an operator signs
// approval answers with.
func NKeyFile(ctx string) (string, error) {
	c, err := load(ctx)
	if err != nil {
		return "", err
	}
	return c.NKey(), nil
}
