package a2a

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// maxDepth is how deeply arrays and objects may nest: encoding/json's own
// limit, so parse and the final json.Unmarshal accept the same documents,
// and a hostile body cannot make parse recurse without bound.
const maxDepth = 10000

// duplicateKeyError is an object that names a member twice.
type duplicateKeyError struct {
	name   string
	offset int
}

func (e *duplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %q at offset %d", e.name, e.offset)
}

// parse reads data, one JSON value with nothing but whitespace around it,
// into the tree the schema validator walks: map[string]any, []any, string,
// json.Number, bool and nil, the tree jsonschema.UnmarshalJSON builds. It
// accepts exactly what encoding/json accepts, strings decode as
// encoding/json decodes them (escapes, and invalid UTF-8 as U+FFFD), and
// numbers keep their text.
//
// In the same pass it refuses, with a *duplicateKeyError, an object that
// names a member twice (names compared once decoded). The schema sees a
// map in which the last duplicate wins, but encoding/json merges a
// repeated object into the same struct field, so a first "sender" could
// smuggle an instance the schema never checked; such a message is refused
// instead.
func parse(data []byte) (any, error) {
	v, _, err := parseKeeping(data, "")
	return v, err
}

// parseKeeping is [parse] that also returns the bytes of the top-level
// object's member named key as they appear in data (nil when there is
// none): what json.Unmarshal would hand a json.RawMessage field of that
// name.
func parseKeeping(data []byte, key string) (any, []byte, error) {
	p := parser{data: data, rawKey: key}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, nil, err
	}
	p.skipSpace()
	if p.i < len(p.data) {
		return nil, nil, p.errorf("invalid character %q after top-level value", p.data[p.i])
	}
	return v, p.raw, nil
}

// parser is the state of one parse: the document and the read offset.
type parser struct {
	data  []byte
	i     int
	depth int
	// rawKey names the top-level member whose bytes raw keeps, if any.
	rawKey string
	raw    []byte
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, fmt.Sprintf(format, args...), p.i)
}

// unexpected reports the byte at the read offset, or the end of the input.
func (p *parser) unexpected(what string) error {
	if p.i >= len(p.data) {
		return p.errorf("unexpected end of JSON input, want %s", what)
	}
	return p.errorf("invalid character %q, want %s", p.data[p.i], what)
}

func (p *parser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads the value at the read offset, which is not whitespace.
func (p *parser) value() (any, error) {
	if p.i >= len(p.data) {
		return nil, p.unexpected("a value")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.unexpected("a value")
}

func (p *parser) literal(word string) error {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return p.unexpected(word)
	}
	p.i += len(word)
	return nil
}

// enter counts one more level of nesting, refusing one too many.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("exceeded max depth of %d", maxDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // {
	obj := map[string]any{}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		p.depth--
		return obj, nil
	}
	for {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.unexpected("a member name")
		}
		at := p.i
		key, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[key]; dup {
			return nil, &duplicateKeyError{name: key, offset: at}
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.unexpected("':'")
		}
		p.i++
		p.skipSpace()
		start := p.i
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.depth == 1 && p.rawKey != "" && key == p.rawKey {
			p.raw = p.data[start:p.i]
		}
		obj[key] = v
		p.skipSpace()
		if p.i < len(p.data) {
			switch p.data[p.i] {
			case ',':
				p.i++
				p.skipSpace()
				continue
			case '}':
				p.i++
				p.depth--
				return obj, nil
			}
		}
		return nil, p.unexpected("',' or '}'")
	}
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // [
	arr := []any{}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		p.depth--
		return arr, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.skipSpace()
		if p.i < len(p.data) {
			switch p.data[p.i] {
			case ',':
				p.i++
				p.skipSpace()
				continue
			case ']':
				p.i++
				p.depth--
				return arr, nil
			}
		}
		return nil, p.unexpected("',' or ']'")
	}
}

// string reads the string whose opening quote is at the read offset. A
// string with no escape and valid UTF-8 is its bytes; any other is decoded
// by encoding/json itself, so escapes, surrogates and invalid UTF-8 read
// exactly as the final json.Unmarshal reads them.
func (p *parser) string() (string, error) {
	start := p.i
	p.i++ // "
	plain, ascii := true, true
	for {
		if p.i >= len(p.data) {
			return "", p.unexpected("the end of a string")
		}
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			raw := p.data[start+1 : p.i-1]
			if plain && (ascii || utf8.Valid(raw)) {
				return string(raw), nil
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return "", fmt.Errorf("%w: string at offset %d: %w", errSyntax, start, err)
			}
			return s, nil
		case c == '\\':
			plain = false
			p.i++
			if p.i >= len(p.data) {
				return "", p.unexpected("an escape")
			}
			switch p.data[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				p.i++
				for range 4 {
					if p.i >= len(p.data) || !isHex(p.data[p.i]) {
						return "", p.unexpected("a hexadecimal digit")
					}
					p.i++
				}
			default:
				return "", p.unexpected("an escape")
			}
		case c < 0x20:
			return "", p.unexpected("a character in a string (control characters must be escaped)")
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			p.i++
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads a number as its text: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() (any, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.i < len(p.data) && isDigit(p.data[p.i]):
		for p.i < len(p.data) && isDigit(p.data[p.i]) {
			p.i++
		}
	default:
		return nil, p.unexpected("a digit")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if err := p.digits(); err != nil {
			return nil, err
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if err := p.digits(); err != nil {
			return nil, err
		}
	}
	return json.Number(p.data[start:p.i]), nil
}

// digits reads one or more decimal digits.
func (p *parser) digits() error {
	if p.i >= len(p.data) || !isDigit(p.data[p.i]) {
		return p.unexpected("a digit")
	}
	for p.i < len(p.data) && isDigit(p.data[p.i]) {
		p.i++
	}
	return nil
}
