package agent2agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	callcore "github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/httpedge"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/tasks"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Paths the service serves.
const (
	// CardPath is the gateway's agent card, at the protocol's well-known
	// path.
	CardPath = "/.well-known/agent-card.json"
	// EndpointPath is the gateway's JSON-RPC endpoint; /a2a/IDENTITY is
	// one remote identity's, with its card below it at CardPath.
	EndpointPath = "/a2a"
)

// Config configures a [Service].
type Config struct {
	// Identity is the gateway's identity, its card's name.
	Identity string
	// Version is the gateway's version, on its cards.
	Version string
	// Description is the gateway card's description
	// (expose.agent.mcp.agent2agent.description); empty means one naming
	// the identity.
	Description string
	// BaseURL is the URL the cards name their endpoints under
	// (expose.agent.mcp.agent2agent.url); empty means the scheme and host
	// each request arrived with.
	BaseURL string
	// Auth is the OAuth issuer callers' tokens come from
	// (expose.agent.mcp.auth), named on the cards as an OpenID Connect
	// scheme; nil for none.
	Auth *config.Auth
	// BearerToken is set when every request must carry the gateway's one
	// shared token (expose.agent.mcp.auth_token_env): an HTTP bearer
	// scheme on the cards.
	BearerToken bool
	// TaskRetention is how long a finished task is kept; 0 means
	// [config.DefaultTaskRetention].
	TaskRetention time.Duration
	// Core is the gateway's call core: the tools a caller sees, and the
	// rate limit the surface checks before it starts a call.
	Core *callcore.Core
	// Tasks keeps the tasks, the same manager the MCP surface's tasks
	// live in (in a fleet, the shared bucket).
	Tasks *tasks.Manager
	// Invoke runs a call through Core and returns its verdict with the
	// result a task keeps (the MCP surface's: [tasks.Task.Result]).
	Invoke func(ctx context.Context, r *callcore.Request) (*mcp.CallToolResult, callcore.Verdict)
	// Logger receives the service's lifecycle and refusals; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Service serves the Agent2Agent protocol for one gateway. It is safe for
// concurrent use.
type Service struct {
	cfg    Config
	log    *slog.Logger
	origin atomic.Pointer[func(tool.Tool) string]

	mu sync.Mutex
	// runs are the calls this process runs, by task id; guarded by mu.
	runs map[string]*run
}

// New returns a service over cfg's call core and task manager.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TaskRetention <= 0 {
		cfg.TaskRetention = config.DefaultTaskRetention
	}
	return &Service{cfg: cfg, log: cfg.Logger, runs: map[string]*run{}}
}

// SetOrigin tells the service which remote identity each imported tool
// comes from (the importer's Origin), for the cards and endpoints of
// /a2a/IDENTITY. Until it is set, no identity has any tools.
func (s *Service) SetOrigin(origin func(tool.Tool) string) { s.origin.Store(&origin) }

// Mount serves the service's routes on edge: the cards open to anyone,
// the endpoints behind the gateway's authentication.
func (s *Service) Mount(edge *httpedge.Edge) {
	edge.Open("GET "+CardPath, http.HandlerFunc(s.serveCard))
	edge.Open("GET "+EndpointPath+"/{identity}"+CardPath, http.HandlerFunc(s.serveCard))
	edge.Authenticated("POST "+EndpointPath, http.HandlerFunc(s.serveRPC))
	edge.Authenticated("POST "+EndpointPath+"/{identity}", http.HandlerFunc(s.serveRPC))
}

// scope is what one endpoint serves: the gateway's every tool, or one
// remote identity's.
type scope struct {
	identity string
}

func scopeOf(r *http.Request) scope { return scope{identity: r.PathValue("identity")} }

// endpoint is the scope's JSON-RPC endpoint as r's client reaches it.
func (s *Service) endpoint(r *http.Request, sc scope) string {
	base := strings.TrimSuffix(s.cfg.BaseURL, "/")
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	if sc.identity != "" {
		return base + EndpointPath + "/" + sc.identity
	}
	return base + EndpointPath
}

// authenticated reports whether callers must prove who they are.
func (s *Service) authenticated() bool { return s.cfg.Auth != nil || s.cfg.BearerToken }

// tools returns the tools of sc the caller ctx carries may see.
func (s *Service) tools(ctx context.Context, sc scope) []callcore.ServedTool {
	all := s.cfg.Core.Visible(auth.CallerFrom(ctx))
	if sc.identity == "" {
		return all
	}
	out := all[:0]
	for _, t := range all {
		if s.inScope(t, sc) {
			out = append(out, t)
		}
	}
	return out
}

// inScope reports whether t is served at sc's endpoint.
func (s *Service) inScope(t callcore.ServedTool, sc scope) bool {
	if sc.identity == "" {
		return true
	}
	origin := s.origin.Load()
	return t.Remote && origin != nil && (*origin)(t.Tool) == sc.identity
}

// lookup returns the tool name at sc for the caller ctx carries; a tool
// unknown, hidden by the policy or of another identity is one answer.
func (s *Service) lookup(ctx context.Context, sc scope, name string) (callcore.ServedTool, bool) {
	t, ok := s.cfg.Core.Lookup(auth.CallerFrom(ctx), name)
	if !ok || !s.inScope(t, sc) {
		return callcore.ServedTool{}, false
	}
	return t, true
}

// owner is whose tasks a request may see: its authenticated caller's,
// apart from the same caller's MCP tasks.
func owner(ctx context.Context) string {
	subject := "anonymous"
	if c := auth.CallerFrom(ctx); c != nil {
		subject = c.Subject
	}
	return "agent2agent:" + tasks.CallerOwner(subject)
}

// card is the agent card of sc, listing tools, readable by clients of
// either protocol version the endpoint speaks.
func (s *Service) card(r *http.Request, sc scope, tools []callcore.ServedTool) unionCard {
	name, desc := s.cfg.Identity, cmp.Or(s.cfg.Description, fmt.Sprintf("fiskfleet gateway %s: the commands of its fisk applications as skills.", s.cfg.Identity))
	if sc.identity != "" {
		name = sc.identity
		desc = fmt.Sprintf("The agent %s of the fiskfleet bus, through gateway %s.", sc.identity, s.cfg.Identity)
	}
	desc += " Each skill is a tool: call it with a message holding one DataPart " + callShape + "."
	url := s.endpoint(r, sc)
	c := &a2a.AgentCard{
		Name:        name,
		Description: desc,
		Version:     cmp.Or(s.cfg.Version, "0.0.0"),
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC),
			{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: v03Interface},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, ExtendedAgentCard: s.authenticated()},
		DefaultInputModes:  []string{"application/json"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Provider:           &a2a.AgentProvider{Org: "fiskfleet", URL: "https://github.com/fiskfleet/fiskfleet"},
		Skills:             make([]a2a.AgentSkill, 0, len(tools)),
	}
	switch {
	case s.cfg.Auth != nil:
		c.SecuritySchemes = a2a.NamedSecuritySchemes{"oidc": a2a.OpenIDConnectSecurityScheme{
			Description:      "An access token of this issuer, for this gateway's audience, as MCP clients present",
			OpenIDConnectURL: strings.TrimSuffix(s.cfg.Auth.Issuer, "/") + "/.well-known/openid-configuration",
		}}
		c.SecurityRequirements = a2a.SecurityRequirementsOptions{{"oidc": s.cfg.Auth.Scopes}}
	case s.cfg.BearerToken:
		c.SecuritySchemes = a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "The gateway's shared token (expose.agent.mcp.auth_token_env)",
		}}
		c.SecurityRequirements = a2a.SecurityRequirementsOptions{{"bearer": {}}}
	}
	for _, t := range tools {
		c.Skills = append(c.Skills, skill(t))
	}
	return unionCard{card: c, url: url}
}

// callShape is how a message calls a tool.
const callShape = `{"tool": NAME, "arguments": {...}}`

// skill is t as a card's skill.
func skill(t callcore.ServedTool) a2a.AgentSkill {
	desc := t.Description
	tags := append([]string{}, t.Tags...)
	if t.Gated {
		desc += "\n\nGated: runs only once an operator approves the call (the task waits in input-required, naming the approval id)."
		tags = append(tags, "gated")
	}
	args := "{}"
	if len(t.InputSchema) > 0 {
		args = "arguments matching " + string(t.InputSchema)
	}
	desc += fmt.Sprintf("\n\nCall: a DataPart {\"tool\": %q, \"arguments\": {...}} with %s. Result: a task whose artifact holds the result envelope (command, exit_code, output, truncated) as a DataPart and the output as a TextPart.", t.Name, args)
	return a2a.AgentSkill{
		ID:          t.Name,
		Name:        cmp.Or(t.Title, t.Name),
		Description: desc,
		Tags:        tags,
		Examples:    []string{fmt.Sprintf(`{"tool": %q, "arguments": {}}`, t.Name)},
		InputModes:  []string{"application/json"},
		OutputModes: []string{"application/json", "text/plain"},
	}
}

// serveCard answers a card: the public one lists every tool only when
// callers need not authenticate; otherwise none, and the extended card
// (GetExtendedAgentCard) lists exactly the caller's.
func (s *Service) serveCard(w http.ResponseWriter, r *http.Request) {
	var tools []callcore.ServedTool
	if !s.authenticated() {
		tools = s.tools(r.Context(), scopeOf(r))
	}
	writeJSON(w, s.card(r, scopeOf(r), tools))
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}
