// Package schemas holds the JSON Schemas (draft 2020-12) of the fiskfleet
// v1 wire protocol: one file per protocol id plus v1/common.json, which
// defines the header, the identity pattern and every shared object.
//
// approval/ holds the schemas of operator approvals (see [ApprovalKinds]):
// the request a gated call waits on, an operator's answer and its reply, the
// list reply and the event. They are not protocol messages (no header, no
// protocol id) and are versioned apart from v1.
//
// audit/record.json is the schema of an audit record, the one record per
// tool call both services publish on NATS. Like approval/, it is not a
// protocol message and is versioned apart from v1.
//
// The files are embedded so every binary validates against exactly the
// schemas it was built with; FS exposes them for compilers and tools.
package schemas

import (
	"embed"
	"io/fs"
)

//go:embed v1/*.json approval/*.json audit/*.json
var files embed.FS

// BaseURL is the $id prefix of every v1 schema; a schema's $id is BaseURL
// followed by its file name.
const BaseURL = "https://fiskfleet.github.io/schemas/v1/"

// AuditRecordPath is the path in [FS] of the audit record schema, and
// AuditRecordURL its $id.
const (
	AuditRecordPath = "audit/record.json"
	AuditRecordURL  = "https://fiskfleet.github.io/schemas/" + AuditRecordPath
)

// FS returns the schema files, rooted so that "v1/common.json",
// "approval/common.json" and [AuditRecordPath] are paths.
func FS() fs.FS { return files }

// ProtocolPrefix is the prefix of every v1 protocol id; the kind follows.
const ProtocolPrefix = "io.choria.fisk-ai.v1."

// Kinds lists the message kinds with a schema, one file each
// (v1/<kind>.json) whose protocol id is ProtocolPrefix + kind.
var Kinds = []string{
	"discovery.request", "discovery.reply",
	"tool.request", "tool.reply",
	"request", "event", "result", "error", "cancel", "ack",
}

// ApprovalBaseURL is the $id prefix of every approval schema; a schema's $id
// is ApprovalBaseURL followed by its file name.
const ApprovalBaseURL = "https://fiskfleet.github.io/schemas/approval/"

// ApprovalKinds lists the approval messages with a schema, one file each
// (approval/<kind>.json) beside approval/common.json, which defines the
// request and caller objects they share.
var ApprovalKinds = []string{"request", "answer", "answer.reply", "list.reply", "event"}
