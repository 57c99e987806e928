package fiskapp

import "errors"

// Errors returned by [Load], [Command.Argv] and [Command.Call]. Callers test
// with errors.Is; each is wrapped with the detail (and cause) that names the
// application and what to fix.
var (
	// ErrNoApplication is an [Options] without an application path.
	ErrNoApplication = errors.New("no application path")
	// ErrIntrospect wraps every failure to obtain the application model:
	// the binary could not be run, exited non-zero, timed out, printed too
	// much or printed something that is not a fisk model.
	ErrIntrospect = errors.New("introspecting application")
	// ErrTooLarge is introspection output over [Options.MaxIntrospectBytes].
	// It is an error rather than a truncated parse: half a model would
	// silently lose commands.
	ErrTooLarge = errors.New("introspection output too large")
	// ErrNotFisk is introspection output that is not a fisk application
	// model (empty, not JSON, or without any command).
	ErrNotFisk = errors.New("not a fisk application")
	// ErrInvalidFilter is a malformed name glob in a filter.
	ErrInvalidFilter = errors.New("invalid tool filter")
	// ErrInvalidInput is call input that cannot become an argv: not a JSON
	// object, or a property the command does not accept. [Command.Call]
	// reports it in-band.
	ErrInvalidInput = errors.New("invalid tool input")
	// ErrStart is a command that could not be started.
	ErrStart = errors.New("starting command")
	// ErrInterrupted is a command stopped because the call's context ended
	// (timeout or cancellation); it also wraps the context's error.
	ErrInterrupted = errors.New("command interrupted")
)
