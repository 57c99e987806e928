package approval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// Kinds of approval message, each with a schema
// (schemas/approval/<kind>.json): the argument of [Validate].
const (
	KindRequest     = "request"
	KindAnswer      = "answer"
	KindAnswerReply = "answer.reply"
	KindListReply   = "list.reply"
	KindEvent       = "event"
)

// MaxMessageSize caps every approval message, checked before a byte is
// parsed. It matches the A2A cap (under the NATS 1 MiB default payload);
// a list reply longer than that is split into several replies.
const MaxMessageSize = 768 << 10

// compiled compiles the embedded approval schemas once per process.
var compiled = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	entries, err := fs.ReadDir(schemas.FS(), "approval")
	if err != nil {
		return nil, fmt.Errorf("reading embedded approval schemas: %w", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(schemas.FS(), "approval/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", e.Name(), err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("parsing schema %s: %w", e.Name(), err)
		}
		if err := c.AddResource(schemas.ApprovalBaseURL+e.Name(), doc); err != nil {
			return nil, fmt.Errorf("adding schema %s: %w", e.Name(), err)
		}
	}
	byKind := make(map[string]*jsonschema.Schema, len(schemas.ApprovalKinds))
	for _, kind := range schemas.ApprovalKinds {
		s, err := c.Compile(schemas.ApprovalBaseURL + kind + ".json")
		if err != nil {
			return nil, fmt.Errorf("compiling schema %s: %w", kind, err)
		}
		byKind[kind] = s
	}
	return byKind, nil
})

// Validate checks data, one message of kind (KindRequest, KindAnswer, …),
// against its schema and the size cap, returning an error wrapping
// [ErrInvalidMessage]. Every message this package sends or receives passes
// through it.
func Validate(kind string, data []byte) error {
	if len(data) > MaxMessageSize {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrInvalidMessage, kind, len(data), MaxMessageSize)
	}
	byKind, err := compiled()
	if err != nil {
		// Embedded and tested: failing to compile is a build defect.
		panic(err)
	}
	s, ok := byKind[kind]
	if !ok {
		return fmt.Errorf("%w: no schema for kind %q", ErrInvalidMessage, kind)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, kind, err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, kind, err)
	}
	return nil
}

// oneLine flattens an error whose text may span lines (a schema
// validation error does), for a reply reason.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// encode marshals v and validates it as kind, so nothing leaves that a peer
// would refuse.
func encode(kind string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: marshalling %s: %w", ErrInvalidMessage, kind, err)
	}
	if err := Validate(kind, data); err != nil {
		return nil, err
	}
	return data, nil
}

// decode validates data as kind and unmarshals it into v.
func decode(kind string, data []byte, v any) error {
	if err := Validate(kind, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, kind, err)
	}
	return nil
}
