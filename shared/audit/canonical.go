package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// emptyObject is the canonical JSON of no arguments.
var emptyObject = []byte("{}")

// Canonical returns the canonical JSON of a call's arguments: decoded with
// numbers kept as written, then re-encoded with object keys sorted, no
// insignificant space and no HTML escaping. Two inputs that differ only in
// key order or spacing have the same canonical JSON, and so the same
// [Digest]. Absent, empty or null input is {} (a call without arguments).
//
// Strings are re-encoded by encoding/json: invalid UTF-8 becomes U+FFFD
// and U+2028/U+2029 are escaped. Of a repeated key, the last value counts.
// Input that is not one JSON value (including one nested deeper than
// encoding/json's limit of 10000) canonicalises to a JSON string holding
// its bytes, so it is still recorded and digested deterministically; a
// record notes it with [NoteInvalidJSON]. Canonical never panics.
func Canonical(input json.RawMessage) []byte {
	c, _ := canonical(input)
	return c
}

// Digest returns "sha256:" and the lower-case hex SHA-256 of
// [Canonical](input): the digest an audit record carries, equal for equal
// arguments however they were written.
func Digest(input json.RawMessage) string { return digestOf(Canonical(input)) }

func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonical returns the canonical JSON of input and whether input was
// JSON.
func canonical(input json.RawMessage) ([]byte, bool) {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return emptyObject, true
	}
	v, err := decodeOne(trimmed)
	if err == nil {
		if c, err := marshal(v); err == nil {
			return c, true
		}
	}
	// Not JSON: its bytes, as a JSON string, invalid UTF-8 replaced first
	// (encoding/json would escape it as \ufffd, which reads back as a
	// different string). Marshalling a string cannot fail.
	c, _ := marshal(strings.ToValidUTF8(string(input), "\uFFFD"))
	return c, false
}

// errTrailing is input with more after its first JSON value.
var errTrailing = errors.New("data after the JSON value")

// decodeOne decodes exactly one JSON value, numbers as json.Number.
func decodeOne(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errTrailing
	}
	return v, nil
}
