package integration_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// TestAgent2AgentProtocol03 drives the gateway with a client of protocol
// 0.3 (a2a-go's v0.3 JSON-RPC transport, which speaks message/send,
// message/stream, tasks/get, tasks/cancel and kind-tagged parts): the
// same card, call, stream and cancel as a 1.0 client, on the same
// endpoint.
func TestAgent2AgentProtocol03(t *testing.T) {
	t.Parallel()
	f := startAgent2AgentFleet(t, nil)
	raw := getBody(t, f.base+"/.well-known/agent-card.json")
	card, err := a2av0.NewAgentCardParser()(raw)
	if err != nil {
		t.Fatalf("the card as a 0.3 client reads it: %v\n%s", err, raw)
	}
	var v03 *a2a.AgentInterface
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolVersion == a2av0.Version {
			v03 = iface
		}
	}
	if v03 == nil || v03.URL != f.base+"/a2a" || !slices.Contains(skillIDs(card), "echo") {
		t.Fatalf("the 0.3 view of the card: got interfaces %+v and skills %v, want a 0.3 JSON-RPC interface at %s/a2a and the tools", card.SupportedInterfaces, skillIDs(card), f.base)
	}
	c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{v03}, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		t.Fatalf("a 0.3 client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })

	t.Run("send", func(t *testing.T) {
		res, err := c.SendMessage(t.Context(), callMessage("echo", map[string]any{"message": "old times"}))
		if err != nil {
			t.Fatalf("message/send: %v", err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("message/send: got %#v, want a completed task", res)
		}
		env, text := resultEnvelope(t, task)
		if text != "old times\n" || env["exit_code"] != float64(0) {
			t.Errorf("result: got %v and %q", env, text)
		}
		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateCompleted {
			t.Errorf("tasks/get: got %+v, %v, want the completed task", got, err)
		}
	})

	t.Run("how to call", func(t *testing.T) {
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("echo hi"))})
		m, ok := res.(*a2a.Message)
		if err != nil || !ok || !strings.Contains(m.Parts[0].Text(), "Not called") {
			t.Errorf("a text-only message: got %#v, %v, want the how-to message", res, err)
		}
	})

	t.Run("stream", func(t *testing.T) {
		var chunks []string
		var final a2a.TaskState
		for ev, err := range c.SendStreamingMessage(t.Context(), callMessage("ticker", map[string]any{"every": "50ms", "count": 4})) {
			if err != nil {
				t.Fatalf("message/stream: %v", err)
			}
			switch e := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				if e.Artifact.ID == "output" {
					chunks = append(chunks, e.Artifact.Parts[0].Text())
				}
			case *a2a.TaskStatusUpdateEvent:
				final = e.Status.State
			}
		}
		if final != a2a.TaskStateCompleted || len(chunks) < 2 || !strings.HasSuffix(strings.Join(chunks, ""), "tick 4 of 4\n") {
			t.Errorf("the stream: got %q ending %v, want the ticks as they came, then completed", chunks, final)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		req := callMessage("spawn", map[string]any{"duration": "1m", "pidfile": pidfile})
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := c.SendMessage(t.Context(), req)
		if err != nil {
			t.Fatalf("message/send: %v", err)
		}
		task := res.(*a2a.Task)
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		got, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("tasks/cancel: got %+v, %v, want canceled", got, err)
		}
		fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
	})

	t.Run("unknown task", func(t *testing.T) {
		if _, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "task-00000000000000000000000000000000"}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("tasks/get of an unknown id: got %v, want task not found", err)
		}
	})
}

// TestAgent2AgentWireShapes holds every answer of both protocol versions
// to the SDKs' own types: neither the protocol's specification nor the
// SDK packages (@a2a-js/sdk 1.3.0, a2a-go v2.4.0 and v0.3.15) ship a JSON
// Schema of the wire, so each answer is decoded into the a2a-go type of
// its version, encoded again, and must come back equal. A member the
// type does not know, or a value of the wrong type, would not.
func TestAgent2AgentWireShapes(t *testing.T) {
	t.Parallel()
	f := startAgent2AgentFleet(t, nil)
	url := f.base + "/a2a"
	call := func(tool string, args map[string]any) map[string]any {
		return map[string]any{"tool": tool, "arguments": args}
	}
	message10 := func(data map[string]any) map[string]any {
		m := map[string]any{"messageId": "m-1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "a call"}}}
		if data != nil {
			m["parts"] = []any{map[string]any{"data": data}}
		}
		return m
	}
	message03 := func(data map[string]any) map[string]any {
		m := map[string]any{"kind": "message", "messageId": "m-1", "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "a call"}}}
		if data != nil {
			m["parts"] = []any{map[string]any{"kind": "data", "data": data}}
		}
		return m
	}

	t.Run("1.0", func(t *testing.T) {
		res := rpcResult(t, url, "SendMessage", map[string]any{"message": message10(call("echo", map[string]any{"message": "shape"}))})
		sameAfterDecoding[a2a.StreamResponse](t, "SendMessage", res)
		var sr a2a.StreamResponse
		_ = json.Unmarshal(res, &sr)
		task, ok := sr.Event.(*a2a.Task)
		if !ok {
			t.Fatalf("SendMessage: got %s, want a task", res)
		}
		sameAfterDecoding[a2a.StreamResponse](t, "SendMessage (how to call)", rpcResult(t, url, "SendMessage", map[string]any{"message": message10(nil)}))
		sameAfterDecoding[a2a.Task](t, "GetTask", rpcResult(t, url, "GetTask", map[string]any{"id": string(task.ID)}))
		for i, ev := range rpcStream(t, url, "SendStreamingMessage", map[string]any{"message": message10(call("ticker", map[string]any{"every": "20ms", "count": 2}))}) {
			sameAfterDecoding[a2a.StreamResponse](t, fmt.Sprintf("SendStreamingMessage event %d", i), ev)
		}
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		res = rpcResult(t, url, "SendMessage", map[string]any{"message": message10(call("spawn", map[string]any{"duration": "1m", "pidfile": pidfile})), "configuration": map[string]any{"returnImmediately": true}})
		_ = json.Unmarshal(res, &sr)
		id := string(sr.Event.(*a2a.Task).ID)
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		res = rpcResult(t, url, "CancelTask", map[string]any{"id": id})
		sameAfterDecoding[a2a.Task](t, "CancelTask", res)
		var cancelled a2a.Task
		if err := json.Unmarshal(res, &cancelled); err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
			t.Errorf("CancelTask: got %s, want the task canceled", res)
		}
		fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
		for i, ev := range rpcStream(t, url, "SubscribeToTask", map[string]any{"id": id}) {
			sameAfterDecoding[a2a.StreamResponse](t, fmt.Sprintf("SubscribeToTask event %d", i), ev)
		}
	})

	t.Run("0.3", func(t *testing.T) {
		res := rpcResult(t, url, "message/send", map[string]any{"message": message03(call("echo", map[string]any{"message": "shape"}))})
		task := sameAfterDecoding03(t, "message/send", res)
		sameAfterDecoding03(t, "message/send (how to call)", rpcResult(t, url, "message/send", map[string]any{"message": message03(nil)}))
		sameAfterDecoding03(t, "tasks/get", rpcResult(t, url, "tasks/get", map[string]any{"id": task}))
		events := rpcStream(t, url, "message/stream", map[string]any{"message": message03(call("ticker", map[string]any{"every": "20ms", "count": 2}))})
		for i, ev := range events {
			sameAfterDecoding03(t, fmt.Sprintf("message/stream event %d", i), ev)
		}
		var last legacy.TaskStatusUpdateEvent
		if err := json.Unmarshal(events[len(events)-1], &last); err != nil || !last.Final || last.Status.State != legacy.TaskStateCompleted {
			t.Errorf("message/stream's last event: got %s, want a final completed status-update", events[len(events)-1])
		}
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		res = rpcResult(t, url, "message/send", map[string]any{"message": message03(call("spawn", map[string]any{"duration": "1m", "pidfile": pidfile})), "configuration": map[string]any{"blocking": false}})
		id := sameAfterDecoding03(t, "message/send (not blocking)", res)
		grandchild := fisktest.WaitPIDFile(t, pidfile)
		res = rpcResult(t, url, "tasks/cancel", map[string]any{"id": id})
		sameAfterDecoding03(t, "tasks/cancel", res)
		var cancelled legacy.Task
		if err := json.Unmarshal(res, &cancelled); err != nil || cancelled.Status.State != legacy.TaskStateCanceled {
			t.Errorf("tasks/cancel: got %s, want the task canceled", res)
		}
		fisktest.WaitFor(t, 15*time.Second, "the cancelled command's group to be killed", func() bool { return fisktest.ProcessGone(grandchild) })
		for i, ev := range rpcStream(t, url, "tasks/resubscribe", map[string]any{"id": id}) {
			sameAfterDecoding03(t, fmt.Sprintf("tasks/resubscribe event %d", i), ev)
		}
	})

	t.Run("cards", func(t *testing.T) {
		for _, path := range []string{"/.well-known/agent-card.json", "/a2a/demo/.well-known/agent-card.json"} {
			raw := getBody(t, f.base+path)
			// The card is both versions' at once: each version's type
			// must read every member of its own back unchanged.
			sameMembersAfterDecoding[a2a.AgentCard](t, path+" (1.0)", raw)
			sameMembersAfterDecoding[legacy.AgentCard](t, path+" (0.3)", raw)
		}
	})
}

// getBody returns the body of a GET of url, which must answer 200.
func getBody(tb testing.TB, url string) []byte {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %s %v", url, resp.StatusCode, b, err)
	}
	return b
}

// rpcPost posts one JSON-RPC request of method to url.
func rpcPost(tb testing.TB, url, method string, params any) *http.Response {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rpcAnswer checks one JSON-RPC response and returns its result.
func rpcAnswer(tb testing.TB, method string, b []byte) json.RawMessage {
	tb.Helper()
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.JSONRPC != "2.0" || string(r.ID) != "7" || len(r.Error) > 0 || len(r.Result) == 0 {
		tb.Fatalf("%s: got %s, want a JSON-RPC 2.0 result for id 7", method, b)
	}
	return r.Result
}

// rpcResult calls method and returns its result.
func rpcResult(tb testing.TB, url, method string, params any) json.RawMessage {
	tb.Helper()
	resp := rpcPost(tb, url, method, params)
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		tb.Fatalf("%s: got Content-Type %q, want application/json", method, ct)
	}
	return rpcAnswer(tb, method, b)
}

// rpcStream calls a streaming method and returns the result of each of
// its events, until the server ends the stream.
func rpcStream(tb testing.TB, url, method string, params any) []json.RawMessage {
	tb.Helper()
	resp := rpcPost(tb, url, method, params)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("%s: got Content-Type %q (%s), want an event stream", method, ct, b)
	}
	var out []json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, rpcAnswer(tb, method, []byte(data)))
		}
	}
	if len(out) == 0 {
		tb.Fatalf("%s: the stream held no event", method)
	}
	return out
}

// sameAfterDecoding decodes raw into T and fails unless encoding it
// again gives the same JSON value.
func sameAfterDecoding[T any](tb testing.TB, what string, raw json.RawMessage) {
	tb.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Errorf("%s: %s is no %T: %v", what, raw, v, err)
		return
	}
	again, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("%s: encoding %T: %v", what, v, err)
	}
	if a, b := jsonValue(tb, raw), jsonValue(tb, again); !reflect.DeepEqual(a, b) {
		tb.Errorf("%s: the answer and its %T differ:\nanswer: %s\n%T:   %s", what, v, raw, v, again)
	}
}

// sameAfterDecoding03 holds a 0.3 result, an object tagged by its kind,
// to the a2a-go 0.3 type of that kind, and returns its task id, if any.
func sameAfterDecoding03(tb testing.TB, what string, raw json.RawMessage) string {
	tb.Helper()
	var head struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(raw, &head)
	switch head.Kind {
	case "task":
		sameAfterDecoding[legacy.Task](tb, what, raw)
		return head.ID
	case "message":
		sameAfterDecoding[legacy.Message](tb, what, raw)
	case "status-update":
		sameAfterDecoding[legacy.TaskStatusUpdateEvent](tb, what, raw)
	case "artifact-update":
		sameAfterDecoding[legacy.TaskArtifactUpdateEvent](tb, what, raw)
	default:
		tb.Errorf("%s: got %s, want an object whose kind is task, message, status-update or artifact-update", what, raw)
	}
	return head.TaskID
}

// sameMembersAfterDecoding is [sameAfterDecoding] for a document that
// also carries another type's members: every member T encodes must be in
// raw, equal.
func sameMembersAfterDecoding[T any](tb testing.TB, what string, raw []byte) {
	tb.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Errorf("%s: the card is no %T: %v", what, v, err)
		return
	}
	again, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("%s: encoding %T: %v", what, v, err)
	}
	have, _ := jsonValue(tb, raw).(map[string]any)
	for k, want := range jsonValue(tb, again).(map[string]any) {
		if !reflect.DeepEqual(have[k], want) && !subsetOf(want, have[k]) {
			tb.Errorf("%s: member %q: the card has %v, its %T %v", what, k, have[k], v, want)
		}
	}
}

// subsetOf reports whether every member of want's objects is in have,
// equal: a union card's scheme carries both versions' members.
func subsetOf(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subsetOf(v, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subsetOf(w[i], h[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(want, have)
}

func jsonValue(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("%s is not JSON: %v", b, err)
	}
	return v
}
