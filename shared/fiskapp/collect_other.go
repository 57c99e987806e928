//go:build !linux

package fiskapp

import (
	"os"
	"syscall"
)

// outputPipe returns a pipe for a command's output: the read end,
// non-blocking, for the collection, and the write end, blocking (a command
// may not expect EAGAIN on its stdout), for the child.
func outputPipe() (int, *os.File, error) {
	var p [2]int
	// Held so that no fork in between inherits the ends before they are
	// marked close-on-exec (see syscall.ForkLock).
	syscall.ForkLock.RLock()
	if err := syscall.Pipe(p[:]); err != nil {
		syscall.ForkLock.RUnlock()
		return -1, nil, os.NewSyscallError("pipe", err)
	}
	syscall.CloseOnExec(p[0])
	syscall.CloseOnExec(p[1])
	syscall.ForkLock.RUnlock()
	if err := syscall.SetNonblock(p[0], true); err != nil {
		_ = syscall.Close(p[0])
		_ = syscall.Close(p[1])
		return -1, nil, os.NewSyscallError("fcntl", err)
	}
	return p[0], os.NewFile(uintptr(p[1]), "output"), nil
}

// poll reports false: without pidfds, the portable collection waits for the
// exit in a goroutine of its own.
func (c *collection) poll() (bool, error) { return false, nil }
