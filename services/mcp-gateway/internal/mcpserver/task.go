package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
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
// session rules ([Server.guardSessions]) route task requests here:
//
//   - a task-augmented tools/call reserves room for its task, then runs
//     through mcp-go's ordinary tools/call path and the gateway's one call
//     path ([Server.handle]): input checks and the approval gate happen on
//     the request, its elicitation travelling on the request's own stream;
//     only once the call is cleared to run ([taskStarted]) is the client
//     answered with the CreateTaskResult, and the call runs on, detached
//     from the request, for a slot, under tool_timeout, counted in the
//     metrics like any call. A call denied before that point becomes a
//     finished task holding the denial, and never runs;
//   - tasks/get, tasks/result, tasks/cancel and tasks/list are answered
//     from [taskStore], for the requesting session only: a task of another
//     session is as unknown as one never created;
//   - tasks/cancel cancels the call's context, which kills a local
//     command's process group or sends the A2A cancel of a remote tool's
//     streamed call, and answers once the call has returned (its slot is
//     free) or after [taskCancelWait];
//   - a finished task is kept for its ttl (at most
//     expose.agent.mcp.task_retention) after it finished, and at most
//     expose.agent.mcp.max_tasks tasks are kept: a new one drops the
//     oldest finished task, and is refused while all are still running;
//   - a task ends with its session, and with the gateway.
//
// Clients of the 2026-07-28 revision have no session and no tasks: a task
// parameter on their tools/call is ignored and the call answered as any.
const (
	// taskPollInterval is the interval between tasks/get polls suggested
	// to clients, in milliseconds.
	taskPollInterval = 1000
	// taskCancelWait bounds how long tasks/cancel waits for the cancelled
	// call to return, its process group killed, before answering anyway.
	taskCancelWait = 30 * time.Second
	// taskMessageMax bounds a task's statusMessage.
	taskMessageMax = 1024
	// taskIDPrefix starts every task id.
	taskIDPrefix = "task-"
)

// taskStore holds the tasks of every session. It is safe for concurrent
// use.
type taskStore struct {
	retention time.Duration
	max       int
	now       func() time.Time

	// base ends with the store: every task's call is cancelled with it.
	base context.Context
	stop context.CancelFunc
	// running counts the calls of tasks still running; Add only under mu
	// while not closed.
	running sync.WaitGroup

	mu sync.Mutex
	// The fields below are guarded by mu.
	byID     map[string]*task
	reserved int
	closed   bool
}

// task is one task. The fields above mu-guarded ones are set at creation
// and never change.
type task struct {
	id      string
	session string
	tool    string
	ttl     time.Duration
	created time.Time
	cancel  context.CancelCauseFunc
	// terminal is closed when the status becomes terminal; ended when the
	// call has returned, its process gone and its slot free.
	terminal chan struct{}
	ended    chan struct{}

	// The fields below are guarded by taskStore.mu.
	status   mcp.TaskStatus
	message  string
	updated  time.Time
	finished time.Time
	result   *mcp.CallToolResult
}

func newTaskStore(retention time.Duration, max int, now func() time.Time) *taskStore {
	base, stop := context.WithCancel(context.Background())
	return &taskStore{retention: retention, max: max, now: now, base: base, stop: stop, byID: map[string]*task{}}
}

// reserve makes room for one task before its call is looked at, so that a
// task that would be refused asks no human first. The reservation is
// used by [taskStore.create] or given back by its release.
func (ts *taskStore) reserve() (*reservation, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil, errTaskStopping
	}
	ts.sweepLocked()
	if len(ts.byID)+ts.reserved >= ts.max && !ts.evictLocked() {
		return nil, fmt.Errorf("%w: all %d tasks kept are still running (expose.agent.mcp.max_tasks); wait for one to finish or cancel one", errTasksFull, ts.max)
	}
	ts.reserved++
	return &reservation{ts: ts}, nil
}

// reservation is room for one task.
type reservation struct {
	ts   *taskStore
	once sync.Once
}

// release gives the room back unless a task took it; calling it again is
// harmless.
func (r *reservation) release() {
	r.once.Do(func() {
		r.ts.mu.Lock()
		defer r.ts.mu.Unlock()
		r.ts.reserved--
	})
}

// useLocked turns the room into a task's.
func (r *reservation) useLocked() {
	r.once.Do(func() { r.ts.reserved-- })
}

// evictLocked drops the task that finished first, reporting false when
// none has finished.
func (ts *taskStore) evictLocked() bool {
	var oldest *task
	for _, t := range ts.byID {
		if t.status.IsTerminal() && (oldest == nil || t.finished.Before(oldest.finished)) {
			oldest = t
		}
	}
	if oldest == nil {
		return false
	}
	delete(ts.byID, oldest.id)
	return true
}

// sweepLocked drops the finished tasks whose ttl has passed since they
// finished.
func (ts *taskStore) sweepLocked() {
	now := ts.now()
	for id, t := range ts.byID {
		if t.status.IsTerminal() && !now.Before(t.finished.Add(t.ttl)) {
			delete(ts.byID, id)
		}
	}
}

// sweep drops expired tasks; the idle-session loop calls it, so results
// go even when no client asks.
func (ts *taskStore) sweep() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
}

// create records a working task of session for tool in the room res
// reserved. cancel cancels its call, whose end must be reported with
// running.Done. It reports false once the store is closed.
func (ts *taskStore) create(session, tool string, ttl time.Duration, res *reservation, cancel context.CancelCauseFunc) (*task, bool) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's contract)
	now := ts.now()
	t := &task{
		id: taskIDPrefix + hex.EncodeToString(b[:]), session: session, tool: tool, ttl: ttl, created: now, cancel: cancel,
		terminal: make(chan struct{}), ended: make(chan struct{}),
		status: mcp.TaskStatusWorking, updated: now,
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil, false
	}
	res.useLocked()
	ts.byID[t.id] = t
	ts.running.Add(1)
	return t, true
}

// lookup returns task id of session, or nil for one that does not exist,
// was dropped, or belongs to another session: all three look alike.
func (ts *taskStore) lookup(session, id string) *task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	t := ts.byID[id]
	if t == nil || t.session != session {
		return nil
	}
	return t
}

// list returns the tasks of session, oldest first.
func (ts *taskStore) list(session string) []mcp.Task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	var mine []*task
	for _, t := range ts.byID {
		if t.session == session {
			mine = append(mine, t)
		}
	}
	slices.SortFunc(mine, func(a, b *task) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return bytes.Compare([]byte(a.id), []byte(b.id))
	})
	out := make([]mcp.Task, 0, len(mine))
	for _, t := range mine {
		out = append(out, t.viewLocked())
	}
	return out
}

// view returns the protocol's picture of t.
func (ts *taskStore) view(t *task) mcp.Task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return t.viewLocked()
}

func (t *task) viewLocked() mcp.Task {
	ttl, poll := t.ttl.Milliseconds(), int64(taskPollInterval)
	return mcp.Task{
		TaskId:        t.id,
		Status:        t.status,
		StatusMessage: t.message,
		CreatedAt:     t.created.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.updated.UTC().Format(time.RFC3339Nano),
		TTL:           &ttl,
		PollInterval:  &poll,
	}
}

// outcome returns t's status and result.
func (ts *taskStore) outcome(t *task) (mcp.TaskStatus, string, *mcp.CallToolResult) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return t.status, t.message, t.result
}

// endLocked moves t to a terminal status, once.
func (ts *taskStore) endLocked(t *task, status mcp.TaskStatus, message string, result *mcp.CallToolResult) {
	if t.status.IsTerminal() {
		return
	}
	now := ts.now()
	t.status, t.message, t.result = status, truncateMessage(message), result
	t.updated, t.finished = now, now
	close(t.terminal)
}

// finish records the result of t's call. cause is why its context was
// cancelled, nil if it was not. A task already cancelled stays so.
func (ts *taskStore) finish(t *task, res *mcp.CallToolResult, cause error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch {
	case cause != nil:
		ts.endLocked(t, mcp.TaskStatusCancelled, cause.Error(), nil)
	case res.IsError:
		// 2025-11-25: a tool result with isError set fails the task; the
		// result still travels by tasks/result, as a plain call's would.
		ts.endLocked(t, mcp.TaskStatusFailed, toolResultText(res), res)
	default:
		ts.endLocked(t, mcp.TaskStatusCompleted, "", res)
	}
}

// cancelTask cancels t's call: the task is cancelled at once, and its call
// told to stop. It reports false for a task already finished.
func (ts *taskStore) cancelTask(t *task) bool {
	ts.mu.Lock()
	if t.status.IsTerminal() {
		ts.mu.Unlock()
		return false
	}
	ts.endLocked(t, mcp.TaskStatusCancelled, errTaskCancelled.Error(), nil)
	ts.mu.Unlock()
	t.cancel(errTaskCancelled)
	return true
}

// dropSession forgets the tasks of a session that ended and cancels the
// calls still running: nobody is left to fetch their results.
func (ts *taskStore) dropSession(session string) {
	ts.mu.Lock()
	var running []*task
	for id, t := range ts.byID {
		if t.session != session {
			continue
		}
		delete(ts.byID, id)
		if !t.status.IsTerminal() {
			ts.endLocked(t, mcp.TaskStatusCancelled, errTaskSessionEnded.Error(), nil)
			running = append(running, t)
		}
	}
	ts.mu.Unlock()
	for _, t := range running {
		t.cancel(errTaskSessionEnded)
	}
}

// close cancels every task's call and waits, at most wait, for them to
// return. It is idempotent.
func (ts *taskStore) close(wait time.Duration) {
	ts.mu.Lock()
	ts.closed = true
	ts.mu.Unlock()
	ts.stop()
	done := make(chan struct{})
	go func() {
		ts.running.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
}

// count returns the tasks kept.
func (ts *taskStore) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.byID)
}

// toolResultText joins a result's text content.
func toolResultText(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func truncateMessage(s string) string {
	if len(s) <= taskMessageMax {
		return s
	}
	return string(bytes.ToValidUTF8([]byte(s[:taskMessageMax]), nil))
}

// taskRequest is what the session rules learned of a task-augmented
// tools/call: they put it in the request's context for the tool handler,
// and read back the task it created to answer with.
type taskRequest struct {
	session string
	ttl     time.Duration
	room    *reservation

	mu sync.Mutex
	// claimed and answer are guarded by mu.
	claimed bool
	answer  json.RawMessage
}

type taskRequestKey struct{}

func taskRequestFrom(ctx context.Context) *taskRequest {
	tr, _ := ctx.Value(taskRequestKey{}).(*taskRequest)
	return tr
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

// taskRun lets the call path say when a task's call is cleared to run.
type taskRun struct {
	once        sync.Once
	started     chan struct{}
	stopRequest func() bool
}

type taskRunKey struct{}

// taskStarted is called by the call path once a call has passed its checks
// and approval and is about to wait for a slot. For a task's call it
// answers the client with the CreateTaskResult and lets the call outlive
// the request; for any other call it does nothing.
func taskStarted(ctx context.Context) {
	if r, ok := ctx.Value(taskRunKey{}).(*taskRun); ok {
		r.once.Do(func() {
			r.stopRequest()
			close(r.started)
		})
	}
}

// startTask turns the task-augmented tools/call req into a task and returns
// once the call is cleared to run or has already finished (denied, say).
// The result returned is only a stand-in: the session rules answer with
// the CreateTaskResult instead ([cancelWriter.replace]).
func (s *Server) startTask(ctx context.Context, tr *taskRequest, name string, req mcp.CallToolRequest) *mcp.CallToolResult {
	// Until the call is cleared to run, it belongs to the request: a client
	// that goes away while its human decides cancels it. After that only
	// tasks/cancel, its session's end, tool_timeout and the gateway's stop
	// end it.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	t, ok := s.tasks.create(tr.session, name, tr.ttl, tr.room, cancel)
	if !ok {
		cancel(errTaskStopping)
		return mcp.NewToolResultError(fmt.Sprintf("%s was not run: %v", name, errTaskStopping))
	}
	run := &taskRun{started: make(chan struct{})}
	run.stopRequest = context.AfterFunc(ctx, func() { cancel(errTaskRequestEnded) })
	stopStore := context.AfterFunc(s.tasks.base, func() { cancel(errTaskStopping) })
	runCtx = context.WithValue(runCtx, taskRunKey{}, run)

	s.log.Info("MCP task created", "agent", s.cfg.Identity, "tool", name, "task", t.id, "ttl", t.ttl)
	go func() {
		defer s.tasks.running.Done()
		defer close(t.ended)
		defer stopStore()
		defer run.stopRequest()
		s.inFlight.Add(1)
		res := s.handle(runCtx, name, req)
		s.inFlight.Add(-1)
		s.tasks.finish(t, res, context.Cause(runCtx))
		cancel(nil)
	}()
	select {
	case <-run.started:
	case <-t.terminal:
	}
	tr.created(s.tasks.view(t))
	return mcp.NewToolResultText(fmt.Sprintf("task %s was created: fetch its result with tasks/result", t.id))
}

// taskCall prepares a task-augmented tools/call of session: it reads the
// task parameter and reserves room for the task. It returns nil, true for
// a call that asks for no task, and false when it has answered the
// request itself with a JSON-RPC error.
func (s *Server) taskCall(w http.ResponseWriter, session string, msg *jsonrpcHead) (*taskRequest, bool) {
	asked, ttl, err := s.taskTTL(msg.Params.Task)
	if err != nil {
		writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, err.Error())
		return nil, false
	}
	if !asked {
		return nil, true
	}
	room, err := s.tasks.reserve()
	if err != nil {
		s.log.Warn("refused an MCP task", "agent", s.cfg.Identity, "error", err)
		writeRPCError(w, msg.ID, mcp.INTERNAL_ERROR, err.Error())
		return nil, false
	}
	return &taskRequest{session: session, ttl: ttl, room: room}, true
}

// taskTTL reads a tools/call's task parameter: asked is false for none
// (absent or null). The ttl granted is the one asked, at most the
// retention; a task asking none gets the retention.
func (s *Server) taskTTL(raw json.RawMessage) (asked bool, ttl time.Duration, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return false, 0, nil
	}
	var p struct {
		TTL json.RawMessage `json:"ttl"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &p) != nil {
		return false, 0, fmt.Errorf("params.task must be an object, got %s", clip(raw))
	}
	limit := s.cfg.TaskRetention
	ttlRaw := bytes.TrimSpace(p.TTL)
	if len(ttlRaw) == 0 || bytes.Equal(ttlRaw, []byte("null")) {
		return true, limit, nil
	}
	ms, err := strconv.ParseInt(string(ttlRaw), 10, 64)
	if err != nil || ms <= 0 {
		return false, 0, fmt.Errorf("params.task.ttl must be a positive whole number of milliseconds, got %s", clip(ttlRaw))
	}
	if ms >= limit.Milliseconds() {
		return true, limit, nil
	}
	return true, time.Duration(ms) * time.Millisecond, nil
}

// clip shortens a hostile value for an error message.
func clip(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(bytes.ToValidUTF8(b[:max], nil)) + "..."
	}
	return string(b)
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
// tasks/list for session.
func (s *Server) serveTaskMethod(w http.ResponseWriter, r *http.Request, session string, msg *jsonrpcHead) {
	if len(msg.ID) == 0 {
		// A notification asks for no answer.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == string(mcp.MethodTasksList) {
		if c := bytes.TrimSpace(msg.Params.Cursor); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
			writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("unknown cursor %s: tasks/list answers in one page", clip(c)))
			return
		}
		writeRPCResult(w, msg.ID, mcp.ListTasksResult{Tasks: s.tasks.list(session)})
		return
	}
	var id string
	if json.Unmarshal(msg.Params.TaskID, &id) != nil || id == "" {
		writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("%s needs params.taskId, the id of a task", msg.Method))
		return
	}
	t := s.tasks.lookup(session, id)
	if t == nil {
		writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, taskNotFound(id))
		return
	}
	switch mcp.MCPMethod(msg.Method) {
	case mcp.MethodTasksGet:
		writeRPCResult(w, msg.ID, mcp.NewGetTaskResult(s.tasks.view(t)))
	case mcp.MethodTasksCancel:
		if !s.tasks.cancelTask(t) {
			status, _, _ := s.tasks.outcome(t)
			writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s is already %s: only a working task can be cancelled", id, status))
			return
		}
		s.log.Info("MCP task cancelled", "agent", s.cfg.Identity, "tool", t.tool, "task", id)
		// Answered once the call has returned: the process group is then
		// gone and the slot free.
		wait := time.NewTimer(taskCancelWait)
		defer wait.Stop()
		select {
		case <-t.ended:
		case <-wait.C:
			s.log.Warn("a cancelled MCP task's call has not returned yet", "agent", s.cfg.Identity, "tool", t.tool, "task", id, "waited", taskCancelWait)
		case <-r.Context().Done():
			return
		}
		writeRPCResult(w, msg.ID, mcp.NewCancelTaskResult(s.tasks.view(t)))
	case mcp.MethodTasksResult:
		select {
		case <-t.terminal:
		case <-r.Context().Done():
			return
		}
		status, message, res := s.tasks.outcome(t)
		if res == nil {
			writeRPCError(w, msg.ID, mcp.INVALID_PARAMS, fmt.Sprintf("task %s was %s (%s): it has no result", id, status, message))
			return
		}
		out := *res
		out.Meta = mcp.WithRelatedTask(id)
		writeRPCResult(w, msg.ID, out)
	}
}

func taskNotFound(id string) string {
	return fmt.Sprintf("task %s not found: it does not exist in this session, or it finished longer ago than its ttl (expose.agent.mcp.task_retention) or made room for newer ones (expose.agent.mcp.max_tasks)", clip([]byte(id)))
}

// rpcAnswer is a JSON-RPC response the gateway writes itself.
type rpcAnswer struct {
	JSONRPC string                   `json:"jsonrpc"`
	ID      json.RawMessage          `json:"id"`
	Result  any                      `json:"result,omitempty"`
	Error   *mcp.JSONRPCErrorDetails `json:"error,omitempty"`
}

func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	writeRPC(w, rpcAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: result})
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeRPC(w, rpcAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Error: &mcp.JSONRPCErrorDetails{Code: code, Message: message}})
}

func writeRPC(w http.ResponseWriter, a rpcAnswer) {
	b, err := json.Marshal(a)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// withResult returns the JSON-RPC response msg with its result replaced,
// or msg itself when it is not a result (an error stays an error).
func withResult(msg []byte, result json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil || m["result"] == nil {
		return msg
	}
	m["result"] = result
	b, err := json.Marshal(m)
	if err != nil {
		return msg
	}
	if bytes.HasSuffix(msg, []byte("\n")) {
		b = append(b, '\n')
	}
	return b
}

// eventWithResult returns an SSE event whose data is the JSON-RPC response
// to id with its result replaced.
func eventWithResult(p []byte, id, result json.RawMessage) []byte {
	lines := bytes.Split(p, []byte("\n"))
	for i, line := range lines {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || !carriesResponse(line, id) {
			continue
		}
		lines[i] = append([]byte("data: "), withResult(bytes.TrimSpace(data), result)...)
	}
	return bytes.Join(lines, []byte("\n"))
}

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
