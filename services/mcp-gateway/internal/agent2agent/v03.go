package agent2agent

import (
	"encoding/json"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
)

// dialect is the protocol version a request speaks. One endpoint serves
// both: their JSON-RPC method names differ, so the method says which, and
// the answer comes back in the request's shapes. The service works in
// 1.0's types; 0.3 is translated at the edge, here.
type dialect int

const (
	// v10 is Agent2Agent 1.0: PascalCase methods, a send's result wrapped
	// in a StreamResponse, parts told apart by their member.
	v10 dialect = iota
	// v03 is Agent2Agent 0.3, which SDKs still speak (a2a-js's compat
	// client, a2a-go before v2): slash-separated methods, every object
	// tagged by "kind", a status update saying whether it is final.
	v03
)

// Protocol 0.3 as a 0.3 card's protocolVersion names it, and as a 1.0
// card's interface does.
const (
	v03Version   = "0.3.0"
	v03Interface = "0.3"
)

// v03Methods maps each 0.3 method to the 1.0 one it is.
var v03Methods = map[string]string{
	"message/send":                        methodSend,
	"message/stream":                      methodStream,
	"tasks/get":                           methodGetTask,
	"tasks/cancel":                        methodCancelTask,
	"tasks/resubscribe":                   methodSubscribe,
	"agent/getAuthenticatedExtendedCard":  methodExtended,
	"tasks/pushNotificationConfig/get":    methodPushGet,
	"tasks/pushNotificationConfig/set":    methodPushSet,
	"tasks/pushNotificationConfig/list":   methodPushList,
	"tasks/pushNotificationConfig/delete": methodPushDelete,
}

// v03Names is v03Methods backwards, for answers that name a method.
var v03Names = func() map[string]string {
	m := make(map[string]string, len(v03Methods))
	for old, cur := range v03Methods {
		m[cur] = old
	}
	return m
}()

// dialectOf returns the dialect of method and its 1.0 name.
func dialectOf(method string) (dialect, string) {
	if m, ok := v03Methods[method]; ok {
		return v03, m
	}
	return v10, method
}

// name is the 1.0 method m as the request's dialect calls it.
func (req *rpcRequest) name(m string) string {
	if req.dialect == v03 {
		if old, ok := v03Names[m]; ok {
			return old
		}
	}
	return m
}

// event is ev as the result of a send or an event of a stream.
func (req *rpcRequest) event(ev a2a.Event) any {
	if req.dialect == v03 {
		return legacyEvent(ev)
	}
	return a2a.StreamResponse{Event: ev}
}

// task is t as the result of GetTask or CancelTask.
func (req *rpcRequest) task(t *a2a.Task) any {
	if req.dialect == v03 {
		return legacyTask(t)
	}
	return t
}

// sendParams is what a send asks, in either dialect.
type sendParams struct {
	message *a2a.Message
	// immediate is set when the client wants the task at once rather
	// than once it settled (1.0 returnImmediately, 0.3 blocking false).
	immediate bool
}

// decodeSend decodes a send's params in req's dialect.
func (req *rpcRequest) decodeSend() (sendParams, *rpcError) {
	if req.dialect == v03 {
		var p legacy.MessageSendParams
		if e := decodeParams(req.Params, &p); e != nil {
			return sendParams{}, e
		}
		if p.Message == nil {
			return sendParams{}, errorf(codeInvalidParams, "params.message is missing")
		}
		sp := sendParams{message: v1Message(p.Message)}
		if p.Config != nil && p.Config.Blocking != nil {
			sp.immediate = !*p.Config.Blocking
		}
		return sp, nil
	}
	var p a2a.SendMessageRequest
	if e := decodeParams(req.Params, &p); e != nil {
		return sendParams{}, e
	}
	if p.Message == nil {
		return sendParams{}, errorf(codeInvalidParams, "params.message is missing")
	}
	return sendParams{message: p.Message, immediate: p.Config != nil && p.Config.ReturnImmediately}, nil
}

// taskParams are the params of the methods that name a task, alike in
// both dialects.
type taskParams struct {
	ID string `json:"id"`
}

// v1Message is the part of a 0.3 message a call reads: its ids and its
// text and data parts (a file is no call).
func v1Message(m *legacy.Message) *a2a.Message {
	out := &a2a.Message{ID: m.ID, ContextID: m.ContextID, TaskID: a2a.TaskID(m.TaskID), Role: a2a.MessageRoleUser}
	for _, p := range m.Parts {
		switch p := p.(type) {
		case legacy.TextPart:
			out.Parts = append(out.Parts, a2a.NewTextPart(p.Text))
		case legacy.DataPart:
			out.Parts = append(out.Parts, a2a.NewDataPart(p.Data))
		}
	}
	return out
}

// legacyEvent is ev in 0.3's shapes.
func legacyEvent(ev a2a.Event) legacy.Event {
	switch ev := ev.(type) {
	case *a2a.Message:
		return legacyMessage(ev)
	case *a2a.Task:
		return legacyTask(ev)
	case *a2a.TaskStatusUpdateEvent:
		return &legacy.TaskStatusUpdateEvent{
			TaskID: legacy.TaskID(ev.TaskID), ContextID: ev.ContextID, Status: legacyStatus(ev.Status),
			Final: ev.Status.State.Terminal(), Metadata: ev.Metadata,
		}
	case *a2a.TaskArtifactUpdateEvent:
		return &legacy.TaskArtifactUpdateEvent{
			TaskID: legacy.TaskID(ev.TaskID), ContextID: ev.ContextID, Artifact: legacyArtifact(ev.Artifact),
			Append: ev.Append, LastChunk: ev.LastChunk, Metadata: ev.Metadata,
		}
	}
	return nil
}

func legacyTask(t *a2a.Task) *legacy.Task {
	out := &legacy.Task{ID: legacy.TaskID(t.ID), ContextID: t.ContextID, Status: legacyStatus(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, legacyArtifact(a))
	}
	return out
}

// legacyStates are 1.0's task states by their 0.3 names.
var legacyStates = map[a2a.TaskState]legacy.TaskState{
	a2a.TaskStateSubmitted:     legacy.TaskStateSubmitted,
	a2a.TaskStateWorking:       legacy.TaskStateWorking,
	a2a.TaskStateInputRequired: legacy.TaskStateInputRequired,
	a2a.TaskStateAuthRequired:  legacy.TaskStateAuthRequired,
	a2a.TaskStateCompleted:     legacy.TaskStateCompleted,
	a2a.TaskStateCanceled:      legacy.TaskStateCanceled,
	a2a.TaskStateFailed:        legacy.TaskStateFailed,
	a2a.TaskStateRejected:      legacy.TaskStateRejected,
}

func legacyStatus(st a2a.TaskStatus) legacy.TaskStatus {
	out := legacy.TaskStatus{State: legacy.TaskStateUnknown, Timestamp: st.Timestamp}
	if s, ok := legacyStates[st.State]; ok {
		out.State = s
	}
	if st.Message != nil {
		out.Message = legacyMessage(st.Message)
	}
	return out
}

func legacyMessage(m *a2a.Message) *legacy.Message {
	role := legacy.MessageRoleAgent
	if m.Role == a2a.MessageRoleUser {
		role = legacy.MessageRoleUser
	}
	return &legacy.Message{
		ID: m.ID, ContextID: m.ContextID, TaskID: legacy.TaskID(m.TaskID), Role: role,
		Parts: legacyParts(m.Parts), Metadata: m.Metadata,
	}
}

func legacyArtifact(a *a2a.Artifact) *legacy.Artifact {
	return &legacy.Artifact{ID: legacy.ArtifactID(a.ID), Name: a.Name, Description: a.Description, Parts: legacyParts(a.Parts), Metadata: a.Metadata}
}

// legacyParts are parts as 0.3 has them. 0.3's data is an object only:
// other JSON values go as {"value": ...}.
func legacyParts(parts a2a.ContentParts) legacy.ContentParts {
	out := make(legacy.ContentParts, 0, len(parts))
	for _, p := range parts {
		switch c := p.Content.(type) {
		case a2a.Text:
			out = append(out, legacy.TextPart{Text: string(c), Metadata: p.Metadata})
		case a2a.Data:
			obj, ok := c.Value.(map[string]any)
			if !ok {
				obj = map[string]any{"value": c.Value}
			}
			out = append(out, legacy.DataPart{Data: obj, Metadata: p.Metadata})
		}
	}
	return out
}

// unionCard is an agent card readable by clients of either version: 1.0's
// members, with 0.3's beside them (url, preferredTransport,
// protocolVersion, security, supportsAuthenticatedExtendedCard). Where
// both name a member alike (securitySchemes), each scheme carries both
// versions' fields; the readers of each ignore the other's.
type unionCard struct {
	card *a2a.AgentCard
	// url is the card's 0.3 JSON-RPC endpoint.
	url string
}

func (u unionCard) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(u.card)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["protocolVersion"] = v03Version
	m["url"] = u.url
	m["preferredTransport"] = string(a2a.TransportProtocolJSONRPC)
	m["supportsAuthenticatedExtendedCard"] = u.card.Capabilities.ExtendedAgentCard
	if len(u.card.SecuritySchemes) > 0 {
		schemes, _ := m["securitySchemes"].(map[string]any)
		for name, scheme := range u.card.SecuritySchemes {
			entry, _ := schemes[string(name)].(map[string]any)
			if entry == nil {
				continue
			}
			switch s := scheme.(type) {
			case a2a.OpenIDConnectSecurityScheme:
				entry["type"], entry["openIdConnectUrl"], entry["description"] = "openIdConnect", s.OpenIDConnectURL, s.Description
			case a2a.HTTPAuthSecurityScheme:
				entry["type"], entry["scheme"], entry["description"] = "http", s.Scheme, s.Description
			}
		}
		var security []map[string][]string
		for _, req := range u.card.SecurityRequirements {
			r := map[string][]string{}
			for name, scopes := range req {
				r[string(name)] = append([]string{}, scopes...)
			}
			security = append(security, r)
		}
		m["security"] = security
	}
	return json.Marshal(m)
}
