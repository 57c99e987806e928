package procs

// callStack is the stack a goroutine serving one call of an agent grows
// to. A goroutine starts with the runtime's smallest stack (2 KiB) and
// doubles it whenever a call needs more, copying the stack and adjusting
// every frame on it: a tool call's goroutine did so twice, the second time
// deep in decoding the call's arguments (counted with a uprobe on
// runtime.morestack, one call after another), at a few microseconds of
// CPU each on the call's own path.
const callStack = 8 << 10

// GrowStack grows the calling goroutine's stack to callStack at once, in
// one copy of the few frames below it: call it first thing in a goroutine
// that serves one call. A stack grown once serves the goroutine's life;
// the runtime frees it when the goroutine exits, and shrinks it at a
// garbage collection that finds it mostly unused.
//
//go:noinline
func GrowStack() {
	// A frame of half the size: the runtime doubles a stack until the
	// frame fits beside what is already in use, which makes it 8 KiB.
	var frame [callStack / 2]byte
	use(frame[:])
}

// use keeps frame on the stack, and the compiler from dropping it.
//
//go:noinline
func use(frame []byte) { frame[0] = 1 }
