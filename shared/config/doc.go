// Package config reads agent.yaml, the one file that describes an agent
// identity for both services.
//
// [Load] and [Parse] decode strictly: an unknown key is an error naming the
// key path and the file, and so is a value of the wrong type or a duration
// that does not parse. They then fill in the defaults, so a caller reads
// max_concurrent_tools, tool_timeout, confirm_over_mcp and
// remote_refresh_interval without knowing them.
//
// [Config.Validate] checks what a [Mode] needs and names the exact key to
// add or fix in every refusal; what an operator may have meant but has no
// effect is returned as warnings, never printed here: the caller logs them.
//
// Every error wraps [ErrInvalidConfig]; the ones about one key are an
// [*Error] that carries the key path.
package config
