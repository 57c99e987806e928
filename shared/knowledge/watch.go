package knowledge

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch timing. An editor's save is a burst of events (write a temporary
// file, rename it over the old one, chmod); they are coalesced into one
// update once the directory has been quiet for [settle], or after
// [maxDelay] of continuous events, so a burst costs one update and an edit
// is searchable within about a second.
const (
	settle   = 200 * time.Millisecond
	maxDelay = 2 * time.Second
)

// Run builds or updates the index, then keeps it current until ctx ends:
// it watches the directory and every subdirectory (fsnotify; new
// subdirectories are added as they appear), coalesces bursts of events and
// updates the files they name. While the first update runs,
// [Index.Building] is true and searches answer with what is indexed so far.
// onChange, when set, is called after every update that changed something
// (the first one and rebuilds included).
//
// Run keeps the store sound: it checks it before the first update and
// every Options.CheckInterval after ([Index.Check], in the background),
// and a store found damaged, by a check or by a search or update meeting
// a damaged page, is rebuilt from the directory (see [Index.rebuild]).
// Meanwhile searches answer from the damaged store where it still
// answers, and otherwise say it is being rebuilt ([ErrUnavailable]). A
// rebuild that fails is logged and tried again at the next check.
//
// Run returns nil when ctx ends, or an error if the watcher cannot start;
// update failures are logged and retried on the next event.
func (i *Index) Run(ctx context.Context, onChange func(Changes)) error {
	i.building.Store(true)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		i.building.Store(false)
		return err
	}
	defer w.Close()
	i.health.running.Store(true)
	defer i.health.running.Store(false)
	// Watch first, then build, so an edit made during the build is seen.
	i.watchTree(w, i.dir)

	start := time.Now()
	err = i.Check(ctx)
	if ctx.Err() != nil {
		i.building.Store(false)
		return nil
	}
	if damage := asDamage(err); damage != nil {
		i.health.mu.Lock()
		if i.health.damage == nil {
			i.health.damage = damage
		}
		i.health.mu.Unlock()
	} else if err != nil {
		i.log.Warn("checking the knowledge store", "store", i.file, "error", err)
	}
	var ch Changes
	if i.Damaged() {
		ch, err = i.rebuild(ctx)
	} else {
		ch, err = i.Update(ctx, nil)
	}
	i.building.Store(false)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil && i.Damaged():
		// rebuild logged it; the checks try again.
	case err != nil:
		i.log.Error("building the knowledge index", "directory", i.dir, "store", i.store, "error", err)
	default:
		i.log.Info("knowledge index ready", "directory", i.dir, "store", i.store,
			"added", len(ch.Added), "changed", len(ch.Changed), "removed", len(ch.Removed), "unchanged", ch.Unchanged,
			"duration", time.Since(start).Round(time.Millisecond))
		if ch.Incomplete {
			i.log.Warn("knowledge directory holds more files than are indexed", "directory", i.dir, "max_documents", MaxDocuments)
		}
		if onChange != nil && !ch.Empty() {
			onChange(ch)
		}
	}
	// With knowledge.embeddings, vectors are made beside the watcher:
	// an edit is searchable by its words at once, and by its meaning
	// once the server has embedded it.
	kick := func() {}
	if i.opts.Embeddings != nil {
		kicks := make(chan struct{}, 1)
		kick = func() {
			select {
			case kicks <- struct{}{}:
			default:
			}
		}
		go i.embedLoop(ctx, kicks)
		i.kickEmbed.Store(&kick)
		defer i.kickEmbed.Store(nil)
		kick()
	}
	if every := i.checkEvery(); every > 0 {
		checks, stop := context.WithCancel(ctx)
		defer stop()
		go i.checkLoop(checks, every)
	}

	pending := map[string]bool{}
	full := false
	var timer <-chan time.Time
	var first time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-i.health.repair:
			// Events that arrive meanwhile wait in the watcher and are
			// applied after: the rebuild may have read those files
			// before they changed.
			ch, err := i.rebuild(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				kick()
			}
			if err == nil && onChange != nil && !ch.Empty() {
				onChange(ch)
			}
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			rel, ok := i.relative(ev.Name)
			if !ok {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					// A new or moved-in directory: watch it, and walk
					// it, since files may have landed before the watch.
					i.watchTree(w, ev.Name)
					full = true
				}
			}
			if rel == "." {
				full = true
			} else {
				pending[rel] = true
			}
			if len(pending) == 0 && !full {
				continue
			}
			if first.IsZero() {
				first = time.Now()
			}
			wait := min(settle, max(0, maxDelay-time.Since(first)))
			timer = time.After(wait)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflowed queue lost events: only a full walk knows
			// what changed.
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				full = true
				timer = time.After(settle)
				continue
			}
			i.log.Warn("watching the knowledge directory", "directory", i.dir, "error", err)
		case <-timer:
			names := make([]string, 0, len(pending))
			for n := range pending {
				names = append(names, n)
			}
			var ch Changes
			var err error
			if full {
				ch, err = i.Update(ctx, nil)
			} else {
				ch, err = i.UpdatePaths(ctx, names)
			}
			pending, full, timer, first = map[string]bool{}, false, nil, time.Time{}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if !errors.Is(err, ErrUnavailable) {
					// Damage is logged once where it was found, and
					// the rebuild it asked for covers these files.
					i.log.Error("updating the knowledge index", "directory", i.dir, "error", err)
				}
				continue
			}
			if !ch.Empty() {
				kick()
				i.log.Info("knowledge index updated", "added", len(ch.Added), "changed", len(ch.Changed), "removed", len(ch.Removed))
				if onChange != nil {
					onChange(ch)
				}
			}
		}
	}
}

// watchTree adds dir and every directory below it to w, skipping hidden
// directories and not following symbolic links. A directory that cannot
// be watched is logged and skipped.
func (i *Index) watchTree(w *fsnotify.Watcher, dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			return nil
		}
		if p != i.dir && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if err := w.Add(p); err != nil {
			i.log.Warn("not watching a knowledge subdirectory", "directory", p, "error", err)
		}
		return nil
	})
}

// relative turns a watcher path into a slash-separated name relative to
// the directory, or false when it is outside it.
func (i *Index) relative(p string) (string, bool) {
	rel, err := filepath.Rel(i.dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}
