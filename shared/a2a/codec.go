package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
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
}

// compiled compiles the embedded schemas once per process.
var compiled = sync.OnceValues(compileSchemas)

func compileSchemas() (*validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
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
	v := &validator{byProtocol: make(map[string]*jsonschema.Schema, len(schemas.Kinds))}
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
// does not stamp: a message is stamped when it is built.
func Encode(m Message) ([]byte, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: marshalling %s: %w", ErrInvalidMessage, m.ProtocolID(), err)
	}
	if len(data) > MaxMessageSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, m.ProtocolID(), len(data), MaxMessageSize)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: re-reading %s: %w", ErrInvalidMessage, m.ProtocolID(), err)
	}
	if err := mustValidator().validate(m.ProtocolID(), doc); err != nil {
		return nil, err
	}
	if err := checkDuplicateKeys(m.ProtocolID(), data); err != nil {
		return nil, err
	}
	return data, nil
}

// Decode reads data into m, which should be a fresh value: the size is
// checked before anything is parsed, the body is validated against the
// schema of the protocol id it names, that id must be the one m expects (a
// body mislabelled as another kind is refused however valid it is), a
// repeated key is refused, and only then is it unmarshalled.
func Decode(data []byte, m Message) error {
	if len(data) > MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxMessageSize)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not JSON: %w", ErrInvalidMessage, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidMessage)
	}
	protocol, _ := obj["protocol"].(string)
	if err := expectProtocol(protocol, m.ProtocolID()); err != nil {
		return err
	}
	if err := mustValidator().validate(protocol, doc); err != nil {
		return err
	}
	if err := checkDuplicateKeys(protocol, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, m); err != nil {
		return fmt.Errorf("%w: decoding %s: %w", ErrInvalidMessage, protocol, err)
	}
	return nil
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

// checkDuplicateKeys refuses data, already parsed as valid JSON, when one
// object names a member twice. The schema sees a parsed map in which the
// last duplicate wins, but encoding/json merges a repeated object into the
// same struct field, so a first "sender" could smuggle an instance the
// schema never checked; such a message is refused instead.
func checkDuplicateKeys(protocol string, data []byte) error {
	// An object's names are compared one by one while it has few, which
	// is every object of a well-formed message, and through a set once it
	// has more, so a hostile object of many names stays linear.
	const smallObject = 16
	type container struct {
		object bool
		first  int                 // index in names of the container's first name
		set    map[string]struct{} // the object's names, once it has many
	}
	var (
		stack   []container
		names   [][]byte // names of the open objects, innermost last
		wantKey bool
	)
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			stack = append(stack, container{object: data[i] == '{', first: len(names)})
			wantKey = data[i] == '{'
		case '}', ']':
			names = names[:stack[len(stack)-1].first]
			stack = stack[:len(stack)-1]
			wantKey = false
		case ',':
			wantKey = stack[len(stack)-1].object
		case '"':
			start := i
			i = closingQuote(data, i+1)
			if !wantKey {
				continue
			}
			wantKey = false
			name := data[start+1 : i]
			if bytes.IndexByte(name, '\\') >= 0 || !isASCII(name) {
				// Escapes and invalid UTF-8 decode as encoding/json reads them.
				var decoded string
				if err := json.Unmarshal(data[start:i+1], &decoded); err != nil {
					return fmt.Errorf("%w: %s: reading key at offset %d: %w", ErrInvalidMessage, protocol, start, err)
				}
				name = []byte(decoded)
			}
			top := &stack[len(stack)-1]
			own := names[top.first:]
			dup := false
			switch {
			case top.set != nil:
				_, dup = top.set[string(name)]
			case len(own) < smallObject:
				dup = slices.ContainsFunc(own, func(n []byte) bool { return bytes.Equal(n, name) })
			default:
				top.set = make(map[string]struct{}, 2*len(own))
				for _, n := range own {
					top.set[string(n)] = struct{}{}
				}
				_, dup = top.set[string(name)]
			}
			if dup {
				return fmt.Errorf("%w: %s: duplicate key %q at offset %d", ErrInvalidMessage, protocol, name, start)
			}
			if top.set != nil {
				top.set[string(name)] = struct{}{}
			}
			names = append(names, name)
		}
	}
	return nil
}

// closingQuote returns the index of the quote that ends the JSON string
// whose contents start at from.
func closingQuote(data []byte, from int) int {
	for {
		n := bytes.IndexByte(data[from:], '"')
		if n < 0 {
			return len(data) // unreachable for valid JSON
		}
		q := from + n
		backslashes := 0
		for j := q - 1; j >= from && data[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q
		}
		from = q + 1
	}
}

// isASCII reports whether b holds only ASCII bytes.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
