// Package a2a is the fiskfleet v1 agent-to-agent protocol: the message
// model, stamping, blocks, the codec that size-caps and validates every
// message against its schema, the agent card, and the client that discovers
// agents and calls their tools.
//
// There is no envelope: every message is one flat JSON object whose header
// fields ([Header], embedded) sit at the top level beside its own, so a
// captured message describes itself outside any transport.
//
// Stamping is header population, not signing. Sender and recipient are
// unauthenticated labels for logs; authentication, authorization and
// confidentiality belong to NATS (the context's credentials, account
// permissions and TLS), and a reply only ever goes to the inbox the
// transport supplied, never to an address taken from a message body.
package a2a
