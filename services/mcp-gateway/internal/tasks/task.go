package tasks

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// PollInterval is the interval between tasks/get polls suggested to
	// clients.
	PollInterval = time.Second
	// MessageMax bounds a task's statusMessage: it may quote a command's
	// output, which has no business travelling whole in every tasks/get.
	MessageMax = 1024
	// IDPrefix starts every task id.
	IDPrefix = "task-"
)

// idPattern is what every task id looks like: 128 random bits. An id that
// does not match was never issued, and is not looked up.
var idPattern = regexp.MustCompile(`^task-[0-9a-f]{32}$`)

// NewID returns a fresh task id: 128 random bits, so that one id says
// nothing of another.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	return IDPrefix + hex.EncodeToString(b[:])
}

// validID reports whether id could have been issued by [NewID].
func validID(id string) bool { return idPattern.MatchString(id) }

// CallerOwner is the owner of the tasks of an authenticated caller: its
// subject. Its tasks outlive its sessions, so it may read them from a new
// one, through any gateway of a fleet.
func CallerOwner(subject string) string { return "caller:" + subject }

// SessionOwner is the owner of the tasks of a caller without
// authentication: its session, whose end drops them.
func SessionOwner(session string) string { return "session:" + session }

// Task is one task's state, the same in every [Store]. A Task is a value:
// changing it changes nothing stored.
type Task struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Tool  string `json:"tool"`
	// Instance names the gateway running the task's call; a cancel is
	// sent there, and the task fails when that gateway stops
	// heartbeating ([Fleet]).
	Instance string `json:"instance,omitempty"`
	// Session is the session that created it, which hears
	// notifications/tasks/status while it lives.
	Session string `json:"session,omitempty"`
	// Context is the Agent2Agent context id the task belongs to; empty
	// for an MCP task.
	Context string `json:"context,omitempty"`
	// TTL is how long the task is kept after it finished.
	TTL      time.Duration  `json:"ttl"`
	Created  time.Time      `json:"created"`
	Updated  time.Time      `json:"updated"`
	Finished time.Time      `json:"finished,omitzero"`
	Status   mcp.TaskStatus `json:"status"`
	Message  string         `json:"message,omitempty"`
	// Rejected marks a failed task whose call was refused before it
	// ran (denied, or refused by the gate or the policy): Agent2Agent's
	// rejected state.
	Rejected bool `json:"rejected,omitempty"`
	// Result is the call's result once it finished with one; nil for a
	// cancelled task or one still working.
	Result *mcp.CallToolResult `json:"-"`
}

// Terminal reports whether the task has finished, one way or another.
func (t Task) Terminal() bool { return t.Status.IsTerminal() }

// expired reports whether a finished task's ttl has passed at now.
func (t Task) expired(now time.Time) bool {
	return t.Terminal() && !now.Before(t.Finished.Add(t.TTL))
}

// View is the protocol's picture of the task.
func (t Task) View() mcp.Task {
	ttl, poll := t.TTL.Milliseconds(), PollInterval.Milliseconds()
	return mcp.Task{
		TaskId:        t.ID,
		Status:        t.Status,
		StatusMessage: t.Message,
		CreatedAt:     t.Created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.Updated.UTC().Format(time.RFC3339Nano),
		TTL:           &ttl,
		PollInterval:  &poll,
	}
}

// Ending is how a task finishes.
type Ending struct {
	Status   mcp.TaskStatus
	Message  string
	Result   *mcp.CallToolResult
	Rejected bool
}

// end applies e to t at now, once: a task already finished stays as it
// is, and end reports false.
func (t *Task) end(e Ending, now time.Time) bool {
	if t.Terminal() {
		return false
	}
	t.Status, t.Message, t.Result, t.Rejected = e.Status, TruncateMessage(e.Message), e.Result, e.Rejected
	t.Updated, t.Finished = now, now
	return true
}

// update sets a task's status and message at now while it has not
// finished, reporting false for a finished task or a terminal status.
func (t *Task) update(status mcp.TaskStatus, message string, now time.Time) bool {
	if t.Terminal() || status.IsTerminal() {
		return false
	}
	t.Status, t.Message, t.Updated = status, TruncateMessage(message), now
	return true
}

// TruncateMessage bounds a statusMessage to [MessageMax] bytes of valid
// UTF-8.
func TruncateMessage(s string) string {
	if len(s) <= MessageMax {
		return s
	}
	return string(bytes.ToValidUTF8([]byte(s[:MessageMax]), nil))
}

// Reservation is room for one task, taken by [Store.Reserve] before the
// call is looked at (so that a task that would be refused asks no human
// first) and used by [Store.Create] or given back by Release.
type Reservation struct {
	once    sync.Once
	release func()
}

// Release gives the room back unless a task took it; calling it again is
// harmless.
func (r *Reservation) Release() {
	r.once.Do(func() {
		if r.release != nil {
			r.release()
		}
	})
}

// use marks the room taken by a task, reporting false when it was already
// released or used.
func (r *Reservation) use() bool {
	used := false
	r.once.Do(func() { used = true })
	return used
}
