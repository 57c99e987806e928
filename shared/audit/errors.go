package audit

import "errors"

// Errors returned by this package.
var (
	// ErrInvalidRecord is a record that does not match the audit record
	// schema, or data that is not a record at all.
	ErrInvalidRecord = errors.New("invalid audit record")
	// ErrUnpublished is a [Publisher.Close] that ran out of time with
	// records still buffered; each of them is logged at error level.
	ErrUnpublished = errors.New("audit records left unpublished")
)
