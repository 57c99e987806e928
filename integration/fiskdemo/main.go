// Command fiskdemo is a small ops-style fisk application that tests,
// benchmarks and the dev fleet serve as tools.
//
// Each command exists to exercise one serving behaviour: echo covers every
// flag type ArgsFromJSON renders (and a hidden flag callers must not reach), fail a non-zero exit with stderr, flood the
// output cap, spawn a process-group kill of a grandchild that ignores
// SIGTERM, deploy and restart the approval gate (they write a marker file a
// test can check), destroy the ai:deny exclusion, getenv the credential
// scrub, cluster node status a nested command path, ticker output that
// arrives while a command runs (streamed calls), and noop a command with
// no help and no tags.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/choria-io/fisk"
)

// version is what --version prints.
const version = "0.1.0"

func main() {
	app := fisk.New("fiskdemo", "A demo operations CLI whose commands fiskfleet serves as tools")
	app.Version(version)

	echo := app.Command("echo", "Prints a message").Tag("impact:ro")
	echoMsg := echo.Arg("message", "The message to print").Required().String()
	echoPrefix := echo.Flag("prefix", "Text put before every line").String()
	echoCount := echo.Flag("count", "How many times to print the message").Default("1").Int()
	echoUpper := echo.Flag("upper", "Print the message in upper case").Bool()
	echoFormat := echo.Flag("format", "Output format").Default("text").Enum("text", "json")
	echoLabels := echo.Flag("label", "A label to print with the message; repeatable").Strings()
	// A hidden flag is left out of the input schema; callers must not be
	// able to pass it anyway.
	echoTrace := echo.Flag("trace", "Prints the parsed flags to stderr").Hidden().UnNegatableBool()
	echo.Action(func(*fisk.ParseContext) error {
		if *echoTrace {
			fmt.Fprintf(os.Stderr, "prefix=%q count=%d upper=%t format=%s labels=%q\n", *echoPrefix, *echoCount, *echoUpper, *echoFormat, *echoLabels)
		}
		return runEcho(*echoMsg, *echoPrefix, *echoCount, *echoUpper, *echoFormat, *echoLabels)
	})

	sleep := app.Command("sleep", "Sleeps, then reports which process ran it").Tag("impact:ro")
	sleepFor := sleep.Flag("duration", "How long to sleep").Default("100ms").Duration()
	sleep.Action(func(*fisk.ParseContext) error {
		time.Sleep(*sleepFor)
		// The timer slack it ran with, where Linux says: what the agent
		// that started it hands its commands (see shared/procs).
		slack := ""
		if b, err := os.ReadFile("/proc/self/timerslack_ns"); err == nil {
			slack = " slack=" + strings.TrimSpace(string(b))
		}
		fmt.Printf("slept %s pid=%d ppid=%d%s\n", *sleepFor, os.Getpid(), os.Getppid(), slack)
		return nil
	})

	ticker := app.Command("ticker", "Prints a numbered line at every interval, for watching a stream").Tag("impact:ro")
	tickEvery := ticker.Flag("every", "The interval between lines").Default("100ms").Duration()
	tickCount := ticker.Flag("count", "How many lines to print").Default("50").Int()
	ticker.Action(func(*fisk.ParseContext) error {
		for i := 1; i <= *tickCount; i++ {
			if i > 1 {
				time.Sleep(*tickEvery)
			}
			fmt.Printf("tick %d of %d\n", i, *tickCount)
		}
		return nil
	})

	fail := app.Command("fail", "Prints to stdout and stderr, then exits non-zero").Tag("impact:ro")
	failCode := fail.Flag("code", "The exit code").Default("3").Int()
	fail.Action(func(*fisk.ParseContext) error {
		fmt.Fprintln(os.Stdout, "about to fail")
		fmt.Fprintf(os.Stderr, "failing with exit code %d\n", *failCode)
		os.Exit(*failCode)
		return nil
	})

	flood := app.Command("flood", "Prints many bytes of text lines").Tag("impact:ro")
	floodBytes := flood.Flag("bytes", "How many bytes to print").Default(strconv.Itoa(1 << 20)).Int()
	flood.Action(func(*fisk.ParseContext) error { return runFlood(*floodBytes) })

	spawn := app.Command("spawn", "Starts a child that ignores SIGTERM, then sleeps").
		HelpLong("The child re-executes this program's hidden linger command and inherits its output, so it holds the output pipe open until it is killed.").
		Tag("impact:ro")
	spawnFor := spawn.Flag("duration", "How long this process sleeps after starting the child").Default("1m").Duration()
	spawnPidfile := spawn.Flag("pidfile", "A file to write the child's PID to").String()
	spawn.Action(func(*fisk.ParseContext) error { return runSpawn(*spawnFor, *spawnPidfile) })

	linger := app.Command("linger", "Ignores SIGTERM and sleeps (the child of spawn)").Hidden()
	lingerFor := linger.Flag("duration", "How long to sleep").Default("1h").Duration()
	linger.Action(func(*fisk.ParseContext) error {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(*lingerFor)
		return nil
	})

	deploy := app.Command("deploy", "Deploys a service").Tag("ai:confirm", "impact:rw")
	deployService := deploy.Arg("service", "The service to deploy").String()
	deployMarker := deploy.Flag("marker", "A file written to record the deployment").Required().String()
	deploy.Action(func(*fisk.ParseContext) error {
		if err := writeMarker(*deployMarker, "deployed "+*deployService); err != nil {
			return err
		}
		fmt.Println(strings.TrimSpace("deployed " + *deployService))
		return nil
	})

	restart := app.Command("restart", "Restarts the service").Tag("impact:rw")
	restartMarker := restart.Flag("marker", "A file written to record the restart").String()
	restart.Action(func(*fisk.ParseContext) error {
		if *restartMarker != "" {
			if err := writeMarker(*restartMarker, "restarted"); err != nil {
				return err
			}
		}
		fmt.Println("restarted")
		return nil
	})

	destroy := app.Command("destroy", "Destroys everything; never reachable as a tool").Tag("ai:deny", "impact:rw")
	destroy.Action(func(*fisk.ParseContext) error {
		fmt.Println("destroyed")
		return nil
	})

	nodeStatus := app.Command("cluster", "Cluster operations").
		Command("node", "Node operations").
		Command("status", "Shows a node's status").Tag("impact:ro")
	statusNode := nodeStatus.Flag("node", "The node to report on").Default("n1").String()
	nodeStatus.Action(func(*fisk.ParseContext) error {
		fmt.Printf("node %s: status ok\n", *statusNode)
		return nil
	})

	getenv := app.Command("getenv", "Prints an environment variable").Tag("impact:ro")
	getenvName := getenv.Flag("name", "The variable to print").Required().String()
	getenv.Action(func(*fisk.ParseContext) error {
		if v, ok := os.LookupEnv(*getenvName); ok {
			fmt.Printf("%s=%s\n", *getenvName, v)
		} else {
			fmt.Printf("%s unset\n", *getenvName)
		}
		return nil
	})

	app.Command("noop", "").Action(func(*fisk.ParseContext) error { return nil })

	app.MustParseWithUsage(os.Args[1:])
}

func runEcho(msg, prefix string, count int, upper bool, format string, labels []string) error {
	if upper {
		msg = strings.ToUpper(msg)
	}
	line := prefix + msg
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for range count {
		if format == "json" {
			err := enc.Encode(struct {
				Message string   `json:"message"`
				Labels  []string `json:"labels,omitempty"`
			}{line, labels})
			if err != nil {
				return fmt.Errorf("encoding message: %w", err)
			}
			continue
		}
		if len(labels) > 0 {
			fmt.Printf("%s [%s]\n", line, strings.Join(labels, ","))
			continue
		}
		fmt.Println(line)
	}
	return nil
}

// runFlood writes exactly n bytes as lines of 63 letters and a newline.
func runFlood(n int) error {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	line := []byte(strings.Repeat("abcdefghijklmnopqrstuvwxyz", 3)[:63] + "\n")
	for n > 0 {
		chunk := line[:min(n, len(line))]
		if _, err := w.Write(chunk); err != nil {
			return fmt.Errorf("writing output: %w", err)
		}
		n -= len(chunk)
	}
	return w.Flush()
}

// runSpawn starts the linger child sharing this process's stdout and stderr,
// so a supervisor that only kills its direct child is left waiting on a pipe
// the grandchild still holds.
func runSpawn(d time.Duration, pidfile string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	child := exec.Command(self, "linger")
	child.Stdout = os.Stdout
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return fmt.Errorf("starting child: %w", err)
	}
	pid := child.Process.Pid
	if pidfile != "" {
		// Write then rename, so a reader polling for the file never sees it
		// half written.
		tmp := pidfile + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)), 0o600); err != nil {
			return fmt.Errorf("writing pidfile: %w", err)
		}
		if err := os.Rename(tmp, pidfile); err != nil {
			return fmt.Errorf("writing pidfile: %w", err)
		}
	}
	fmt.Printf("child=%d\n", pid) // os.Stdout is unbuffered: the line is out now
	time.Sleep(d)
	return nil
}

func writeMarker(path, content string) error {
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing marker: %w", err)
	}
	return nil
}
