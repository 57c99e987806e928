package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/mcphttp"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/mcpserver/toolslist"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Server serves tools to MCP clients over streamable HTTP. It is safe for
// concurrent use; [Server.SetTools] may replace a source while calls run.
type Server struct {
	cfg        Config
	log        *slog.Logger
	strict     bool
	mcp        *server.MCPServer
	streamable *server.StreamableHTTPServer
	// router is the MCP endpoint in front of streamable: the session
	// rules, tasks, and the answers given without mcp-go.
	router *mcphttp.Router
	// stopExpiry ends the idle-session expiry loop.
	stopExpiry chan struct{}
	// core is the call path every surface shares: the served tools,
	// policy, gate, slots and what a call leaves behind.
	core      *call.Core
	approvals approvalNonces
	// entries maps each served name to its MCP registration. It is
	// replaced whole, never modified, so a request reads it without a
	// lock.
	entries atomic.Pointer[map[string]*entry]

	mu sync.Mutex // serialises SetTools; guards defs
	// defs is the JSON of what tools/list shows, to tell whether a
	// replacement changed anything clients see.
	defs []byte

	closeOnce sync.Once

	// res is the knowledge resources listing (resources.go).
	res resourceState
}

// New builds the server that `serve` runs, with tools as the
// [SourceLocal] source (commands first, then built-ins). It is strict: two
// tools claiming one name is an error wrapping [ErrCollision] that names
// both claimants, here and in every later [Server.SetTools]. Other drops
// (see [Select]) are logged as warnings and listed by [Server.Dropped].
func New(cfg Config, tools []tool.Tool) (*Server, error) { return build(cfg, tools, true) }

// Build is the lenient form of [New]: a tool whose name is already claimed
// is skipped with a warning instead of failing, as a backstop for callers
// that did not go through [New]. The first claim still wins.
func Build(cfg Config, tools []tool.Tool) (*Server, error) { return build(cfg, tools, false) }

func build(cfg Config, tools []tool.Tool, strict bool) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger,
		strict:     strict,
		approvals:  newApprovals(cfg.ApprovalTimeout, maxPendingApprovals, time.Now),
		stopExpiry: make(chan struct{}),
		core: call.New(call.Config{
			Identity:        cfg.Identity,
			Instance:        cfg.Instance,
			MaxConcurrent:   cfg.MaxConcurrent,
			Timeout:         cfg.Timeout,
			Confirm:         cfg.Confirm,
			Policy:          cfg.Policy,
			Audit:           cfg.Audit,
			AuditDigestOnly: cfg.AuditDigestOnly,
			Approvals:       cfg.Approvals,
			RemoteVia:       cfg.RemoteVia,
			Refuse:          headerAnnotations,
			Strict:          strict,
			Logger:          cfg.Logger,
			Metrics:         cfg.Metrics,
			Tracer:          cfg.Tracer,
		}),
	}
	if cfg.ApprovalBucket != nil {
		s.approvals = &bucketApprovals{kv: cfg.ApprovalBucket, ttl: cfg.ApprovalTimeout, now: time.Now}
	}
	store := cfg.TaskStore
	if store == nil {
		store = tasks.NewMemory(cfg.MaxTasks, time.Now)
	}
	authenticated := cfg.AuthToken != "" || cfg.Authenticate != nil
	pageSize := cfg.ToolsPageSize
	if pageSize == 0 && cfg.Resources != nil {
		pageSize = resourcePageSize
	}
	scope := listCacheScope(cfg)
	ttlMs := cfg.ToolsListTTL.Milliseconds()
	rt := &mcphttp.Router{
		Identity:      cfg.Identity,
		Log:           cfg.Logger,
		Backend:       s,
		Core:          s.core,
		TaskRetention: cfg.TaskRetention,
		Authenticated: authenticated,
		Sessions:      mcphttp.NewSessions(cfg.SessionIdleTimeout, cfg.MaxSessions, time.Now),
		Cancels:       mcphttp.NewCancellations(),
		List:          toolslist.New(pageSize, ttlMs, scope, mcp.Implementation{Name: cfg.Identity, Version: cfg.Version}),
	}
	s.router = rt
	rt.Tasks = tasks.NewManager(store, tasks.ManagerConfig{
		Instance:  cfg.Instance,
		Canceller: cfg.TaskCanceller,
		Notify:    rt.NotifyTaskStatus,
		Logger:    cfg.Logger,
	})
	// A session's end takes its own tasks with it; a caller's outlive it.
	// With authentication no task is a session's, and there is nothing
	// to look up (in a fleet, a round trip to the bucket per session).
	rt.Sessions.OnEnd = func(id string) {
		if !authenticated {
			rt.Tasks.Drop(tasks.SessionOwner(id))
		}
	}
	empty := map[string]*entry{}
	s.entries.Store(&empty)
	opts := []server.ServerOption{
		// listChanged: remote tools come and go while serving, and
		// clients must hear about it.
		server.WithToolCapabilities(true),
		server.WithRecovery(),
		// Tasks are served by the router, not by mcp-go's task
		// machinery; its hooks only advertise them. They and the audit
		// of calls of hidden tools (access.go) are one set of hooks: a
		// second WithHooks would replace the first.
		server.WithHooks(s.hooks()),
		// Each caller sees and calls only what its policy grants; a
		// hidden tool is answered as an unknown one.
		server.WithToolFilter(s.visibleTools),
	}
	// The same hints on the answers mcp-go still builds itself (none
	// that list tools, see toolslist.Cache.Serve; kept so the two never differ).
	opts = append(opts, server.WithMethodCacheHints(mcp.MethodToolsList, ttlMs, scope))
	if cfg.Instructions != "" {
		opts = append(opts, server.WithInstructions(cfg.Instructions))
	}
	opts = append(opts, resourceOptions(cfg)...)
	s.mcp = server.NewMCPServer(cfg.Identity, cfg.Version, opts...)
	s.registerResources()
	s.streamable = server.NewStreamableHTTPServer(s.mcp,
		server.WithEndpointPath("/mcp"),
		// Stateful: a session-based client's capabilities live in its
		// session. An unknown session id (say, after a restart) must get a
		// 404 so the client starts over and declares elicitation again,
		// rather than a blank session that cannot be asked and, under
		// confirm_over_mcp auto, would run gated tools unasked.
		server.WithStateful(true),
		// The gateway issues, expires and caps sessions itself (see
		// route); mcp-go's own idle sweeper stays off, since it
		// would also end sessions whose event stream is open.
		server.WithSessionIdManager(rt.Sessions),
		server.WithStreamableHTTPLogger(cfg.Logger),
		// DNS-rebinding protection (a loopback connection must carry a
		// loopback Host header) stays on: WithDisableLocalhostProtection
		// is deliberately never passed.
	)
	rt.MCP, rt.Streamable = s.mcp, s.streamable
	go rt.ExpireIdle(max(cfg.SessionIdleTimeout/4, 10*time.Millisecond), s.stopExpiry)
	if err := s.SetTools(SourceLocal, tools); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.Confirm == config.ConfirmNever {
		s.log.Warn("gated tools run without asking anyone: expose.agent.mcp.confirm_over_mcp is never",
			"agent", cfg.Identity)
	}
	return s, nil
}

// SetTools replaces the tools of source (an empty list removes it) and
// re-registers everything: [SourceLocal] first, then the other sources by
// name, the first claim of a name winning, so the same inputs always give
// the same names ([call.Core.SetTools]). When what clients see changed,
// mcp-go sends notifications/tools/list_changed. On a strict server (see
// [New]) a collision is an error wrapping [ErrCollision] and leaves the
// served set as it was. Calls already running keep the tool they started
// with.
func (s *Server) SetTools(source string, tools []tool.Tool) error {
	if source == "" {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, call.ErrNoSource)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.SetTools(source, tools, func(served []*call.Entry) error {
		listed := make([]toolslist.Tool, len(served))
		byName := make(map[string]*entry, len(served))
		registrations := make([]server.ServerTool, len(served))
		defs := make([]mcp.Tool, len(served))
		for i, ce := range served {
			e := newEntry(ce)
			byName[e.def.Name] = e
			listed[i] = toolslist.Tool{Def: e.def, Tags: e.Tool.Tags(), Remote: e.Remote()}
			registrations[i] = s.serverTool(e.def)
			defs[i] = e.def
		}
		encoded, err := json.Marshal(defs)
		if err != nil {
			return fmt.Errorf("encoding tool definitions: %w", err)
		}
		if err := s.router.List.Set(listed, s.core.Unreachable()); err != nil {
			return err
		}
		s.entries.Store(&byName)
		if s.defs == nil || !bytes.Equal(encoded, s.defs) {
			// Replaces the whole registry and tells every connected
			// client; skipped when nothing a client sees changed, so a
			// periodic refresh that finds the same tools is silent.
			s.mcp.SetTools(registrations...)
		}
		s.defs = encoded
		return nil
	})
}

// listCacheScope is the cacheScope of a 2026-07-28 tools/list answer.
// With a policy, lists differ per caller: private. Without one every
// caller sees the same list, but a gateway that authenticates its callers
// still lists only for them, and a shared cache in front of it must not
// hand the list to anyone else: private too. Only an open gateway, whose
// list anyone reaching it gets, says public.
func listCacheScope(cfg Config) mcp.CacheScope {
	if cfg.Policy != nil || cfg.AuthToken != "" || cfg.Authenticate != nil {
		return mcp.CacheScopePrivate
	}
	return mcp.CacheScopePublic
}

// serverTool is the mcp-go registration of a definition: every tool kind
// shares one handler, which looks the entry up by name at call time.
func (s *Server) serverTool(def mcp.Tool) server.ServerTool {
	name := def.Name
	return server.ServerTool{Tool: def, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if res, ok := s.router.Task(ctx, name, req); ok {
			return res, nil
		}
		return s.CallTool(ctx, name, req, nil), nil
	}}
}

// Served returns the served tools in registration order.
func (s *Server) Served() []tool.Tool {
	served := s.core.Served()
	out := make([]tool.Tool, len(served))
	for i, e := range served {
		out[i] = e.Tool
	}
	return out
}

// Dropped returns the tools left out, with the reason for each.
func (s *Server) Dropped() []tool.Dropped { return s.core.Dropped() }

// Core returns the server's call core, which the gateway's other surfaces
// call through.
func (s *Server) Core() *call.Core { return s.core }

// MCPHandler is the MCP endpoint itself, mcp-go's streamable server behind
// the gateway's router ([mcphttp.Router]), without an edge: it expects the
// caller check of [httpedge.Edge.Authenticated] in front of it.
func (s *Server) MCPHandler() http.Handler { return s.router }

// Tasks returns the server's task manager, for a fleet's membership
// ([tasks.Fleet.Start]) to stop the calls other gateways cancel.
func (s *Server) Tasks() *tasks.Manager { return s.router.Tasks }

// Close stops the tasks (within [ShutdownTimeout]), ends every session
// and stops the idle-session expiry. It is idempotent; the owner calls
// it once the server's listener has stopped serving.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.stopExpiry)
		s.router.Tasks.Close(ShutdownTimeout)
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := s.streamable.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			s.log.Warn("closing MCP sessions", "agent", s.cfg.Identity, "error", err)
		}
		s.core.Close()
	})
}
