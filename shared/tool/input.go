package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInputNotObject is call input that is not one JSON object.
var ErrInputNotObject = errors.New("input must be a JSON object")

// ObjectInput normalises a call's input for every tool kind and server:
// absent, empty or null is no arguments (nil; models send null for tools
// without arguments, and a command treats none as {}), a JSON object is
// returned trimmed, and anything else is an error wrapping
// [ErrInputNotObject] that names what it got.
func ObjectInput(input json.RawMessage) (json.RawMessage, error) {
	in := bytes.TrimSpace(input)
	if len(in) == 0 || string(in) == "null" {
		return nil, nil
	}
	if in[0] != '{' || !json.Valid(in) {
		return nil, fmt.Errorf("%w, got %s", ErrInputNotObject, jsonKind(in))
	}
	return in, nil
}

// jsonKind names the kind of the JSON value in, for messages.
func jsonKind(in []byte) string {
	if !json.Valid(in) {
		return "invalid JSON"
	}
	switch b := in[0]; {
	case b == '[':
		return "an array"
	case b == '"':
		return "a string"
	case b == 't' || b == 'f':
		return "a boolean"
	case b == '-' || (b >= '0' && b <= '9'):
		return "a number"
	}
	return "an object"
}
