package fiskapp

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once the started process p has exited, leaving it
// unreaped for the Wait that follows, which then returns at once.
//
// Wait blocks a thread in waitid from the start; measured on a two-CPU
// machine, a Go command started that way reaches its first line about a
// millisecond later (some 10 %) than one whose parent waits in the poller
// for its pidfd to become readable, which is what this does. Where pidfds
// are unavailable (before Linux 5.3, or refused by a sandbox) it returns at
// once and Wait blocks as before.
//
// p is this process's unreaped child, so its PID cannot have been reused:
// the pidfd opened here refers to it.
func awaitExit(p *os.Process) {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return
	}
	// Non-blocking, the pidfd is registered with the runtime's poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd polls readable once its process has exited. Read calls the
	// check again each time the poller reports the pidfd ready, and an
	// error (a pidfd the poller does not take) ends the wait.
	_ = rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err != nil || n > 0
	})
}
