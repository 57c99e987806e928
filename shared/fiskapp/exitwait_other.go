//go:build !linux

package fiskapp

import "os"

// awaitExit returns at once: without pidfds, the Wait that follows blocks
// until the process exits.
func awaitExit(*os.Process) {}
