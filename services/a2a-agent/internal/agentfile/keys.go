package agentfile

import (
	"strconv"
	"strings"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/audit"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/spec"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

// entry is what the file says about one key: the value written when the
// key is commented out (its default, or for a key that has none a
// placeholder in capitals or an empty value), and a short note. A mapping
// has no value. skip, when set, leaves the key out of the file and says
// why: a key that has no effect, or whose only effect is a refusal, is not
// offered.
type entry struct {
	value string
	note  string
	skip  string
}

// The listen defaults of mcp-gateway serve, which live in the gateway; the
// configuration reference states them too.
const (
	gatewayHost = "127.0.0.1"
	gatewayPort = 8080
)

// entries describes every key of [config.Config] by the path the
// configuration reference writes ("remote_tools[].host",
// "expose.agent.mcp.policy.roles.NAME.match"). Defaults are the
// constants the parser and the services apply, so the file cannot state
// another. The audit subject's default depends on the identity.
func entries(identity string) map[string]entry {
	filter := func(what string) map[string]entry {
		return map[string]entry{
			"":       {note: what},
			".tools": {value: "[]", note: "name globs (path.Match, such as stream_*)"},
			".tags":  {value: "[]", note: "tags, such as impact:ro"},
		}
	}
	e := map[string]entry{
		"identity":         {value: "NAME", note: "keys the NATS subjects and the queue group, names the MCP server"},
		"application_path": {value: "PATH", note: "the fisk application whose commands are served"},
		"nats_context":     {value: "NAME", note: "required by a2a-agent serve: a context `nats context ls` lists, or a context file"},
		"confirm_tags":     {value: "[]", note: "tags that gate a command as ai:confirm does, such as impact:rw"},
		"credential_env":   {value: "[]", note: "more environment variables scrubbed from every command's environment"},

		"expose":                     {},
		"expose.agent":               {},
		"expose.agent.tools":         {note: "narrows what either server serves, after include and exclude"},
		"expose.agent.tools.include": {note: "keep only what a glob or a tag matches"},
		"expose.agent.tools.exclude": {note: "then drop what a glob or a tag matches"},

		"expose.agent.a2a":                      {note: "serving over NATS (a2a-agent serve)"},
		"expose.agent.a2a.serve_tools":          {value: "false", note: "true serves the commands over A2A"},
		"expose.agent.a2a.max_concurrent_tools": {value: strconv.Itoa(tool.DefaultMaxConcurrent), note: "calls one process runs at once"},
		"expose.agent.a2a.tool_timeout":         {value: duration(tool.DefaultTimeout), note: "bound on one call's run time"},

		"expose.agent.mcp":                      {note: "its presence enables mcp-gateway serve"},
		"expose.agent.mcp.address":              {value: gatewayHost, note: "listen address (--address overrides it)"},
		"expose.agent.mcp.port":                 {value: strconv.Itoa(gatewayPort), note: "listen port (--port overrides it)"},
		"expose.agent.mcp.instructions":         {value: `""`, note: "sent to MCP clients when they connect"},
		"expose.agent.mcp.max_concurrent_tools": {value: strconv.Itoa(tool.DefaultMaxConcurrent), note: "calls running at once"},
		"expose.agent.mcp.tool_timeout":         {value: duration(tool.DefaultTimeout), note: "bound on one call's run time, not counting approval"},
		"expose.agent.mcp.confirm_over_mcp":     {value: string(config.ConfirmAuto), note: "auto, always or never: how gated commands are approved"},
		"expose.agent.mcp.builtins":             {value: "[]", note: "built-ins to serve: " + strings.Join(config.Builtins(), ", ") + " (they need knowledge.directory)"},
		"expose.agent.mcp.auth_token_env":       {value: `""`, note: "variable holding a bearer token every request must carry"},
		"expose.agent.mcp.allowed_origins":      {value: "[]", note: "browser origins allowed besides the gateway's loopback address"},
		"expose.agent.mcp.session_idle_timeout": {value: duration(config.DefaultSessionIdleTimeout), note: "a session idle this long is ended"},
		"expose.agent.mcp.max_sessions":         {value: strconv.Itoa(config.DefaultMaxSessions), note: "live sessions at most"},
		"expose.agent.mcp.task_retention":       {value: duration(config.DefaultTaskRetention), note: "how long a finished task's result is kept"},
		"expose.agent.mcp.max_tasks":            {value: strconv.Itoa(config.DefaultMaxTasks), note: "tasks kept at once, running and finished"},
		"expose.agent.mcp.tools_page_size":      {value: "0", note: "tools per tools/list page; 0 lists all in one"},
		"expose.agent.mcp.resources":            {value: "[]", note: "[" + config.ResourceKnowledge + "] serves the knowledge documents as resources"},

		"expose.agent.mcp.auth":            {note: "accept OAuth access tokens of issuer; excludes auth_token_env"},
		"expose.agent.mcp.auth.issuer":     {value: "https://ISSUER", note: "required: the issuer URL, as its tokens' iss spells it"},
		"expose.agent.mcp.auth.audience":   {value: `""`, note: "what a token's aud must hold; empty means resource"},
		"expose.agent.mcp.auth.resource":   {value: `""`, note: "the gateway's public URL of /mcp; empty means the listen URL"},
		"expose.agent.mcp.auth.scopes":     {value: "[]", note: "scopes every token must carry"},
		"expose.agent.mcp.auth.jwks_url":   {value: `""`, note: "overrides the key set URL of the issuer's metadata"},
		"expose.agent.mcp.auth.algorithms": {value: list(config.DefaultAuthAlgorithms), note: "signature algorithms accepted (asymmetric only)"},
		"expose.agent.mcp.auth.leeway":     {value: duration(config.DefaultAuthLeeway), note: "clock skew allowed on exp, nbf and iat"},

		"expose.agent.mcp.policy":                                 {note: "roles matched against a token claim, each granting tools"},
		"expose.agent.mcp.policy.claim":                           {value: config.DefaultPolicyClaim, note: "the claim holding the caller's groups"},
		"expose.agent.mcp.policy.roles":                           {note: "by name; a caller has every role its claim matches"},
		"expose.agent.mcp.policy.roles.NAME":                      {note: "a role, named as you like"},
		"expose.agent.mcp.policy.roles.NAME.match":                {value: "[GROUP]", note: "required: claim values granting the role"},
		"expose.agent.mcp.policy.roles.NAME.approve":              {value: "false", note: "true lets the role approve others' gated calls"},
		"expose.agent.mcp.policy.roles.NAME.nats_context":         {value: `""`, note: "context for its remote tools; empty means nats_context"},
		"expose.agent.mcp.policy.roles.NAME.max_concurrent_tools": {value: "0", note: "its callers' calls at once; 0 means all the gateway's"},
		"expose.agent.mcp.policy.roles.NAME.rate":                 {value: `""`, note: "N/s, N/m or N/h per caller, all tools; empty is unbounded"},
		"expose.agent.mcp.policy.roles.NAME.tool_rates":           {value: "{}", note: "{GLOB: RATE} per caller and tool"},

		"expose.agent.mcp.fleet":              {note: "gateways of this identity share tasks in JetStream; needs nats_context"},
		"expose.agent.mcp.fleet.bucket":       {value: config.DefaultFleetBucket, note: "the key-value bucket, created if missing"},
		"expose.agent.mcp.fleet.instance_ttl": {value: duration(config.DefaultFleetInstanceTTL), note: "a gateway silent this long has its tasks failed"},
		"expose.agent.mcp.fleet.replicas":     {value: "1", note: "the bucket's replicas when it is created"},

		"expose.agent.mcp.agent2agent":             {note: "serve the Agent2Agent protocol on the gateway's listener"},
		"expose.agent.mcp.agent2agent.url":         {value: `""`, note: "base URL the cards name; empty means the request's"},
		"expose.agent.mcp.agent2agent.description": {value: `""`, note: "the gateway card's description"},

		"expose.agent.metrics":         {note: "Prometheus /metrics on a listener of its own"},
		"expose.agent.metrics.address": {value: config.DefaultMetricsAddress, note: "host to bind"},
		"expose.agent.metrics.port":    {value: "9464", note: "required: the port Prometheus scrapes"},

		"remote_tools":                {note: "agents whose tools the gateway imports"},
		"remote_tools[].host":         {value: "IDENTITY", note: "required: the agent, listed once"},
		"remote_tools[].include":      {note: "import only the tools a glob matches"},
		"remote_tools[].exclude":      {note: "leave out the tools a glob matches"},
		"remote_tools[].include.tags": {skip: "ignored: discovery carries no tags"},
		"remote_tools[].exclude.tags": {skip: "refused: discovery carries no tags"},
		"remote_refresh_interval":     {value: duration(config.DefaultRemoteRefresh), note: "how often the gateway re-discovers remote_tools; 0 turns it off"},

		"knowledge":                  {note: "the documents behind the knowledge built-ins"},
		"knowledge.directory":        {value: "DIRECTORY", note: "required: the documents"},
		"knowledge.store":            {value: `""`, note: "the index's folder; empty means the user's cache directory"},
		"knowledge.max_result_bytes": {value: strconv.Itoa(spec.DefaultMaxResultBytes), note: "cap on one knowledge_search answer"},
		"knowledge.check_interval":   {value: duration(spec.DefaultCheckInterval), note: "how often the store is checked for damage; 0 turns the check off"},

		"knowledge.embeddings":                 {note: "the vector tier: sections embedded through an OpenAI-compatible server"},
		"knowledge.embeddings.base_url":        {value: "http://127.0.0.1:11434/v1", note: "required: the API root; https unless on loopback"},
		"knowledge.embeddings.model":           {value: "MODEL", note: "required: the model the server embeds with"},
		"knowledge.embeddings.api_key_env":     {value: `""`, note: "variable holding the server's key; scrubbed from commands"},
		"knowledge.embeddings.timeout":         {value: duration(spec.DefaultEmbeddingsTimeout), note: "bound on one request; a query past it is answered lexically"},
		"knowledge.embeddings.query_prefix":    {value: `""`, note: "put before every query"},
		"knowledge.embeddings.document_prefix": {value: `""`, note: "put before every section; {title} is its heading path"},
		"knowledge.embeddings.batch":           {value: strconv.Itoa(spec.DefaultEmbeddingsBatch), note: "sections one request embeds"},

		"audit":           {note: "the audit trail on NATS: one record per call"},
		"audit.subject":   {value: config.AuditSubject(identity), note: "the subject records are published on"},
		"audit.arguments": {value: config.AuditArgumentsFull, note: "full, or digest: only the arguments' SHA-256"},
		"audit.spool_dir": {value: `""`, note: "absolute folder keeping records NATS cannot take yet"},
		"audit.spool_max": {value: strconv.Itoa(audit.DefaultSpoolMax), note: "bytes each process's spool holds at most"},

		"approvals":                       {note: "an operator approves gated calls over NATS"},
		"approvals.operator":              {value: "false", note: "true serves gated commands over A2A, an operator approving each call"},
		"approvals.timeout":               {value: duration(config.DefaultApprovalTimeout), note: "an unanswered request is denied after this"},
		"approvals.self_approval":         {value: "false", note: "true lets approvers approve their own calls"},
		"approvals.approvers":             {note: "who approves"},
		"approvals.approvers[].name":      {value: "WHO", note: "required: as audit records name them"},
		"approvals.approvers[].token_env": {value: `""`, note: "variable holding their token for the gateway's /approvals page"},
		"approvals.approvers[].nkey":      {value: `""`, note: "their public user nkey (U...), to sign answers with"},
		"approvals.approvers[].delegate":  {value: "false", note: "true: the key signs for others (a gateway's signing_key)"},
		"approvals.web":                   {note: "approvers sign in at the gateway's OAuth issuer"},
		"approvals.web.client_id":         {value: "CLIENT_ID", note: "required: the client registered for /approvals"},
		"approvals.web.client_secret_env": {value: `""`, note: "variable holding that client's secret"},
		"approvals.signing_key":           {value: `""`, note: "absolute path of the gateway's nkey seed"},

		"human_in_the_loop": {skip: "no effect when serving"},
		"memory":            {skip: "no effect when serving"},
	}
	for prefix, what := range map[string]string{
		"include":                    "keep only the commands a glob or a tag matches",
		"exclude":                    "then drop the commands a glob or a tag matches",
		"expose.agent.tools.include": "",
		"expose.agent.tools.exclude": "",
		"expose.agent.mcp.policy.roles.NAME.include": "the role keeps only what a glob or a tag matches",
		"expose.agent.mcp.policy.roles.NAME.exclude": "the role loses what a glob or a tag matches",
		"remote_tools[].include":                     "",
		"remote_tools[].exclude":                     "",
	} {
		for suffix, en := range filter(what) {
			if old, ok := e[prefix+suffix]; ok {
				en = old // set above: a note of its own, or skipped
			}
			e[prefix+suffix] = en
		}
	}
	return e
}

// duration writes d as the configuration reference does: 30s, 2m, 1h.
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// list writes values as a YAML flow sequence.
func list(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = scalar(v)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// scalar writes s as a YAML scalar: plain when it cannot be read as
// anything but that string, else double-quoted. Go's quoting is YAML's for
// every escape it writes.
func scalar(s string) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '/' ||
			i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-' || c == '+')
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		plain = false
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}
