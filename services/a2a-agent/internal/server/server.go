// Package server is the A2A serving engine: it selects which tools an agent
// may serve over NATS, computes the agent card once, and answers discovery
// and tool calls with back-pressure, per-call timeouts and exactly one reply
// per request.
//
// Streamed calls (stream.go) run the same tools under the same slots: an
// ack once the slot is taken, the output as coalesced text events, a status
// heartbeat when nothing else went out for an interval, and the final
// reply. A cancel on the instance's control subject, or a caller found gone
// by a liveness probe, kills the command's process group; the final reply
// then says it was canceled.
//
// A unary call can be canceled too ([a2a.ProtocolCallCancel], which the
// card lists): every instance takes cancels on the identity's shared
// control subject, and the one running the call the cancel names kills its
// process group (or withdraws its approval request) and answers the call
// with a reply that says it was canceled. Registering a call for that is a
// map entry; nothing is sent unless a cancel comes.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/ops"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Errors returned by [New] and [Server.Start].
var (
	// ErrNothingToServe is a tool set with nothing left after selection.
	ErrNothingToServe = errors.New("no tool left to serve over A2A")
	// ErrInvalidConfig is a Config that cannot be served.
	ErrInvalidConfig = errors.New("invalid A2A server config")
)

// Config configures a [Server]. Zero values mean the defaults.
type Config struct {
	// Identity names the agent: subjects, queue group, card name.
	Identity string
	// Instance labels this process in replies and logs; empty means a label
	// from the host name and process id.
	Instance string
	// Version is the card version; empty means "0.0.0".
	Version string
	// Description is the card description.
	Description string
	// MaxConcurrent bounds calls running at once (default
	// [tool.DefaultMaxConcurrent]).
	MaxConcurrent int
	// Timeout bounds one call (default [tool.DefaultTimeout]).
	Timeout time.Duration
	// Metadata is added to the micro service metadata.
	Metadata map[string]string
	// Logger receives one line per call and the selection; nil means
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts calls and rejected messages and reports
	// the slots; nil means no metrics, at the cost of a nil check.
	Metrics *ops.Metrics
	// Tracer, when set, gets a span per request (continuing the caller's
	// trace from the NATS headers) with children for the slot wait and the
	// command run; nil means no tracing, at the cost of a nil check.
	Tracer trace.Tracer
	// Audit, when set, receives one record per tool call on the tool and
	// stream endpoints: a call that ran is recorded after its reply went
	// out, a refusal (unknown tool, stopping) just before it; nil means no
	// records, at the cost of a nil check. The caller owns it and closes
	// it after Stop returns, so the records of the calls Stop let finish
	// are published too.
	Audit *audit.Publisher
	// AuditDigestOnly keeps only the digest of each call's arguments in
	// its record (audit.arguments: digest).
	AuditDigestOnly bool
	// Approvals, when set, serves gated tools: each call waits, holding no
	// slot, for an operator's answer through this broker
	// (approvals.operator). The caller owns it and closes it after Stop.
	// Nil drops gated tools, as nobody on the bus could approve them.
	Approvals *approval.Broker
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = tool.DefaultMaxConcurrent
	}
	if c.Timeout <= 0 {
		c.Timeout = tool.DefaultTimeout
	}
	if c.Version == "" {
		c.Version = natsbus.ServiceVersion
	}
	if c.Instance == "" {
		c.Instance = DefaultInstance()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports a config that cannot be served.
func (c Config) Validate() error {
	if err := a2a.CheckIdentity(c.Identity); err != nil {
		return fmt.Errorf("%w: identity: %w", ErrInvalidConfig, err)
	}
	if c.Instance != "" {
		if err := a2a.CheckIdentity(c.Instance); err != nil {
			return fmt.Errorf("%w: instance: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

var instanceUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// DefaultInstance labels this process: host name and pid, made safe for
// the identity pattern.
func DefaultInstance() string {
	host, _ := os.Hostname()
	host = instanceUnsafe.ReplaceAllString(host, "-")
	suffix := "-" + strconv.Itoa(os.Getpid())
	if len(host)+len(suffix) > 64 {
		host = host[:64-len(suffix)]
	}
	if host == "" {
		return "pid" + suffix
	}
	return host + suffix
}

// reasonUnapprovable is why the agent drops a gated tool when operator
// approvals are off: a caller on the bus cannot be asked, and nobody else
// could approve the call.
const reasonUnapprovable = "gated (ai:confirm or confirm_tags): nobody on the bus can approve it; set approvals.operator: true to have an operator approve it"

// Select splits tools into the served set and the dropped ones, each with
// its reason: the rules every server applies ([tool.DropReason] on
// [tool.ExposeA2A]); then, when operator is false, a gated tool (nobody on
// a bus can approve it; with operator approvals on, an operator does); then
// a second tool with a name already taken. It is the one selection New
// serves and `info` and `init` list.
func Select(tools []tool.Tool, operator bool) (served []tool.Tool, dropped []tool.Dropped) {
	return tool.Select(tools, tool.ExposeA2A, func(t tool.Tool) string {
		if t.Confirmation() == tool.ConfirmRequired && !operator {
			return reasonUnapprovable
		}
		return ""
	})
}

// Server answers discovery and tool calls for one identity. Its tool set
// and card are fixed at [New]: a dropped tool is neither advertised nor
// callable.
type Server struct {
	cfg     Config
	self    a2a.Participant
	served  []tool.Tool
	dropped []tool.Dropped
	byName  map[string]tool.Tool
	card    *a2a.CardReply
	sem     chan struct{}
	log     *slog.Logger

	// lifetime is the parent of every call's context; cancelled last on
	// Stop, after in-flight calls had their chance to finish.
	lifetime context.Context
	cancel   context.CancelFunc
	// stopping is closed when Stop begins, releasing handlers waiting for
	// a slot.
	stopping chan struct{}
	inflight sync.WaitGroup

	// calls are the calls in progress, streamed and unary, for cancels.
	calls calls
	// reach is what the agent has learned of the caller-probe subjects
	// it was given (see watchCaller).
	reach probeReach

	// mu guards svc, ctrl, callCtrl and stopped, and orders every
	// inflight.Add before Stop's inflight.Wait.
	mu  sync.Mutex
	svc *natsbus.Service
	// ctrl is this instance's control subscription (cancels of its
	// streams), callCtrl the identity's shared one (cancels of unary
	// calls).
	ctrl, callCtrl *nats.Subscription
	// stopped is set once Stop has begun; no call is admitted after it.
	stopped bool
}

// admit counts a call as in flight, unless Stop has begun.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.inflight.Add(1)
	return true
}

// New selects the served set from tools and computes the agent card.
func New(cfg Config, tools []tool.Tool) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	served, dropped := Select(tools, cfg.Approvals != nil)
	for _, d := range dropped {
		cfg.Logger.Info("tool not served over A2A", "agent", cfg.Identity, "tool", d.Name, "reason", d.Reason)
	}
	if len(served) == 0 {
		return nil, fmt.Errorf("%w for %s: %d tools offered, %d dropped (the reasons are logged; `a2a-agent info` lists them)", ErrNothingToServe, cfg.Identity, len(tools), len(dropped))
	}
	card := a2a.AgentCard{
		Name:        cfg.Identity,
		Version:     cfg.Version,
		Description: cfg.Description,
		// Streamed calls: a tool.request on the stream subject, answered
		// with ack, events and a tool.reply, stopped with a cancel. Unary
		// calls: stopped with a cancel on the shared control subject
		// (ProtocolCallCancel).
		Protocols: []string{a2a.ProtocolDiscoveryRequest, a2a.ProtocolToolRequest, a2a.ProtocolAck, a2a.ProtocolEvent, a2a.ProtocolCancel, a2a.ProtocolCallCancel},
		Tools:     make([]a2a.ToolDescriptor, 0, len(served)),
	}
	if !slices.ContainsFunc(served, func(t tool.Tool) bool { return !tool.ReturnsCommandResult(t) }) {
		// Every served tool answers a call that ran with the command
		// result, so a gateway can declare its schema up front.
		card.Protocols = append(card.Protocols, a2a.ProtocolCommandResult)
	}
	byName := make(map[string]tool.Tool, len(served))
	for _, t := range served {
		byName[t.Name()] = t
		desc := t.ModelDescription()
		if t.Confirmation() == tool.ConfirmRequired {
			desc = tool.ModelDescription(strings.TrimSpace(t.Description()+"\n\n"+approvalNote), t.Tags())
		}
		card.Tools = append(card.Tools, a2a.ToolDescriptor{
			Name:        t.Name(),
			Description: desc,
			InputSchema: t.InputSchema(),
		})
	}
	cr, err := a2a.NewCardReply(card)
	if err != nil {
		return nil, fmt.Errorf("building agent card: %w", err)
	}
	lifetime, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		self:     a2a.Participant{Name: cfg.Identity, Instance: cfg.Instance},
		served:   served,
		dropped:  dropped,
		byName:   byName,
		card:     cr,
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		log:      cfg.Logger,
		lifetime: lifetime,
		cancel:   cancel,
		stopping: make(chan struct{}),
	}
	s.registerMetrics()
	return s, nil
}

// Served returns the served tools in selection order.
func (s *Server) Served() []tool.Tool { return s.served }

// Dropped returns the tools left out and why.
func (s *Server) Dropped() []tool.Dropped { return s.dropped }

// Card returns the agent card.
func (s *Server) Card() a2a.AgentCard { return s.card.Card() }

// Self is the participant this server answers as.
func (s *Server) Self() a2a.Participant { return s.self }

// Start registers the micro service on nc, which the caller owns and must
// keep open until Stop returns. When Start returns nil the NATS server
// knows the service: requests sent from any connection reach it.
func (s *Server) Start(nc *nats.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("starting A2A server: already stopped")
	}
	if s.svc != nil {
		return errors.New("starting A2A server: already started")
	}
	md := map[string]string{
		"fiskfleet.protocol":       "io.choria.fisk-ai.v1",
		"fiskfleet.instance":       s.cfg.Instance,
		"fiskfleet.pid":            strconv.Itoa(os.Getpid()),
		"fiskfleet.tools":          strconv.Itoa(len(s.served)),
		"fiskfleet.max_concurrent": strconv.Itoa(s.cfg.MaxConcurrent),
		"fiskfleet.tool_timeout":   s.cfg.Timeout.String(),
		"fiskfleet.version":        s.cfg.Version,
	}
	for k, v := range s.cfg.Metadata {
		md[k] = v
	}
	desc := s.cfg.Description
	if desc == "" {
		desc = "fiskfleet agent " + s.cfg.Identity
	}
	svc, err := natsbus.Serve(nc, natsbus.ServiceConfig{
		Identity:    s.cfg.Identity,
		Description: desc,
		Metadata:    md,
		Discovery:   s.handleDiscovery,
		Tool:        s.handleTool,
		Stream:      s.handleStream,
		ErrorHandler: func(err error) {
			s.log.Error("nats service error", "agent", s.cfg.Identity, "error", err)
		},
	})
	if err != nil {
		return err
	}
	ctrl, err := natsbus.Control(nc, s.cfg.Identity, s.cfg.Instance, s.handleControl)
	if err != nil {
		_ = svc.Stop()
		return err
	}
	callCtrl, err := natsbus.CallControl(nc, s.cfg.Identity, s.handleCallControl)
	if err != nil {
		_ = ctrl.Unsubscribe()
		_ = svc.Stop()
		return err
	}
	// A round trip to the server, so the subscriptions are registered when
	// Start returns: a caller told "serving" must not get no responders.
	if err := nc.Flush(); err != nil {
		_ = callCtrl.Unsubscribe()
		_ = ctrl.Unsubscribe()
		_ = svc.Stop()
		return fmt.Errorf("registering %s with the NATS server: %w", s.cfg.Identity, err)
	}
	s.svc, s.ctrl, s.callCtrl = svc, ctrl, callCtrl
	return nil
}

// Stop stops intake, lets in-flight calls finish until ctx is done, then
// cancels the rest and waits for their workers. It is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	svc, ctrl, callCtrl := s.svc, s.ctrl, s.callCtrl
	s.mu.Unlock()

	close(s.stopping)
	var err error
	if svc != nil {
		err = svc.Stop()
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("stopping with calls in flight; cancelling them", "agent", s.cfg.Identity)
	}
	s.cancel()
	<-done
	// Kept until every call ended, so a cancel still reaches them while
	// they drain.
	if ctrl != nil {
		_ = ctrl.Unsubscribe()
	}
	if callCtrl != nil {
		_ = callCtrl.Unsubscribe()
	}
	return err
}
