package knowledge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
)

// DefaultCheckInterval and MinCheckInterval are [spec]'s, here for the
// index's callers.
const (
	DefaultCheckInterval = spec.DefaultCheckInterval
	MinCheckInterval     = spec.MinCheckInterval
)

// staleRebuild is how old a rebuild's temporary file must be before
// [Open] removes it as the leftover of a process that died rebuilding: a
// rebuild that runs writes its file continuously.
const staleRebuild = 10 * time.Minute

// rebuildSuffix follows [StoreFile] in the name of a rebuild's temporary
// file, before a random part.
const rebuildSuffix = ".rebuild-"

// SQLite's primary result codes that mean the file is damaged.
const (
	sqliteCorrupt = 11 // SQLITE_CORRUPT: "database disk image is malformed"
	sqliteNotADB  = 26 // SQLITE_NOTADB: "file is not a database"
)

// health is what an index knows of its store's soundness.
type health struct {
	mu sync.Mutex // guards damage, rebuilding and failed
	// damage is what showed the store damaged (SQLite's error or the
	// check's report), nil while it is sound.
	damage error
	// rebuilding is true while a rebuild runs.
	rebuilding bool
	// failed is why the last rebuild failed, nil after a good one.
	failed error
	// running is true while [Index.Run] keeps the index, so a search
	// meeting damage can say a rebuild is coming.
	running atomic.Bool
	// repair asks Run for a rebuild; one pending request is enough.
	repair chan struct{}
}

// damageError is a check that ran and found the store damaged: its
// report is the cause.
type damageError struct{ report string }

func (e *damageError) Error() string { return "integrity check: " + e.report }

// isDamage reports whether err is SQLite saying the store file is damaged
// (or not a database at all), as opposed to busy, full or cancelled.
func isDamage(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteCorrupt, sqliteNotADB:
			return true
		}
	}
	var de *damageError
	if errors.As(err, &de) {
		return true
	}
	// A damaged schema page loses tables rather than failing with a code.
	msg := err.Error()
	return strings.Contains(msg, "malformed") || strings.Contains(msg, "not a database") || strings.Contains(msg, "no such table")
}

// asDamage returns err when it is damage, nil otherwise.
func asDamage(err error) error {
	if isDamage(err) {
		return err
	}
	return nil
}

// unavailableError is [ErrUnavailable] with a plain message. SQLite's
// error stays in the chain for errors.Is and errors.As, out of the text: a
// client (a model, or a person at the CLI) is told what happens and what
// to fix, and the operator's log has SQLite's words.
type unavailableError struct {
	msg   string
	cause error
}

func (e *unavailableError) Error() string   { return e.msg }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// Damaged reports whether the store is known to be damaged and not yet
// rebuilt.
func (i *Index) Damaged() bool {
	i.health.mu.Lock()
	defer i.health.mu.Unlock()
	return i.health.damage != nil
}

// Rebuilding reports whether a rebuild of a damaged store is running.
func (i *Index) Rebuilding() bool {
	i.health.mu.Lock()
	defer i.health.mu.Unlock()
	return i.health.rebuilding
}

// damaged records that cause showed the store damaged, asks [Index.Run]
// for a rebuild the first time, and returns the error a caller gets.
func (i *Index) damaged(cause error) error {
	h := &i.health
	h.mu.Lock()
	first := h.damage == nil
	if first {
		h.damage = cause
	}
	rebuilding := h.rebuilding
	h.mu.Unlock()
	if first && !rebuilding {
		i.log.Warn("knowledge store found damaged", "store", i.file, "error", cause)
		i.askRepair()
	}
	return i.unavailable(cause)
}

// askRepair asks Run for a rebuild without waiting.
func (i *Index) askRepair() {
	select {
	case i.health.repair <- struct{}{}:
	default:
	}
}

// checkEvery returns the periodic check's interval, 0 when off.
func (i *Index) checkEvery() time.Duration {
	switch d := i.opts.CheckInterval; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultCheckInterval
	default:
		return d
	}
}

// unavailable is the error of a use of the store that met damage: it
// says whether a rebuild is running, failed, or is for a gateway or the
// operator to run.
func (i *Index) unavailable(cause error) error {
	h := &i.health
	h.mu.Lock()
	rebuilding, failed := h.rebuilding, h.failed
	h.mu.Unlock()
	var msg string
	switch {
	case rebuilding || (failed == nil && h.running.Load()):
		msg = fmt.Sprintf("%s: its store (knowledge.store %s) was found damaged and is being rebuilt from knowledge.directory %s; search again in a moment",
			ErrUnavailable, i.store, i.dir)
	case failed != nil:
		retry := "when the gateway restarts"
		if d := i.checkEvery(); d > 0 {
			retry = fmt.Sprintf("within knowledge.check_interval (%s)", d)
		}
		msg = fmt.Sprintf("%s: its store (knowledge.store %s) is damaged and rebuilding it from knowledge.directory %s failed: %s; fix knowledge.directory, and the rebuild is tried again %s",
			ErrUnavailable, i.store, i.dir, failureReason(failed), retry)
	case i.rebuildingElsewhere():
		msg = fmt.Sprintf("%s: its store (knowledge.store %s) is damaged and a running gateway is rebuilding it from knowledge.directory %s; search again in a moment",
			ErrUnavailable, i.store, i.dir)
	default:
		msg = fmt.Sprintf("%s: its store (knowledge.store %s) is damaged; a running gateway rebuilds it from knowledge.directory %s, or rebuild it now with `%s`",
			ErrUnavailable, i.store, i.dir, RebuildCommand)
	}
	return &unavailableError{msg: msg, cause: cause}
}

// failureReason says why a rebuild failed without SQLite's words: the
// directory's error is the operator's to fix and is shown; a failure to
// write the new store is in the log.
func failureReason(err error) string {
	var se *sqlite.Error
	if errors.As(err, &se) || errors.Is(err, ErrStore) {
		return "writing the new index into knowledge.store failed (the gateway's log has the cause)"
	}
	return err.Error()
}

// rebuildingElsewhere reports whether another process is rebuilding the
// store: a rebuild's temporary file is there and was written recently.
func (i *Index) rebuildingElsewhere() bool {
	tmps, _ := filepath.Glob(filepath.Join(i.store, StoreFile+rebuildSuffix+"*"))
	for _, t := range tmps {
		if fi, err := os.Stat(t); err == nil && time.Since(fi.ModTime()) < time.Minute {
			return true
		}
	}
	return false
}

// removeStaleRebuilds removes the temporary files of rebuilds that died
// with their process (a crash mid-rebuild leaves the damaged store as it
// was, and this), sparing any still being written by another process.
func removeStaleRebuilds(file string) {
	tmps, _ := filepath.Glob(file + rebuildSuffix + "*")
	for _, t := range tmps {
		if fi, err := os.Stat(t); err == nil && time.Since(fi.ModTime()) > staleRebuild {
			_ = os.Remove(t)
		}
	}
}

// removeDB removes a database file and its write-ahead log and shared
// memory files, ignoring those that are not there.
func removeDB(file string) error {
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(file + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rebuild replaces the damaged store with a new index of the directory,
// the source of truth, and logs when it starts (with what showed the
// damage) and when it ends (with counts and duration). The new index is
// built into a temporary file in the store folder while searches go on
// reading the damaged store, then written over the damaged one in one
// SQLite transaction (the backup API), so the file keeps its identity and
// another process sharing the store sees the new index; a store whose
// header is gone cannot be written that way and the temporary file is
// renamed over it instead. A crash at any point leaves the damaged store
// (rebuilt again at the next start) or the new one, never half of each.
// A failed rebuild is logged and returned; the damage stays recorded.
func (i *Index) rebuild(ctx context.Context) (Changes, error) {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	h := &i.health
	h.mu.Lock()
	cause := h.damage
	h.rebuilding = true
	h.mu.Unlock()
	start := time.Now()
	i.log.Warn("rebuilding the damaged knowledge store from its directory", "store", i.file, "directory", i.dir, "reason", cause)
	ch, how, err := i.rebuildFile(ctx)
	if err != nil {
		h.mu.Lock()
		h.rebuilding, h.failed = false, err
		h.mu.Unlock()
		if ctx.Err() == nil {
			retry := "restart the gateway to try again"
			if d := i.checkEvery(); d > 0 {
				retry = "tried again at the next check, within " + d.String()
			}
			i.log.Error("rebuilding the knowledge store failed: searches answer from the damaged store where they can, or say it is unavailable; "+retry,
				"store", i.file, "directory", i.dir, "error", err)
		}
		return ch, err
	}
	i.counts.mu.Lock()
	i.counts.version, i.counts.df = "", nil
	i.counts.mu.Unlock()
	i.vec.mu.Lock()
	i.vec.reset()
	i.vec.mu.Unlock()
	// Requests made while it ran were about the damaged store.
	select {
	case <-h.repair:
	default:
	}
	h.mu.Lock()
	h.damage, h.failed, h.rebuilding = nil, nil, false
	h.mu.Unlock()
	i.log.Info("knowledge store rebuilt", "store", i.file, "directory", i.dir, "documents", len(ch.Added), "incomplete", ch.Incomplete,
		"written", how, "duration", time.Since(start).Round(time.Millisecond))
	return ch, nil
}

// rebuildFile builds the new index into a temporary file and puts it in
// place, returning how ("in place" or "file replaced").
func (i *Index) rebuildFile(ctx context.Context) (Changes, string, error) {
	f, err := os.CreateTemp(i.store, StoreFile+rebuildSuffix+"*")
	if err != nil {
		return Changes{}, "", fmt.Errorf("%w: knowledge.store %s: creating the rebuild's file: %w", ErrStore, i.store, err)
	}
	tmp := f.Name()
	f.Close()
	defer removeDB(tmp) // gone already once renamed into place
	opts := i.opts
	opts.Rebuild, opts.Logger = false, i.log
	fresh, err := openFile(tmp, i.store, opts)
	if err != nil {
		return Changes{}, "", err
	}
	fresh.dir = i.dir
	ch, err := fresh.Update(ctx, nil)
	if err == nil {
		// Everything into the file itself: the copy reads the file.
		_, err = fresh.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	if cerr := fresh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ch, "", err
	}
	if err := i.restore(ctx, tmp); err == nil {
		return ch, "in place", nil
	} else if ctx.Err() != nil {
		return ch, "", err
	} else {
		i.log.Info("the damaged knowledge store cannot be written in place; replacing the file", "store", i.file, "reason", err)
	}
	return ch, "file replaced", i.swapIn(tmp)
}

// restorer is the modernc.org/sqlite connection's backup API.
type restorer interface {
	NewRestore(src string) (*sqlite.Backup, error)
}

// restore copies the database at src over the store's in one write
// transaction and checks the result. Readers of the store see the damaged
// index until it commits and the new one after.
func (i *Index) restore(ctx context.Context, src string) error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		r, ok := dc.(restorer)
		if !ok {
			return errors.New("the SQLite driver has no backup API")
		}
		b, err := r.NewRestore(src)
		if err != nil {
			return err
		}
		_, stepErr := b.Step(-1)
		return errors.Join(stepErr, b.Finish())
	})
	if err != nil {
		return err
	}
	// The copy went through the write-ahead log; fold it in, as a first
	// build does. Failing only leaves that for a later checkpoint.
	_, _ = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return i.check(ctx)
}

// swapIn renames the database at src over the store, for a store SQLite
// cannot write: the connections are closed first (the last to close
// removes the write-ahead log by its name, which would then be the new
// file's), the old log and shared memory removed, and the file renamed
// and reopened. If another process sharing the store replaced the file
// already, that one is kept and reopened.
func (i *Index) swapIn(src string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	_ = closeDB(i.db, i.stmts)
	var err error
	if now, serr := os.Stat(i.file); serr != nil || os.SameFile(now, i.opened) {
		for _, suffix := range []string{"-wal", "-shm"} {
			if rerr := os.Remove(i.file + suffix); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
		if err == nil {
			err = os.Rename(src, i.file)
		}
		if err == nil {
			err = syncDir(i.store)
		}
	}
	// Reopened whatever happened: the index must not keep a closed pool.
	db, oerr := openDB(i.file)
	if oerr != nil {
		return errors.Join(err, oerr)
	}
	i.db, i.stmts = db, &sync.Map{}
	if fi, serr := os.Stat(i.file); serr == nil {
		i.opened = fi
	}
	if err != nil {
		return fmt.Errorf("%w: knowledge.store %s: replacing the damaged index: %w", ErrStore, i.store, err)
	}
	var id int64
	if err := i.db.QueryRow(`PRAGMA application_id`).Scan(&id); err != nil || id != applicationID {
		return fmt.Errorf("%w: knowledge.store %s: the replaced index does not read back (application id %#x): %w", ErrStore, i.store, id, err)
	}
	return nil
}

// syncDir flushes a directory's entries, so a rename survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkLoop checks the store every interval until ctx ends and asks for
// a rebuild whenever the check finds damage, so a rebuild that failed is
// tried again each interval.
func (i *Index) checkLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if i.Rebuilding() {
			continue
		}
		err := i.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		if damage := asDamage(err); damage != nil {
			if !i.Damaged() {
				i.log.Warn("knowledge store found damaged by the periodic check", "store", i.file, "error", damage)
			}
			i.health.mu.Lock()
			if i.health.damage == nil {
				i.health.damage = damage
			}
			i.health.mu.Unlock()
			i.askRepair()
		} else if err != nil {
			i.log.Warn("checking the knowledge store", "store", i.file, "error", err)
		}
	}
}

// sqlDB returns the current pool, for tests that read the store directly.
func (i *Index) sqlDB() *sql.DB {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.db
}
