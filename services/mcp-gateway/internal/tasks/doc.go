// Package tasks keeps the MCP tasks (protocol 2025-11-25) the gateway
// runs: what tasks/get, tasks/result, tasks/list and tasks/cancel read,
// and the calls still running behind them.
//
// Two halves, kept apart so that the call path never knows where tasks
// are kept:
//
//   - a [Store] holds each task's state, bound to its owner. [Memory]
//     keeps them in the process, as a single gateway always has; [KV]
//     keeps them in a JetStream key-value bucket shared by every gateway
//     of one identity, so that a task outlives the gateway that ran it
//     and its session, and any gateway answers for it;
//   - a [Manager] runs on top of one store: it creates tasks, remembers
//     the cancel function of each call this process runs, finishes them,
//     and cancels them, through another gateway when another runs the
//     call ([Canceller]).
//
// An owner is an opaque string the caller chooses ([CallerOwner],
// [SessionOwner]): a task is only ever found by its owner, and a task of
// another owner is "not found", exactly like one never created, so task
// ids leak nothing.
//
// [Fleet] adds what many gateways need besides the shared store: each
// gateway's heartbeat, the failing of tasks whose gateway stopped
// heartbeating, and the NATS subject on which a gateway takes cancels for
// the calls it runs.
package tasks
