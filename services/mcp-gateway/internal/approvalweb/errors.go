package approvalweb

import "errors"

// ErrInvalidConfig is a [Config] [New] cannot serve with; the error names
// what to fix.
var ErrInvalidConfig = errors.New("invalid approvals page config")
