package natsbus

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/natsconn"
)

// CallControlToken is the last token of an identity's shared control
// subject. It holds a character no instance name may ([a2a.IdentityPattern]
// admits none), so it can never be one instance's control subject, and it
// sits where an instance's token does, so NATS permissions written for
// choria.fisk-ai.control.<identity>.* (or control.*.*) cover it too.
const CallControlToken = "@all"

// CallControlSubject is the subject every process of an identity takes
// the cancels of unary tool calls on ([a2a.ProtocolCallCancel]). No queue
// group: a unary reply does not say which instance runs a call, so each
// process hears every cancel and acts on those of the calls it runs.
func CallControlSubject(identity string) string {
	return SubjectPrefix + ".control." + identity + "." + CallControlToken
}

// CancelCall sends data, an encoded cancel of a unary call, to every
// process of identity, and flushes it, so the agent hears of it at once.
// Nothing is sent until a call is canceled. A cancel the server refuses
// for the connection's permissions is [a2a.ErrPermission], known by the
// time the flush returns (the server's refusal comes before its answer to
// the flush), so a caller does not wait for a reply the cancel will never
// bring.
func (t *Transport) CancelCall(identity string, data []byte) error {
	if err := a2a.CheckIdentity(identity); err != nil {
		return err
	}
	if len(data) > a2a.MaxMessageSize {
		return fmt.Errorf("%w: cancel is %d bytes, the limit is %d", a2a.ErrTooLarge, len(data), a2a.MaxMessageSize)
	}
	subject := CallControlSubject(identity)
	// nats.go keeps a refusal as the connection's last error as soon as it
	// reads it (its error handler hears of it later): one that is new once
	// the flush returns is this cancel's.
	before := t.nc.LastError()
	if err := t.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("sending cancel to %s: %w", subject, err)
	}
	if err := t.nc.Flush(); err != nil {
		return fmt.Errorf("sending cancel to %s: %w", subject, err)
	}
	if after := t.nc.LastError(); after != before {
		if refused, ok := natsconn.PublishViolation(after); ok && refused == subject {
			return refusedError(subject)
		}
	}
	return nil
}

// CallControl subscribes handler to identity's shared control subject
// ([CallControlSubject]), without a queue group. The subscription is the
// caller's to unsubscribe; it runs on nc, which the caller owns.
func CallControl(nc *nats.Conn, identity string, handler func(data []byte)) (*nats.Subscription, error) {
	if err := a2a.CheckIdentity(identity); err != nil {
		return nil, err
	}
	sub, err := nc.Subscribe(CallControlSubject(identity), func(m *nats.Msg) { handler(m.Data) })
	if err != nil {
		return nil, fmt.Errorf("subscribing to the shared control subject: %w", err)
	}
	return sub, nil
}
