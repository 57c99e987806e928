package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
)

// Mode is what the configuration is about to be used for; each needs
// different keys.
type Mode int

// Modes. The zero Mode is none of them and [Config.Validate] refuses it.
const (
	// ModeMCP is `mcp-gateway serve`: serving over MCP.
	ModeMCP Mode = iota + 1
	// ModeA2AServe is `a2a-agent serve`: serving over NATS.
	ModeA2AServe
	// ModeInfo is either service's `info`: listing what would be served.
	ModeInfo
)

// String names the mode for messages.
func (m Mode) String() string {
	switch m {
	case ModeMCP:
		return "mcp"
	case ModeA2AServe:
		return "a2a serve"
	case ModeInfo:
		return "info"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// envNamePattern is what credential_env and auth_token_env entries must look
// like: a name a shell could export.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// confirmPolicies are the values of confirm_over_mcp; empty means the
// default.
var confirmPolicies = []ConfirmPolicy{ConfirmAuto, ConfirmAlways, ConfirmNever}

// Validate checks c for mode. Every refusal is an [*Error] naming the key
// to add or fix and the file; several are joined with [errors.Join], one per
// line. Warnings are settings that have no effect in mode or are ignored;
// they are returned for the caller to log, even alongside an error. Validate
// reads c only: it checks no file system or network.
func (c *Config) Validate(mode Mode) (warnings []string, err error) {
	v := &validator{file: c.File}
	switch mode {
	case ModeMCP, ModeA2AServe, ModeInfo:
	default:
		return nil, &Error{File: c.File, Msg: fmt.Sprintf("validating for unknown mode %s", mode)}
	}

	v.common(c)

	switch mode {
	case ModeMCP:
		if c.Expose.Agent.MCP == nil {
			v.fail("expose.agent.mcp", "MCP serving is not enabled: add expose.agent.mcp: {}")
		}
		if c.ApplicationPath == "" {
			v.warn("no application_path: only built-ins and remote tools are served; add application_path to serve a fisk application's commands")
		}
		if len(c.RemoteTools) > 0 && c.NATSContext == "" {
			v.fail("nats_context", "remote_tools needs a NATS connection to discover its hosts: add nats_context: NAME")
		} else if a := c.Approvals; a != nil && a.Operator && c.NATSContext == "" {
			v.fail("nats_context", "approvals.operator reaches operators over NATS: add nats_context: NAME")
		} else if m := c.Expose.Agent.MCP; m != nil && m.Fleet != nil && c.NATSContext == "" {
			v.fail("nats_context", "expose.agent.mcp.fleet keeps tasks in JetStream: add nats_context: NAME")
		}
	case ModeA2AServe:
		if a := c.Expose.Agent.A2A; a == nil || !a.ServeTools {
			v.fail("expose.agent.a2a.serve_tools", "A2A serving is not enabled: add expose.agent.a2a.serve_tools: true")
		}
		if c.ApplicationPath == "" {
			v.fail("application_path", "A2A serving needs the fisk application whose commands it serves: add application_path: PATH")
		}
		if c.NATSContext == "" {
			v.fail("nats_context", "A2A serving needs a NATS connection: add nats_context: NAME")
		}
	case ModeInfo:
		if c.ApplicationPath == "" {
			v.warn("no application_path: only built-ins and remote tools are listed; add application_path to list a fisk application's commands")
		}
		if len(c.RemoteTools) > 0 && c.NATSContext == "" {
			v.warn("remote_tools are not listed without a NATS connection: add nats_context: NAME")
		}
	}

	if c.HumanInTheLoop != nil {
		v.warn("human_in_the_loop has no effect when serving: nobody is at this end to ask; remove it")
	}
	if c.Memory != nil {
		v.warn("memory has no effect when serving: served calls keep no state; remove it")
	}
	return v.warnings, v.err()
}

// common holds the checks every mode makes.
func (v *validator) common(c *Config) {
	switch {
	case c.Identity == "":
		v.fail("identity", fmt.Sprintf("identity is required: add identity: NAME matching %s", a2a.IdentityPattern))
	case !a2a.ValidIdentity(c.Identity):
		v.failErr("identity", fmt.Sprintf("identity %q cannot name NATS subjects: fix identity", c.Identity), a2a.CheckIdentity(c.Identity))
	}

	v.filter("include", c.Include)
	v.filter("exclude", c.Exclude)
	v.filter("expose.agent.tools.include", c.Expose.Agent.Tools.Include)
	v.filter("expose.agent.tools.exclude", c.Expose.Agent.Tools.Exclude)

	for i, t := range c.ConfirmTags {
		if strings.TrimSpace(t) == "" {
			key := fmt.Sprintf("confirm_tags[%d]", i)
			v.fail(key, fmt.Sprintf("%s is empty: remove it or name a tag such as impact:rw", key))
		}
	}
	for i, name := range c.CredentialEnv {
		v.envName(fmt.Sprintf("credential_env[%d]", i), name)
	}

	v.remoteTools(c.RemoteTools)
	if r := c.RemoteRefreshInterval; r != nil && r.Duration < 0 {
		v.fail("remote_refresh_interval", fmt.Sprintf("remote_refresh_interval must not be negative, got %s: fix remote_refresh_interval (0 turns refreshing off)", r.Duration))
	}

	if m := c.Expose.Agent.MCP; m != nil {
		const key = "expose.agent.mcp"
		if m.Port < 0 || m.Port > 65535 {
			v.fail(key+".port", fmt.Sprintf("%s.port %d is not a TCP port: use 1-65535, or leave it out for the gateway's default", key, m.Port))
		}
		v.limits(key, m.MaxConcurrentTools, m.ToolTimeout)
		if m.ConfirmOverMCP != "" && !slices.Contains(confirmPolicies, m.ConfirmOverMCP) {
			v.fail(key+".confirm_over_mcp", fmt.Sprintf("%s.confirm_over_mcp %q is not one of auto, always, never: fix %s.confirm_over_mcp", key, m.ConfirmOverMCP, key))
		}
		if m.AuthTokenEnv != "" {
			v.envName(key+".auth_token_env", m.AuthTokenEnv)
		}
		v.builtins(key+".builtins", m.Builtins, c.Knowledge)
		v.resources(key+".resources", m.Resources, c.Knowledge)
		for i, o := range m.AllowedOrigins {
			k := fmt.Sprintf("%s.allowed_origins[%d]", key, i)
			if err := CheckOrigin(o); err != nil {
				v.failErr(k, fmt.Sprintf("%s %q: %v: fix %s", k, o, err, k), err)
			}
		}
		if m.SessionIdleTimeout.Duration < 0 {
			v.fail(key+".session_idle_timeout", fmt.Sprintf("%s.session_idle_timeout must be positive, got %s: fix %s.session_idle_timeout", key, m.SessionIdleTimeout.Duration, key))
		}
		if m.MaxSessions < 0 {
			v.fail(key+".max_sessions", fmt.Sprintf("%s.max_sessions must be positive, got %d: fix %s.max_sessions", key, m.MaxSessions, key))
		}
		if m.ToolsPageSize < 0 {
			v.fail(key+".tools_page_size", fmt.Sprintf("%s.tools_page_size must not be negative, got %d: fix %s.tools_page_size (0 lists every tool in one page)", key, m.ToolsPageSize, key))
		}
		if m.TaskRetention.Duration < 0 {
			v.fail(key+".task_retention", fmt.Sprintf("%s.task_retention must be positive, got %s: fix %s.task_retention", key, m.TaskRetention.Duration, key))
		}
		if m.MaxTasks < 0 {
			v.fail(key+".max_tasks", fmt.Sprintf("%s.max_tasks must be positive, got %d: fix %s.max_tasks", key, m.MaxTasks, key))
		}
		if m.Auth != nil {
			if m.AuthTokenEnv != "" {
				v.fail(key+".auth", fmt.Sprintf("%s.auth and %s.auth_token_env are both set: a caller is known either by an OAuth token or by the one shared token; remove one of them", key, key))
			}
			v.auth(key+".auth", m.Auth)
		}
		if m.Policy != nil {
			v.policy(key+".policy", m.Policy, m.MaxConcurrentTools)
		}
		if m.Fleet != nil {
			v.fleet(key+".fleet", m.Fleet)
		}
		if a := m.Agent2Agent; a != nil && a.URL != "" {
			if err := checkBaseURL(a.URL); err != nil {
				v.failErr(key+".agent2agent.url", fmt.Sprintf("%s.agent2agent.url %q: %v: fix %s.agent2agent.url, or leave it out to take the URL requests arrive at", key, a.URL, err, key), err)
			}
		}
	}
	if a := c.Audit; a != nil {
		v.audit(a)
	}
	if a := c.Approvals; a != nil {
		v.approvals(a, c.Expose.Agent.MCP)
	}
	if a := c.Expose.Agent.A2A; a != nil {
		v.limits("expose.agent.a2a", a.MaxConcurrentTools, a.ToolTimeout)
	}
	if m := c.Expose.Agent.Metrics; m != nil {
		v.metrics(m)
	}
	if k := c.Knowledge; k != nil {
		v.knowledge(k)
	}
}

// auth checks expose.agent.mcp.auth at key.
func (v *validator) auth(key string, a *Auth) {
	if a.Issuer == "" {
		v.fail(key+".issuer", fmt.Sprintf("%s.issuer is required: add %s.issuer: the URL your identity provider's tokens name in iss", key, key))
	} else if err := checkServerURL(a.Issuer); err != nil {
		v.failErr(key+".issuer", fmt.Sprintf("%s.issuer %q: %v: fix %s.issuer", key, a.Issuer, err, key), err)
	}
	if a.Resource != "" {
		if err := checkServerURL(a.Resource); err != nil {
			v.failErr(key+".resource", fmt.Sprintf("%s.resource %q: %v: fix %s.resource (the gateway's public URL of /mcp)", key, a.Resource, err, key), err)
		} else if u, _ := url.Parse(a.Resource); u.Fragment != "" || strings.HasSuffix(a.Resource, "#") {
			v.fail(key+".resource", fmt.Sprintf("%s.resource %q has a fragment, which RFC 8707 forbids: remove it", key, a.Resource))
		}
	}
	if a.JWKSURL != "" {
		if err := checkServerURL(a.JWKSURL); err != nil {
			v.failErr(key+".jwks_url", fmt.Sprintf("%s.jwks_url %q: %v: fix %s.jwks_url, or leave it out to use the issuer's", key, a.JWKSURL, err, key), err)
		}
	}
	if a.Audience != "" && strings.TrimSpace(a.Audience) != a.Audience {
		v.fail(key+".audience", fmt.Sprintf("%s.audience %q has surrounding spaces: fix %s.audience", key, a.Audience, key))
	}
	for i, sc := range a.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") {
			k := fmt.Sprintf("%s.scopes[%d]", key, i)
			v.fail(k, fmt.Sprintf("%s %q is not a scope token: fix %s", k, sc, k))
		}
	}
	for i, alg := range a.Algorithms {
		if !slices.Contains(AuthAlgorithms, alg) {
			k := fmt.Sprintf("%s.algorithms[%d]", key, i)
			v.fail(k, fmt.Sprintf("%s %q is not accepted: use asymmetric algorithms only (%s); none and HMAC are never accepted", k, alg, strings.Join(AuthAlgorithms, ", ")))
		}
	}
	if a.Leeway.Duration < 0 || a.Leeway.Duration > MaxAuthLeeway {
		v.fail(key+".leeway", fmt.Sprintf("%s.leeway must be between 0 and %s, got %s: fix %s.leeway", key, MaxAuthLeeway, a.Leeway.Duration, key))
	}
}

// checkServerURL reports whether u is an absolute URL a gateway may fetch
// from or name itself by: https, or http on a loopback host (a test or a
// provider on the same machine), with no user or query.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Host == "" || u.Opaque != "":
		return errors.New("want an absolute URL such as https://login.example.com/realms/ops")
	case u.User != nil || u.RawQuery != "":
		return errors.New("want no user or query in it")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && IsLoopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return errors.New("want https: tokens and keys must not travel in clear text (http is allowed only on loopback)")
	}
	return errors.New("want scheme https")
}

// IsLoopback reports whether host only reaches this machine: localhost (in
// any case) or a loopback IP address, IPv4 127/8 or IPv6 ::1, an IPv4
// address mapped into IPv6 and an IPv6 zone included. host is a bare host,
// as [net.SplitHostPort] and [url.URL.Hostname] return it: a port or the
// brackets around an IPv6 address make it not loopback, so callers split
// those off first. An empty host or an unspecified address (0.0.0.0, ::)
// listens on every interface and is not loopback. Other names are not
// resolved: what a name resolves to can change after the check.
//
// Every loopback rule of both services uses it, so a listen address, a
// Host header and a URL agree on what this machine is.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// rolePattern is what a policy role's name must look like: it appears in
// logs, audit records and info output.
var rolePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// policy checks expose.agent.mcp.policy at key. Whether a role's
// nats_context exists is the caller's to check (Validate reads no files):
// see [Config.PolicyContexts].
func (v *validator) policy(key string, p *Policy, slots int) {
	if p.Claim != "" && strings.TrimSpace(p.Claim) != p.Claim {
		v.fail(key+".claim", fmt.Sprintf("%s.claim %q has surrounding spaces: fix %s.claim", key, p.Claim, key))
	}
	if len(p.Roles) == 0 {
		v.fail(key+".roles", fmt.Sprintf("%s.roles is empty: a policy without roles would refuse every caller; add %s.roles.NAME: {match: [GROUP]} or remove %s", key, key, key))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Roles)) {
		r := p.Roles[name]
		k := key + ".roles." + name
		if !rolePattern.MatchString(name) {
			v.fail(k, fmt.Sprintf("%s: a role name is 1-64 letters, digits, '_', '-' or '.': rename it", k))
		}
		if r == nil {
			v.fail(k+".match", fmt.Sprintf("%s is empty: add %s.match: [GROUP]", k, k))
			continue
		}
		if len(r.Match) == 0 && name != DefaultRole {
			v.fail(k+".match", fmt.Sprintf("%s.match is empty: the role would match nobody; add %s.match: [GROUP]", k, k))
		}
		for i, m := range r.Match {
			if strings.TrimSpace(m) == "" {
				mk := fmt.Sprintf("%s.match[%d]", k, i)
				v.fail(mk, fmt.Sprintf("%s is empty: remove it or name a group", mk))
			}
		}
		v.filter(k+".include", r.Include)
		v.filter(k+".exclude", r.Exclude)
		if r.MaxConcurrentTools < 0 {
			v.fail(k+".max_concurrent_tools", fmt.Sprintf("%s.max_concurrent_tools must be at least 1, got %d: fix it, or leave it out for all of the gateway's slots", k, r.MaxConcurrentTools))
		}
		if slots > 0 && r.MaxConcurrentTools > slots {
			v.fail(k+".max_concurrent_tools", fmt.Sprintf("%s.max_concurrent_tools %d is more than the gateway has (expose.agent.mcp.max_concurrent_tools %d): lower it, or raise expose.agent.mcp.max_concurrent_tools", k, r.MaxConcurrentTools, slots))
		}
		if r.Rate != "" {
			if _, err := ParseRate(r.Rate); err != nil {
				v.fail(k+".rate", fmt.Sprintf("%s.rate: %v", k, err))
			}
		}
		for _, glob := range slices.Sorted(maps.Keys(r.ToolRates)) {
			tk := k + ".tool_rates." + glob
			if _, err := path.Match(glob, ""); err != nil || strings.TrimSpace(glob) == "" {
				v.fail(tk, fmt.Sprintf("%s: %q is not a tool name glob: fix it", tk, glob))
			}
			if _, err := ParseRate(r.ToolRates[glob]); err != nil {
				v.fail(tk, fmt.Sprintf("%s: %v", tk, err))
			}
		}
		if r.NATSContext != "" && strings.TrimSpace(r.NATSContext) != r.NATSContext {
			v.fail(k+".nats_context", fmt.Sprintf("%s.nats_context %q has surrounding spaces: fix %s.nats_context", k, r.NATSContext, k))
		}
	}
}

// auditSubjectPattern is a NATS subject without wildcards: tokens of
// printable characters other than '*' and '>', separated by dots.
var auditSubjectPattern = regexp.MustCompile(`^[^.*> \t\r\n]+(\.[^.*> \t\r\n]+)*$`)

// audit checks the audit key.
func (v *validator) audit(a *Audit) {
	if a.Subject != "" && !auditSubjectPattern.MatchString(a.Subject) {
		v.fail("audit.subject", fmt.Sprintf("audit.subject %q is not a NATS subject to publish on (no wildcards, spaces or empty tokens): fix audit.subject, or leave it out for choria.fisk-ai.audit.<identity>", a.Subject))
	}
	switch a.Arguments {
	case "", AuditArgumentsFull, AuditArgumentsDigest:
	default:
		v.fail("audit.arguments", fmt.Sprintf("audit.arguments %q is not one of %s, %s: fix audit.arguments", a.Arguments, AuditArgumentsFull, AuditArgumentsDigest))
	}
	if a.SpoolDir != "" && !filepath.IsAbs(a.SpoolDir) {
		v.fail("audit.spool_dir", fmt.Sprintf("audit.spool_dir %q is not an absolute path: give one, such as /var/lib/fiskfleet/audit-spool", a.SpoolDir))
	}
	if a.SpoolMax < 0 {
		v.fail("audit.spool_max", fmt.Sprintf("audit.spool_max must be a number of bytes, at least 0, got %d: fix it, or leave it out for 64 MiB", a.SpoolMax))
	}
	if a.SpoolMax > 0 && a.SpoolDir == "" {
		v.fail("audit.spool_max", "audit.spool_max is set without audit.spool_dir: set audit.spool_dir to spool records, or remove audit.spool_max")
	}
}

// approvals checks the approvals key; m is expose.agent.mcp, nil when the
// gateway is not enabled.
func (v *validator) approvals(a *Approvals, m *MCP) {
	if d := a.Timeout.Duration; d < 0 || d > MaxApprovalTimeout {
		v.fail("approvals.timeout", fmt.Sprintf("approvals.timeout must be between 0 and %s, got %s: fix approvals.timeout, or leave it out for %s", MaxApprovalTimeout, d, DefaultApprovalTimeout))
	}
	seen := map[string]int{}
	for i, ap := range a.Approvers {
		key := fmt.Sprintf("approvals.approvers[%d]", i)
		switch {
		case strings.TrimSpace(ap.Name) == "":
			v.fail(key+".name", fmt.Sprintf("%s.name is required: add %s.name: WHO, as audit records will name them", key, key))
		case seen[ap.Name] > 0:
			v.fail(key+".name", fmt.Sprintf("%s.name %q repeats approvals.approvers[%d]: give each approver one entry", key, ap.Name, seen[ap.Name]-1))
		default:
			seen[ap.Name] = i + 1
		}
		switch {
		case ap.TokenEnv == "" && ap.NKey == "":
			v.fail(key+".token_env", fmt.Sprintf("%s needs token_env (a token for the /approvals page) or nkey (a public user nkey to sign answers with): add %s.token_env: NAME of the variable holding their token, or %s.nkey: U...", key, key, key))
		case ap.TokenEnv != "":
			v.envName(key+".token_env", ap.TokenEnv)
		}
		if ap.NKey != "" && !nkeys.IsValidPublicUserKey(ap.NKey) {
			v.fail(key+".nkey", fmt.Sprintf("%s.nkey %q is not a public user nkey (U followed by 55 characters, as nk -inkey SEED -pubout prints): fix %s.nkey", key, ap.NKey, key))
		}
	}
	if a.SigningKey != "" && !filepath.IsAbs(a.SigningKey) {
		v.fail("approvals.signing_key", fmt.Sprintf("approvals.signing_key %q is not an absolute path: give the absolute path of the gateway's nkey seed file", a.SigningKey))
	}
	hasAuth := m != nil && m.Auth != nil
	if w := a.Web; w != nil {
		if !hasAuth {
			v.fail("approvals.web", "approvals.web signs approvers in at the gateway's authorization server, and there is none: add expose.agent.mcp.auth, or use approvals.approvers instead")
		}
		if w.ClientID == "" {
			v.fail("approvals.web.client_id", "approvals.web.client_id is required: add the client id registered for the /approvals page")
		}
		if w.ClientSecretEnv != "" {
			v.envName("approvals.web.client_secret_env", w.ClientSecretEnv)
		}
	}
	if hasAuth && slices.ContainsFunc(a.Approvers, func(ap Approver) bool { return ap.TokenEnv != "" }) {
		v.fail("approvals.approvers", "approvals.approvers[].token_env and expose.agent.mcp.auth are both set: with OAuth, approvers sign in at the authorization server (approvals.web and the approve: true roles of expose.agent.mcp.policy); remove their token_env")
	}
	if !a.Operator && (len(a.Approvers) > 0 || a.Web != nil) {
		v.warn("approvals.approvers and approvals.web have no effect while approvals.operator is false; set approvals.operator: true to use them")
	}
}

// bucketPattern is what JetStream accepts as a key-value bucket name.
var bucketPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// fleet checks expose.agent.mcp.fleet at key.
func (v *validator) fleet(key string, f *Fleet) {
	if f.Bucket != "" && !bucketPattern.MatchString(f.Bucket) {
		v.fail(key+".bucket", fmt.Sprintf("%s.bucket %q is not a JetStream bucket name (letters, digits, _ and -, at most 64): fix %s.bucket, or leave it out for %s", key, f.Bucket, key, DefaultFleetBucket))
	}
	if d := f.InstanceTTL.Duration; d != 0 && d < MinFleetInstanceTTL {
		v.fail(key+".instance_ttl", fmt.Sprintf("%s.instance_ttl must be at least %s, got %s: fix %s.instance_ttl, or leave it out for %s", key, MinFleetInstanceTTL, d, key, DefaultFleetInstanceTTL))
	}
	if f.Replicas < 0 || f.Replicas > MaxFleetReplicas {
		v.fail(key+".replicas", fmt.Sprintf("%s.replicas must be between 1 and %d, got %d: fix %s.replicas", key, MaxFleetReplicas, f.Replicas, key))
	}
}

// knowledge checks the knowledge key.
func (v *validator) knowledge(k *Knowledge) {
	if k.MaxResultBytes != 0 && k.MaxResultBytes < spec.MinMaxResultBytes {
		v.fail("knowledge.max_result_bytes", fmt.Sprintf("knowledge.max_result_bytes must be at least %d, got %d: fix knowledge.max_result_bytes, or leave it out for %d",
			spec.MinMaxResultBytes, k.MaxResultBytes, spec.DefaultMaxResultBytes))
	}
	if c := k.CheckInterval; c != nil && c.Duration != 0 && c.Duration < spec.MinCheckInterval {
		v.fail("knowledge.check_interval", fmt.Sprintf("knowledge.check_interval must be at least %s, got %s: fix knowledge.check_interval, leave it out for %s, or set 0 to turn the periodic check off",
			spec.MinCheckInterval, c.Duration, spec.DefaultCheckInterval))
	}
	if e := k.Embeddings; e != nil {
		v.embeddings(e)
	}
	if k.Store != "" && k.Directory != "" {
		d, errD := filepath.Abs(k.Directory)
		s, errS := filepath.Abs(k.Store)
		if rel, err := filepath.Rel(d, s); errD == nil && errS == nil && err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))) {
			v.fail("knowledge.store", fmt.Sprintf("knowledge.store %s is inside knowledge.directory %s: the index would index itself; move knowledge.store outside it, or leave it out for the cache directory", k.Store, k.Directory))
		}
	}
}

// embeddings checks knowledge.embeddings. The server sees every query
// and document, so one off this machine must be reached over https.
func (v *validator) embeddings(e *Embeddings) {
	const key = "knowledge.embeddings"
	switch u, err := url.Parse(e.BaseURL); {
	case e.BaseURL == "":
		v.fail(key+".base_url", fmt.Sprintf("%s.base_url is required: add %s.base_url: URL of an OpenAI-compatible embeddings API, such as http://127.0.0.1:11434/v1 for Ollama", key, key))
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		v.fail(key+".base_url", fmt.Sprintf("%s.base_url %q is not an http(s) URL without credentials, query or fragment: fix %s.base_url (the key goes in %s.api_key_env)", key, e.BaseURL, key, key))
	case u.Scheme == "http" && !IsLoopback(u.Hostname()):
		v.fail(key+".base_url", fmt.Sprintf("%s.base_url %s is not on this machine and not https: every query and document would cross the network in clear; use https, or a server on loopback", key, e.BaseURL))
	}
	if strings.TrimSpace(e.Model) == "" {
		v.fail(key+".model", fmt.Sprintf("%s.model is required: add %s.model: the model the server embeds with, such as nomic-embed-text", key, key))
	}
	if e.APIKeyEnv != "" {
		v.envName(key+".api_key_env", e.APIKeyEnv)
	}
	if d := e.Timeout.Duration; d < 0 || (d > 0 && d < time.Second) || d > 10*time.Minute {
		v.fail(key+".timeout", fmt.Sprintf("%s.timeout must be between 1s and 10m, got %s: fix %s.timeout, or leave it out for %s", key, d, key, spec.DefaultEmbeddingsTimeout))
	}
	if e.Batch < 0 || e.Batch > spec.MaxEmbeddingsBatch {
		v.fail(key+".batch", fmt.Sprintf("%s.batch must be between 1 and %d, got %d: fix %s.batch, or leave it out for %d", key, spec.MaxEmbeddingsBatch, e.Batch, key, spec.DefaultEmbeddingsBatch))
	}
}

// metrics checks expose.agent.metrics: a port that a scrape config can
// name, and a bare host (the port has a key of its own).
func (v *validator) metrics(m *Metrics) {
	const key = "expose.agent.metrics"
	switch {
	case m.Port == nil:
		v.fail(key+".port", fmt.Sprintf("%s.port is required: add %s.port: PORT for Prometheus to scrape, such as 9464", key, key))
	case *m.Port < 0 || *m.Port > 65535:
		v.fail(key+".port", fmt.Sprintf("%s.port %d is not a TCP port: use 1-65535", key, *m.Port))
	}
	if m.Address != "" {
		host := strings.Trim(m.Address, "[]")
		if _, _, err := net.SplitHostPort(m.Address); err == nil || strings.ContainsAny(host, " /:") && net.ParseIP(host) == nil {
			v.fail(key+".address", fmt.Sprintf("%s.address %q is not a host: give an IP address or host name and put the port in %s.port", key, m.Address, key))
		}
	}
}

// resources checks expose.agent.mcp.resources at key: known kinds only,
// and knowledge needs the documents it serves.
func (v *validator) resources(key string, kinds []string, k *Knowledge) {
	for i, kind := range kinds {
		if kind != ResourceKnowledge {
			k := fmt.Sprintf("%s[%d]", key, i)
			v.fail(k, fmt.Sprintf("%s %q is not a resource kind: use %s", k, kind, ResourceKnowledge))
			continue
		}
		if k == nil || k.Directory == "" {
			v.fail("knowledge.directory", fmt.Sprintf("%s lists knowledge, which serves documents as resources: add knowledge.directory: PATH", key))
		}
	}
}

// filter checks a {tools, tags} filter at key.
func (v *validator) filter(key string, f Filter) {
	v.globs(key+".tools", f.Tools)
	for i, t := range f.Tags {
		if strings.TrimSpace(t) == "" {
			k := fmt.Sprintf("%s.tags[%d]", key, i)
			v.fail(k, fmt.Sprintf("%s is empty: remove it or name a tag", k))
		}
	}
}

// globs checks that each entry of the list at key is a path.Match pattern.
// Matching against "" walks the whole pattern, so a malformed one fails
// here rather than on the first tool name it meets.
func (v *validator) globs(key string, globs []string) {
	for i, g := range globs {
		k := fmt.Sprintf("%s[%d]", key, i)
		if g == "" {
			v.fail(k, fmt.Sprintf("%s is empty: remove it or give a name glob such as stream_*", k))
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			v.failErr(k, fmt.Sprintf("%s %q is not a valid glob: fix %s", k, g, k), err)
		}
	}
}

// remoteTools checks remote_tools. Discovery carries no tags: a tag
// exclude could not be honoured and would leave unwanted tools imported, so
// it is refused; a tag include only narrows nothing, so it is a warning.
func (v *validator) remoteTools(hosts []RemoteHost) {
	seen := map[string]int{}
	for i, h := range hosts {
		key := fmt.Sprintf("remote_tools[%d]", i)
		switch {
		case h.Host == "":
			v.fail(key+".host", fmt.Sprintf("%s.host is required: add %s.host: IDENTITY of the agent whose tools to import", key, key))
		case !a2a.ValidIdentity(h.Host):
			v.failErr(key+".host", fmt.Sprintf("%s.host %q is not an agent identity: fix %s.host", key, h.Host, key), a2a.CheckIdentity(h.Host))
		default:
			if first, dup := seen[h.Host]; dup {
				v.fail(key+".host", fmt.Sprintf("%s.host %q repeats remote_tools[%d]: merge the two entries", key, h.Host, first))
			} else {
				seen[h.Host] = i
			}
		}
		v.globs(key+".include.tools", h.Include.Tools)
		v.globs(key+".exclude.tools", h.Exclude.Tools)
		if len(h.Exclude.Tags) > 0 {
			v.fail(key+".exclude.tags", fmt.Sprintf("%s.exclude.tags cannot be honoured: discovery carries no tags, so the tools would still be imported; remove it and exclude by name with %s.exclude.tools", key, key))
		}
		if len(h.Include.Tags) > 0 {
			v.warn(fmt.Sprintf("%s.include.tags is ignored: discovery carries no tags; select tools by name with %s.include.tools", key, key))
		}
	}
}

// limits checks a server's max_concurrent_tools and tool_timeout under key.
// Zero is the default; only a negative value is wrong.
func (v *validator) limits(key string, maxConcurrent int, timeout Duration) {
	if maxConcurrent < 0 {
		v.fail(key+".max_concurrent_tools", fmt.Sprintf("%s.max_concurrent_tools must be at least 1, got %d: fix it, or leave it out for the default", key, maxConcurrent))
	}
	if timeout.Duration < 0 {
		v.fail(key+".tool_timeout", fmt.Sprintf("%s.tool_timeout must be positive, got %s: fix it, or leave it out for the default", key, timeout.Duration))
	}
}

// builtins checks the builtins allowlist at key: names must be known, and a
// knowledge built-in needs the directory it serves.
func (v *validator) builtins(key string, names []string, k *Knowledge) {
	known := Builtins()
	needsDocs := ""
	for i, name := range names {
		if !slices.Contains(known, name) {
			k := fmt.Sprintf("%s[%d]", key, i)
			v.fail(k, fmt.Sprintf("%s %q is not a built-in: use one of %s", k, name, strings.Join(known, ", ")))
			continue
		}
		if needsDocs == "" && slices.Contains(spec.ToolNames(), name) {
			needsDocs = name
		}
	}
	if needsDocs != "" && (k == nil || k.Directory == "") {
		v.fail("knowledge.directory", fmt.Sprintf("%s lists %s, which serves documents: add knowledge.directory: PATH", key, needsDocs))
	}
}

// envName checks that the value at key is an environment variable name.
func (v *validator) envName(key, name string) {
	if !envNamePattern.MatchString(name) {
		v.fail(key, fmt.Sprintf("%s %q is not an environment variable name: fix %s", key, name, key))
	}
}

// validator collects refusals and warnings for one file.
type validator struct {
	file     string
	problems []error
	warnings []string
}

func (v *validator) fail(key, msg string) { v.failErr(key, msg, nil) }

func (v *validator) failErr(key, msg string, cause error) {
	v.problems = append(v.problems, &Error{File: v.file, Key: key, Msg: msg, Err: cause})
}

func (v *validator) warn(msg string) {
	if v.file != "" {
		msg = v.file + ": " + msg
	}
	v.warnings = append(v.warnings, msg)
}

// err returns the one refusal, all of them joined, or nil.
func (v *validator) err() error {
	switch len(v.problems) {
	case 0:
		return nil
	case 1:
		return v.problems[0]
	}
	return errors.Join(v.problems...)
}

// CheckOrigin reports whether o is an origin as browsers send it in the
// Origin header: scheme://host[:port], scheme http or https, lower case,
// with no path, query, fragment or user. The gateway compares Origin
// headers with allowed origins byte for byte, so anything else could
// never match.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want scheme http or https")
	case u.Host == "" || u.Opaque != "":
		return errors.New("want scheme://host[:port]")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#"):
		return errors.New("want only scheme://host[:port], with no user, path, query or fragment")
	case o != strings.ToLower(o):
		return errors.New("want lower case, as browsers send it")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errors.New("want a port of 1-65535")
		}
	}
	return nil
}

// checkBaseURL reports whether u can prefix the gateway's paths in what
// it tells clients (expose.agent.mcp.agent2agent.url): an absolute http or
// https URL with no user, query or fragment; a path is kept, for a
// gateway mounted below one by its proxy.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want scheme http or https")
	case u.Host == "" || u.Opaque != "":
		return errors.New("want scheme://host[:port][/path]")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return errors.New("want no user, query or fragment")
	}
	return nil
}
