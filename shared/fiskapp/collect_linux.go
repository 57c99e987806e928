package fiskapp

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// outputPipe returns a pipe for a command's output: the read end, non-blocking,
// for the collection, and the write end, blocking (a command may not expect
// EAGAIN on its stdout), for the child. Neither is registered with the
// runtime's poller: the collection watches the read end itself.
func outputPipe() (int, *os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, os.NewSyscallError("pipe2", err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		_ = unix.Close(p[0])
		_ = unix.Close(p[1])
		return -1, nil, os.NewSyscallError("fcntl", err)
	}
	return p[0], os.NewFile(uintptr(p[1]), "output"), nil
}

// maxReadsPerWake bounds the reads of the pipe between two checks of the
// bound, so a descendant writing without pause cannot hold the call past
// it.
const maxReadsPerWake = 16

// poll collects in the calling goroutine alone. The pipe's read end and a
// pidfd of the command, which polls readable once the command has exited,
// share an epoll instance of their own, and that instance, itself pollable,
// waits in the runtime's poller: the goroutine sleeps until output comes,
// the command exits or the bound passes, with no other goroutine to hand
// the output or the exit over.
//
// Measured on a two-CPU virtual machine (BenchmarkCallEcho, ctxsw/op), a
// short call costs this process about 12 voluntary context switches this
// way, against about 16 to 18 with os/exec's copy and context goroutines,
// and about 14 for a plain exec.Command(...).CombinedOutput().
//
// Seen through the pidfd, the exit leaves the command unreaped until its
// output is collected, so its process group id cannot be reused while a
// kill may still reach it.
//
// poll reports false, having done nothing, where pidfds or epoll are
// unavailable (before Linux 5.3, or refused by a sandbox).
func (c *collection) poll() (bool, error) {
	// The command is this process's unreaped child, so its PID cannot have
	// been reused: the pidfd refers to it.
	pidfd, err := unix.PidfdOpen(c.cmd.Process.Pid, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(pidfd)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return false, nil
	}
	// Non-blocking, the epoll instance is registered with the runtime's
	// poller, which reports it readable when one of its own fds is ready.
	if err := errors.Join(
		unix.SetNonblock(epfd, true),
		unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, c.rfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.rfd)}),
		unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, pidfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pidfd)}),
	); err != nil {
		_ = unix.Close(epfd)
		return false, nil
	}
	ep := os.NewFile(uintptr(epfd), "epoll")
	defer ep.Close()
	rc, err := ep.SyscallConn()
	if err != nil {
		return false, nil
	}
	defer func() {
		if c.rfd >= 0 {
			_ = unix.Close(c.rfd)
		}
	}()
	c.bound.attach(ep.SetReadDeadline)

	var (
		events [2]unix.EpollEvent
		n      int
		werr   error
	)
	ready := func(fd uintptr) bool {
		n, werr = epollWaitNow(int(fd), events[:])
		return n > 0 || (werr != nil && werr != unix.EINTR)
	}
	var rerr error
	open, exited, bounded, watchingExit := true, false, false, true
	for open || !exited {
		n, werr = 0, nil
		err := rc.Read(ready)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !exited {
				// Past the bound the command is still running: it
				// has left its group and outlived the kill.
				_ = c.cmd.Process.Kill()
			}
			break
		}
		if err == nil {
			err = werr
		}
		if err != nil {
			rerr = fmt.Errorf("waiting on epoll: %w", err)
			if !exited {
				_ = c.cmd.Process.Kill()
			}
			break
		}
		// The exit first, so its event comes before the output is
		// drained, as the stage events say.
		for _, ev := range events[:n] {
			if int(ev.Fd) == pidfd && !exited {
				exited = true
				c.exited()
			}
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) != c.rfd || !open {
				continue
			}
			eof, err := c.drain()
			if err != nil {
				rerr = err
			}
			open = !eof && err == nil
		}
		// What is done leaves the set only when polling goes on, so the
		// exit, which usually comes last, is followed by as few system
		// calls as can be before the result.
		if exited && open && watchingExit {
			watchingExit = false
			epollDelNow(epfd, pidfd)
		}
		if !open && !exited && c.rfd >= 0 {
			// Closed by hand, for the same reason the reads are raw.
			epollDelNow(epfd, c.rfd)
			_, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(c.rfd), 0, 0)
			c.rfd = -1
		}
		if exited && open && !bounded {
			// Only now, with the pipe drained and still open: a
			// timer set for every call could wake a thread.
			bounded = true
			c.bound.within(c.delay)
		}
	}
	return true, waitResult(c.cmd.Wait(), rerr)
}

// drain reads the pipe until it is empty, at end of file, or
// maxReadsPerWake reads have been made.
func (c *collection) drain() (eof bool, err error) {
	for range maxReadsPerWake {
		n, err := c.out.fill(func(p []byte) (int, error) {
			for {
				n, err := readNow(c.rfd, p)
				if err != unix.EINTR {
					return n, err
				}
			}
		})
		switch {
		case err == unix.EAGAIN:
			return false, nil
		case err != nil:
			return false, err
		case n == 0:
			return true, nil
		}
	}
	return false, nil
}

// epollWaitNow is epoll_wait that returns at once, epollDelNow removes fd
// from an epoll set, and readNow is read(2) of a non-blocking descriptor.
// None can block, so all are made as raw system calls, which the runtime's
// scheduler does not hear of. A plain system call made after the process
// was idle wakes the runtime's monitor thread (sysmon), which then polls
// every 20 µs until the process is idle again: measured with perf on a
// two-CPU virtual machine, that thread took most of the wake-ups of a
// short call, and output arriving while the command ran cost one more such
// round per call (1.7 rounds per echo call with plain calls, 1.0 raw).
func epollWaitNow(epfd int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

func epollDelNow(epfd, fd int) {
	_, _, _ = unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), unix.EPOLL_CTL_DEL, uintptr(fd), 0, 0, 0)
}

// readNow returns 0, nil at end of file only: p must not be empty, which
// capWriter.fill never makes it.
func readNow(fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, unix.EINVAL
	}
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
