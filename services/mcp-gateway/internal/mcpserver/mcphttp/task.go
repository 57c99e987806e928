package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
)

// MCP tasks (protocol 2025-11-25) are served by the gateway itself, with
// mcp-go's types, for the session-based protocol eras. mcp-go v1.2.1 has
// the machinery, but not in a shape a gateway can serve safely:
//
//   - its task goroutine's context derives from the tools/call request's,
//     which mcp-go cancels as soon as the CreateTaskResult is written, so
//     a task over streamable HTTP is cancelled the moment it starts;
//   - it broadcasts notifications/tasks/status of every task to every
//     session, so one client hears of another's task ids and outcomes;
//   - its session check passes whenever either side has no session id, so
//     a 2026-07-28 request sees every session's tasks;
//   - it keeps a task without a ttl for ever, counts only running tasks,
//     and offers no way to drop a finished one early;
//   - a gated tool's approval would be asked from the task goroutine,
//     after the request stream that could carry the elicitation is gone.
//
// So mcp-go's task capability stays off (its tasks/* handlers answer
// "unsupported" to anything that reaches them), the capability and each
// tool's execution.taskSupport are advertised through hooks, and the
// session rules ([Router]) route task requests here:
//
//   - a task-augmented tools/call reserves room for its task, then runs
//     through mcp-go's ordinary tools/call path and the gateway's one call
//     core ([call.Core.Call]): input checks and the approval gate happen on
//     the request, its elicitation travelling on the request's own stream;
//     only once the call is cleared to run ([call.Request.Cleared]) is the client
//     answered with the CreateTaskResult, and the call runs on, detached
//     from the request, for a slot, under tool_timeout, counted in the
//     metrics like any call. A call denied before that point becomes a
//     finished task holding the denial, and never runs;
//   - tasks/get, tasks/result, tasks/cancel and tasks/list are answered
//     from the task store (package tasks, [Router.Tasks]: in memory,
//     or a JetStream bucket a fleet shares) for the requesting owner
//     only ([taskOwner]): the authenticated caller, else the session. A
//     task of another owner is as unknown as one never created;
//   - tasks/cancel cancels the call's context, which kills a local
//     command's process group or sends the A2A cancel of a remote tool's
//     streamed call (through the gateway running it, in a fleet), and
//     answers once the call has returned (its slot is free) or after
//     [tasks.CancelWait];
//   - a finished task is kept for its ttl (at most
//     expose.agent.mcp.task_retention) after it finished, and at most
//     expose.agent.mcp.max_tasks tasks are kept: a new one drops the
//     oldest finished task, and is refused while all are still running;
//   - a task bound to a session ends with it; a task bound to a caller
//     outlives the session, so that the caller may read it from a new
//     one; every task this gateway runs ends with the gateway;
//   - each change of status this gateway makes is sent to the session
//     that created the task as notifications/tasks/status, when that
//     session lives here and listens.
//
// Clients of the 2026-07-28 revision have no session and no tasks: a task
// parameter on their tools/call is ignored and the call answered as any.

// taskRequest is what the router learned of a task-augmented tools/call:
// it travels in the request's context through mcp-go to the tool handler
// ([Router.Task]), and the router answers with the task it created.
type taskRequest struct {
	owner   string
	session string
	ttl     time.Duration
	room    *tasks.Reservation

	mu sync.Mutex
	// claimed and answer are guarded by mu.
	claimed bool
	answer  json.RawMessage
}

type taskRequestKey struct{}

// Task runs the call of name as the task its request asked for, when the
// router prepared one and no other handler has claimed it, and reports
// false otherwise: the tool handler's first question. The result is only
// a stand-in: the router answers with the CreateTaskResult instead
// ([CancelWriter.Replace]).
func (rt *Router) Task(ctx context.Context, name string, req mcp.CallToolRequest) (*mcp.CallToolResult, bool) {
	tr, _ := ctx.Value(taskRequestKey{}).(*taskRequest)
	if tr == nil || req.Params.Task == nil || !tr.claim() {
		return nil, false
	}
	return rt.startTask(ctx, tr, name, req), true
}

// claim reports whether the caller is the one handler to turn this
// request into a task.
func (tr *taskRequest) claim() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.claimed {
		return false
	}
	tr.claimed = true
	return true
}

func (tr *taskRequest) created(t mcp.Task) {
	b, err := json.Marshal(mcp.NewCreateTaskResult(t))
	if err != nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.answer = b
}

// result is the CreateTaskResult that answers the request, or nil when no
// task was created (mcp-go answered with an error before any handler ran).
func (tr *taskRequest) result() json.RawMessage {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.answer
}

// startTask turns the task-augmented tools/call req into a task and returns
// once the call is cleared to run or has already finished (denied, say).
func (rt *Router) startTask(ctx context.Context, tr *taskRequest, name string, req mcp.CallToolRequest) *mcp.CallToolResult {
	// Until the call is cleared to run, it belongs to the request: a client
	// that goes away while its human decides cancels it. After that only
	// tasks/cancel, its session's end (for a session's task),
	// tool_timeout and the gateway's stop end it.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	run, err := rt.Tasks.StartTask(ctx, tasks.Task{Owner: tr.owner, Session: tr.session, Tool: name, TTL: tr.ttl}, tr.room, cancel)
	if err != nil {
		cancel(err)
		return mcp.NewToolResultError(fmt.Sprintf("%s was not run: %v", name, err))
	}
	t := run.Task()
	stopRequest := context.AfterFunc(ctx, func() { cancel(errtaskRequestEnded) })
	stopStore := context.AfterFunc(rt.Tasks.Base(), func() { cancel(tasks.ErrStopping) })
	// The client is answered once the call is cleared to run, any
	// approval given; the call then runs on without the request.
	var once sync.Once
	started := make(chan struct{})
	cleared := func() {
		once.Do(func() {
			stopRequest()
			close(started)
		})
	}

	rt.Log.Info("MCP task created", "agent", rt.Identity, "tool", name, "task", t.ID, "ttl", t.TTL)
	go func() {
		defer stopStore()
		defer stopRequest()
		res := rt.Backend.CallTool(runCtx, name, req, cleared)
		run.Finish(res, context.Cause(runCtx))
		cancel(nil)
	}()
	select {
	case <-started:
	case <-run.Ended():
		// Finished before it was cleared to run: denied, or cancelled.
		if got, err := rt.Tasks.Get(context.WithoutCancel(ctx), t.Owner, t.ID); err == nil {
			t = got
		}
	}
	tr.created(t.View())
	return mcp.NewToolResultText(fmt.Sprintf("task %s was created: fetch its result with tasks/result", t.ID))
}

// taskCall prepares a task-augmented tools/call of owner, made in session:
// it reads the task parameter and reserves room for the task. It returns
// nil, true for a call that asks for no task, and false when it has
// answered the request itself with a JSON-RPC error.
func (rt *Router) taskCall(w http.ResponseWriter, r *http.Request, owner, session string, msg *message) (*taskRequest, bool) {
	asked, ttl, err := rt.taskTTL(msg.Params.Task)
	if err != nil {
		WriteError(w, msg.ID, mcp.INVALID_PARAMS, err.Error())
		return nil, false
	}
	if !asked {
		return nil, true
	}
	room, err := rt.Tasks.Reserve(r.Context())
	if err != nil {
		rt.Log.Warn("refused an MCP task", "agent", rt.Identity, "error", err)
		WriteError(w, msg.ID, mcp.INTERNAL_ERROR, err.Error())
		return nil, false
	}
	return &taskRequest{owner: owner, session: session, ttl: ttl, room: room}, true
}

// taskOwner is whose tasks a request may see: its authenticated caller's
// (an OAuth subject; with auth_token_env, the token's holders, who are one
// caller), else, with no authentication at all, its session's.
func (rt *Router) taskOwner(r *http.Request, session string) string {
	if c := auth.CallerFrom(r.Context()); c != nil && (!c.Static || rt.Authenticated) {
		return tasks.CallerOwner(c.Subject)
	}
	return tasks.SessionOwner(session)
}

// taskTTL reads a tools/call's task parameter: asked is false for none
// (absent or null). The ttl granted is the one asked, at most the
// retention; a task asking none gets the retention.
func (rt *Router) taskTTL(raw json.RawMessage) (asked bool, ttl time.Duration, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return false, 0, nil
	}
	var p struct {
		TTL json.RawMessage `json:"ttl"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &p) != nil {
		return false, 0, fmt.Errorf("params.task must be an object, got %s", Clip(raw))
	}
	limit := rt.TaskRetention
	ttlRaw := bytes.TrimSpace(p.TTL)
	if len(ttlRaw) == 0 || bytes.Equal(ttlRaw, []byte("null")) {
		return true, limit, nil
	}
	ms, err := strconv.ParseInt(string(ttlRaw), 10, 64)
	if err != nil || ms <= 0 {
		return false, 0, fmt.Errorf("params.task.ttl must be a positive whole number of milliseconds, got %s", Clip(ttlRaw))
	}
	if ms >= limit.Milliseconds() {
		return true, limit, nil
	}
	return true, time.Duration(ms) * time.Millisecond, nil
}

// isTaskMethod reports whether method is one the gateway answers from its
// task store.
func isTaskMethod(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel, mcp.MethodTasksList:
		return true
	}
	return false
}

// serveTaskMethod answers tasks/get, tasks/result, tasks/cancel and
// tasks/list for owner.
func (rt *Router) serveTaskMethod(w http.ResponseWriter, r *http.Request, owner string, msg *message) {
	if len(msg.ID) == 0 {
		// A notification asks for no answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ctx := r.Context()
	if msg.Method == string(mcp.MethodTasksList) {
		if c := bytes.TrimSpace(msg.Params.Cursor); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
			WriteError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("unknown cursor %s: tasks/list answers in one page", Clip(c)))
			return
		}
		list, err := rt.Tasks.List(ctx, owner)
		if err != nil {
			rt.taskStoreError(w, msg, err)
			return
		}
		views := make([]mcp.Task, 0, len(list))
		for _, t := range list {
			views = append(views, t.View())
		}
		WriteResult(w, msg.ID, mcp.ListTasksResult{Tasks: views})
		return
	}
	var id string
	if json.Unmarshal(msg.Params.TaskID, &id) != nil || id == "" {
		WriteError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("%s needs params.taskId, the id of a task", msg.Method))
		return
	}
	switch mcp.MCPMethod(msg.Method) {
	case mcp.MethodTasksGet:
		t, err := rt.Tasks.Get(ctx, owner, id)
		if err != nil {
			rt.taskError(w, msg, id, err)
			return
		}
		WriteResult(w, msg.ID, mcp.NewGetTaskResult(t.View()))
	case mcp.MethodTasksCancel:
		// Answered once the call has returned: the process group is then
		// gone and the slot free, here or on the gateway running it.
		t, err := rt.Tasks.Cancel(ctx, owner, id)
		switch {
		case errors.Is(err, tasks.ErrFinished):
			WriteError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s is already %s: only a working task can be cancelled", id, t.Status))
			return
		case err != nil:
			rt.taskError(w, msg, id, err)
			return
		case ctx.Err() != nil:
			return
		}
		rt.Log.Info("MCP task cancelled", "agent", rt.Identity, "tool", t.Tool, "task", id, "instance", t.Instance)
		WriteResult(w, msg.ID, mcp.NewCancelTaskResult(t.View()))
	case mcp.MethodTasksResult:
		t, err := rt.Tasks.Wait(ctx, owner, id)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			rt.taskError(w, msg, id, err)
			return
		}
		if t.Result == nil {
			WriteError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s was %s (%s): it has no result", id, t.Status, t.Message))
			return
		}
		out := *t.Result
		out.Meta = mcp.WithRelatedTask(id)
		WriteResult(w, msg.ID, out)
	}
}

// taskError answers a task method whose task could not be read: not
// found, or the store unreachable.
func (rt *Router) taskError(w http.ResponseWriter, msg *message, id string, err error) {
	if errors.Is(err, tasks.ErrNotFound) {
		WriteError(w, msg.ID, mcp.INVALID_PARAMS, taskNotFound(id))
		return
	}
	rt.taskStoreError(w, msg, err)
}

// taskStoreError answers a task method when the store failed.
func (rt *Router) taskStoreError(w http.ResponseWriter, msg *message, err error) {
	rt.Log.Warn("reading MCP tasks", "agent", rt.Identity, "method", msg.Method, "error", err)
	WriteError(w, msg.ID, mcp.INTERNAL_ERROR, fmt.Sprintf("the task store cannot be read now, try again: %v", err))
}

// NotifyTaskStatus sends notifications/tasks/status for t to the session
// that created it, when that session lives on this gateway. The session
// hears it on its standing event stream, if it holds one; a session of
// another gateway, or one gone, hears nothing and polls as ever.
func (rt *Router) NotifyTaskStatus(t tasks.Task) {
	if t.Session == "" {
		return
	}
	v := t.View()
	params := map[string]any{
		"taskId":        v.TaskId,
		"status":        v.Status,
		"createdAt":     v.CreatedAt,
		"lastUpdatedAt": v.LastUpdatedAt,
		"ttl":           *v.TTL,
		"pollInterval":  *v.PollInterval,
	}
	if v.StatusMessage != "" {
		params["statusMessage"] = v.StatusMessage
	}
	_ = rt.MCP.SendNotificationToSpecificClient(t.Session, string(mcp.MethodNotificationTasksStatus), params)
}

func taskNotFound(id string) string {
	return fmt.Sprintf("task %s not found: it does not exist for this caller or session, or it finished longer ago than its ttl (expose.agent.mcp.task_retention) or made room for newer ones (expose.agent.mcp.max_tasks)", Clip([]byte(id)))
}

// errtaskRequestEnded is why a task's call was cancelled when the request
// that made it went away first, as the task's statusMessage says.
var errtaskRequestEnded = errors.New("the request that created it ended before the call was cleared to run")

// taskHooks are the mcp-go hooks that advertise tasks to clients of the
// session-based eras: the capability at initialize, and on every tool in
// tools/list an execution.taskSupport of optional. The tools registered
// with mcp-go carry no task support themselves, so that mcp-go never runs
// a task of its own.
func taskHooks(h *server.Hooks) {
	h.AddAfterInitialize(func(_ context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if res != nil {
			res.Capabilities.Tasks = mcp.NewTasksCapability()
		}
	})
	h.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		if res == nil || mcp.IsModernProtocol(server.RequestProtocolVersion(ctx)) {
			return
		}
		for i := range res.Tools {
			// A fresh value: the registry's tool must not change.
			res.Tools[i].Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		}
	})
}

// sweepTasks drops the tasks whose ttl has passed, so results go even when
// no client asks; the idle-session loop calls it.
func (rt *Router) sweepTasks() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Tasks.Sweep(ctx); err != nil {
		rt.Log.Warn("sweeping expired MCP tasks", "agent", rt.Identity, "error", err)
	}
}
