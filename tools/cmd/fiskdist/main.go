// Command fiskdist builds a fiskfleet release into a directory: `make
// dist` runs it with the version, commit and commit time it takes from
// git. See package dist for what is written.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/dist"
)

func main() {
	var (
		root    = flag.String("root", ".", "the checkout (the directory holding go.work)")
		out     = flag.String("out", "dist", "directory to write the release to")
		version = flag.String("version", "", "release version, without a leading v")
		commit  = flag.String("commit", "", "git commit the release is built from")
		epoch   = flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the commit time in Unix seconds: the build date and every file's time")
		targets = flag.String("targets", "", "OS/ARCH list, comma-separated (default: linux and darwin on amd64 and arm64)")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*root, *out, *version, *commit, *epoch, *targets, log); err != nil {
		fmt.Fprintln(os.Stderr, "fiskdist:", err)
		os.Exit(1)
	}
}

func run(root, out, version, commit, epoch, targets string, log *slog.Logger) error {
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-source-date-epoch %q: want Unix seconds (git log -1 --format=%%ct): %w", epoch, err)
	}
	c := dist.Config{Root: root, Out: out, Version: version, Commit: commit, Time: time.Unix(sec, 0).UTC(), Logger: log}
	if targets != "" {
		if c.Targets, err = dist.ParseTargets(targets); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	files, err := dist.Run(ctx, c)
	if err != nil {
		return err
	}
	log.Info("release written", "dir", out, "files", len(files), "took", time.Since(start).Round(time.Second))
	return nil
}
