package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// Config is one agent identity's configuration, as [Load] and [Parse] decode
// it from agent.yaml; each field's key is in its yaml tag. A Config from
// [Load] or [Parse] has its defaults filled in; in one built by hand, zero
// means the default.
type Config struct {
	// Identity names the agent: it keys the NATS subjects and the queue
	// group, and names the MCP server.
	Identity string `yaml:"identity"`
	// ApplicationPath is the fisk application binary whose commands are
	// served.
	ApplicationPath string `yaml:"application_path"`
	// NATSContext names a nats context as `nats context add` writes it.
	NATSContext string `yaml:"nats_context"`
	// Include and Exclude filter the loaded commands by name glob and tag.
	Include Filter `yaml:"include"`
	Exclude Filter `yaml:"exclude"`
	// ConfirmTags gate commands carrying them, as ai:confirm does.
	ConfirmTags []string `yaml:"confirm_tags"`
	// CredentialEnv names extra environment variables scrubbed from every
	// command's environment.
	CredentialEnv []string `yaml:"credential_env"`
	// Expose selects the serving surfaces.
	Expose Expose `yaml:"expose"`
	// RemoteTools lists agents whose tools the gateway imports.
	RemoteTools []RemoteHost `yaml:"remote_tools"`
	// RemoteRefreshInterval is how often the gateway re-discovers its
	// remote hosts; nil means [DefaultRemoteRefresh], 0 turns it off.
	RemoteRefreshInterval *Duration `yaml:"remote_refresh_interval"`
	// Knowledge locates the documents behind the knowledge built-ins.
	Knowledge *Knowledge `yaml:"knowledge"`
	// Audit configures the audit trail both services publish on NATS.
	Audit *Audit `yaml:"audit"`
	// Approvals configures operator approvals of gated commands.
	Approvals *Approvals `yaml:"approvals"`
	// HumanInTheLoop and Memory are accepted for compatibility with agent
	// files written for an agent loop; they have no effect when serving and
	// are warned about.
	HumanInTheLoop any `yaml:"human_in_the_loop"`
	Memory         any `yaml:"memory"`

	// File is the path the configuration was read from, for messages.
	File string `yaml:"-"`
}

// Filter selects tools by name glob (path.Match syntax) and by tag.
type Filter struct {
	Tools []string `yaml:"tools"`
	Tags  []string `yaml:"tags"`
}

// Empty reports whether the filter names nothing.
func (f Filter) Empty() bool { return len(f.Tools) == 0 && len(f.Tags) == 0 }

// ToolsFilter is expose.agent.tools: a narrowing applied after the top-level
// include and exclude, for both servers.
type ToolsFilter struct {
	Include Filter `yaml:"include"`
	Exclude Filter `yaml:"exclude"`
}

// Expose is the expose key.
type Expose struct {
	Agent Agent `yaml:"agent"`
}

// Agent is expose.agent.
type Agent struct {
	Tools ToolsFilter `yaml:"tools"`
	// MCP enables the MCP gateway by its presence.
	MCP *MCP `yaml:"mcp"`
	// A2A configures A2A serving; serve_tools must be true to serve.
	A2A *A2A `yaml:"a2a"`
	// Metrics enables a Prometheus metrics listener by its presence.
	Metrics *Metrics `yaml:"metrics"`
}

// DefaultMetricsAddress is where the metrics listener binds when
// expose.agent.metrics.address is not set: loopback, so exposing the
// figures beyond this host is an explicit choice.
const DefaultMetricsAddress = "127.0.0.1"

// Metrics is expose.agent.metrics: where /metrics is served, on a listener
// of its own, by the gateway or the agent that reads the file. Off when
// absent.
type Metrics struct {
	// Address is the host to bind; empty means [DefaultMetricsAddress].
	Address string `yaml:"address"`
	// Port is required: a scrape config names it, so it must not move
	// between restarts. 0 picks a free port (tests), which is logged.
	Port *int `yaml:"port"`
}

// HostPort is the address the metrics listener binds.
func (m *Metrics) HostPort() string {
	host := m.Address
	if host == "" {
		host = DefaultMetricsAddress
	}
	port := 0
	if m.Port != nil {
		port = *m.Port
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
}

// ConfirmPolicy is expose.agent.mcp.confirm_over_mcp.
type ConfirmPolicy string

// Confirm policies.
const (
	// ConfirmAuto elicits approval; a client that cannot elicit runs gated
	// tools ungated, and that is logged.
	ConfirmAuto ConfirmPolicy = "auto"
	// ConfirmAlways elicits approval and refuses clients that cannot elicit.
	ConfirmAlways ConfirmPolicy = "always"
	// ConfirmNever never asks: the operator's explicit choice to run gated
	// tools ungated.
	ConfirmNever ConfirmPolicy = "never"
)

// MCP is expose.agent.mcp; its presence enables the MCP gateway.
type MCP struct {
	// Address and Port are where the gateway listens when no flag or
	// environment variable says otherwise; unset, the gateway uses its own
	// loopback default. Port 0 means unset.
	Address string `yaml:"address"`
	Port    int    `yaml:"port"`
	// Instructions are sent to clients at initialisation.
	Instructions string `yaml:"instructions"`
	// MaxConcurrentTools bounds calls running at once: anything that reaches
	// the port can call, and an external caller has no iteration budget.
	// Zero means [tool.DefaultMaxConcurrent].
	MaxConcurrentTools int `yaml:"max_concurrent_tools"`
	// ToolTimeout bounds one call's run time, not counting the wait for
	// approval. Zero means [tool.DefaultTimeout].
	ToolTimeout Duration `yaml:"tool_timeout"`
	// ConfirmOverMCP decides how gated tools are approved; empty means
	// [ConfirmAuto].
	ConfirmOverMCP ConfirmPolicy `yaml:"confirm_over_mcp"`
	// Builtins is the allowlist of built-in tools to serve, by name (see
	// [Builtins]). Empty serves none: built-ins are default-deny.
	Builtins []string `yaml:"builtins"`
	// AuthTokenEnv names an environment variable holding a bearer token
	// every request must carry. Empty means no token is required.
	AuthTokenEnv string `yaml:"auth_token_env"`
	// AllowedOrigins are the browser origins (exact scheme://host[:port])
	// allowed besides the gateway's own loopback address. A request with
	// any other Origin header is refused with 403, a token or not: the
	// check is what stops a web page the user visits from driving the
	// gateway.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// SessionIdleTimeout is how long a session may see no request before
	// the gateway forgets it; clients that crash or restart never say
	// goodbye. Zero means [DefaultSessionIdleTimeout].
	SessionIdleTimeout Duration `yaml:"session_idle_timeout"`
	// MaxSessions caps the live sessions; an initialize beyond it is
	// refused with 503 rather than evicting a session in use. Zero means
	// [DefaultMaxSessions].
	MaxSessions int `yaml:"max_sessions"`
	// TaskRetention is how long the result of a finished MCP task is kept
	// for its client to fetch; a client may ask for less (the task's ttl),
	// never more. Zero means [DefaultTaskRetention].
	TaskRetention Duration `yaml:"task_retention"`
	// MaxTasks caps the MCP tasks kept at once, running and finished, over
	// all sessions: a new task beyond it drops the oldest finished one, and
	// is refused when every one kept is still running. Zero means
	// [DefaultMaxTasks].
	MaxTasks int `yaml:"max_tasks"`
	// ToolsPageSize is how many tools one tools/list page holds; the
	// answer carries a nextCursor while more follow. Zero, the default,
	// lists every tool in one page, as clients expect: set it when
	// clients cannot take a fleet's whole list in one message.
	ToolsPageSize int `yaml:"tools_page_size"`
	// Resources lists what is served as MCP resources; the one kind is
	// [ResourceKnowledge]. Empty serves none: resources are off by default.
	Resources []string `yaml:"resources"`
	// Auth makes the gateway an OAuth 2.1 protected resource: every
	// request to /mcp carries an access token of Auth.Issuer. It and
	// AuthTokenEnv exclude each other.
	Auth *Auth `yaml:"auth"`
	// Policy decides per caller which tools it sees and runs.
	Policy *Policy `yaml:"policy"`
	// Fleet, when set, lets many gateways of this identity run behind one
	// HTTP load balancer, sharing tasks and approvals through a JetStream
	// key-value bucket. Unset (the default), a gateway keeps them in
	// memory and needs no JetStream.
	Fleet *Fleet `yaml:"fleet"`
	// Agent2Agent, when present ({} is enough), serves the gateway's
	// tools to clients of the Agent2Agent protocol (HTTP, JSON-RPC) on
	// the same listener: agent cards at /.well-known/agent-card.json and
	// /a2a/IDENTITY/.well-known/agent-card.json, calls at /a2a and
	// /a2a/IDENTITY. Absent (the default), those routes answer 404.
	Agent2Agent *Agent2Agent `yaml:"agent2agent"`
}

// Agent2Agent is expose.agent.mcp.agent2agent.
type Agent2Agent struct {
	// URL is the base URL clients reach the gateway at, which the agent
	// cards name as their endpoints (https://gateway.example.com). Empty
	// means expose.agent.mcp.auth.resource without its /mcp when set,
	// else the scheme and host each request arrived with: right on
	// loopback, wrong behind a proxy that rewrites Host, where it must
	// be set.
	URL string `yaml:"url"`
	// Description is the gateway card's description; empty means one
	// naming the identity and how to call it.
	Description string `yaml:"description"`
}

// Fleet is expose.agent.mcp.fleet: what the gateways of one identity
// share, and how they tell that one of them died.
type Fleet struct {
	// Bucket is the JetStream key-value bucket holding tasks, heartbeats
	// and approvals, created if missing; empty means [DefaultFleetBucket].
	// Give each identity its own when several share an account.
	Bucket string `yaml:"bucket"`
	// InstanceTTL is how long a gateway may go without a heartbeat before
	// the others fail its running tasks; zero means
	// [DefaultFleetInstanceTTL].
	InstanceTTL Duration `yaml:"instance_ttl"`
	// Replicas is the bucket's replica count when it is created (1-5):
	// 3 on a JetStream cluster keeps tasks through a server's loss. Zero
	// means 1.
	Replicas int `yaml:"replicas"`
}

// Defaults and limits of expose.agent.mcp.fleet.
const (
	// DefaultFleetBucket is the bucket a fleet uses unless told.
	DefaultFleetBucket = "FISK_GATEWAY"
	// DefaultFleetInstanceTTL rides out a long garbage collection or a
	// JetStream leader election, and still fails a dead gateway's tasks
	// within seconds.
	DefaultFleetInstanceTTL = 15 * time.Second
	// MinFleetInstanceTTL: heartbeats go out every third of the ttl, and
	// more than a few a second per gateway only loads the bucket.
	MinFleetInstanceTTL = time.Second
	// MaxFleetReplicas is JetStream's own limit.
	MaxFleetReplicas = 5
)

// Auth is expose.agent.mcp.auth: the authorization server whose access
// tokens the gateway accepts, and what a token must say.
type Auth struct {
	// Issuer is the authorization server's issuer URL, exactly as its
	// tokens' iss claim and its metadata spell it. Its metadata (OpenID
	// discovery or RFC 8414) names the keys.
	Issuer string `yaml:"issuer"`
	// Audience is what a token's aud must contain; empty means Resource.
	Audience string `yaml:"audience"`
	// Resource is the gateway's canonical public URL of /mcp, as clients
	// reach it (through a load balancer, say); empty means the listen
	// URL.
	Resource string `yaml:"resource"`
	// Scopes are required of every token and advertised to clients.
	Scopes []string `yaml:"scopes"`
	// JWKSURL overrides the key set URL the issuer's metadata names.
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms are the signature algorithms accepted; empty means
	// [DefaultAuthAlgorithms]. Only asymmetric ones are allowed: never
	// none, never HMAC, whose key the gateway would have to share.
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp, nbf and iat; zero means
	// [DefaultAuthLeeway].
	Leeway Duration `yaml:"leeway"`
}

// AuthAlgorithms are the JWS algorithms expose.agent.mcp.auth.algorithms
// may name: the asymmetric ones.
var AuthAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// DefaultAuthAlgorithms are accepted when expose.agent.mcp.auth.algorithms
// is not set: what identity providers sign access tokens with.
var DefaultAuthAlgorithms = []string{"RS256", "PS256", "ES256", "EdDSA"}

// Limits of expose.agent.mcp.auth.leeway: a minute covers clocks kept by
// NTP; more than five would keep an expired token alive noticeably.
const (
	DefaultAuthLeeway = time.Minute
	MaxAuthLeeway     = 5 * time.Minute
)

// DefaultPolicyClaim is the token claim holding a caller's groups when
// expose.agent.mcp.policy.claim is not set.
const DefaultPolicyClaim = "groups"

// DefaultRole is the role the one caller of a gateway without OAuth (a
// static token, or none) has, when the policy defines it.
const DefaultRole = "default"

// Policy is expose.agent.mcp.policy: roles matched against a claim of the
// caller's token, each granting a set of tools.
type Policy struct {
	// Claim names the token claim holding the caller's groups or roles,
	// a string or a list of strings; empty means [DefaultPolicyClaim].
	Claim string `yaml:"claim"`
	// Roles are keyed by name; a caller has every role one of whose
	// match values its claim holds.
	Roles map[string]*Role `yaml:"roles"`
}

// Role is one entry of expose.agent.mcp.policy.roles.
type Role struct {
	// Match lists claim values; a caller whose claim holds any of them
	// has the role.
	Match []string `yaml:"match"`
	// Include and Exclude narrow the served tools for this role, as the
	// filters everywhere else do. Remote tools carry no tags, so only
	// name globs select them.
	Include Filter `yaml:"include"`
	Exclude Filter `yaml:"exclude"`
	// Approve marks the role's members as approvers of others' gated
	// calls.
	Approve bool `yaml:"approve"`
	// NATSContext is the nats context remote tools are discovered and
	// called through for this role, so NATS permissions decide which
	// agents it reaches; empty means the gateway's nats_context.
	NATSContext string `yaml:"nats_context"`
	// MaxConcurrentTools is the role's share of the gateway's slots;
	// zero means all of them.
	MaxConcurrentTools int `yaml:"max_concurrent_tools"`
	// Rate bounds how often each caller of the role calls tools, all
	// tools together ([ParseRate]: "60/m"); empty means no bound.
	Rate string `yaml:"rate"`
	// ToolRates bound how often each caller of the role calls the tools
	// a name glob matches, each tool on its own and besides Rate.
	ToolRates map[string]string `yaml:"tool_rates"`
}

// Audit is the audit key: where the audit trail is published and how much
// of a call's arguments it carries.
type Audit struct {
	// Subject is the NATS subject records are published on; empty means
	// choria.fisk-ai.audit.<identity>.
	Subject string `yaml:"subject"`
	// Arguments is AuditArgumentsFull (the default) or
	// AuditArgumentsDigest (only the SHA-256 digest of the canonical
	// arguments, for arguments that may hold secrets).
	Arguments string `yaml:"arguments"`
	// SpoolDir, an absolute path, keeps on disk the records that cannot
	// be published while the bus or the stream is away, and publishes
	// them, in order, when it is back (this run or the next); empty
	// logs them instead. Each process takes a slot of its own below it.
	SpoolDir string `yaml:"spool_dir"`
	// SpoolMax bounds each slot's bytes; 0 means 64 MiB. A full spool
	// keeps the oldest records and refuses (and logs) new ones.
	SpoolMax int64 `yaml:"spool_max"`
}

// Approvals is the approvals key: a human operator, reached over NATS,
// approves gated commands for callers that cannot be asked themselves.
type Approvals struct {
	// Operator turns operator approvals on (off by default): gated tools
	// are then served over A2A, and an MCP client that cannot elicit gets
	// an operator's approval instead of confirm_over_mcp's auto or always.
	Operator bool `yaml:"operator"`
	// Timeout is how long a request waits for an operator's answer before
	// it is denied; zero means [DefaultApprovalTimeout].
	Timeout Duration `yaml:"timeout"`
	// SelfApproval lets an approver approve a request whose caller is
	// themselves; off is the four-eyes rule.
	SelfApproval bool `yaml:"self_approval"`
	// Approvers sign in to the gateway's /approvals page with a token of
	// their own, when the gateway has no OAuth (expose.agent.mcp.auth).
	Approvers []Approver `yaml:"approvers"`
	// Web signs approvers in to the /approvals page at the gateway's
	// authorization server (OpenID Connect); needs expose.agent.mcp.auth.
	Web *ApprovalsWeb `yaml:"web"`
	// SigningKey is the file of the gateway's nkey seed, with which its
	// /approvals page signs the answers it sends for the people it
	// signed in; list its public key with delegate: true in the
	// approvals.approvers of the agents that should take them.
	SigningKey string `yaml:"signing_key"`
}

// Approver is one entry of approvals.approvers: a token to sign in to the
// gateway's /approvals page with, a public nkey to sign answers over NATS
// with, or both.
type Approver struct {
	// Name is who the approver is, as audit records name them.
	Name string `yaml:"name"`
	// TokenEnv names the environment variable holding their token.
	TokenEnv string `yaml:"token_env"`
	// NKey is their public user nkey (U...). Once one approver has one,
	// an agent takes only answers signed with a listed key, and names
	// the approver by the key, not by what the answer claims.
	NKey string `yaml:"nkey"`
	// Delegate marks a key that signs for others: a gateway's, whose
	// /approvals page answers for the people it signed in
	// (approvals.signing_key). Its answers are recorded under the name
	// they give, with the key's.
	Delegate bool `yaml:"delegate"`
}

// Signers are the approvers with a public nkey, by key: their name, and
// whether the key signs for others.
func (a *Approvals) Signers() map[string]ApproverKey {
	if a == nil {
		return nil
	}
	var out map[string]ApproverKey
	for _, ap := range a.Approvers {
		if ap.NKey != "" {
			if out == nil {
				out = map[string]ApproverKey{}
			}
			out[ap.NKey] = ApproverKey{Name: ap.Name, Delegate: ap.Delegate}
		}
	}
	return out
}

// ApproverKey is the holder of one listed nkey (approval.Signer).
type ApproverKey struct {
	// Name is who holds the key, as decisions and audit records name
	// them.
	Name string
	// Delegate marks a key that signs for others.
	Delegate bool
}

// ApprovalsWeb is approvals.web: the OpenID client the /approvals page
// signs approvers in with.
type ApprovalsWeb struct {
	ClientID        string `yaml:"client_id"`
	ClientSecretEnv string `yaml:"client_secret_env"`
}

// Limits of approvals.timeout: a human needs time to read a command line;
// a request held for more than an hour is better denied and asked again.
const (
	DefaultApprovalTimeout = 2 * time.Minute
	MaxApprovalTimeout     = time.Hour
)

// Values of audit.arguments.
const (
	AuditArgumentsFull   = "full"
	AuditArgumentsDigest = "digest"
)

// ResourceKnowledge in expose.agent.mcp.resources serves the indexed
// knowledge documents and their sections as MCP resources.
const ResourceKnowledge = "knowledge"

// Defaults of the MCP session limits. Half an hour outlasts a human's
// pause; a thousand sessions is far beyond one team's clients and bounds
// what abandoned ones can cost.
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultMaxSessions        = 1000
)

// Defaults of the MCP task limits. Ten minutes is ample for a client that
// polls to fetch a result; 64 results of at most a command's output cap
// bound what abandoned tasks can hold in memory.
const (
	DefaultTaskRetention = 10 * time.Minute
	DefaultMaxTasks      = 64
)

// A2A is expose.agent.a2a.
type A2A struct {
	// ServeTools must be true to serve over A2A: presence alone does not
	// enable it, so a block kept for its limits cannot start serving.
	ServeTools bool `yaml:"serve_tools"`
	// MaxConcurrentTools bounds calls running at once; a busy agent stops
	// reading so pressure reaches NATS. Zero means
	// [tool.DefaultMaxConcurrent]. It is separate from the MCP knob because
	// it bounds a different trust boundary: NATS peers that already passed
	// account authentication.
	MaxConcurrentTools int `yaml:"max_concurrent_tools"`
	// ToolTimeout bounds one call's run time. Zero means
	// [tool.DefaultTimeout].
	ToolTimeout Duration `yaml:"tool_timeout"`
}

// RemoteHost is one entry of remote_tools. Discovery carries no tags, so a
// tag exclude is rejected and a tag include is warned about and ignored.
type RemoteHost struct {
	// Host is the identity of the agent whose tools are imported.
	Host string `yaml:"host"`
	// Include and Exclude select the host's tools by name glob.
	Include Filter `yaml:"include"`
	Exclude Filter `yaml:"exclude"`
}

// Knowledge is the knowledge key.
type Knowledge struct {
	// Directory holds the documents behind the knowledge built-ins. A
	// relative path is resolved against the working directory, as
	// application_path is.
	Directory string `yaml:"directory"`
	// Store is the folder holding the index of Directory; empty means the
	// index's default for the identity (knowledge.DefaultStore), under the
	// user's cache directory. It must be outside Directory.
	Store string `yaml:"store"`
	// MaxResultBytes caps one knowledge_search answer; 0 means
	// [spec.DefaultMaxResultBytes]. Raise it for models with a large
	// context; below [spec.MinMaxResultBytes] it is refused.
	MaxResultBytes int `yaml:"max_result_bytes"`
	// CheckInterval is how often a serving gateway reads its whole store
	// for damage, rebuilding a damaged one from Directory; nil means
	// [spec.DefaultCheckInterval] and 0 turns the periodic check off (the
	// check at start and damage a search meets still rebuild). Below
	// [spec.MinCheckInterval] it is refused.
	CheckInterval *Duration `yaml:"check_interval"`
	// Embeddings turns on the vector tier: its presence is the switch.
	// Each section is embedded through an OpenAI-compatible embeddings
	// server and a search fuses the lexical ranking with the vectors'.
	Embeddings *Embeddings `yaml:"embeddings"`
}

// Embeddings is knowledge.embeddings: where sections and queries are
// embedded, and how.
type Embeddings struct {
	// BaseURL is the server's API root; requests go to BaseURL +
	// "/embeddings" (Ollama, LM Studio, llama.cpp's server and vLLM all
	// serve it under /v1). A host that is not loopback must use https: a
	// query and every document travel in the request.
	BaseURL string `yaml:"base_url"`
	// Model is the model the server is asked for.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the server's key,
	// sent as a bearer token. It names the variable, never the secret,
	// and the variable is scrubbed from every command's environment.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds one request; zero means
	// [spec.DefaultEmbeddingsTimeout].
	Timeout Duration `yaml:"timeout"`
	// QueryPrefix is put before every query, DocumentPrefix before every
	// section, for models trained with them ("search_query: ", "query: ").
	// {title} in DocumentPrefix is the section's heading path.
	QueryPrefix    string `yaml:"query_prefix"`
	DocumentPrefix string `yaml:"document_prefix"`
	// Batch is how many sections one request embeds; zero means
	// [spec.DefaultEmbeddingsBatch].
	Batch int `yaml:"batch"`
}

// RequestTimeout returns knowledge.embeddings.timeout, or its default.
func (e *Embeddings) RequestTimeout() time.Duration {
	if e.Timeout.Duration > 0 {
		return e.Timeout.Duration
	}
	return spec.DefaultEmbeddingsTimeout
}

// BatchSize returns knowledge.embeddings.batch, or its default.
func (e *Embeddings) BatchSize() int {
	if e.Batch > 0 {
		return e.Batch
	}
	return spec.DefaultEmbeddingsBatch
}

// CheckEvery returns knowledge.check_interval as the index takes it: 0
// for the default, negative for off.
func (k *Knowledge) CheckEvery() time.Duration {
	switch {
	case k.CheckInterval == nil:
		return 0
	case k.CheckInterval.Duration == 0:
		return -1
	}
	return k.CheckInterval.Duration
}

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m30s"). A bare number other than 0 is refused rather than guessed at:
// "30" could mean seconds or nanoseconds.
type Duration struct{ time.Duration }

// UnmarshalYAML decodes a Go duration string. A refusal is an [*Error]
// naming the key, since the decoder does not say where a value came from.
func (d *Duration) UnmarshalYAML(node ast.Node) error {
	key, line := keyPath(node.GetPath()), nodeLine(node)
	var text string
	switch n := node.(type) {
	case *ast.NullNode:
		d.Duration = 0
		return nil
	case *ast.StringNode:
		text = n.Value
	case ast.ScalarNode:
		text = n.GetToken().Value
	default:
		return &Error{Key: key, Line: line, Msg: fmt.Sprintf("%s: want a duration such as 30s, got %s", key, describeNode(node))}
	}
	v, err := time.ParseDuration(text)
	if err != nil {
		return &Error{Key: key, Line: line, Msg: fmt.Sprintf("%s: want a duration such as 30s or 1m30s, got %q", key, text), Err: err}
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration back as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// DefaultRemoteRefresh is how often the gateway re-discovers remote hosts
// when remote_refresh_interval is not set: often enough that a restarted or
// newly deployed agent's tools appear within a minute, rarely enough that
// discovery traffic is noise on the bus.
const DefaultRemoteRefresh = 30 * time.Second

// RefreshInterval returns how often the gateway re-discovers its remote
// hosts: remote_refresh_interval, [DefaultRemoteRefresh] when it is unset,
// and 0 when the operator turned refreshing off.
func (c *Config) RefreshInterval() time.Duration {
	if c.RemoteRefreshInterval == nil {
		return DefaultRemoteRefresh
	}
	return c.RemoteRefreshInterval.Duration
}

// withDefaults fills in every zero value that means a default. The serving
// defaults are tool's, so the two servers and this file cannot disagree. An
// explicit remote_refresh_interval of 0 stays 0: it turns refreshing off.
func (c *Config) withDefaults() {
	if m := c.Expose.Agent.MCP; m != nil {
		if m.MaxConcurrentTools == 0 {
			m.MaxConcurrentTools = tool.DefaultMaxConcurrent
		}
		if m.ToolTimeout.Duration == 0 {
			m.ToolTimeout.Duration = tool.DefaultTimeout
		}
		if m.ConfirmOverMCP == "" {
			m.ConfirmOverMCP = ConfirmAuto
		}
		if m.SessionIdleTimeout.Duration == 0 {
			m.SessionIdleTimeout.Duration = DefaultSessionIdleTimeout
		}
		if m.MaxSessions == 0 {
			m.MaxSessions = DefaultMaxSessions
		}
		if a := m.Auth; a != nil {
			if a.Leeway.Duration == 0 {
				a.Leeway.Duration = DefaultAuthLeeway
			}
			if len(a.Algorithms) == 0 {
				a.Algorithms = slices.Clone(DefaultAuthAlgorithms)
			}
		}
		if p := m.Policy; p != nil && p.Claim == "" {
			p.Claim = DefaultPolicyClaim
		}
	}
	if a := c.Approvals; a != nil && a.Timeout.Duration == 0 {
		a.Timeout.Duration = DefaultApprovalTimeout
	}
	if a := c.Audit; a != nil && a.Arguments == "" {
		a.Arguments = AuditArgumentsFull
	}
	if a := c.Expose.Agent.A2A; a != nil {
		if a.MaxConcurrentTools == 0 {
			a.MaxConcurrentTools = tool.DefaultMaxConcurrent
		}
		if a.ToolTimeout.Duration == 0 {
			a.ToolTimeout.Duration = tool.DefaultTimeout
		}
	}
	if c.RemoteRefreshInterval == nil {
		c.RemoteRefreshInterval = &Duration{DefaultRemoteRefresh}
	}
}

// AuditSubject is the subject the audit trail of identity is published on
// by default.
func AuditSubject(identity string) string { return "choria.fisk-ai.audit." + identity }

// AuditSubject returns the subject this identity's audit records go to:
// audit.subject, else [AuditSubject] of the identity.
func (c *Config) AuditSubject() string {
	if c.Audit != nil && c.Audit.Subject != "" {
		return c.Audit.Subject
	}
	return AuditSubject(c.Identity)
}

// AuditDigestOnly reports whether audit records carry only the digest of a
// call's arguments (audit.arguments: digest).
func (c *Config) AuditDigestOnly() bool {
	return c.Audit != nil && c.Audit.Arguments == AuditArgumentsDigest
}

// PolicyContexts returns the nats contexts the policy's roles name, by
// key (expose.agent.mcp.policy.roles.NAME.nats_context), for the caller to
// check they exist: [Config.Validate] reads no files.
func (c *Config) PolicyContexts() map[string]string {
	m := c.Expose.Agent.MCP
	if m == nil || m.Policy == nil {
		return nil
	}
	out := map[string]string{}
	for name, r := range m.Policy.Roles {
		if r != nil && r.NATSContext != "" {
			out["expose.agent.mcp.policy.roles."+name+".nats_context"] = r.NATSContext
		}
	}
	return out
}

// Builtins returns the names of every built-in tool
// expose.agent.mcp.builtins may list. The names are the knowledge
// package's own, so they are spelled once.
func Builtins() []string { return spec.ToolNames() }

// SecretEnv returns the names of the environment variables that hold the
// secrets the servers themselves use: the MCP bearer token, approvers'
// tokens, the approvals page's client secret and the embeddings server's
// key. They are scrubbed from every command's environment, so a command a
// model runs can never print one back to it.
func (c *Config) SecretEnv() []string {
	var names []string
	add := func(name string) {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if m := c.Expose.Agent.MCP; m != nil {
		add(m.AuthTokenEnv)
	}
	if a := c.Approvals; a != nil {
		for _, ap := range a.Approvers {
			add(ap.TokenEnv)
		}
		if a.Web != nil {
			add(a.Web.ClientSecretEnv)
		}
	}
	if k := c.Knowledge; k != nil && k.Embeddings != nil {
		add(k.Embeddings.APIKeyEnv)
	}
	return names
}
