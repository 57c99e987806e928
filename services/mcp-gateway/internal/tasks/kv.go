package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of [KVConfig].
const (
	// DefaultBucket is the key-value bucket the gateways of a fleet share
	// when expose.agent.mcp.fleet.bucket is not set. One bucket serves
	// every identity: keys carry no identity, so give each identity its
	// own bucket when several share a JetStream account.
	DefaultBucket = "FISK_GATEWAY"
	// DefaultInlineMax is the largest result, in bytes of JSON, kept in
	// the task's own key-value entry. A larger one goes to the object
	// store (see [KV]). It leaves room under NATS's default max_payload of
	// 1 MiB for the task's other fields and the headers.
	DefaultInlineMax = 256 << 10
)

// Key prefixes in the bucket: tasks and gateway heartbeats ([Fleet]). The
// approvals a fleet shares (mcpserver's approvalKeyPrefix) live beside them.
const (
	taskPrefix     = "task."
	instancePrefix = "instance."
)

// casRetries bounds the compare-and-set retries of one [KV.End] or
// [KV.Update]: each retry means another gateway changed the task
// meanwhile, which only a cancel racing the call's end or its gateway's
// failing can do.
const casRetries = 16

// KVConfig configures a [KV] store.
type KVConfig struct {
	// Bucket is the key-value bucket, created if missing; empty means
	// [DefaultBucket].
	Bucket string
	// Replicas is the bucket's replica count when it is created: 1 on a
	// single server, 3 in a cluster that must keep tasks through a
	// server's loss. 0 means 1. An existing bucket keeps its own.
	Replicas int
	// Max caps the tasks kept, over the whole fleet
	// (expose.agent.mcp.max_tasks); at least 1. Gateways racing for the
	// last room may overshoot it by one each.
	Max int
	// InlineMax is the largest result kept inline; 0 means
	// [DefaultInlineMax].
	InlineMax int
	// Now is the store's clock; nil means time.Now.
	Now Clock
}

// KV is the [Store] of a fleet: tasks live in a JetStream key-value
// bucket, one entry per task under task.<owner digest>.<id>, so that any
// gateway of the fleet finds a caller's task, and a task outlives the
// gateway that ran it. Every change is a compare-and-set on the entry's
// revision, so a cancel from one gateway and a result from another
// cannot both win.
//
// A result larger than [KVConfig.InlineMax] goes to the object store
// <bucket>_RESULTS under the task's id, and the entry names it: a
// key-value value is one NATS message, bounded by the server's
// max_payload (1 MiB by default), while a command's output may be larger.
// The object store (nats.go's own) chunks, checksums and deletes it as
// one object, which hand-made chunk keys would have to redo, and without
// its atomic put a reader could see half a result.
//
// It is safe for concurrent use. The caller owns the JetStream context
// and its connection.
type KV struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	cfg KVConfig

	objMu sync.Mutex
	// obj is the results' object store, created on first use; guarded by
	// objMu.
	obj jetstream.ObjectStore

	mu sync.Mutex
	// reserved counts this process's reservations not yet used or
	// released; guarded by mu.
	reserved int
}

// NewKV opens the tasks bucket, creating it if missing.
func NewKV(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KV, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.InlineMax <= 0 {
		cfg.InlineMax = DefaultInlineMax
	}
	cfg.Max = max(cfg.Max, 1)
	kv, err := OpenBucket(ctx, js, cfg.Bucket, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	return &KV{js: js, kv: kv, cfg: cfg}, nil
}

// openTimeout bounds opening or creating the bucket when the caller set
// no deadline. jetstream's own default is 5 s per request, which a
// replicated bucket's creation can need more than: its raft group must
// form first, which on a busy cluster, or one whose server is restarting,
// takes longer. A gateway that gave up then would not start at all.
const openTimeout = 30 * time.Second

// OpenBucket opens the key-value bucket, creating it with replicas if
// missing; an existing bucket is used as it is.
func OpenBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, openTimeout)
		defer cancel()
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err == nil {
		return kv, checkBucket(ctx, kv)
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: opening bucket %s: %w", ErrUnavailable, bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "fiskfleet MCP gateway fleet: tasks, heartbeats and approvals",
		History:     1,
		Replicas:    replicas,
		// Per-key ttls (approvals expire by themselves) need markers;
		// a minute lets a watcher see a key go.
		LimitMarkerTTL: time.Minute,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// Another gateway created it meanwhile.
		kv, err = js.KeyValue(ctx, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: creating bucket %s (replicas %d): %w", ErrUnavailable, bucket, replicas, err)
	}
	return kv, nil
}

// checkBucket refuses a bucket made elsewhere without per-key ttls, which
// the fleet's approvals need, naming the fix.
func checkBucket(ctx context.Context, kv jetstream.KeyValue) error {
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("%w: reading bucket %s: %w", ErrUnavailable, kv.Bucket(), err)
	}
	if st.LimitMarkerTTL() == 0 {
		return fmt.Errorf("%w: bucket %s exists without per-key ttls (limit_marker_ttl), which the fleet's approvals need: delete it and let a gateway create it, or name another expose.agent.mcp.fleet.bucket", ErrInvalidConfig, kv.Bucket())
	}
	return nil
}

// Bucket returns the key-value bucket the store uses.
func (s *KV) Bucket() jetstream.KeyValue { return s.kv }

// Ready reports whether the bucket answers, for /readyz.
func (s *KV) Ready(ctx context.Context) error {
	if _, err := s.kv.Status(ctx); err != nil {
		return fmt.Errorf("%w: bucket %s: %w", ErrUnavailable, s.cfg.Bucket, err)
	}
	return nil
}

// ownerDigest keys an owner: subjects may hold any character, and a key
// only some.
func ownerDigest(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:16])
}

func taskKey(owner, id string) string { return taskPrefix + ownerDigest(owner) + "." + id }

// record is a task as stored: the result inline, or the name of its
// object.
type record struct {
	Task
	Result       json.RawMessage `json:"result,omitempty"`
	ResultObject string          `json:"result_object,omitempty"`
}

func (s *KV) now() time.Time { return s.cfg.Now.now() }

// encode turns t into an entry's value, putting a large result in the
// object store first.
func (s *KV) encode(ctx context.Context, t Task) ([]byte, error) {
	rec := record{Task: t}
	if t.Result != nil {
		b, err := json.Marshal(t.Result)
		if err != nil {
			return nil, fmt.Errorf("encoding the result of task %s: %w", t.ID, err)
		}
		if len(b) <= s.cfg.InlineMax {
			rec.Result = b
		} else {
			obj, err := s.objects(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := obj.PutBytes(ctx, t.ID, b); err != nil {
				return nil, fmt.Errorf("%w: storing the result of task %s: %w", ErrUnavailable, t.ID, err)
			}
			rec.ResultObject = t.ID
		}
	}
	return json.Marshal(rec)
}

// decode reads an entry's value; the result is loaded only when
// withResult is set.
func (s *KV) decode(ctx context.Context, b []byte, withResult bool) (Task, error) {
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Task{}, fmt.Errorf("decoding a task: %w", err)
	}
	t := rec.Task
	if !withResult {
		return t, nil
	}
	raw := rec.Result
	if rec.ResultObject != "" {
		obj, err := s.objects(ctx)
		if err != nil {
			return Task{}, err
		}
		if raw, err = obj.GetBytes(ctx, rec.ResultObject); err != nil {
			return Task{}, fmt.Errorf("%w: reading the result of task %s: %w", ErrUnavailable, t.ID, err)
		}
	}
	if len(raw) > 0 {
		res, err := mcp.ParseCallToolResult((*json.RawMessage)(&raw))
		if err != nil {
			return Task{}, fmt.Errorf("decoding the result of task %s: %w", t.ID, err)
		}
		t.Result = res
	}
	return t, nil
}

// objects returns the results' object store, creating it on first use.
func (s *KV) objects(ctx context.Context) (jetstream.ObjectStore, error) {
	s.objMu.Lock()
	defer s.objMu.Unlock()
	if s.obj != nil {
		return s.obj, nil
	}
	name := s.cfg.Bucket + "_RESULTS"
	obj, err := s.js.ObjectStore(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obj, err = s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      name,
			Description: "fiskfleet MCP gateway fleet: task results too large for a key-value entry",
			Replicas:    s.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obj, err = s.js.ObjectStore(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: opening object store %s: %w", ErrUnavailable, name, err)
	}
	s.obj = obj
	return obj, nil
}

// stored is a task as read from the bucket, with its entry's revision.
type stored struct {
	Task
	rev uint64
}

// entries returns every task entry whose key matches filter, without
// results.
func (s *KV) entries(ctx context.Context, filter string) ([]stored, error) {
	keys, err := s.keys(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []stored
	for _, k := range keys {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading a task: %w", ErrUnavailable, err)
		}
		t, err := s.decode(ctx, e.Value(), false)
		if err != nil {
			continue // not ours to judge; a bad entry is skipped
		}
		out = append(out, stored{Task: t, rev: e.Revision()})
	}
	return out, nil
}

// live returns the entries of owner's tasks, or of every owner's when it
// is empty, and removes those whose ttl has passed.
func (s *KV) live(ctx context.Context, owner string) ([]stored, error) {
	filter := taskPrefix + ">"
	if owner != "" {
		filter = taskPrefix + ownerDigest(owner) + ".*"
	}
	all, err := s.entries(ctx, filter)
	if err != nil {
		return nil, err
	}
	now := s.now()
	return slices.DeleteFunc(all, func(t stored) bool {
		switch {
		case owner != "" && t.Owner != owner:
			return true
		case t.expired(now):
			s.remove(ctx, t.Task, t.rev)
			return true
		}
		return false
	}), nil
}

// remove deletes a task's entry at revision rev (and its result object),
// unless it changed meanwhile.
func (s *KV) remove(ctx context.Context, t Task, rev uint64) {
	if err := s.kv.Purge(ctx, taskKey(t.Owner, t.ID), jetstream.LastRevision(rev)); err != nil {
		return
	}
	s.dropObject(ctx, t.ID)
}

func (s *KV) dropObject(ctx context.Context, id string) {
	s.objMu.Lock()
	obj := s.obj
	s.objMu.Unlock()
	if obj != nil {
		_ = obj.Delete(ctx, id)
	}
}

// Reserve implements [Store]. It counts the tasks of the whole bucket by
// their keys alone; only a full bucket has its tasks read, to drop the
// expired ones and the one that finished first.
func (s *KV) Reserve(ctx context.Context) (*Reservation, error) {
	keys, err := s.keys(ctx, taskPrefix+">")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	room := len(keys)+s.reserved < s.cfg.Max
	s.mu.Unlock()
	if !room {
		if err := s.makeRoom(ctx); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved++
	return &Reservation{release: s.unreserve}, nil
}

func (s *KV) unreserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved--
}

// makeRoom drops the expired tasks and, when that is not enough, the task
// that finished first; it fails with [ErrFull] when all are running.
func (s *KV) makeRoom(ctx context.Context) error {
	kept, err := s.live(ctx, "")
	if err != nil {
		return err
	}
	oldest := -1
	for i, t := range kept {
		if t.Terminal() && (oldest < 0 || t.Finished.Before(kept[oldest].Finished)) {
			oldest = i
		}
	}
	s.mu.Lock()
	full := len(kept)+s.reserved >= s.cfg.Max
	s.mu.Unlock()
	if !full {
		return nil
	}
	if oldest < 0 {
		return errFull(s.cfg.Max)
	}
	s.remove(ctx, kept[oldest].Task, kept[oldest].rev)
	return nil
}

// keys lists the keys matching filter.
func (s *KV) keys(ctx context.Context, filter string) ([]string, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("%w: listing tasks: %w", ErrUnavailable, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// Create implements [Store].
func (s *KV) Create(ctx context.Context, t Task, r *Reservation) (Task, error) {
	defer func() {
		if r.use() {
			s.unreserve()
		}
	}()
	t.Created = s.now()
	t.Updated = t.Created
	b, err := s.encode(ctx, t)
	if err != nil {
		return Task{}, err
	}
	if _, err := s.kv.Create(ctx, taskKey(t.Owner, t.ID), b); err != nil {
		return Task{}, fmt.Errorf("%w: recording task %s: %w", ErrUnavailable, t.ID, err)
	}
	return t, nil
}

// load returns owner's task id and its entry's revision.
func (s *KV) load(ctx context.Context, owner, id string, withResult bool) (Task, uint64, error) {
	if !validID(id) {
		return Task{}, 0, ErrNotFound
	}
	e, err := s.kv.Get(ctx, taskKey(owner, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Task{}, 0, ErrNotFound
	}
	if err != nil {
		return Task{}, 0, fmt.Errorf("%w: reading task %s: %w", ErrUnavailable, id, err)
	}
	t, err := s.decode(ctx, e.Value(), withResult)
	if err != nil {
		return Task{}, 0, err
	}
	if t.Owner != owner || t.ID != id {
		return Task{}, 0, ErrNotFound
	}
	if t.expired(s.now()) {
		s.remove(ctx, t, e.Revision())
		return Task{}, 0, ErrNotFound
	}
	return t, e.Revision(), nil
}

// Get implements [Store].
func (s *KV) Get(ctx context.Context, owner, id string) (Task, error) {
	t, _, err := s.load(ctx, owner, id, true)
	return t, err
}

// List implements [Store]; the tasks listed carry no result.
func (s *KV) List(ctx context.Context, owner string) ([]Task, error) {
	all, err := s.live(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []Task
	for _, t := range all {
		out = append(out, t.Task)
	}
	sortTasks(out)
	return out, nil
}

// End implements [Store].
func (s *KV) End(ctx context.Context, owner, id string, e Ending) (Task, bool, error) {
	return s.change(ctx, owner, id, true, "the end", "while it was being ended", func(t *Task) bool {
		return t.end(e, s.now())
	})
}

// Update implements [Store].
func (s *KV) Update(ctx context.Context, owner, id string, status mcp.TaskStatus, message string) (Task, bool, error) {
	return s.change(ctx, owner, id, false, "the status", "while its status was being recorded", func(t *Task) bool {
		return t.update(status, message, s.now())
	})
}

// change applies apply to owner's task id and writes it back with a
// compare-and-set, reading it again when another gateway changed it
// meanwhile. apply reports false when the task stays as it is, and change
// then returns it unchanged. what and doing name the change in errors.
func (s *KV) change(ctx context.Context, owner, id string, withResult bool, what, doing string, apply func(*Task) bool) (Task, bool, error) {
	for range casRetries {
		t, rev, err := s.load(ctx, owner, id, withResult)
		if err != nil {
			return Task{}, false, err
		}
		if !apply(&t) {
			return t, false, nil
		}
		b, err := s.encode(ctx, t)
		if err != nil {
			return Task{}, false, err
		}
		_, err = s.kv.Update(ctx, taskKey(owner, id), b, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return Task{}, false, fmt.Errorf("%w: recording %s of task %s: %w", ErrUnavailable, what, id, err)
		}
		return t, true, nil
	}
	return Task{}, false, fmt.Errorf("%w: task %s kept changing %s", ErrUnavailable, id, doing)
}

// Wait implements [Store]: it watches the task's entry.
func (s *KV) Wait(ctx context.Context, owner, id string) (Task, error) {
	if !validID(id) {
		return Task{}, ErrNotFound
	}
	w, err := s.kv.Watch(ctx, taskKey(owner, id))
	if err != nil {
		return Task{}, fmt.Errorf("%w: watching task %s: %w", ErrUnavailable, id, err)
	}
	defer func() { _ = w.Stop() }()
	seen := false
	for {
		select {
		case <-ctx.Done():
			return Task{}, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return Task{}, fmt.Errorf("%w: the watch of task %s ended", ErrUnavailable, id)
			}
			if e == nil {
				// The current value has been delivered, if any.
				if !seen {
					return Task{}, ErrNotFound
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				return Task{}, ErrNotFound
			}
			seen = true
			t, err := s.decode(ctx, e.Value(), false)
			if err != nil {
				return Task{}, err
			}
			if t.Owner != owner {
				return Task{}, ErrNotFound
			}
			if t.Terminal() {
				t, _, err := s.load(ctx, owner, id, true)
				return t, err
			}
		}
	}
}

// Drop implements [Store].
func (s *KV) Drop(ctx context.Context, owner string, e Ending) ([]Task, error) {
	all, err := s.live(ctx, owner)
	if err != nil {
		return nil, err
	}
	var working []Task
	for _, t := range all {
		if t.end(e, s.now()) {
			working = append(working, t.Task)
		}
		s.remove(ctx, t.Task, t.rev)
	}
	return working, nil
}

// Sweep implements [Store]; it also clears the markers deleted entries
// leave, once they are a minute old (a watcher may still be reading one).
func (s *KV) Sweep(ctx context.Context) error {
	if _, err := s.live(ctx, ""); err != nil {
		return err
	}
	if err := s.kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(time.Minute)); err != nil {
		return fmt.Errorf("%w: clearing deleted tasks: %w", ErrUnavailable, err)
	}
	return nil
}

// Count implements [Store]; it counts keys, so a task past its ttl but
// not yet swept still counts.
func (s *KV) Count(ctx context.Context) (int, error) {
	keys, err := s.keys(ctx, taskPrefix+">")
	return len(keys), err
}

// validKeyToken reports whether s may stand in a key: instance names and
// approval ids come from this process, but a bad one must not corrupt
// the bucket.
func validKeyToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
