package tasks

import (
	"cmp"
	"context"
	"github.com/mark3labs/mcp-go/mcp"
	"slices"
	"sync"
)

// Memory is the [Store] of a single gateway: tasks live in the process and
// go with it. It keeps at most max tasks, running and finished, over all
// owners: a new one drops the task that finished first, and is refused
// while all are still running. The zero value is not usable; use
// [NewMemory].
type Memory struct {
	max int
	now Clock

	mu sync.Mutex
	// byID and reserved are guarded by mu.
	byID     map[string]*memTask
	reserved int
}

// memTask is a stored task and the channel closed when it finishes.
type memTask struct {
	Task
	terminal chan struct{}
}

// NewMemory returns an empty store keeping at most max tasks (at least
// one). now is its clock; nil means time.Now.
func NewMemory(limit int, now Clock) *Memory {
	return &Memory{max: max(limit, 1), now: now, byID: map[string]*memTask{}}
}

// Reserve implements [Store].
func (m *Memory) Reserve(context.Context) (*Reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	if len(m.byID)+m.reserved >= m.max && !m.evictLocked() {
		return nil, errFull(m.max)
	}
	m.reserved++
	return &Reservation{release: func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.reserved--
	}}, nil
}

// Create implements [Store].
func (m *Memory) Create(_ context.Context, t Task, r *Reservation) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.use() {
		m.reserved--
	}
	t.Created = m.now.now()
	t.Updated = t.Created
	m.byID[t.ID] = &memTask{Task: t, terminal: make(chan struct{})}
	return t, nil
}

// lookupLocked returns owner's task id, or nil.
func (m *Memory) lookupLocked(owner, id string) *memTask {
	m.sweepLocked()
	t := m.byID[id]
	if t == nil || t.Owner != owner {
		return nil
	}
	return t
}

// Get implements [Store].
func (m *Memory) Get(_ context.Context, owner, id string) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.lookupLocked(owner, id)
	if t == nil {
		return Task{}, ErrNotFound
	}
	return t.Task, nil
}

// List implements [Store].
func (m *Memory) List(_ context.Context, owner string) ([]Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	var out []Task
	for _, t := range m.byID {
		if t.Owner == owner {
			out = append(out, t.Task)
		}
	}
	sortTasks(out)
	return out, nil
}

// sortTasks orders tasks oldest first, then by id, so a listing is stable.
func sortTasks(ts []Task) {
	slices.SortFunc(ts, func(a, b Task) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// End implements [Store].
func (m *Memory) End(_ context.Context, owner, id string, e Ending) (Task, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[id]
	if t == nil || t.Owner != owner {
		return Task{}, false, ErrNotFound
	}
	if !t.end(e, m.now.now()) {
		return t.Task, false, nil
	}
	close(t.terminal)
	return t.Task, true, nil
}

// Update implements [Store].
func (m *Memory) Update(_ context.Context, owner, id string, status mcp.TaskStatus, message string) (Task, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.byID[id]
	if t == nil || t.Owner != owner {
		return Task{}, false, ErrNotFound
	}
	changed := t.update(status, message, m.now.now())
	return t.Task, changed, nil
}

// Wait implements [Store].
func (m *Memory) Wait(ctx context.Context, owner, id string) (Task, error) {
	m.mu.Lock()
	t := m.lookupLocked(owner, id)
	m.mu.Unlock()
	if t == nil {
		return Task{}, ErrNotFound
	}
	select {
	case <-t.terminal:
	case <-ctx.Done():
		return Task{}, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return t.Task, nil
}

// Drop implements [Store].
func (m *Memory) Drop(_ context.Context, owner string, e Ending) ([]Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var working []Task
	for id, t := range m.byID {
		if t.Owner != owner {
			continue
		}
		delete(m.byID, id)
		if t.end(e, m.now.now()) {
			close(t.terminal)
			working = append(working, t.Task)
		}
	}
	return working, nil
}

// Sweep implements [Store].
func (m *Memory) Sweep(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	return nil
}

// Count implements [Store].
func (m *Memory) Count(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID), nil
}

func (m *Memory) sweepLocked() {
	now := m.now.now()
	for id, t := range m.byID {
		if t.expired(now) {
			delete(m.byID, id)
		}
	}
}

// evictLocked drops the task that finished first, reporting false when
// none has finished.
func (m *Memory) evictLocked() bool {
	var oldest *memTask
	for _, t := range m.byID {
		if t.Terminal() && (oldest == nil || t.Finished.Before(oldest.Finished)) {
			oldest = t
		}
	}
	if oldest == nil {
		return false
	}
	delete(m.byID, oldest.ID)
	return true
}
