package config

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalidConfig is wrapped by every error of [Load], [Parse] and
// [Config.Validate].
var ErrInvalidConfig = errors.New("invalid config")

// Error is one refusal of a configuration file. Its text is the file, the
// line when the refusal comes from the file's text, and a message that names
// the key to add or fix:
//
//	agent.yaml: A2A serving is not enabled: add expose.agent.a2a.serve_tools: true
//	agent.yaml:7: unknown key expose.agent.mcp.adress (keys here: address, …)
//
// It wraps [ErrInvalidConfig] and its cause, if any.
type Error struct {
	// File is the configuration file, empty when it has no name.
	File string
	// Key is the YAML key path the refusal is about, such as
	// expose.agent.a2a.serve_tools or remote_tools[1].host; empty when it is
	// about no one key (a syntax error, an empty file).
	Key string
	// Line is the 1-based line in File, 0 when unknown.
	Line int
	// Msg says what is wrong and how to fix it.
	Msg string
	// Err is the cause, or nil.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if e.File == "" {
			b.WriteString("line ")
		} else {
			b.WriteString(":")
		}
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns [ErrInvalidConfig] and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}
