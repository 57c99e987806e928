// Package fiskapp turns a fisk application (any CLI built with
// github.com/choria-io/fisk, such as the nats CLI) into tools: it
// introspects the application with --fisk-introspect, selects the commands
// an operator allows, and runs a call as one guarded child process.
//
// [Load] runs the introspection once, bounded in time and output size, and
// decodes it into fisk's own [fisk.ApplicationModel]. Every leaf command
// becomes a [Command] (a [tool.Tool]) named by its command path joined with
// "_", unless a rule drops it; each drop is recorded in [App.Dropped] with a
// reason an operator can act on. ai:deny is applied first and cannot be
// undone by any filter. What a group command says applies below it: ai:deny
// and hidden carry down, and a command without tags of its own takes those
// of its nearest tagged parent, so a tag on "bench js" reaches the
// subcommands that publish.
//
// [Command.Call] builds the argv with fisk's own [fisk.CmdModel.ArgsFromJSON]
// and runs it in its own process group with an empty stdin, stdout and
// stderr interleaved into one capped buffer, and credential variables
// scrubbed from the environment. When the call's context ends, the whole
// group gets SIGTERM, then SIGKILL after a grace period, so a grandchild
// that ignores SIGTERM or holds the output pipe cannot outlive or stall the
// call. On Linux the call waits for the process in the runtime's poller,
// through a pidfd, rather than in a thread blocked in waitid from the
// start, which delays a Go command's first output by about a millisecond
// on a small machine.
package fiskapp
