package knowledge

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver: binaries stay CGO_ENABLED=0
)

// Store layout and identity.
const (
	// StoreFile is the database's name inside the store folder.
	StoreFile = "index.db"
	// applicationID marks a database as a fiskfleet knowledge index
	// (PRAGMA application_id, "FKIX"), so a store that is not ours is
	// refused instead of written into.
	applicationID = 0x464b4958
	// schemaVersion is PRAGMA user_version of the current layout. A store
	// of another version is refused with the rebuild command.
	schemaVersion = 1
	// busyTimeoutMS is how long a connection waits for another writer (a
	// second gateway on the same store) before failing.
	busyTimeoutMS = 15000
	// DefaultMaxResultBytes and MinMaxResultBytes are [spec]'s, here for
	// the index's callers.
	DefaultMaxResultBytes = spec.DefaultMaxResultBytes
	MinMaxResultBytes     = spec.MinMaxResultBytes
)

// RebuildCommand is the operator command that rebuilds a store, named in
// every store refusal.
const RebuildCommand = "mcp-gateway knowledge index --reindex --config agent.yaml"

// Options configures [Open]. Directory is required; zero values of the
// others mean their defaults.
type Options struct {
	// Directory holds the documents (knowledge.directory). A relative path
	// is resolved against the working directory when opening.
	Directory string
	// Store is the folder holding the index (knowledge.store); empty means
	// [DefaultStore] of Identity. It must not be inside Directory: the
	// index would index itself and a watcher would chase its own writes.
	Store string
	// Identity names the agent; it keys the default store.
	Identity string
	// MaxResultBytes caps one search answer (knowledge.max_result_bytes);
	// 0 means [DefaultMaxResultBytes].
	MaxResultBytes int
	// Rebuild empties the store before use, and replaces a store that is
	// corrupt or not ours instead of refusing it (`index --reindex`).
	Rebuild bool
	// Logger receives the watcher's and updater's lines; nil means
	// slog.Default().
	Logger *slog.Logger
	// CheckInterval is how often [Index.Run] reads the whole store for
	// damage (knowledge.check_interval); 0 means [DefaultCheckInterval],
	// a negative value turns the periodic check off (the check at start
	// and damage met by a search still trigger a rebuild).
	CheckInterval time.Duration
	// Embeddings turns on the vector tier (knowledge.embeddings); nil
	// means lexical search only.
	Embeddings *Embeddings

	// ranking knobs, changed only by tests that pin what each one does.
	tokenizer     string
	headingWeight float64
}

// DefaultStore returns the store folder used when knowledge.store is not
// set: the user's cache directory, so the index is rebuildable data kept
// apart from the documents, per identity, so two agents never share one.
func DefaultStore(identity string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: finding the user cache directory for the default knowledge.store: %w (set knowledge.store)", ErrStore, err)
	}
	if identity == "" {
		identity = "default"
	}
	return filepath.Join(cache, "fiskfleet", "knowledge", identity), nil
}

// Index is a persistent full-text index of one directory. It is safe for
// concurrent use: searches read while one update writes (WAL), and updates
// are serialised. Close it when done.
type Index struct {
	dir            string
	store          string
	file           string // the database: store/StoreFile
	log            *slog.Logger
	maxResultBytes int
	headingWeight  float64
	opts           Options // what a rebuild opens its new database with

	// mu guards db, stmts, opened and gen. Every use of the store holds
	// it for reading; a rebuild that has to replace the file (one whose
	// header is gone cannot be rewritten in place) holds it for writing
	// while it swaps the connections, so no search reads a closed pool.
	mu sync.RWMutex
	db *sql.DB
	// stmts holds the prepared statements of searches, by query text.
	stmts *sync.Map
	// opened identifies the file db opened, so a file replaced by
	// another process sharing the store is noticed and reopened.
	opened os.FileInfo
	// gen counts rebuilds: damage reported by a search that read the
	// store before the last rebuild finished is not damage of the
	// rebuilt one.
	gen uint64

	health health

	// building is true while the first update after start runs: searches
	// still answer, and say the answer may be incomplete.
	building atomic.Bool
	// writeMu serialises updates within this process; SQLite's lock and
	// busy timeout serialise them across processes.
	writeMu sync.Mutex
	// searchTool is the knowledge_search tool [Index.Tools] built, so a
	// server can tell its results from a same-named tool's.
	searchTool atomic.Pointer[any]

	// embedMu serialises [Index.Embed]: one pass at a time makes each
	// missing vector once.
	embedMu sync.Mutex
	// vec is the memory side of the vector search.
	vec vectorIndex
	// outage is the embeddings server's state as searches met it.
	outage outage
	// kickEmbed, while Run runs with knowledge.embeddings, wakes its
	// embedding loop.
	kickEmbed atomic.Pointer[func()]

	// counts are the section counts of common terms searches weigh by,
	// for one version of the index (see [snapshot.weigh]).
	counts struct {
		mu       sync.Mutex
		version  string
		sections int64
		df       map[string]int64
	}
}

// Open opens (creating when absent) the index of opts.Directory at
// opts.Store. It refuses a store inside the directory, and an SQLite
// database that is not a fiskfleet knowledge index or was built by
// another schema version, naming knowledge.store and [RebuildCommand]: a
// file that may be someone else's is never overwritten. A store file that
// SQLite cannot read at all (a damaged header, or not a database) is
// opened damaged instead: searches answer [ErrUnavailable] and
// [Index.Run] rebuilds it from the directory. With opts.Rebuild it is
// replaced at once. Open does not index anything: call [Index.Update] or
// [Index.Run].
func Open(opts Options) (*Index, error) {
	dir, err := checkDirectory(opts.Directory)
	if err != nil {
		return nil, err
	}
	store := opts.Store
	if store == "" {
		if store, err = DefaultStore(opts.Identity); err != nil {
			return nil, err
		}
	}
	if store, err = filepath.Abs(store); err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, opts.Store, err)
	}
	if inside(dir, store) {
		return nil, fmt.Errorf("%w: knowledge.store %s is inside knowledge.directory %s: the index would index itself; set knowledge.store to a folder outside it (or leave it out for the cache directory)", ErrStore, store, dir)
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: creating the folder: %w", ErrStore, store, err)
	}
	if err := os.Chmod(store, 0o700); err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, store, err)
	}
	file := filepath.Join(store, StoreFile)
	removeStaleRebuilds(file)
	idx, err := openFile(file, store, opts)
	if err == nil && opts.Rebuild && idx.Damaged() {
		idx.Close()
		err = idx.refuse("not a readable SQLite database", idx.health.damage)
	}
	if err != nil && opts.Rebuild && errors.Is(err, ErrStore) {
		// Corrupt or not ours: the operator asked for a rebuild, so the
		// file is replaced rather than repaired.
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if rmErr := os.Remove(file + suffix); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: knowledge.store %s: removing the unusable index: %w", ErrStore, store, rmErr)
			}
		}
		idx, err = openFile(file, store, opts)
	}
	if err != nil {
		return nil, err
	}
	idx.dir = dir
	return idx, nil
}

// openDB opens the connection pool of the database at file. SQLite opens
// lazily: nothing is read until the first statement.
func openDB(file string) (*sql.DB, error) {
	dsn := (&url.URL{Scheme: "file", OmitHost: true, Path: file}).String() + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS),
			"journal_mode(WAL)",
			"synchronous(NORMAL)",
			// Reads through a memory map instead of a read call a
			// page: searches of a large index spend less time in
			// system calls, and opening (its quick check reads every
			// page) is several times faster.
			"mmap_size(268435456)",
		},
		// Writers take the lock when they begin, so two gateways never
		// both hold a read lock and deadlock upgrading it.
		"_txlock": {"immediate"},
	}.Encode()
	return sql.Open("sqlite", dsn)
}

// openFile opens the database at file, creating it 0600, and checks it.
func openFile(file, store string, opts Options) (*Index, error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, store, err)
	}
	opened, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, store, err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, store, err)
	}
	db, err := openDB(file)
	if err != nil {
		return nil, fmt.Errorf("%w: knowledge.store %s: %w", ErrStore, store, err)
	}
	idx := &Index{
		store:          store,
		file:           file,
		db:             db,
		stmts:          &sync.Map{},
		opened:         opened,
		log:            opts.Logger,
		maxResultBytes: opts.MaxResultBytes,
		headingWeight:  opts.headingWeight,
		opts:           opts,
	}
	idx.health.repair = make(chan struct{}, 1)
	if idx.log == nil {
		idx.log = slog.Default()
	}
	if idx.maxResultBytes <= 0 {
		idx.maxResultBytes = DefaultMaxResultBytes
	}
	if idx.headingWeight == 0 {
		idx.headingWeight = defaultHeadingWeight
	}
	tokenizer := opts.tokenizer
	if tokenizer == "" {
		tokenizer = "porter unicode61 remove_diacritics 2"
	}
	idx.opts.tokenizer = tokenizer
	if err := idx.prepare(context.Background(), tokenizer, opts.Rebuild); err != nil {
		if damage := asDamage(err); damage != nil {
			// Unreadable: opened damaged, for Run to rebuild.
			idx.health.damage = damage
			return idx, nil
		}
		db.Close()
		return nil, err
	}
	return idx, nil
}

// checkDirectory resolves dir and checks it is a readable directory.
func checkDirectory(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("%w: no directory given", ErrNoDirectory)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: resolving %s: %w", ErrNoDirectory, dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%w: %s is not a directory", ErrNoDirectory, abs)
	}
	return abs, nil
}

// inside reports whether path is dir or below it, comparing the paths as
// given and with symbolic links resolved where they exist.
func inside(dir, path string) bool {
	within := func(d, p string) bool {
		rel, err := filepath.Rel(d, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	if within(dir, path) {
		return true
	}
	rd, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	// The store folder may not exist yet: resolve its nearest existing
	// ancestor and keep the rest.
	rest := ""
	p := path
	for {
		if rp, err := filepath.EvalSymlinks(p); err == nil {
			return within(rd, filepath.Join(rp, rest))
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// refuse is the error for a store that is not usable.
func (i *Index) refuse(what string, cause error) error {
	return fmt.Errorf("%w: knowledge.store %s: %s; rebuild it with `%s` (it replaces %s), or point knowledge.store at another folder: %w",
		ErrStore, i.store, what, RebuildCommand, filepath.Join(i.store, StoreFile), cause)
}

// prepare checks the store is ours (creating the schema in an empty one)
// and, when rebuild is set, empties it.
func (i *Index) prepare(ctx context.Context, tokenizer string, rebuild bool) error {
	var id, version int64
	if err := i.db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return i.refuse("not a readable SQLite database (corrupt, or another kind of file)", err)
	}
	if err := i.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return i.refuse("not a readable SQLite database", err)
	}

	if id == 0 {
		var tables int
		if err := i.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
			return i.refuse("not a readable SQLite database (corrupt, or another kind of file)", err)
		}
		if tables > 0 {
			return i.refuse("this SQLite database is not a fiskfleet knowledge index", errors.New("application id 0 with tables present"))
		}
		return i.create(ctx, tokenizer)
	}
	if id != applicationID {
		return i.refuse("this SQLite database is not a fiskfleet knowledge index", fmt.Errorf("application id %#x", id))
	}
	if version != schemaVersion {
		return i.refuse(fmt.Sprintf("built by another version of fiskfleet (schema %d, this one reads %d)", version, schemaVersion), errors.New("schema version mismatch"))
	}
	if err := i.addVectorSchema(ctx); err != nil {
		return err
	}
	if rebuild {
		if err := i.Check(ctx); err != nil {
			return err
		}
		return i.clear(ctx)
	}
	return i.checkIdentity(ctx)
}

// Check reads the whole store for corruption (SQLite's quick check, which
// covers the full-text index too), returning an error naming
// knowledge.store and [RebuildCommand] when it is damaged. [Open] checks
// only that the file is a fiskfleet index of this version: reading all of
// a large store takes seconds, which a gateway must not spend before it
// listens, so [Index.Run] checks in the background before its first
// update. A damaged page a search or update meets before then fails it
// with the same error.
func (i *Index) Check(ctx context.Context) error {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.check(ctx)
}

// check is [Index.Check] under i.mu. An error that is damage satisfies
// [asDamage].
func (i *Index) check(ctx context.Context) error {
	// A running SQLite keeps page 1 in its cache while nothing writes,
	// so damage to the header is read from the file itself.
	if err := checkHeader(i.file); err != nil {
		return i.refuse("the index is corrupt", err)
	}
	var ok string
	if err := i.db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&ok); err != nil || ok != "ok" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			// The check ran and found damage: its report is the cause.
			err = &damageError{report: ok}
		} else if !isDamage(err) {
			// Busy or out of memory: not a finding about the store.
			return fmt.Errorf("checking knowledge.store %s: %w", i.store, err)
		}
		return i.refuse("the index is corrupt", err)
	}
	return nil
}

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// checkHeader reads the file's header: SQLite's magic and, in a store
// that holds anything, our application id (bytes 68-71, big-endian).
func checkHeader(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	var h [100]byte
	n, err := io.ReadFull(f, h[:])
	switch {
	case n == 0:
		return nil // empty: a store not yet created
	case err != nil:
		return &damageError{report: fmt.Sprintf("header: the file is %d bytes, shorter than an SQLite header", n)}
	case string(h[:len(sqliteMagic)]) != sqliteMagic:
		return &damageError{report: "header: no SQLite signature"}
	}
	if id := binary.BigEndian.Uint32(h[68:72]); id != applicationID && id != 0 {
		return &damageError{report: fmt.Sprintf("header: application id %#x", id)}
	}
	return nil
}

// create lays out the schema in an empty database. It runs in one write
// transaction that re-checks the application id, so two processes opening
// a fresh store at once create it once.
func (i *Index) create(ctx context.Context, tokenizer string) error {
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return i.refuse("cannot write the index", err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return i.refuse("not a readable SQLite database", err)
	}
	if id == applicationID {
		return nil // another process created it first
	}
	stmts := []string{
		`CREATE TABLE documents(
			path TEXT PRIMARY KEY,
			title TEXT NOT NULL,
			hash TEXT NOT NULL,
			bytes INTEGER NOT NULL,
			mtime INTEGER NOT NULL,
			sections INTEGER NOT NULL,
			indexed_at INTEGER NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE sections(
			id INTEGER PRIMARY KEY,
			path TEXT NOT NULL,
			ordinal INTEGER NOT NULL,
			heading TEXT NOT NULL,
			lead TEXT NOT NULL,
			body TEXT NOT NULL,
			UNIQUE(path, ordinal)
		)`,
		`CREATE VIRTUAL TABLE sections_fts USING fts5(heading, body, content='sections', content_rowid='id', tokenize=` + sqlString(tokenizer) + `)`,
		`CREATE TRIGGER sections_ai AFTER INSERT ON sections BEGIN
			INSERT INTO sections_fts(rowid, heading, body) VALUES (new.id, new.heading, new.body);
		END`,
		`CREATE TRIGGER sections_ad AFTER DELETE ON sections BEGIN
			INSERT INTO sections_fts(sections_fts, rowid, heading, body) VALUES ('delete', old.id, old.heading, old.body);
		END`,
		`CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`,
	}
	stmts = append(stmts, vectorSchema...)
	stmts = append(stmts,
		fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion),
		fmt.Sprintf(`PRAGMA application_id = %d`, applicationID),
	)
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return i.refuse("cannot create the index", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return i.refuse("cannot create the index", err)
	}
	return nil
}

// clear empties the index in one transaction, so a gateway reading the
// same store sees the old index or the new one, never half of each.
func (i *Index) clear(ctx context.Context) error {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return i.refuse("cannot write the index", err)
	}
	defer tx.Rollback()
	for _, s := range []string{`DELETE FROM vectors`, `DELETE FROM sections`, `DELETE FROM documents`, `DELETE FROM meta`, `INSERT INTO sections_fts(sections_fts) VALUES ('rebuild')`} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return i.refuse("cannot empty the index", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return i.refuse("cannot empty the index", err)
	}
	return nil
}

// sqlString quotes s as an SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Dir returns the absolute directory the index covers.
func (i *Index) Dir() string { return i.dir }

// Store returns the absolute store folder.
func (i *Index) Store() string { return i.store }

// Close closes the database. Searches and updates after Close fail.
func (i *Index) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	return closeDB(i.db, i.stmts)
}

// closeDB closes a pool and the statements prepared on it.
func closeDB(db *sql.DB, stmts *sync.Map) error {
	stmts.Range(func(_, s any) bool {
		s.(*sql.Stmt).Close()
		return true
	})
	return db.Close()
}
