package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
)

// input is what the interactive commands read answers from, bound by main
// (os.Stdin) so tests of the binary type into it.
type input struct{ r io.Reader }

type approvalsCmd struct {
	Ls      approvalsLsCmd      `cmd:"" help:"List the pending approval requests of the fleet, gathered from every instance."`
	Approve approvalsApproveCmd `cmd:"" help:"Approve request ID: its command runs, once."`
	Deny    approvalsDenyCmd    `cmd:"" help:"Deny request ID, saying why."`
	Watch   approvalsWatchCmd   `cmd:"" help:"Show each new approval request as it arrives and answer it with y or n (with --json: print each, take no input)."`
}

// approvalsFlags are shared by the approvals commands.
type approvalsFlags struct {
	Context string `help:"nats context to connect with (default: the selected one)." env:"NATS_CONTEXT"`
}

// waitFlag bounds the gathering of list replies: instances reply within
// milliseconds on one network, and a second leaves room for a distant
// cluster.
type waitFlag struct {
	Wait time.Duration `help:"How long to gather the replies of the fleet's instances." default:"1s"`
}

func (f approvalsFlags) connect(log *slog.Logger) (*nats.Conn, error) {
	return natsconn.Connect(natsconn.Options{Context: f.Context, Name: "a2a-agent approvals", Logger: log})
}

// approverFlags name who answers.
type approverFlags struct {
	// As is a claim written into the answer and the audit trail. NATS
	// permissions, not this name, decide who may answer.
	As string `help:"Approver name for the answer and the audit trail (default: your user name@host). It is a claim: who may answer at all is decided by NATS publish permission on choria.fisk-ai.approval.*.answer.>." env:"A2A_AGENT_APPROVER"`
	// NKey signs the answer: proof of who answered, which an agent
	// listing its approvers' keys (approvals.approvers[].nkey) requires.
	NKey string `name:"nkey" help:"File of your nkey seed (SU...) to sign answers with; agents that list approvers' keys take only signed answers, and name you by your key (default: the nats context's nkey setting)." env:"A2A_AGENT_NKEY" type:"path"`
}

// approver is the name given with --as, or the OS user name at the host,
// with the NATS user nc connected as, if any, and the signer of --nkey
// or of the nats context's nkey setting.
func (f approverFlags) approver(nc *nats.Conn, natsContext string) (approval.Approver, error) {
	name := f.As
	if name == "" {
		name = "unknown"
		if u, err := user.Current(); err == nil && u.Username != "" {
			name = u.Username
		}
		if host, err := os.Hostname(); err == nil && host != "" {
			name += "@" + host
		}
	}
	a := approval.Approver{Name: name, NATSUser: approval.ConnUser(nc)}
	file := f.NKey
	if file == "" {
		// A context that cannot be read connected nc already; one
		// without an nkey leaves the answer unsigned.
		file, _ = natsconn.NKeyFile(natsContext)
	}
	if file == "" {
		return a, nil
	}
	seed, err := os.ReadFile(file)
	if err != nil {
		return a, fmt.Errorf("--nkey: %w", err)
	}
	if a.Signer, err = approval.ParseSigner(seed); err != nil {
		return a, fmt.Errorf("--nkey %s: %w", file, err)
	}
	return a, nil
}

type approvalsLsCmd struct {
	approvalsFlags
	waitFlag
	Identity string `help:"Only the requests of this identity (default: the whole fleet)."`
	JSON     bool   `help:"Print one JSON object per request, one per line."`
}

func (c *approvalsLsCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	nc, err := c.connect(log)
	if err != nil {
		return err
	}
	defer nc.Close()
	reqs, err := approval.List(ctx, nc, c.Identity, c.Wait)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		for _, r := range reqs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(reqs) == 0 {
		fmt.Fprintln(e.stdout, "no pending approval requests")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tIDENTITY\tINSTANCE\tTOOL\tCALLER\tEXPIRES IN\tCOMMAND")
	for _, r := range reqs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Identity, r.Instance, r.Tool, r.Caller, timeLeft(r), oneLine(r.Command))
	}
	return tw.Flush()
}

// answerFlags select the request an answer is for.
type answerFlags struct {
	approvalsFlags
	waitFlag
	approverFlags
	ID       string `arg:"" help:"Request id, as approvals ls lists it."`
	Identity string `help:"The identity the request is for (default: look through the whole fleet)."`
	Digest   string `help:"Answer only if the request's arguments digest is this one (as approvals ls --json shows it); otherwise the agent refuses the answer as for other arguments."`
}

// answer finds the request and sends the answer.
func (c *answerFlags) answer(ctx context.Context, log *slog.Logger, e env, approve bool, reason string) error {
	nc, err := c.connect(log)
	if err != nil {
		return err
	}
	defer nc.Close()
	req, err := approval.Find(ctx, nc, c.Identity, c.ID, c.Wait)
	if err != nil {
		return err
	}
	if c.Digest != "" {
		req.Digest = c.Digest
	}
	who, err := c.approver(nc, c.Context)
	if err != nil {
		return err
	}
	if _, err := approval.Answer(ctx, nc, req, approve, who, reason); err != nil {
		return err
	}
	verb := "denied"
	if approve {
		verb = "approved"
	}
	fmt.Fprintf(e.stdout, "%s %s: %s on %s (instance %s)\n", verb, req.ID, req.Tool, req.Identity, req.Instance)
	return nil
}

type approvalsApproveCmd struct {
	answerFlags
	Reason string `help:"Why, for the audit trail."`
}

func (c *approvalsApproveCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	return c.answer(ctx, log, e, true, c.Reason)
}

type approvalsDenyCmd struct {
	answerFlags
	Reason string `help:"Why: the caller and the audit trail get it." required:""`
}

func (c *approvalsDenyCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	return c.answer(ctx, log, e, false, c.Reason)
}

type approvalsWatchCmd struct {
	approvalsFlags
	approverFlags
	Identity string `help:"Only the requests of this identity (default: the whole fleet)."`
	JSON     bool   `help:"Print each new request as one JSON object per line and read no input."`
}

// watchDenyReason is the reason of a denial typed without one.
const watchDenyReason = "denied from approvals watch"

func (c *approvalsWatchCmd) Run(ctx context.Context, log *slog.Logger, e env, in input) error {
	nc, err := c.connect(log)
	if err != nil {
		return err
	}
	defer nc.Close()
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		return approval.Watch(ctx, nc, c.Identity, func(ev approval.Event) {
			if ev.Type == approval.EventRequested {
				_ = enc.Encode(ev.Request)
			}
		})
	}
	return c.prompt(ctx, nc, e, in)
}

// prompt shows one request at a time and answers it from the lines typed:
// y (or yes) approves, n (or no) denies, and text after the n is the
// reason. Requests that arrive meanwhile queue; one that ends elsewhere
// first is said to have ended and skipped. It returns when ctx ends or the
// input closes.
func (c *approvalsWatchCmd) prompt(ctx context.Context, nc *nats.Conn, e env, in input) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan approval.Event)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- approval.Watch(ctx, nc, c.Identity, func(ev approval.Event) {
			select {
			case events <- ev:
			case <-ctx.Done():
			}
		})
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in.r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	who, err := c.approver(nc, c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "watching approval requests as %s; answer each with y, or n and a reason\n", who.Name)

	var (
		queue   []approval.Request
		current *approval.Request
	)
	next := func() {
		for current == nil && len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			if time.Now().After(r.Expires) {
				continue
			}
			current = &r
			showRequest(e.stdout, r)
			fmt.Fprint(e.stdout, "approve? [y/n] ")
		}
	}
	for {
		next()
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			return err
		case ev := <-events:
			if ev.Type == approval.EventRequested {
				queue = append(queue, *ev.Request)
				continue
			}
			if current != nil && current.ID == ev.ID {
				fmt.Fprintf(e.stdout, "\nrequest %s %s meanwhile%s\n", ev.ID, ended(ev), by(ev))
				current = nil
				continue
			}
			for i, r := range queue {
				if r.ID == ev.ID {
					queue = append(queue[:i], queue[i+1:]...)
					break
				}
			}
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(e.stderr, "input closed; stopping")
				return nil
			}
			if current == nil {
				continue
			}
			word, reason, _ := strings.Cut(strings.TrimSpace(line), " ")
			var approve bool
			switch strings.ToLower(word) {
			case "y", "yes":
				approve, reason = true, strings.TrimSpace(reason)
			case "n", "no":
				if reason = strings.TrimSpace(reason); reason == "" {
					reason = watchDenyReason
				}
			default:
				fmt.Fprint(e.stdout, "answer y or n: ")
				continue
			}
			if _, err := approval.Answer(ctx, nc, *current, approve, who, reason); err != nil {
				fmt.Fprintf(e.stdout, "not answered: %v\n", err)
			} else if approve {
				fmt.Fprintf(e.stdout, "approved %s\n", current.ID)
			} else {
				fmt.Fprintf(e.stdout, "denied %s\n", current.ID)
			}
			current = nil
		}
	}
}

// showRequest prints a request for a person to decide on: the exact
// command line, on a line of its own.
func showRequest(w io.Writer, r approval.Request) {
	fmt.Fprintf(w, "\napproval request %s from %s (instance %s)\n", r.ID, r.Identity, r.Instance)
	fmt.Fprintf(w, "  tool:      %s\n", r.Tool)
	fmt.Fprintf(w, "  caller:    %s\n", r.Caller)
	fmt.Fprintf(w, "  digest:    %s\n", r.Digest)
	fmt.Fprintf(w, "  time left: %s (expires %s)\n", timeLeft(r), r.Expires.Local().Format(time.TimeOnly))
	fmt.Fprintf(w, "  command:\n    %s\n", r.Command)
}

func ended(ev approval.Event) string {
	switch ev.Type {
	case approval.EventDecided:
		if ev.Decision == approval.DecisionApprove {
			return "was approved"
		}
		return "was denied"
	case approval.EventExpired:
		return "expired"
	default:
		return "was withdrawn"
	}
}

func by(ev approval.Event) string {
	if ev.Approver == "" {
		return ""
	}
	return " by " + ev.Approver
}

// timeLeft is how long r has before it expires, to the second.
func timeLeft(r approval.Request) string {
	left := time.Until(r.Expires).Round(time.Second)
	if left <= 0 {
		return "expired"
	}
	return left.String()
}

// oneLine shows a command line in a table: line breaks as \n, so a row
// stays one line and nothing of the command is hidden.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}
