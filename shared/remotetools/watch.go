package remotetools

import (
	"context"
	"log/slog"
	"time"
)

// Watch re-imports every interval until ctx is done and calls apply with
// each result whose served set changed, so a gateway stays current as
// agents come, go and change their tools. A host that stops answering
// keeps its last tools (calls to them fail in-band naming it); the change
// in its reachability is logged once, not on every tick. A zero interval
// returns at once: refreshing is off.
func (im *Importer) Watch(ctx context.Context, interval time.Duration, log *slog.Logger, apply func(Result)) {
	if interval <= 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	down := map[string]bool{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res := im.Import(ctx)
		if ctx.Err() != nil {
			return
		}
		for _, h := range im.hosts {
			err, failed := res.Failed[h.Host]
			switch {
			case failed && !down[h.Host]:
				log.Warn("remote host unreachable; keeping its tools listed, calls fail until it returns", "host", h.Host, "error", err)
			case !failed && down[h.Host]:
				log.Info("remote host reachable again", "host", h.Host)
			}
			down[h.Host] = failed
		}
		for _, d := range res.Collided {
			log.Warn("remote tool dropped", "tool", d.Name, "reason", d.Reason)
		}
		if res.Changed {
			log.Info("remote tools changed", "tools", len(res.Tools))
			apply(res)
		}
	}
}
