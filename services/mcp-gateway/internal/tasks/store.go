package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Store keeps tasks, bound to their owners. Every method is safe for
// concurrent use. A task of another owner is [ErrNotFound], as is one
// whose id was never issued, one dropped to make room, and one whose ttl
// has passed since it finished.
type Store interface {
	// Reserve makes room for one task, dropping the finished task that
	// finished first when the store is full; it fails with [ErrFull]
	// when every task kept is still running.
	Reserve(ctx context.Context) (*Reservation, error)
	// Create records t, a working task, in the room r reserved, stamped
	// with the store's time, and returns it as stored.
	Create(ctx context.Context, t Task, r *Reservation) (Task, error)
	// Get returns owner's task id.
	Get(ctx context.Context, owner, id string) (Task, error)
	// List returns owner's tasks, oldest first.
	List(ctx context.Context, owner string) ([]Task, error)
	// End finishes owner's task id as e says, once: it returns the task as
	// stored afterwards, and whether this call finished it (false when it
	// had already finished).
	End(ctx context.Context, owner, id string, e Ending) (Task, bool, error)
	// Update sets the status and message of owner's task id while it
	// has not finished (working, input_required): it returns the task
	// as stored afterwards, and whether this call changed it (false for
	// a finished task, which stays as it is).
	Update(ctx context.Context, owner, id string, status mcp.TaskStatus, message string) (Task, bool, error)
	// Wait returns owner's task id once it has finished, or the context's
	// error.
	Wait(ctx context.Context, owner, id string) (Task, error)
	// Drop forgets every task of owner and returns those still working,
	// already ended with e (their calls are for the caller to stop).
	Drop(ctx context.Context, owner string, e Ending) ([]Task, error)
	// Sweep forgets the finished tasks whose ttl has passed.
	Sweep(ctx context.Context) error
	// Count returns the tasks kept, of every owner.
	Count(ctx context.Context) (int, error)
}

// errFull refuses a new task of a store keeping max tasks, all running.
func errFull(max int) error {
	return fmt.Errorf("%w: all %d tasks kept are still running (expose.agent.mcp.max_tasks); wait for one to finish or cancel one", ErrFull, max)
}

// Clock is the store's time; nil means time.Now. Tests move it by hand.
type Clock func() time.Time

func (c Clock) now() time.Time {
	if c == nil {
		return time.Now()
	}
	return c()
}
