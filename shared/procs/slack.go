package procs

import (
	"errors"
	"fmt"
	"time"
)

// SlackEnv names the environment variable that sets a serving process's
// timer slack, as a Go duration ("1ms", "50us"); "0" leaves the process
// with the slack it was started with.
const SlackEnv = "FISKFLEET_TIMER_SLACK"

// DefaultSlack is a serving process's timer slack unless SlackEnv sets one.
//
// Timer slack is how late Linux may wake a thread from a timed sleep, so
// that wake-ups can be batched; the kernel's default is 50 µs. The
// runtime's monitor thread (sysmon) sleeps 20 µs at a time while any
// goroutine runs, and a call keeps the process running for a few hundred
// microseconds before its command starts and after it exits: at 50 µs of
// slack, sysmon woke about ten times per call and took most of a process's
// context switches. Every timer of a serving process is a timeout or an
// interval of a second or more, which a millisecond late does not change.
// What it does change: sysmon is also what hands the P of a goroutine
// blocked in a system call to another thread, and it now looks about once
// a millisecond, not every 20 to 70 µs. A call's path blocks in none (its
// reads and writes go through the poller), but a process on one P whose
// log writes block on a slow stderr reader holds its calls that much
// longer per write: FISKFLEET_TIMER_SLACK=0 is the way back.
//
// The commands a process runs get back the slack it was started with (see
// [StartChild]). Slack is a Linux feature; elsewhere it is left alone.
const DefaultSlack = time.Millisecond

// maxSlack bounds SlackEnv: more than this is a typo, not a choice.
const maxSlack = time.Second

// childSlack is the slack a process had before [ApplySlack] re-executed
// it with its own, restored for the commands it starts when
// restoreChildSlack is set; otherwise the commands inherit the process's
// slack.
var (
	childSlack        time.Duration
	restoreChildSlack bool
)

// inheritedEnv carries childSlack, in nanoseconds, across the
// re-execution; ApplySlack removes it from the environment again, so the
// commands never see it.
const inheritedEnv = "FISKFLEET_TIMER_SLACK_STARTED"

// errNoSlack is a system without per-thread timer slack.
var errNoSlack = errors.New("timer slack is not supported on this system")

// SlackSetting is the timer slack lookupEnv (os.LookupEnv in the
// binaries) asks for: SlackEnv's value, else DefaultSlack. A value that is
// not a duration from 0 to a second is an error naming SlackEnv.
func SlackSetting(lookupEnv func(string) (string, bool)) (time.Duration, error) {
	v, set := lookupEnv(SlackEnv)
	if !set {
		return DefaultSlack, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration (for example 1ms, 50us, or 0 to keep the slack the process is started with)", SlackEnv, v)
	}
	if d < 0 || d > maxSlack {
		return 0, fmt.Errorf("%s: %s is out of range: from 0 to %s", SlackEnv, d, maxSlack)
	}
	return d, nil
}
