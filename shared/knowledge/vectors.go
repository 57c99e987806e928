package knowledge

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
)

// Embeddings configures the vector tier (knowledge.embeddings): each
// section is embedded through Client, and a search fuses the lexical
// ranking with the vectors'. Nil in [Options] means lexical only.
type Embeddings struct {
	Client *embed.Client
	// QueryPrefix is put before every query; DocumentPrefix before every
	// section, with {title} replaced by the section's heading path.
	QueryPrefix    string
	DocumentPrefix string
	// Batch is how many sections one request embeds; 0 means
	// [spec.DefaultEmbeddingsBatch].
	Batch int
}

// VectorIdentity is what the store's vectors were made with. Vectors of
// two identities do not compare, so a store holds one, pinned with its
// first vectors, and one configured otherwise is refused.
type VectorIdentity struct {
	Model string `json:"model"`
	Dim   int    `json:"dim"`
	// Normalised reports whether the server gave unit vectors. The index
	// compares directions either way; a change means a changed server.
	Normalised     bool   `json:"normalised"`
	QueryPrefix    string `json:"query_prefix"`
	DocumentPrefix string `json:"document_prefix"`
}

// String is the identity as the tier line names it.
func (v VectorIdentity) String() string { return fmt.Sprintf("model=%s, dim=%d", v.Model, v.Dim) }

// sameSetup reports whether v was made with the configuration of e (the
// model and prefixes; the dimension is learned from the server).
func (v VectorIdentity) sameSetup(e *Embeddings) bool {
	return v.Model == e.Client.Model() && v.QueryPrefix == e.QueryPrefix && v.DocumentPrefix == e.DocumentPrefix
}

// identityKey is the meta key of the pinned [VectorIdentity].
const identityKey = "vectors"

// seqKey is the meta key of the highest seq given to a vector.
const seqKey = "vectors_seq"

// ErrEmbeddings is an embeddings server that could not embed what an
// update had to: unreachable, or answering wrongly. The message names
// knowledge.embeddings.base_url.
var ErrEmbeddings = errors.New("knowledge embeddings unavailable")

// vectorSchema is the vectors' part of the store: one vector a section,
// keyed by the section's id and removed with it. seq orders vectors by
// when they were stored, so a process sharing the store loads only the
// ones it has not seen.
var vectorSchema = []string{
	`CREATE TABLE IF NOT EXISTS vectors(id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, v BLOB NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS vectors_seq ON vectors(seq)`,
	`CREATE TRIGGER IF NOT EXISTS sections_vd AFTER DELETE ON sections BEGIN
		DELETE FROM vectors WHERE id = old.id;
	END`,
}

// addVectorSchema adds the vectors' tables to a store made before they
// existed; a store that has them is left alone, without a write.
func (i *Index) addVectorSchema(ctx context.Context) error {
	var n int
	if err := i.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'sections_vd'`).Scan(&n); err != nil {
		return i.refuse("not a readable SQLite database", err)
	}
	if n > 0 {
		return nil
	}
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return i.refuse("cannot write the index", err)
	}
	defer tx.Rollback()
	for _, s := range vectorSchema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return i.refuse("cannot add the vectors to the index", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return i.refuse("cannot add the vectors to the index", err)
	}
	return nil
}

// Identity returns the store's pinned vector identity, and false when it
// holds no vectors.
func (i *Index) Identity(ctx context.Context) (VectorIdentity, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.identity(ctx)
}

// identity is [Index.Identity] under i.mu.
func (i *Index) identity(ctx context.Context) (VectorIdentity, bool) {
	return parseIdentity(i.meta(ctx, identityKey))
}

// parseIdentity reads a stored identity; false when there is none.
func parseIdentity(raw string) (VectorIdentity, bool) {
	var id VectorIdentity
	if raw == "" || json.Unmarshal([]byte(raw), &id) != nil || id.Dim <= 0 {
		return VectorIdentity{}, false
	}
	return id, true
}

// checkIdentity refuses a store whose vectors were made with another
// model or other prefixes than configured, before anything is embedded.
func (i *Index) checkIdentity(ctx context.Context) error {
	e := i.opts.Embeddings
	if e == nil {
		return nil
	}
	have, ok := i.identity(ctx)
	if !ok || have.sameSetup(e) {
		return nil
	}
	return i.refuse(fmt.Sprintf("its vectors were made with model %q (query_prefix %q, document_prefix %q), and knowledge.embeddings asks for model %q (query_prefix %q, document_prefix %q); vectors of two models do not compare",
		have.Model, have.QueryPrefix, have.DocumentPrefix, e.Client.Model(), e.QueryPrefix, e.DocumentPrefix), errors.New("vector identity mismatch"))
}

// identityMismatch is the refusal of vectors the server now gives with
// another dimension or normalisation than the store's.
func (i *Index) identityMismatch(have VectorIdentity, dim int, normalised bool) error {
	return i.refuse(fmt.Sprintf("its vectors (%s, normalised %t) are not what the embeddings server gives now (dim=%d, normalised %t): the model behind knowledge.embeddings.model changed",
		have, have.Normalised, dim, normalised), errors.New("vector identity mismatch"))
}

// EmbedProgress is called while vectors are made, with the sections
// embedded so far and the number that lacked one.
type EmbedProgress func(done, total int)

// Embed makes the vectors of every section that has none: after an update
// (new and changed documents), and after an earlier Embed failed part
// way. Each request embeds knowledge.embeddings.batch sections, and each
// batch is committed as it comes, so what was embedded is kept whatever
// happens to the rest. It returns how many sections it embedded, and an
// error wrapping [ErrEmbeddings] naming knowledge.embeddings.base_url when
// the server could not embed them, or [ErrStore] when it now gives
// vectors of another dimension than the store's. Without
// knowledge.embeddings it does nothing.
func (i *Index) Embed(ctx context.Context, progress EmbedProgress) (int, error) {
	e := i.opts.Embeddings
	if e == nil {
		return 0, nil
	}
	i.embedMu.Lock()
	defer i.embedMu.Unlock()
	batch := e.Batch
	if batch <= 0 {
		batch = spec.DefaultEmbeddingsBatch
	}
	total, err := i.missingVectors(ctx)
	if err != nil || total == 0 {
		return 0, err
	}
	done := 0
	var after int64
	for {
		todo, err := i.unembedded(ctx, after, batch)
		if err != nil || len(todo) == 0 {
			if done >= batchSize {
				i.checkpoint(ctx)
			}
			return done, err
		}
		after = todo[len(todo)-1].id
		texts := make([]string, len(todo))
		for n, s := range todo {
			texts[n] = documentText(e.DocumentPrefix, s)
		}
		have, pinned := i.Identity(ctx)
		vecs, err := e.Client.Embed(ctx, texts, 0)
		if err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			return done, fmt.Errorf("%w: knowledge.embeddings.base_url %s: %w; the sections without vectors are embedded when it answers (`mcp-gateway knowledge doctor` checks it)", ErrEmbeddings, e.Client.URL(), err)
		}
		normalised := true
		for _, v := range vecs {
			normalised = normalised && embed.Normalised(v)
		}
		id := VectorIdentity{Model: e.Client.Model(), Dim: len(vecs[0]), Normalised: normalised, QueryPrefix: e.QueryPrefix, DocumentPrefix: e.DocumentPrefix}
		if pinned && (have.Dim != id.Dim || have.Normalised != id.Normalised) {
			return done, i.identityMismatch(have, id.Dim, id.Normalised)
		}
		stored, err := i.storeVectors(ctx, todo, vecs, id, pinned)
		if err != nil {
			return done, err
		}
		done += stored
		if progress != nil {
			progress(done, total)
		}
		if done >= checkpointEvery && done%checkpointEvery < len(todo) {
			i.checkpoint(ctx)
		}
	}
}

// checkpointEvery is how many vectors Embed stores between checkpoints:
// a first embedding of a large store otherwise leaves a write-ahead log
// as large as its vectors, which every read looks pages up in.
const checkpointEvery = 8192

// checkpoint copies the write-ahead log into the database and empties
// it. Failing (a reader holding an old snapshot) leaves that for later.
func (i *Index) checkpoint(ctx context.Context) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	if _, err := i.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		i.log.Debug("checkpointing the knowledge index", "store", i.store, "error", err)
	}
}

// pendingSection is a section to embed, as read for it.
type pendingSection struct {
	id                  int64
	heading, lead, body string
	title               string
}

// documentText is what is embedded for a section: the document prefix
// ({title} its heading path, or the document's title), then the section.
func documentText(prefix string, s pendingSection) string {
	title := s.heading
	if title == "" {
		title = s.title
	}
	return strings.ReplaceAll(prefix, "{title}", title) + s.lead + s.body
}

// missingVectors counts the sections without a vector.
func (i *Index) missingVectors(ctx context.Context) (int, error) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	var n int
	err := i.db.QueryRowContext(ctx, `SELECT count(*) FROM sections s WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id = s.id)`).Scan(&n)
	if err != nil {
		return 0, i.storeErr("reading the index", err)
	}
	return n, nil
}

// unembedded reads up to limit sections without a vector whose id is
// above after, in id order.
func (i *Index) unembedded(ctx context.Context, after int64, limit int) ([]pendingSection, error) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	rows, err := i.db.QueryContext(ctx, `SELECT s.id, s.heading, s.lead, s.body, d.title FROM sections s JOIN documents d ON d.path = s.path
		WHERE s.id > ? AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id = s.id) ORDER BY s.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, i.storeErr("reading the index", err)
	}
	defer rows.Close()
	var out []pendingSection
	for rows.Next() {
		var s pendingSection
		if err := rows.Scan(&s.id, &s.heading, &s.lead, &s.body, &s.title); err != nil {
			return nil, i.storeErr("reading the index", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, i.storeErr("reading the index", err)
	}
	return out, nil
}

// storeVectors stores the vectors of sections in one transaction, each
// only if its section still holds the text that was embedded (an update
// may have replaced it meanwhile; the new section gets its own vector
// next), and pins id with the store's first vectors.
func (i *Index) storeVectors(ctx context.Context, sections []pendingSection, vecs [][]float32, id VectorIdentity, pinned bool) (int, error) {
	i.writeMu.Lock()
	defer i.writeMu.Unlock()
	i.mu.RLock()
	defer i.mu.RUnlock()
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, i.storeErr("writing the index", err)
	}
	defer tx.Rollback()
	if !pinned {
		// Another process may have pinned an identity since it was read.
		var raw string
		switch err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, identityKey).Scan(&raw); {
		case errors.Is(err, sql.ErrNoRows):
			data, _ := json.Marshal(id)
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)`, identityKey, string(data)); err != nil {
				return 0, i.storeErr("writing the index", err)
			}
		case err != nil:
			return 0, i.storeErr("reading the index", err)
		default:
			var have VectorIdentity
			if json.Unmarshal([]byte(raw), &have) != nil || have != id {
				return 0, i.identityMismatch(have, id.Dim, id.Normalised)
			}
		}
	}
	// seq continues from the highest ever given, not from the vectors
	// left: a replaced section's vector leaves with it, and a seq after
	// what is left would repeat one a search has loaded already, so the
	// vector given it would never be loaded.
	var seq int64
	if err := tx.QueryRowContext(ctx, `SELECT max(coalesce((SELECT max(seq) FROM vectors), 0), coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1), 0))`, seqKey).Scan(&seq); err != nil {
		return 0, i.storeErr("reading the index", err)
	}
	stored := 0
	for n, s := range sections {
		seq++
		res, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO vectors(id, seq, v) SELECT ?1, ?2, ?3
			WHERE EXISTS (SELECT 1 FROM sections WHERE id = ?1 AND heading = ?4 AND lead = ?5 AND body = ?6)`,
			s.id, seq, encodeVector(embed.Unit(vecs[n])), s.heading, s.lead, s.body)
		if err != nil {
			return 0, i.storeErr("writing the index", err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			stored++
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, seqKey, strconv.FormatInt(seq, 10)); err != nil {
		return 0, i.storeErr("writing the index", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, i.storeErr("writing the index", err)
	}
	return stored, nil
}

// encodeVector is a vector as stored: little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
	}
	return b
}

// decodeVector reads a stored vector into v (len(v) numbers), and reports
// whether the blob had that many.
func decodeVector(b []byte, v []float32) bool {
	if len(b) != 4*len(v) {
		return false
	}
	for k := range v {
		v[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
	}
	return true
}

// VectorStats is the vector tier's part of [Stats].
type VectorStats struct {
	// Identity is what the vectors were made with; nil without vectors.
	Identity *VectorIdentity `json:"identity,omitempty"`
	// Vectors counts sections with a vector, Missing those without.
	Vectors int `json:"vectors"`
	Missing int `json:"missing"`
}

// vectorStats counts the vectors. The caller holds i.mu.
func (i *Index) vectorStats(ctx context.Context, sections int) (VectorStats, error) {
	var s VectorStats
	if err := i.db.QueryRowContext(ctx, `SELECT count(*) FROM vectors`).Scan(&s.Vectors); err != nil {
		return s, i.storeErr("reading the index", err)
	}
	s.Missing = max(0, sections-s.Vectors)
	if id, ok := i.identity(ctx); ok {
		s.Identity = &id
	}
	return s, nil
}

// embedRetry bounds how long a serving gateway waits before trying the
// embeddings server again after it failed: from embedRetryMin, doubling.
const (
	embedRetryMin = time.Second
	embedRetryMax = time.Minute
)

// embedLoop runs in [Index.Run] with knowledge.embeddings: it embeds what
// lacks a vector whenever kick says the index changed, and, while the
// server fails, again after a growing pause, so vectors missing when the
// server was away are filled in once it is back.
func (i *Index) embedLoop(ctx context.Context, kick <-chan struct{}) {
	wait := time.Duration(0)
	for {
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-time.After(wait):
			}
		} else {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
		}
		start := time.Now()
		n, err := i.Embed(ctx, nil)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			wait = min(max(2*wait, embedRetryMin), embedRetryMax)
			i.log.Error("embedding knowledge sections", "store", i.store, "embedded", n, "retry_in", wait, "error", err)
		default:
			if wait > 0 || n > 0 {
				i.log.Info("knowledge sections embedded", "store", i.store, "embedded", n, "duration", time.Since(start).Round(time.Millisecond))
			}
			wait = 0
		}
	}
}

// Diagnosis is what [Index.Doctor] found of the embeddings server and
// the store.
type Diagnosis struct {
	// URL is where requests go.
	URL string
	// Server is the identity the server gives now: its vector's
	// dimension and whether it is normalised, with the configured model
	// and prefixes.
	Server VectorIdentity
	// Latency is one request's round trip, embedding one short text.
	Latency time.Duration
	// Store is the store's pinned identity; nil when it holds no vectors.
	Store *VectorIdentity
	// Problem is why the store's vectors and the server's do not
	// compare, naming the fix; "" when they do (or the store has none).
	Problem string
}

// Doctor asks the embeddings server for one vector and compares what it
// gives with the store's pinned identity. It returns an error wrapping
// [ErrEmbeddings] when the server does not answer as it should, and nil
// with a zero Diagnosis without knowledge.embeddings.
func (i *Index) Doctor(ctx context.Context) (Diagnosis, error) {
	e := i.opts.Embeddings
	if e == nil {
		return Diagnosis{}, nil
	}
	d := Diagnosis{URL: e.Client.URL()}
	start := time.Now()
	vecs, err := e.Client.Embed(ctx, []string{e.QueryPrefix + "How do I restart the server?"}, 0)
	d.Latency = time.Since(start)
	if err != nil {
		return d, fmt.Errorf("%w: knowledge.embeddings.base_url %s: %w", ErrEmbeddings, d.URL, err)
	}
	d.Server = VectorIdentity{Model: e.Client.Model(), Dim: len(vecs[0]), Normalised: embed.Normalised(vecs[0]), QueryPrefix: e.QueryPrefix, DocumentPrefix: e.DocumentPrefix}
	if have, ok := i.Identity(ctx); ok {
		d.Store = &have
		if have != d.Server {
			d.Problem = fmt.Sprintf("the store's vectors (%s, normalised %t, query_prefix %q, document_prefix %q) do not compare with the server's (%s, normalised %t, query_prefix %q, document_prefix %q): rebuild with `%s`",
				have, have.Normalised, have.QueryPrefix, have.DocumentPrefix, d.Server, d.Server.Normalised, d.Server.QueryPrefix, d.Server.DocumentPrefix, RebuildCommand)
		}
	}
	return d, nil
}
