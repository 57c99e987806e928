package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// MaxMessageSize caps every message in both directions, checked before a
// byte is parsed: it sits under the NATS 1 MiB default payload with room for
// headers, and stops a hostile peer forcing a large allocation.
const MaxMessageSize = 768 << 10

// validator holds the compiled schema of every protocol id.
type validator struct {
	byProtocol map[string]*jsonschema.Schema
	// header admits an object of header fields only: the header of a
	// discovery reply whose card the client has validated before (see
	// cardCache).
	header *jsonschema.Schema
}

// headerOnlyURL names the schema of a closed header object. It is not a
// protocol id and not a file of the schemas module: only the card cache
// validates against it.
const headerOnlyURL = schemas.BaseURL + "internal/header-only.json"

// compiled compiles the embedded schemas once per process.
var compiled = sync.OnceValues(compileSchemas)

func compileSchemas() (*validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseRegexpEngine(compilePattern)
	entries, err := fs.ReadDir(schemas.FS(), "v1")
	if err != nil {
		return nil, fmt.Errorf("reading embedded schemas: %w", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(schemas.FS(), "v1/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("reading schema %s: %w", e.Name(), err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("parsing schema %s: %w", e.Name(), err)
		}
		if err := c.AddResource(schemas.BaseURL+e.Name(), doc); err != nil {
			return nil, fmt.Errorf("adding schema %s: %w", e.Name(), err)
		}
	}
	headerOnly := map[string]any{"$ref": "../common.json#/$defs/header", "unevaluatedProperties": false}
	if err := c.AddResource(headerOnlyURL, headerOnly); err != nil {
		return nil, fmt.Errorf("adding the header-only schema: %w", err)
	}
	v := &validator{byProtocol: make(map[string]*jsonschema.Schema, len(schemas.Kinds))}
	if v.header, err = c.Compile(headerOnlyURL); err != nil {
		return nil, fmt.Errorf("compiling the header-only schema: %w", err)
	}
	for _, kind := range schemas.Kinds {
		s, err := c.Compile(schemas.BaseURL + kind + ".json")
		if err != nil {
			return nil, fmt.Errorf("compiling schema %s: %w", kind, err)
		}
		v.byProtocol[schemas.ProtocolPrefix+kind] = s
	}
	return v, nil
}

// mustValidator returns the compiled schemas. They are embedded and tested,
// so failing to compile them is a build defect, not a runtime condition.
func mustValidator() *validator {
	v, err := compiled()
	if err != nil {
		panic(err)
	}
	return v
}

// validate checks a parsed document against the schema of protocol.
func (v *validator) validate(protocol string, doc any) error {
	s, ok := v.byProtocol[protocol]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProtocol, protocol)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, protocol, err)
	}
	return nil
}

// Encode marshals m and validates the result against the schema of its
// protocol id, and refuses a repeated key (which only raw JSON such as a
// tool input can carry), so nothing leaves that a peer would reject. It
// does not stamp: a message is stamped when it is built. Discovery
// requests, acks, events, tool requests and tool replies of the forms
// fiskfleet sends are written directly instead, valid by construction (see
// [appendHeader] and toolcodec.go).
func Encode(m Message) ([]byte, error) {
	var (
		data   []byte
		direct bool
	)
	switch m := m.(type) {
	case *DiscoveryRequest:
		data, direct = appendDiscoveryRequest(nil, m)
	case *Ack:
		data, direct = appendAck(nil, m)
	case *Event:
		data, direct = appendEvent(nil, m)
	case *ToolRequest:
		data, direct = appendToolRequest(nil, m)
	case *ToolReply:
		data, direct = appendToolReply(nil, m)
	}
	switch {
	case direct && len(data) > MaxMessageSize:
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, m.ProtocolID(), len(data), MaxMessageSize)
	case direct:
		return data, nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: marshalling %s: %w", ErrInvalidMessage, m.ProtocolID(), err)
	}
	if len(data) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, m.ProtocolID(), len(data), MaxMessageSize)
	}
	doc, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: re-reading %s: %w", ErrInvalidMessage, m.ProtocolID(), err)
	}
	if err := mustValidator().validate(m.ProtocolID(), doc); err != nil {
		return nil, err
	}
	return data, nil
}

// Decode reads data into m, which should be a fresh value: the size is
// checked before anything is parsed; the body is parsed once, a repeated
// key refused in that same pass; the protocol id it names must be the one
// m expects (a body mislabelled as another kind is refused however valid
// it is); the parsed body is validated against that id's schema; and only
// then is it unmarshalled into m. Discovery requests, acks, events, tool
// requests and tool replies of the forms fiskfleet sends are read directly
// from the parsed body instead, accepting only what the schema accepts (see
// [headerOnly] and toolcodec.go).
func Decode(data []byte, m Message) error {
	if isHeaderOnly(m) {
		return decodeHeader(data, m.header(), m.ProtocolID(), mustValidator().byProtocol[m.ProtocolID()])
	}
	if decodeDirect(data, m) {
		return nil
	}
	return decodeAs(data, m, m.ProtocolID(), mustValidator().byProtocol[m.ProtocolID()])
}

// decodeHeader is [Decode] of a message, or a part of one, that holds
// header fields only: [headerOnly] takes the common forms without the
// schema validator, and leaves every other to [decodeAs] with schema.
func decodeHeader(data []byte, h *Header, want string, schema *jsonschema.Schema) error {
	if len(data) <= MaxMessageSize {
		if doc, err := parse(data); err == nil {
			if obj, ok := doc.(map[string]any); ok && headerOnly(obj, want, h) {
				return nil
			}
		}
	}
	return decodeAs(data, h, want, schema)
}

// decodeAs is [Decode] into v, a message or a part of one, whose protocol
// id must be want, validated against schema.
func decodeAs(data []byte, v any, want string, schema *jsonschema.Schema) error {
	if len(data) > MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxMessageSize)
	}
	doc, err := parse(data)
	if dup := (*duplicateKeyError)(nil); errors.As(err, &dup) {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err != nil {
		return fmt.Errorf("%w: not JSON: %w", ErrInvalidMessage, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidMessage)
	}
	protocol, _ := obj["protocol"].(string)
	if err := expectProtocol(protocol, want); err != nil {
		return err
	}
	if schema == nil {
		return fmt.Errorf("%w: %q has no schema", ErrUnknownProtocol, protocol)
	}
	if err := schema.Validate(doc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidMessage, protocol, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: decoding %s: %w", ErrInvalidMessage, protocol, err)
	}
	return nil
}

// decodeDirect decodes the stream and tool-call messages fiskfleet sends
// (see [ackDirect], [eventDirect], [toolRequestDirect] and
// [toolReplyDirect]) into m without the schema walk, and reports whether it
// could; m is left alone when it could not.
func decodeDirect(data []byte, m Message) bool {
	keep := ""
	switch m.(type) {
	case *Ack, *Event, *ToolReply:
	case *ToolRequest:
		keep = "input"
	default:
		return false
	}
	if len(data) > MaxMessageSize {
		return false
	}
	doc, raw, err := parseKeeping(data, keep)
	if err != nil {
		return false
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return false
	}
	switch m := m.(type) {
	case *Ack:
		return ackDirect(obj, m)
	case *Event:
		return eventDirect(obj, m)
	case *ToolRequest:
		return toolRequestDirect(obj, raw, m)
	case *ToolReply:
		return toolReplyDirect(obj, m)
	}
	return false
}

// isHeaderOnly reports whether m's kind carries nothing but the header.
func isHeaderOnly(m Message) bool {
	_, ok := m.(*DiscoveryRequest)
	return ok
}

// expectProtocol re-checks on arrival the protocol id a receiver expected,
// rather than trusting the subject a message arrived on.
func expectProtocol(got, want string) error {
	if got == want {
		return nil
	}
	if got == "" {
		return fmt.Errorf("%w: protocol missing, want %s", ErrInvalidMessage, want)
	}
	if _, known := mustValidator().byProtocol[got]; !known {
		return fmt.Errorf("%w: %q (want %s)", ErrUnknownProtocol, got, want)
	}
	return fmt.Errorf("%w: got %s, want %s", ErrUnexpectedProtocol, got, want)
}
