package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Timeouts of the manager's own work.
const (
	// CancelWait bounds how long a cancel waits for the cancelled call to
	// return, its process group killed, before answering anyway.
	CancelWait = 30 * time.Second
	// storeTimeout bounds one store operation made outside any request
	// (a call's result being recorded, a session's tasks dropped): long
	// enough for a JetStream leader election, short enough that a lost
	// bucket cannot hold a call's goroutine for ever.
	storeTimeout = 10 * time.Second
)

// Canceller stops a task's call run by another gateway: it returns once
// that call has returned, or with an error when the gateway cannot be
// reached (it may be gone, and its call with it). [Fleet] is one.
type Canceller interface {
	CancelRemote(ctx context.Context, instance, id string) error
}

// ManagerConfig configures a [Manager].
type ManagerConfig struct {
	// Instance names this gateway in the tasks it creates; the zero
	// value is fine for a store no other gateway reads.
	Instance string
	// Canceller reaches the gateways running other tasks' calls; nil
	// means every call is this process's.
	Canceller Canceller
	// Notify, when set, is told of every task this process finishes or
	// cancels (notifications/tasks/status). It must not block.
	Notify func(Task)
	// Logger receives what cannot be returned; nil means slog.Default().
	Logger *slog.Logger
}

// Manager creates, finishes and cancels tasks on one [Store], and keeps
// the cancel function of each call this process runs. It is safe for
// concurrent use. The caller owns the store.
type Manager struct {
	store Store
	cfg   ManagerConfig
	log   *slog.Logger

	// base ends with the manager: every task's call is cancelled with it.
	base context.Context
	stop context.CancelFunc
	// running counts the calls of this process's tasks still running;
	// Add only under mu while not closed.
	running sync.WaitGroup

	mu sync.Mutex
	// runs and closed are guarded by mu.
	runs   map[string]*Run
	closed bool
}

// NewManager returns a manager of the tasks in store.
func NewManager(store Store, cfg ManagerConfig) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	base, stop := context.WithCancel(context.Background())
	return &Manager{store: store, cfg: cfg, log: cfg.Logger, base: base, stop: stop, runs: map[string]*Run{}}
}

// Base is cancelled when the manager closes: a task's call must end with
// it.
func (m *Manager) Base() context.Context { return m.base }

// Run is the call of one task, run by this process.
type Run struct {
	m      *Manager
	task   Task
	cancel context.CancelCauseFunc
	// ended is closed when the call has returned, its process gone and
	// its slot free.
	ended chan struct{}
	once  sync.Once
}

// Task returns the task as created.
func (r *Run) Task() Task { return r.task }

// Ended is closed once [Run.Finish] has recorded the call's end.
func (r *Run) Ended() <-chan struct{} { return r.ended }

// StartTask records a working task as t describes it (its owner, session,
// tool, ttl and context; the id, instance and status are the manager's to
// set), in the room res reserved; cancel stops its call, whose end must be
// reported with [Run.Finish]. It fails with [ErrStopping] once the manager
// is closed.
func (m *Manager) StartTask(ctx context.Context, t Task, res *Reservation, cancel context.CancelCauseFunc) (*Run, error) {
	t.ID, t.Instance, t.Status = NewID(), m.cfg.Instance, mcp.TaskStatusWorking
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrStopping
	}
	// The store is written without the lock: a bucket's round trip must
	// not hold up the other tasks' finishing.
	t, err := m.store.Create(ctx, t, res)
	if err != nil {
		return nil, fmt.Errorf("recording task: %w", err)
	}
	r := &Run{m: m, task: t, cancel: cancel, ended: make(chan struct{})}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		// Closed meanwhile: the task ends before its call starts.
		_, _, _ = m.store.End(context.WithoutCancel(ctx), t.Owner, t.ID, Ending{Status: mcp.TaskStatusCancelled, Message: ErrStopping.Error()})
		return nil, ErrStopping
	}
	m.runs[t.ID] = r
	m.running.Add(1)
	return r, nil
}

// Finish records the result of r's call: cause is why its context was
// cancelled, nil if it was not. A task already finished (cancelled, or
// failed by another gateway) stays as it was. Calling it again does
// nothing.
func (r *Run) Finish(res *mcp.CallToolResult, cause error) { r.finish(res, cause, false) }

// Refuse records the end of r's call that was refused before it ran
// (res says why): a failed task marked [Task.Rejected].
func (r *Run) Refuse(res *mcp.CallToolResult) { r.finish(res, nil, true) }

func (r *Run) finish(res *mcp.CallToolResult, cause error, refused bool) {
	r.once.Do(func() {
		m := r.m
		var e Ending
		switch {
		case refused:
			e = Ending{Status: mcp.TaskStatusFailed, Message: ResultText(res), Result: res, Rejected: true}
		case cause != nil:
			e = Ending{Status: mcp.TaskStatusCancelled, Message: cause.Error()}
		case res.IsError:
			// 2025-11-25: a tool result with isError set fails the
			// task; the result still travels by tasks/result, as a
			// plain call's would.
			e = Ending{Status: mcp.TaskStatusFailed, Message: ResultText(res), Result: res}
		default:
			e = Ending{Status: mcp.TaskStatusCompleted, Result: res}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(m.base), storeTimeout)
		t, changed, err := m.store.End(ctx, r.task.Owner, r.task.ID, e)
		cancel()
		switch {
		case err != nil && !errors.Is(err, ErrNotFound):
			m.log.Warn("recording a task's result", "task", r.task.ID, "tool", r.task.Tool, "error", err)
		case changed:
			m.notify(t)
		}
		m.mu.Lock()
		delete(m.runs, r.task.ID)
		m.mu.Unlock()
		close(r.ended)
		m.running.Done()
	})
}

func (m *Manager) notify(t Task) {
	if m.cfg.Notify != nil {
		m.cfg.Notify(t)
	}
}

// Reserve is the store's [Store.Reserve], refused with [ErrStopping] once
// the manager is closed.
func (m *Manager) Reserve(ctx context.Context) (*Reservation, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, ErrStopping
	}
	return m.store.Reserve(ctx)
}

// Get is the store's [Store.Get].
func (m *Manager) Get(ctx context.Context, owner, id string) (Task, error) {
	return m.store.Get(ctx, owner, id)
}

// List is the store's [Store.List].
func (m *Manager) List(ctx context.Context, owner string) ([]Task, error) {
	return m.store.List(ctx, owner)
}

// Update is the store's [Store.Update]; a change is told to
// [ManagerConfig.Notify].
func (m *Manager) Update(ctx context.Context, owner, id string, status mcp.TaskStatus, message string) (Task, error) {
	t, changed, err := m.store.Update(ctx, owner, id, status, message)
	if err == nil && changed {
		m.notify(t)
	}
	return t, err
}

// Wait is the store's [Store.Wait].
func (m *Manager) Wait(ctx context.Context, owner, id string) (Task, error) {
	return m.store.Wait(ctx, owner, id)
}

// Cancel cancels owner's task id: the task is cancelled at once, and its
// call told to stop, here or on the gateway running it. It returns once
// the call has returned, or after [CancelWait], or when ctx ends, with the
// task as cancelled. A task already finished is [ErrFinished], returned
// with the task.
func (m *Manager) Cancel(ctx context.Context, owner, id string) (Task, error) {
	t, changed, err := m.store.End(ctx, owner, id, Ending{Status: mcp.TaskStatusCancelled, Message: ErrCancelled.Error()})
	if err != nil {
		return Task{}, err
	}
	if !changed {
		return t, ErrFinished
	}
	m.notify(t)
	wait, cancel := context.WithTimeout(ctx, CancelWait)
	defer cancel()
	if m.stopLocal(wait, id, ErrCancelled) {
		return t, nil
	}
	if m.cfg.Canceller != nil && t.Instance != "" && t.Instance != m.cfg.Instance {
		if err := m.cfg.Canceller.CancelRemote(wait, t.Instance, id); err != nil {
			m.log.Warn("a cancelled task's gateway did not confirm its call stopped", "task", id, "tool", t.Tool, "instance", t.Instance, "error", err)
		}
	}
	return t, nil
}

// stopLocal stops this process's call of task id, if it runs one, and
// waits for it to return (at most until ctx ends). It reports whether it
// ran one. [Fleet] calls it for cancels from other gateways.
func (m *Manager) stopLocal(ctx context.Context, id string, cause error) bool {
	m.mu.Lock()
	r := m.runs[id]
	m.mu.Unlock()
	if r == nil {
		return false
	}
	r.cancel(cause)
	select {
	case <-r.ended:
	case <-ctx.Done():
		m.log.Warn("a cancelled task's call has not returned yet", "task", id, "tool", r.task.Tool)
	}
	return true
}

// Drop forgets the tasks of owner (a session that ended) and stops their
// calls still running: nobody is left to fetch their results.
func (m *Manager) Drop(owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.base), storeTimeout)
	defer cancel()
	working, err := m.store.Drop(ctx, owner, Ending{Status: mcp.TaskStatusCancelled, Message: ErrSessionEnded.Error()})
	if err != nil {
		m.log.Warn("dropping the tasks of an ended session", "error", err)
	}
	for _, t := range working {
		m.mu.Lock()
		r := m.runs[t.ID]
		m.mu.Unlock()
		if r != nil {
			r.cancel(ErrSessionEnded)
		} else if m.cfg.Canceller != nil && t.Instance != "" {
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(m.base), CancelWait)
				defer cancel()
				_ = m.cfg.Canceller.CancelRemote(ctx, t.Instance, t.ID)
			}()
		}
	}
}

// Sweep is the store's [Store.Sweep].
func (m *Manager) Sweep(ctx context.Context) error { return m.store.Sweep(ctx) }

// Count is the store's [Store.Count], 0 when it cannot be read.
func (m *Manager) Count(ctx context.Context) int {
	n, _ := m.store.Count(ctx)
	return n
}

// Close refuses new tasks, cancels the calls this process runs and waits,
// at most wait, for them to return. It is idempotent; it closes no store.
func (m *Manager) Close(wait time.Duration) {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	done := make(chan struct{})
	go func() {
		m.running.Wait()
		close(done)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// ResultText joins a result's text content.
func ResultText(res *mcp.CallToolResult) string {
	var b []byte
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			if len(b) > 0 {
				b = append(b, '\n')
			}
			b = append(b, t.Text...)
		}
	}
	return string(b)
}
