package knowledge

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// batchSize is how many changed documents one write transaction holds:
// large enough that a full build is not dominated by commits, small enough
// that searches (and a second gateway) see progress and the write lock is
// never held for long.
const batchSize = 200

// Changes is what an update did.
type Changes struct {
	// Added, Changed and Removed are document paths, in name order.
	Added   []string
	Changed []string
	Removed []string
	// Unchanged counts documents whose content hash (or size and
	// modification time) showed no change.
	Unchanged int
	// Incomplete reports that the directory holds more than
	// [MaxDocuments] candidate files; the rest are not indexed.
	Incomplete bool
}

// Empty reports whether the update changed nothing.
func (c Changes) Empty() bool { return len(c.Added)+len(c.Changed)+len(c.Removed) == 0 }

// SetChanged reports whether documents were added or removed: the set a
// resource listing shows changed, not only the content of one document.
func (c Changes) SetChanged() bool { return len(c.Added)+len(c.Removed) > 0 }

// Progress is called during an update with the documents examined so far
// and the total; it must be quick.
type Progress func(done, total int)

// stored is what the index holds about one document, to tell whether the
// file changed.
type stored struct {
	hash  string
	bytes int64
	mtime int64
}

// Update brings the index in line with the directory: new and changed
// files are chunked and indexed, deleted ones removed, and a file whose
// size and modification time (or, failing that, content hash) are
// unchanged is skipped. progress may be nil.
func (i *Index) Update(ctx context.Context, progress Progress) (Changes, error) {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	i.mu.RLock()
	defer i.mu.RUnlock()
	root, err := os.OpenRoot(i.dir)
	if err != nil {
		return Changes{}, fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	defer root.Close()
	files, truncated, err := walkFiles(ctx, root)
	if err != nil {
		return Changes{}, fmt.Errorf("reading knowledge directory %s: %w", i.dir, err)
	}
	known, err := i.storedDocuments(ctx)
	if err != nil {
		return Changes{}, err
	}
	ch := Changes{Incomplete: truncated}
	seen := make(map[string]bool, len(files))
	w := i.newWriter(ctx)
	defer w.rollback()
	for n, f := range files {
		seen[f.name] = true
		if err := w.consider(root, f, known, &ch); err != nil {
			return ch, err
		}
		if progress != nil {
			progress(n+1, len(files))
		}
	}
	for name := range known {
		if !seen[name] {
			if err := w.remove(name); err != nil {
				return ch, err
			}
			ch.Removed = append(ch.Removed, name)
		}
	}
	if err := w.finish(truncated); err != nil {
		return ch, err
	}
	sortChanges(&ch)
	if len(ch.Added)+len(ch.Changed)+len(ch.Removed) >= batchSize {
		// A large update (a first build) leaves tens of megabytes of
		// write-ahead log that every read would look pages up in, and
		// that the store would carry on disk: copy it into the
		// database and empty it. Failing (a reader holding an old
		// snapshot past the busy timeout) only leaves that for the
		// next checkpoint.
		if _, err := i.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			i.log.Debug("checkpointing the knowledge index", "store", i.store, "error", err)
		}
	}
	return ch, nil
}

// UpdatePaths updates only the named documents (slash-separated, relative
// to the directory): each is indexed if it is a document now, and removed
// (with everything under it, for a directory that went away) if not. It is
// what the watcher runs for a burst of file events, so one edit costs one
// file, not a walk of the directory.
func (i *Index) UpdatePaths(ctx context.Context, names []string) (Changes, error) {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	i.mu.RLock()
	defer i.mu.RUnlock()
	root, err := os.OpenRoot(i.dir)
	if err != nil {
		return Changes{}, fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	defer root.Close()
	var ch Changes
	w := i.newWriter(ctx)
	defer w.rollback()
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
			continue // a directory that is still there: its files have events of their own
		}
		known, err := i.storedUnder(ctx, name)
		if err != nil {
			return ch, err
		}
		if f, ok := statCandidate(root, name); ok {
			one := map[string]stored{}
			if s, have := known[name]; have {
				one[name] = s
			}
			delete(known, name)
			if err := w.consider(root, f, one, &ch); err != nil {
				return ch, err
			}
		}
		for gone := range known {
			if err := w.remove(gone); err != nil {
				return ch, err
			}
			ch.Removed = append(ch.Removed, gone)
		}
	}
	if err := w.finish(false); err != nil {
		return ch, err
	}
	sortChanges(&ch)
	return ch, nil
}

func sortChanges(ch *Changes) {
	slices.Sort(ch.Added)
	slices.Sort(ch.Changed)
	slices.Sort(ch.Removed)
	ch.Removed = slices.Compact(ch.Removed)
}

// storedDocuments loads what the index holds about every document.
func (i *Index) storedDocuments(ctx context.Context) (map[string]stored, error) {
	return i.queryStored(ctx, `SELECT path, hash, bytes, mtime FROM documents`)
}

// storedUnder loads the documents at name or below it (name as a
// directory).
func (i *Index) storedUnder(ctx context.Context, name string) (map[string]stored, error) {
	return i.queryStored(ctx, `SELECT path, hash, bytes, mtime FROM documents WHERE path = ?1 OR substr(path, 1, length(?1) + 1) = ?1 || '/'`, name)
}

func (i *Index) queryStored(ctx context.Context, query string, args ...any) (map[string]stored, error) {
	rows, err := i.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, i.storeErr("reading the index", err)
	}
	defer rows.Close()
	out := map[string]stored{}
	for rows.Next() {
		var name string
		var s stored
		if err := rows.Scan(&name, &s.hash, &s.bytes, &s.mtime); err != nil {
			return nil, i.storeErr("reading the index", err)
		}
		out[name] = s
	}
	if err := rows.Err(); err != nil {
		return nil, i.storeErr("reading the index", err)
	}
	return out, nil
}

// storeErr wraps an SQLite error. Damage is recorded (a running index
// rebuilds the store) and answered with [ErrUnavailable]'s plain message;
// anything else (a full disk, a busy store) keeps its cause.
func (i *Index) storeErr(doing string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", doing, err)
	}
	if isDamage(err) {
		return i.damaged(err)
	}
	return fmt.Errorf("%s in knowledge.store %s: %w", doing, i.store, err)
}

// writer applies changes in transactions of [batchSize] documents.
type writer struct {
	i       *Index
	ctx     context.Context
	tx      *sql.Tx
	pending int
	now     int64
	// gone are the ids of sections the transaction removed, whose codes
	// the vector search forgets once it commits.
	gone []int64
}

func (i *Index) newWriter(ctx context.Context) *writer {
	return &writer{i: i, ctx: ctx, now: time.Now().UnixNano()}
}

func (w *writer) begin() error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.i.db.BeginTx(w.ctx, nil)
	if err != nil {
		return w.i.storeErr("writing the index", err)
	}
	w.tx = tx
	return nil
}

// step commits once a batch is full.
func (w *writer) step() error {
	w.pending++
	if w.pending < batchSize {
		return nil
	}
	return w.commit()
}

func (w *writer) commit() error {
	if w.tx == nil {
		return nil
	}
	err := w.tx.Commit()
	w.tx, w.pending = nil, 0
	gone := w.gone
	w.gone = nil
	if err != nil {
		return w.i.storeErr("writing the index", err)
	}
	w.i.vec.forget(gone)
	return nil
}

func (w *writer) rollback() {
	if w.tx != nil {
		_ = w.tx.Rollback()
		w.tx, w.gone = nil, nil
	}
}

// finish records the update time and commits.
func (w *writer) finish(incomplete bool) error {
	if err := w.begin(); err != nil {
		return err
	}
	for k, v := range map[string]string{"updated_at": strconv.FormatInt(time.Now().UnixNano(), 10), "incomplete": strconv.FormatBool(incomplete)} {
		if _, err := w.tx.ExecContext(w.ctx, `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, k, v); err != nil {
			return w.i.storeErr("writing the index", err)
		}
	}
	return w.commit()
}

// consider indexes f unless known shows it unchanged, counting the
// outcome in ch. A file that cannot be read now (removed, replaced by
// something that is not text) is removed from the index.
func (w *writer) consider(root *os.Root, f candidate, known map[string]stored, ch *Changes) error {
	old, have := known[f.name]
	if have && old.bytes == f.size && old.mtime == f.mtime {
		ch.Unchanged++
		return nil
	}
	// Read under the write lock, and compare with what the store holds
	// now: another gateway on the same store may have indexed this file
	// since known was read, from a later read than one made before the
	// lock, and would be overwritten with older content.
	if err := w.begin(); err != nil {
		return err
	}
	data, mtime, ok := readVersion(root, f.name, time.Now())
	if !ok {
		if have {
			ch.Removed = append(ch.Removed, f.name)
			return w.remove(f.name)
		}
		return nil
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	var current string
	switch err := w.tx.QueryRowContext(w.ctx, `SELECT hash FROM documents WHERE path = ?`, f.name).Scan(&current); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return w.i.storeErr("reading the index", err)
	}
	if have && current == hash {
		// Touched, not changed: remember the new time so the next walk
		// skips it without reading.
		ch.Unchanged++
		if _, err := w.tx.ExecContext(w.ctx, `UPDATE documents SET mtime = ?, bytes = ? WHERE path = ?`, mtime, int64(len(data)), f.name); err != nil {
			return w.i.storeErr("writing the index", err)
		}
		return w.step()
	}
	// Delete whatever is there now, known or not: another process on
	// the same store may have indexed the file since it was looked up.
	if err := w.deleteRows(f.name); err != nil {
		return err
	}
	if have {
		ch.Changed = append(ch.Changed, f.name)
	} else {
		ch.Added = append(ch.Added, f.name)
	}
	chunks := chunkDocument(f.name, data)
	if _, err := w.tx.ExecContext(w.ctx, `INSERT INTO documents(path, title, hash, bytes, mtime, sections, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		f.name, title(f.name, data), hash, int64(len(data)), mtime, len(chunks), w.now); err != nil {
		return w.i.storeErr("writing the index", err)
	}
	for n, c := range chunks {
		lead, body := "", c.text
		if strings.HasSuffix(c.text, c.body) {
			lead, body = c.text[:len(c.text)-len(c.body)], c.body
		}
		if _, err := w.tx.ExecContext(w.ctx, `INSERT INTO sections(path, ordinal, heading, lead, body) VALUES (?, ?, ?, ?, ?)`,
			f.name, n+1, c.heading, lead, body); err != nil {
			return w.i.storeErr("writing the index", err)
		}
	}
	return w.step()
}

// remove drops a document and its sections.
func (w *writer) remove(name string) error {
	if err := w.begin(); err != nil {
		return err
	}
	if err := w.deleteRows(name); err != nil {
		return err
	}
	return w.step()
}

func (w *writer) deleteRows(name string) error {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT id FROM sections WHERE path = ?`, name)
	if err != nil {
		return w.i.storeErr("reading the index", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err == nil {
			w.gone = append(w.gone, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return w.i.storeErr("reading the index", err)
	}
	if _, err := w.tx.ExecContext(w.ctx, `DELETE FROM sections WHERE path = ?`, name); err != nil {
		return w.i.storeErr("writing the index", err)
	}
	if _, err := w.tx.ExecContext(w.ctx, `DELETE FROM documents WHERE path = ?`, name); err != nil {
		return w.i.storeErr("writing the index", err)
	}
	return nil
}
