package mcpserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/toolslist"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/approval"
	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/knowledge"
	"github.com/fiskfleet/fiskfleet/shared/ops"
)

// Defaults for the zero values of [Config], and the fixed limits.
const (
	// DefaultApprovalTimeout bounds how long a gated call waits for the
	// human: long enough to read a command line and decide, short enough
	// that an abandoned prompt does not hold a request open for ever.
	DefaultApprovalTimeout = 2 * time.Minute
	// ShutdownTimeout is how long a stop waits for in-flight requests
	// ([httpedge.ShutdownTimeout]).
	ShutdownTimeout = httpedge.ShutdownTimeout
	// maxPendingApprovals bounds the approvals issued to clients of the
	// 2026-07-28 revision and not yet redeemed or expired, so a client that
	// never retries cannot grow the table without limit.
	maxPendingApprovals = 1024
)

// Config configures a [Server]. The zero value of every field but Identity
// means its default.
type Config struct {
	// Identity names the server to clients and appears in every log line.
	Identity string
	// Version is the server version clients see; empty means "0.0.0".
	Version string
	// Instructions are sent to clients when they connect: how to use the
	// tools, in the operator's words.
	Instructions string
	// ApprovalTimeout bounds the wait for a human's answer; 0 means
	// [DefaultApprovalTimeout]. Tests shorten it.
	ApprovalTimeout time.Duration
	// AuthToken, when set, is the bearer token every request must carry.
	// It is ignored when Authenticate is set.
	AuthToken string
	// Authenticate, when set, checks the caller of every request to /mcp
	// (the OAuth verifier's middleware: expose.agent.mcp.auth): a request
	// it refuses never reaches the MCP handler; one it accepts carries its
	// [auth.Caller], which authorize has seen. Nil means the static check
	// of AuthToken, whose one caller is [auth.StaticSubject].
	Authenticate func(next http.Handler, authorize func(*auth.Caller) error) http.Handler

	// These go to the call core as they are: [call.Config] says what each
	// means. An empty Instance means a fresh random one. The caller owns
	// Audit and Approvals, and closes them after the server.
	Instance        string
	MaxConcurrent   int
	Timeout         time.Duration
	Confirm         config.ConfirmPolicy
	Policy          *policy.Policy
	Audit           *audit.Publisher
	AuditDigestOnly bool
	Approvals       *approval.Broker
	RemoteVia       func(natsContext string) (any, error)
	Metrics         *ops.Metrics
	Tracer          trace.Tracer

	// SessionIdleTimeout ends a session that has seen no request for this
	// long, with none open; it then gets 404 and starts anew. Without it
	// every client that never says goodbye would be remembered until the
	// process ends. 0 means [config.DefaultSessionIdleTimeout].
	SessionIdleTimeout time.Duration
	// MaxSessions caps the live sessions; an initialize beyond it gets
	// 503. 0 means [config.DefaultMaxSessions].
	MaxSessions int
	// ToolsPageSize is how many tools one tools/list page holds
	// (expose.agent.mcp.tools_page_size); 0 means every tool in one page,
	// or [resourcePageSize] when Resources is set, as resources/list.
	ToolsPageSize int
	// ToolsListTTL is how long a 2026-07-28 client may reuse a tools/list
	// answer (its ttlMs): the gateway passes its remote refresh interval,
	// the longest it takes to notice a remote tool change. 0 means
	// [toolslist.DefaultToolsListTTL].
	ToolsListTTL time.Duration
	// TaskRetention is how long a finished task's result is kept for its
	// client (a client's ttl may shorten it, never lengthen it); 0 means
	// [config.DefaultTaskRetention].
	TaskRetention time.Duration
	// MaxTasks caps the tasks kept at once, running and finished, over all
	// sessions; 0 means [config.DefaultMaxTasks].
	MaxTasks int
	// TaskStore keeps the MCP tasks; nil means a store in memory of
	// MaxTasks tasks, as one gateway alone needs. A fleet passes the
	// JetStream store its gateways share (expose.agent.mcp.fleet). The
	// caller owns it.
	TaskStore tasks.Store
	// TaskCanceller reaches the gateway running a task's call when
	// another one is asked to cancel it; nil means every task's call runs
	// here.
	TaskCanceller tasks.Canceller
	// ApprovalBucket, when set, keeps the approvals asked of 2026-07-28
	// clients between a call and its retry (the fleet's bucket), so that
	// the retry may reach any gateway; nil keeps them in this process,
	// where only this gateway honours them. The caller owns it.
	ApprovalBucket jetstream.KeyValue
	// Logger receives one line per call, the selection and the lifecycle;
	// nil means slog.Default().
	Logger *slog.Logger
	// Resources, when set, serves the documents of this knowledge index
	// as MCP resources (expose.agent.mcp.resources: [knowledge]) and adds
	// resource_link items to its knowledge_search results. The caller
	// owns the index and keeps it open while serving.
	Resources *knowledge.Index
}

func (c Config) withDefaults() Config {
	if c.Version == "" {
		c.Version = "0.0.0"
	}
	// MaxConcurrent, Timeout and Confirm are the call core's, which
	// defaults them (call.New).
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = DefaultApprovalTimeout
	}
	if c.SessionIdleTimeout <= 0 {
		c.SessionIdleTimeout = config.DefaultSessionIdleTimeout
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = config.DefaultMaxSessions
	}
	if c.TaskRetention <= 0 {
		c.TaskRetention = config.DefaultTaskRetention
	}
	if c.MaxTasks <= 0 {
		c.MaxTasks = config.DefaultMaxTasks
	}
	if c.ToolsListTTL <= 0 {
		c.ToolsListTTL = toolslist.DefaultToolsListTTL * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Instance == "" {
		c.Instance = nuid.Next()
	}
	return c
}

// Validate reports a config that cannot be served, naming the key to fix.
func (c Config) Validate() error {
	if err := a2a.CheckIdentity(c.Identity); err != nil {
		return fmt.Errorf("%w: identity: %w", ErrInvalidConfig, err)
	}
	switch c.Confirm {
	case "", config.ConfirmAuto, config.ConfirmAlways, config.ConfirmNever:
	default:
		return fmt.Errorf("%w: expose.agent.mcp.confirm_over_mcp %q: want auto, always or never", ErrInvalidConfig, c.Confirm)
	}
	if c.MaxConcurrent < 0 {
		return fmt.Errorf("%w: expose.agent.mcp.max_concurrent_tools %d: want a positive number", ErrInvalidConfig, c.MaxConcurrent)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: expose.agent.mcp.tool_timeout %s: want a positive duration", ErrInvalidConfig, c.Timeout)
	}
	if c.TaskRetention < 0 {
		return fmt.Errorf("%w: expose.agent.mcp.task_retention %s: want a positive duration", ErrInvalidConfig, c.TaskRetention)
	}
	if c.MaxTasks < 0 {
		return fmt.Errorf("%w: expose.agent.mcp.max_tasks %d: want a positive number", ErrInvalidConfig, c.MaxTasks)
	}
	if c.ToolsPageSize < 0 {
		return fmt.Errorf("%w: expose.agent.mcp.tools_page_size %d: want 0 (every tool in one page) or more", ErrInvalidConfig, c.ToolsPageSize)
	}
	if c.ToolsListTTL < 0 {
		return fmt.Errorf("%w: remote_refresh_interval %s: want a positive duration (it bounds how long clients cache tools/list)", ErrInvalidConfig, c.ToolsListTTL)
	}
	return nil
}
