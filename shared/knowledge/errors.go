package knowledge

import "errors"

// Errors returned by [Open] and the methods of [Index]. Every returned
// error wraps one of these with its cause.
var (
	// ErrNoDirectory is a knowledge directory that is unset, missing or not
	// a directory.
	ErrNoDirectory = errors.New("knowledge directory unavailable")
	// ErrUnknownTool is a tool name that is not one of [ToolNames].
	ErrUnknownTool = errors.New("unknown knowledge tool")
	// ErrStore is a store that cannot be used: not ours, corrupt, built by
	// another schema version, placed inside the directory, or not
	// writable. The message names knowledge.store and the rebuild command.
	ErrStore = errors.New("knowledge store unusable")
	// ErrUnavailable is a search (or listing, or read) that the store
	// cannot answer because it is damaged, being rebuilt from the
	// directory, or its rebuild failed. The message says which in plain
	// words, naming knowledge.store and knowledge.directory; SQLite's
	// own error is logged, never shown.
	ErrUnavailable = errors.New("knowledge index unavailable")
	// ErrNotFound is a citation or document path the index does not hold.
	ErrNotFound = errors.New("not in the knowledge index")
	// ErrBadCitation is a citation that is not relpath#ordinal.
	ErrBadCitation = errors.New("malformed citation")
	// ErrBadCursor is an enumerate cursor this index did not return.
	ErrBadCursor = errors.New("unknown cursor")
)
