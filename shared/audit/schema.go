package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fiskfleet/fiskfleet/schemas"
)

// recordSchema compiles the embedded record schema once per process.
var recordSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	b, err := fs.ReadFile(schemas.FS(), schemas.AuditRecordPath)
	if err != nil {
		return nil, fmt.Errorf("reading the audit record schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parsing the audit record schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemas.AuditRecordURL, doc); err != nil {
		return nil, fmt.Errorf("adding the audit record schema: %w", err)
	}
	return c.Compile(schemas.AuditRecordURL)
})

// Validate checks that data is one audit record as the embedded schema
// (schemas/audit/record.json) describes it. Errors wrap [ErrInvalidRecord].
func Validate(data []byte) error {
	s, err := recordSchema()
	if err != nil {
		// Embedded and tested: failing to compile it is a build defect.
		panic(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return nil
}

// Decode validates data as an audit record and decodes it: what a
// consumer of the trail (a2a-agent audit tail) reads. Errors wrap
// [ErrInvalidRecord].
func Decode(data []byte) (*Record, error) {
	if err := Validate(data); err != nil {
		return nil, err
	}
	r := &Record{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return r, nil
}
