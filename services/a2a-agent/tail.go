package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
)

type auditCmd struct {
	Tail auditTailCmd `cmd:"" help:"Print the audit records of agents and gateways as they are published, until Ctrl-C."`
}

// tailBuffer is how many records tail holds while it prints: a burst of
// records waits here rather than making the NATS client drop them as a
// slow consumer.
const tailBuffer = 4096

type auditTailCmd struct {
	natsFlags
	Identity string `help:"Follow only this identity's trail (choria.fisk-ai.audit.IDENTITY); default: every identity's." xor:"subject"`
	Subject  string `help:"Follow this subject instead: an identity's audit.subject (wildcards allowed)." xor:"subject"`
	JSON     bool   `help:"Print each record as its JSON, one per line."`
}

func (c *auditTailCmd) subject() (string, error) {
	switch {
	case c.Subject != "":
		return c.Subject, nil
	case c.Identity != "":
		if err := a2a.CheckIdentity(c.Identity); err != nil {
			return "", fmt.Errorf("--identity: %w", err)
		}
		return audit.Subject(c.Identity), nil
	}
	return audit.SubjectAll(), nil
}

func (c *auditTailCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	subject, err := c.subject()
	if err != nil {
		return err
	}
	nc, err := natsconn.Connect(natsconn.Options{Context: c.Context, Name: "a2a-agent audit tail", Logger: log})
	if err != nil {
		return err
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, tailBuffer)
	sub, err := nc.ChanSubscribe(subject, msgs)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("subscribing to %s: %w", subject, err)
	}
	fmt.Fprintf(e.stderr, "following the audit trail on %s (Ctrl-C to stop)\n", subject)
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			r, err := audit.Decode(m.Data)
			if err != nil {
				fmt.Fprintf(e.stderr, "skipped a message on %s: %v\n", m.Subject, errors.Unwrap(err))
				continue
			}
			if c.JSON {
				fmt.Fprintf(e.stdout, "%s\n", m.Data)
				continue
			}
			fmt.Fprintln(e.stdout, recordLine(r))
		}
	}
}

// recordLine renders a record as one line: when, where, who, what, and how
// it ended.
func recordLine(r *audit.Record) string {
	var b strings.Builder
	b.WriteString(r.Time.UTC().Format("2006-01-02T15:04:05.000Z"))
	fmt.Fprintf(&b, "  %s/%s  %s  caller %s  tool %s  gate %s  %s", r.Identity, r.Instance, r.Surface, callerLabel(r.Caller), quoteIfNeeded(r.Tool), r.Gate.Decision, r.Outcome.Result)
	if r.Gate.Approver != "" {
		fmt.Fprintf(&b, " (approved by %s)", r.Gate.Approver)
	}
	if r.Outcome.ExitCode != nil {
		fmt.Fprintf(&b, "  exit %d", *r.Outcome.ExitCode)
	}
	if r.Outcome.ErrorClass != "" {
		fmt.Fprintf(&b, "  %s", r.Outcome.ErrorClass)
	}
	d := time.Duration(r.Outcome.DurationMS * float64(time.Millisecond)).Round(time.Microsecond)
	fmt.Fprintf(&b, "  %s", d)
	return b.String()
}

// callerLabel names the caller: the token's subject and roles, or the
// sender an A2A request claimed, marked as claimed.
func callerLabel(c audit.Caller) string {
	var s string
	switch {
	case c.Subject != "":
		s = quoteIfNeeded(c.Subject)
	case c.Name != "":
		s = c.Name
		if c.Instance != "" {
			s += "/" + c.Instance
		}
	default:
		s = "-"
	}
	if len(c.Roles) > 0 {
		s += " [" + quoteIfNeeded(strings.Join(c.Roles, ",")) + "]"
	}
	if c.Claimed {
		s += " (claimed)"
	}
	return s
}

// quoteIfNeeded quotes s when it is empty or holds a space or a control
// character, so a hostile name cannot forge the rest of the line.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '"' || r == 0x7f || r == '\u2028' || r == '\u2029' }) {
		return strconv.Quote(s)
	}
	return s
}
