package agent2agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	callcore "github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Artifact ids: the live output of a streamed call, and the result.
const (
	outputArtifact = "output"
	resultArtifact = "result"
)

// errStreamDropped cancels the call of a stream whose client went away.
var errStreamDropped = errors.New("the Agent2Agent stream that started the call was dropped")

// run is one call this process runs for a task: its events, in order,
// for the streams that follow it.
type run struct {
	s     *Service
	owner string
	info  a2a.TaskInfo
	task  *tasks.Run

	mu sync.Mutex
	// events, waiting, done and changed are guarded by mu. changed is
	// closed, and replaced, whenever events grows or the run ends.
	events  []a2a.Event
	waiting bool
	done    bool
	changed chan struct{}
	// outputs counts the output chunks sent, so the first starts the
	// artifact and the others append to it.
	outputs int
}

// call is what a message asks for.
type call struct {
	tool string
	args json.RawMessage
}

// parseCall finds the message's DataPart {"tool", "arguments"}; ok is
// false for a message that names no tool, whose answer says how to call.
func parseCall(m *a2a.Message) (c call, problem string) {
	for _, p := range m.Parts {
		d, isData := p.Content.(a2a.Data)
		if !isData {
			continue
		}
		obj, isObject := d.Value.(map[string]any)
		if !isObject {
			return call{}, "the DataPart is not an object"
		}
		name, _ := obj["tool"].(string)
		if name == "" {
			return call{}, `the DataPart has no "tool" naming the tool to call`
		}
		c.tool = name
		if a, present := obj["arguments"]; present && a != nil {
			if _, isObject := a.(map[string]any); !isObject {
				return call{}, `"arguments" must be an object`
			}
			b, err := json.Marshal(a)
			if err != nil {
				return call{}, fmt.Sprintf("encoding the arguments: %v", err)
			}
			c.args = b
		}
		return c, ""
	}
	return call{}, "the message holds no DataPart (there is no model here to read text)"
}

// howTo is the in-band answer to a message that is no call the caller
// can make.
func howTo(m *a2a.Message, problem string) *a2a.Message {
	text := fmt.Sprintf("Not called: %s. Call a tool with a message holding one DataPart %s; the tools are the skills of this endpoint's agent card (the extended card, for an authenticated caller).", problem, callShape)
	reply := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(text))
	reply.ContextID = m.ContextID
	return reply
}

// begin turns a send's params into a started run, or into the in-band
// answer or error that ends the request; immediate reports whether the
// client wants the task at once.
func (s *Service) begin(r *http.Request, sc scope, req *rpcRequest) (ru *run, immediate bool, reply *a2a.Message, e *rpcError) {
	p, e := req.decodeSend()
	if e != nil {
		return nil, false, nil, e
	}
	m := p.message
	if m.TaskID != "" {
		return nil, false, nil, errorf(codeUnsupported, "messages to an existing task are not taken: each message is one tool call (a gated call waits for an operator, not for more input)")
	}
	c, problem := parseCall(m)
	ctx := r.Context()
	if problem == "" {
		if _, ok := s.lookup(ctx, sc, c.tool); !ok {
			problem = fmt.Sprintf("there is no tool %q here", clip(c.tool))
		}
	}
	if problem != "" {
		return nil, false, howTo(m, problem), nil
	}
	if rr := s.cfg.Core.Limit(ctx, s.request(r, c, nil)); rr != nil {
		return nil, false, nil, &rpcError{Code: codeRateLimited, Message: rr.Message,
			Data: map[string]any{"retryAfterSeconds": rr.RetryAfterSeconds()}, status: http.StatusTooManyRequests, retryAfter: rr.RetryAfterSeconds()}
	}
	ru, err := s.start(r, c, m.ContextID)
	if err != nil {
		return nil, false, nil, errorf(codeInternalError, "%s was not run: %v", c.tool, err)
	}
	return ru, p.immediate, nil, nil
}

// start creates the task of c and runs its call, detached from the
// request: only a cancel, the drop of the stream that started it,
// tool_timeout and the gateway's stop end it.
func (s *Service) start(r *http.Request, c call, contextID string) (*run, error) {
	ctx := r.Context()
	m := s.cfg.Tasks
	room, err := m.Reserve(ctx)
	if err != nil {
		return nil, err
	}
	if contextID == "" {
		contextID = a2a.NewContextID()
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	ru := &run{s: s, owner: owner(ctx), changed: make(chan struct{})}
	tr, err := m.StartTask(ctx, tasks.Task{Owner: ru.owner, Tool: c.tool, TTL: s.cfg.TaskRetention, Context: contextID}, room, cancel)
	if err != nil {
		room.Release()
		cancel(err)
		return nil, err
	}
	ru.task = tr
	ru.info = a2a.TaskInfo{TaskID: a2a.TaskID(tr.Task().ID), ContextID: contextID}
	s.mu.Lock()
	s.runs[tr.Task().ID] = ru
	s.mu.Unlock()
	stopStore := context.AfterFunc(m.Base(), func() { cancel(tasks.ErrStopping) })
	s.log.Info("Agent2Agent task created", "agent", s.cfg.Identity, "tool", c.tool, "task", tr.Task().ID)

	req := s.request(r, c, ru)
	go func() {
		defer stopStore()
		res, v := s.cfg.Invoke(runCtx, req)
		if v.Refused() {
			tr.Refuse(res)
		} else {
			tr.Finish(res, context.Cause(runCtx))
		}
		cancel(nil)
		ru.finish(ctx)
	}()
	return ru, nil
}

// request is the call core's request for c, made over r; ru, when set,
// is the run that hears its output and approval. Nobody at an
// Agent2Agent client's end can be asked (no Asker): a gated call waits
// for an operator or is refused. The call outlives its request (its
// task), so a remote tool's stays streamed.
func (s *Service) request(r *http.Request, c call, ru *run) *callcore.Request {
	req := &callcore.Request{
		Tool:     c.tool,
		Args:     c.args,
		Caller:   auth.CallerFrom(r.Context()),
		Surface:  audit.SurfaceAgent2Agent,
		Protocol: "agent2agent/" + string(a2a.Version),
		Header:   r.Header.Clone(),
		Streamed: true,
	}
	if ru != nil {
		req.Output, req.Cleared = ru, ru.cleared
		req.Awaiting = func(id string) func() { ru.awaiting(id); return nil }
	}
	return req
}

// Write takes the call's output as it comes ([tool.Request.Output]): one
// artifact update per piece, appended to the output artifact. It never
// blocks on a stream.
func (ru *run) Write(p []byte) (int, error) {
	ru.mu.Lock()
	first := ru.outputs == 0
	ru.outputs++
	ru.mu.Unlock()
	ev := &a2a.TaskArtifactUpdateEvent{
		TaskID: ru.info.TaskID, ContextID: ru.info.ContextID, Append: !first,
		Artifact: &a2a.Artifact{ID: outputArtifact, Name: "output", Parts: a2a.ContentParts{a2a.NewTextPart(string(p))}},
	}
	ru.publish(ev)
	return len(p), nil
}

// awaiting marks the task input-required while an operator decides.
func (ru *run) awaiting(id string) {
	msg := fmt.Sprintf("awaiting operator approval (id %s): an operator approves it with `a2a-agent approvals approve %s` or on the gateway's /approvals page", id, id)
	ru.mu.Lock()
	ru.waiting = true
	ru.mu.Unlock()
	ru.status(mcp.TaskStatusInputRequired, msg)
}

// cleared marks a task that waited for an operator working again.
func (ru *run) cleared() {
	ru.mu.Lock()
	was := ru.waiting
	ru.waiting = false
	ru.mu.Unlock()
	if was {
		ru.status(mcp.TaskStatusWorking, "approved: running")
	}
}

// status records a change of a running task's status and tells the
// streams.
func (ru *run) status(st mcp.TaskStatus, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t, err := ru.s.cfg.Tasks.Update(ctx, ru.owner, string(ru.info.TaskID), st, msg)
	if err != nil {
		ru.s.log.Warn("recording an Agent2Agent task's status", "task", ru.info.TaskID, "error", err)
		return
	}
	if t.Terminal() {
		return
	}
	ru.publish(&a2a.TaskStatusUpdateEvent{TaskID: ru.info.TaskID, ContextID: ru.info.ContextID, Status: taskStatus(t)})
}

// finish tells the streams the task's end: its result artifact, then its
// final status.
func (ru *run) finish(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	t, err := ru.s.cfg.Tasks.Get(sctx, ru.owner, string(ru.info.TaskID))
	cancel()
	ru.s.mu.Lock()
	delete(ru.s.runs, string(ru.info.TaskID))
	ru.s.mu.Unlock()
	if err == nil {
		if a := artifact(t.Result); a != nil && !t.Rejected && t.Status != mcp.TaskStatusFailed {
			ru.publish(&a2a.TaskArtifactUpdateEvent{TaskID: ru.info.TaskID, ContextID: ru.info.ContextID, Artifact: a, LastChunk: true})
		}
		ru.publish(&a2a.TaskStatusUpdateEvent{TaskID: ru.info.TaskID, ContextID: ru.info.ContextID, Status: taskStatus(t)})
	}
	ru.mu.Lock()
	ru.done = true
	close(ru.changed)
	ru.changed = make(chan struct{})
	ru.mu.Unlock()
}

func (ru *run) publish(ev a2a.Event) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	ru.events = append(ru.events, ev)
	close(ru.changed)
	ru.changed = make(chan struct{})
}

// next returns the events from i on, whether the run has ended, and a
// channel closed at the next change.
func (ru *run) next(i int) ([]a2a.Event, bool, <-chan struct{}) {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	return ru.events[min(i, len(ru.events)):], ru.done, ru.changed
}

// settled waits until the task has finished or waits for an operator:
// a blocking send's answer.
func (ru *run) settled(ctx context.Context) {
	seen := 0
	for {
		evs, done, changed := ru.next(seen)
		seen += len(evs)
		for _, ev := range evs {
			if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && st.Status.State == a2a.TaskStateInputRequired {
				return
			}
		}
		if done {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// local returns this process's run of task id, or nil.
func (s *Service) local(id string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// send answers SendMessage: the task once it finished or waits for an
// operator, or at once when the client asks so.
func (s *Service) send(w http.ResponseWriter, r *http.Request, sc scope, req *rpcRequest) {
	ru, immediate, reply, e := s.begin(r, sc, req)
	switch {
	case e != nil:
		writeRPC(w, rpcResponse{ID: req.ID, Error: e})
		return
	case reply != nil:
		writeRPC(w, rpcResponse{ID: req.ID, Result: req.event(reply)})
		return
	}
	ctx := r.Context()
	if !immediate {
		ru.settled(ctx)
		if ctxDone(ctx) {
			return
		}
	}
	t, err := s.cfg.Tasks.Get(ctx, ru.owner, string(ru.info.TaskID))
	if err != nil {
		writeRPC(w, rpcResponse{ID: req.ID, Error: taskError(string(ru.info.TaskID), err)})
		return
	}
	writeRPC(w, rpcResponse{ID: req.ID, Result: req.event(view(t))})
}

// stream answers SendStreamingMessage: the task, then its updates as the
// command runs, until it ends. A client that drops the stream before then
// cancels the call.
func (s *Service) stream(w http.ResponseWriter, r *http.Request, sc scope, req *rpcRequest) {
	ru, _, reply, e := s.begin(r, sc, req)
	if e != nil && e.status != 0 {
		// An HTTP refusal (429) goes as one, not inside a stream.
		writeRPC(w, rpcResponse{ID: req.ID, Error: e})
		return
	}
	if e != nil || reply != nil {
		sw, ok := newSSE(w)
		if !ok {
			writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeInternalError, "this connection cannot stream")})
			return
		}
		if e != nil {
			sw.send(rpcResponse{ID: req.ID, Error: e})
		} else {
			sw.send(rpcResponse{ID: req.ID, Result: req.event(reply)})
		}
		return
	}
	first := &a2a.Task{ID: ru.info.TaskID, ContextID: ru.info.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: ptr(time.Now().UTC())}}
	if !s.follow(w, r, req, ru, first) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), tasks.CancelWait)
		defer cancel()
		if _, err := s.cfg.Tasks.Cancel(ctx, ru.owner, string(ru.info.TaskID)); err == nil {
			s.log.Info("Agent2Agent task cancelled: its stream was dropped", "agent", s.cfg.Identity, "task", ru.info.TaskID, "cause", errStreamDropped)
		}
	}
}

// follow streams first, then ru's events until it ends. It returns false
// when the client went away before the end.
func (s *Service) follow(w http.ResponseWriter, r *http.Request, req *rpcRequest, ru *run, first a2a.Event) bool {
	sw, ok := newSSE(w)
	if !ok {
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeInternalError, "this connection cannot stream")})
		return true
	}
	ctx := r.Context()
	if !sw.send(rpcResponse{ID: req.ID, Result: req.event(first)}) {
		return false
	}
	seen := 0
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		evs, done, changed := ru.next(seen)
		seen += len(evs)
		for _, ev := range evs {
			if !sw.send(rpcResponse{ID: req.ID, Result: req.event(ev)}) {
				return false
			}
		}
		if done {
			return true
		}
		select {
		case <-changed:
		case <-keepAlive.C:
			if !sw.comment() {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// subscribe answers SubscribeToTask: the task as it is, then, while it
// runs, its updates. Live output comes from the gateway running the
// call; another gateway of a fleet sends the task's end once the store
// has it.
func (s *Service) subscribe(w http.ResponseWriter, r *http.Request, req *rpcRequest) {
	var p taskParams
	if e := decodeParams(req.Params, &p); e != nil {
		writeRPC(w, rpcResponse{ID: req.ID, Error: e})
		return
	}
	ctx := r.Context()
	t, err := s.cfg.Tasks.Get(ctx, owner(ctx), p.ID)
	if err != nil {
		writeRPC(w, rpcResponse{ID: req.ID, Error: taskError(p.ID, err)})
		return
	}
	if ru := s.local(t.ID); ru != nil && !t.Terminal() {
		s.follow(w, r, req, ru, view(t))
		return
	}
	sw, ok := newSSE(w)
	if !ok {
		writeRPC(w, rpcResponse{ID: req.ID, Error: errorf(codeInternalError, "this connection cannot stream")})
		return
	}
	if !sw.send(rpcResponse{ID: req.ID, Result: req.event(view(t))}) || t.Terminal() {
		return
	}
	end, err := s.cfg.Tasks.Wait(ctx, owner(ctx), t.ID)
	if err != nil {
		if !ctxDone(ctx) {
			sw.send(rpcResponse{ID: req.ID, Error: taskError(t.ID, err)})
		}
		return
	}
	info := a2a.TaskInfo{TaskID: a2a.TaskID(end.ID), ContextID: end.Context}
	if a := artifact(end.Result); a != nil && end.Status == mcp.TaskStatusCompleted {
		sw.send(rpcResponse{ID: req.ID, Result: req.event(&a2a.TaskArtifactUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Artifact: a, LastChunk: true})})
	}
	sw.send(rpcResponse{ID: req.ID, Result: req.event(&a2a.TaskStatusUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Status: taskStatus(end)})})
}

// state is a stored task's Agent2Agent state.
func state(t tasks.Task) a2a.TaskState {
	switch t.Status {
	case mcp.TaskStatusWorking:
		return a2a.TaskStateWorking
	case mcp.TaskStatusInputRequired:
		return a2a.TaskStateInputRequired
	case mcp.TaskStatusCompleted:
		return a2a.TaskStateCompleted
	case mcp.TaskStatusCancelled:
		return a2a.TaskStateCanceled
	case mcp.TaskStatusFailed:
		if t.Rejected {
			return a2a.TaskStateRejected
		}
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateUnspecified
}

// taskStatus is a stored task's status, with its message as the agent's.
func taskStatus(t tasks.Task) a2a.TaskStatus {
	st := a2a.TaskStatus{State: state(t), Timestamp: ptr(t.Updated.UTC())}
	if t.Message != "" {
		st.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, a2a.TaskInfo{TaskID: a2a.TaskID(t.ID), ContextID: t.Context}, a2a.NewTextPart(t.Message))
	}
	return st
}

// view is a stored task as the protocol shows it.
func view(t tasks.Task) *a2a.Task {
	v := &a2a.Task{ID: a2a.TaskID(t.ID), ContextID: t.Context, Status: taskStatus(t)}
	if a := artifact(t.Result); a != nil && t.Status == mcp.TaskStatusCompleted {
		v.Artifacts = []*a2a.Artifact{a}
	}
	v.Metadata = map[string]any{"tool": t.Tool}
	return v
}

// artifact is a call's result as the task's artifact: the result
// envelope as a DataPart and the output as a TextPart, for a command; an
// in-process tool's JSON as a DataPart and its text. Nil for no result.
func artifact(res *mcp.CallToolResult) *a2a.Artifact {
	if res == nil || res.IsError {
		return nil
	}
	a := &a2a.Artifact{ID: resultArtifact, Name: "result"}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		var env tool.CommandResult
		var data map[string]any
		if err == nil && json.Unmarshal(b, &env) == nil && json.Unmarshal(b, &data) == nil {
			a.Parts = a2a.ContentParts{a2a.NewDataPart(data), a2a.NewTextPart(env.Output)}
			return a
		}
	}
	text := tasks.ResultText(res)
	var data any
	if json.Unmarshal([]byte(text), &data) == nil {
		a.Parts = append(a.Parts, a2a.NewDataPart(data))
	}
	a.Parts = append(a.Parts, a2a.NewTextPart(text))
	return a
}

func ptr[T any](v T) *T { return &v }

// sse writes one event stream.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", contentTypeStream)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, true
}

// send writes resp as one event, reporting false once the client is gone.
func (s *sse) send(resp rpcResponse) bool {
	resp.JSONRPC = jsonrpcVersion
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(rpcResponse{JSONRPC: jsonrpcVersion, ID: resp.ID, Error: errorf(codeInternalError, "encoding the event: %v", err)})
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return false
	}
	s.f.Flush()
	return true
}

// comment keeps an idle stream open through proxies.
func (s *sse) comment() bool {
	if _, err := s.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return false
	}
	s.f.Flush()
	return true
}
