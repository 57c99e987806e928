// Package approvalweb is the gateway's /approvals page: a person signs
// in, sees the gated commands of the fleet waiting for an operator (the
// exact command line, who asks, the arguments digest, the time left), and
// approves or denies them. It is a thin handler over [approval]: the page
// lists and follows requests with [approval.Watch], and answers with
// [approval.Find] and [approval.Answer] on the gateway's NATS connection,
// naming the signed-in person as the approver, so the broker of the
// instance that asked applies every rule (bound to id and digest, once,
// before expiry, four eyes) and the page only shows its reason when it
// refuses.
//
// # Who answers
//
// NATS cannot tell the people behind one gateway apart, so the page must
// know who each of them is for certain, in one of two ways:
//
//   - tokens (approvals.approvers, a gateway without OAuth): each approver
//     has a secret of their own; the page compares digests in constant
//     time, and the matching approver's name is who answers;
//   - OpenID Connect (approvals.web, a gateway with OAuth): the
//     authorization code flow with PKCE (S256), state and nonce at the
//     gateway's issuer; the ID token is verified (signature by the
//     issuer's keys, iss, aud = client id, exp, nonce), its subject is who
//     answers, and the policy's roles of its groups decide: only a role
//     with approve: true may act. Anyone else signed in sees that they are
//     not an approver, and their POSTs are refused.
//
// # Sessions
//
// A session is a random id in a cookie that is HttpOnly, SameSite=Strict,
// Path=/approvals and Secure over TLS, kept in a bounded server-side table.
// It ends after [Config.SessionIdle] without a request (30 minutes,
// sliding), after [Config.SessionMax] in any case, and on sign-out; then
// the page asks to sign in again.
//
// # Requests from elsewhere
//
// The gateway's Origin and Host checks run first (a foreign Origin is
// refused). Every POST must in addition name the page's own origin in
// Origin, or without Origin in Referer, and carry the session's CSRF token
// (the csrf field or the X-CSRF-Token header); otherwise it is refused
// with 403 and nothing is answered. Every response has a strict
// Content-Security-Policy (the page's one inline script and style run by
// nonce), refuses framing, sends Referer to its own origin only and is not
// cached.
//
// # Live
//
// One watch per [Page] keeps the pending list; the page's script follows
// /approvals/events (server-sent events: the whole list, again at every
// change) and, should the stream end for good, polls
// /approvals/pending.json every second, so requests appear and disappear
// without a reload. The page works without script too: answers are plain
// form POSTs followed by a redirect back to the list.
package approvalweb
