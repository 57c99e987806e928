// Package audit is the audit trail: one [Record] per tool call, on both
// services, published on NATS at choria.fisk-ai.audit.<identity> (or the
// operator's audit.subject) by a [Publisher].
//
// A record says who called (a verified MCP token's subject and roles, or an
// A2A sender's claimed name, marked claimed because NATS does not tell the
// agent who sent a request), which tool with which arguments (canonical
// JSON and its SHA-256 digest, or the digest only with audit.arguments:
// digest), what the approval gate decided and how the call ended. Records
// are validated against the embedded schema (schemas/audit/record.json)
// before they leave. How a call ended is an [Ending], which also spells it
// for the call's log line and the calls metric, so the three agree.
//
// Publishing never blocks a call: [Publisher.Publish] hands the record to a
// bounded buffer that one goroutine per publisher empties with core NATS
// publishes. Records land in a JetStream stream when the operator creates
// one on the subject; the services need no JetStream themselves.
//
// What can be lost, and how it shows: nothing is lost while NATS is
// reachable. While the connection is briefly down, nats.go holds the
// publishes in its reconnect buffer (8 MiB unless the connection was made
// with another nats.ReconnectBufSize) and sends them once it is back. A
// record that cannot be kept anywhere (the buffer of this package is full,
// the reconnect buffer is full, the connection is closed, the record is
// invalid) is written to the log at error level together with the whole
// record, so the trail can be completed from the logs.
package audit
