package tasks

import "errors"

// Errors of the stores and the [Manager]. Callers test with errors.Is.
var (
	// ErrNotFound is a task that does not exist, was dropped, or belongs
	// to another owner: the three look alike on purpose.
	ErrNotFound = errors.New("task not found")
	// ErrFull is a new task refused because every task kept is still
	// running (expose.agent.mcp.max_tasks).
	ErrFull = errors.New("too many tasks are running")
	// ErrFinished is a cancel of a task that already finished.
	ErrFinished = errors.New("task already finished")
	// ErrStopping is a task refused because its manager is closing.
	ErrStopping = errors.New("the gateway is stopping")
	// ErrUnavailable is a store that cannot be reached (the JetStream
	// bucket), wrapped with the cause.
	ErrUnavailable = errors.New("task store unavailable")
	// ErrInvalidConfig is a store or fleet option that cannot work,
	// wrapped with the key to fix.
	ErrInvalidConfig = errors.New("invalid task store config")
)

// Why a task's call was cancelled, as the task's statusMessage says.
var (
	// ErrCancelled is a cancel asked by tasks/cancel.
	ErrCancelled = errors.New("cancelled by tasks/cancel")
	// ErrSessionEnded is the end of the session that owned the task.
	ErrSessionEnded = errors.New("its session ended")
)
