package integration_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/knowledge/embedtest"
)

// Tier lines of knowledge_search with the embedder's model.
const (
	tierHybridUSE  = "hybrid (model=" + embedtest.Model + ", dim=512)"
	tierDegradedTo = "hybrid -> degraded to lexical (embeddings unreachable:"
)

// Bounds of the waits in the vector tier's tests. None is a sleep: each
// bounds a wait for something that normally takes a second or two.
const (
	// settleTimeout bounds an edit's way into the index and its vectors:
	// the watcher's settling, one update and one embedding request.
	settleTimeout = 30 * time.Second
	// recoverTimeout bounds a gateway's return to the hybrid tier after
	// its embeddings server comes back: both its retry of the missing
	// vectors and its searches' pause double while the server is away,
	// up to a minute each.
	recoverTimeout = 90 * time.Second
)

// hybridDocs are documents on distinct topics, one section each.
var hybridDocs = map[string]string{
	"install.md": "# Installing the gateway\n\nBuild the gateway from source with make build; the binaries land in the bin folder.\n",
	"rotate.md":  "# Rotating credentials\n\nThe nats context holds the credentials file; replace it and restart the service.\n",
	"backup.md":  "# Backups\n\nSnapshot the JetStream streams nightly and copy the archive to cold storage.\n",
	"garden.md":  "# Tomatoes\n\nWater the tomato plants every morning and tie the vines to stakes as they grow.\n",
}

// tieredAnswer is knowledge_search's answer with its tier.
type tieredAnswer struct {
	knowledgeAnswer
	Tier string `json:"tier"`
}

// searchTiered calls knowledge_search through the gateway, failing tb on
// a tool error: a search answers whatever the embeddings server does.
func searchTiered(tb testing.TB, c *client.Client, query string) (tieredAnswer, string) {
	tb.Helper()
	res := callMCP(tb, c, "knowledge_search", map[string]any{"query": query})
	text := mcpText(res)
	if res.IsError {
		tb.Fatalf("knowledge_search %q: got isError %q, want an answer", query, text)
	}
	var a tieredAnswer
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		tb.Fatalf("knowledge_search %q: decoding %q: %v", query, text, err)
	}
	return a, text
}

// top returns the document of a's best hit, "" without hits.
func (a tieredAnswer) top() string {
	if len(a.Results) == 0 {
		return ""
	}
	doc, _, _ := strings.Cut(a.Results[0].Citation, "#")
	return doc
}

// citedDocs lists the documents a's hits cite, in rank order.
func (a tieredAnswer) citedDocs() []string {
	var docs []string
	for _, r := range a.Results {
		doc, _, _ := strings.Cut(r.Citation, "#")
		docs = append(docs, doc)
	}
	return docs
}

// awaitSearch searches for query every 100ms until ok holds of the
// answer, failing tb after timeout with the last answer. It logs each
// tier the answers went through, and returns the last answer and how
// long it took.
func awaitSearch(tb testing.TB, c *client.Client, timeout time.Duration, what, query string, ok func(tieredAnswer) bool) (tieredAnswer, time.Duration) {
	tb.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var tiers []string
	for {
		a, text := searchTiered(tb, c, query)
		if len(tiers) == 0 || !strings.HasSuffix(tiers[len(tiers)-1], " "+a.Tier) {
			tiers = append(tiers, fmt.Sprintf("%s: %s", time.Since(start).Round(time.Millisecond), a.Tier))
		}
		if ok(a) {
			took := time.Since(start)
			tb.Logf("%s after %s (tiers: %s)", what, took.Round(time.Millisecond), strings.Join(tiers, " | "))
			return a, took
		}
		select {
		case <-deadline.C:
			tb.Fatalf("timed out after %s waiting for %s (tiers: %s): the last search for %q answered %s", timeout, what, strings.Join(tiers, " | "), query, text)
		case <-tick.C:
		}
	}
}

// writeDocs writes docs into dir.
func writeDocs(tb testing.TB, dir string, docs map[string]string) {
	tb.Helper()
	for name, body := range docs {
		fleettest.WriteFile(tb, dir, name, body)
	}
}

// embeddingsKnowledge is the knowledge key of an agent.yaml serving docs
// with knowledge.embeddings at baseURL; keyEnv, when set, is api_key_env.
func embeddingsKnowledge(docs, store, baseURL, model, keyEnv string) map[string]any {
	emb := map[string]any{"base_url": baseURL, "model": model}
	if keyEnv != "" {
		emb["api_key_env"] = keyEnv
	}
	k := map[string]any{"directory": docs, "embeddings": emb}
	if store != "" {
		k["store"] = store
	}
	return k
}

// TestKnowledgeHybridLive serves a docs folder through a real gateway with
// knowledge.embeddings on the real embedder: every search answers hybrid
// once the sections are embedded; an edit and a new file are found by
// their meaning within seconds and a deletion leaves the index; when the
// embedder is killed mid-serve, searches answer lexically and say so, a
// file added meanwhile is found by its words, and once an embedder listens
// again on the same port the gateway embeds what it missed and answers
// hybrid again, with no restart and never a tool error.
func TestKnowledgeHybridLive(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	s := embedtest.Start(t)
	docs := t.TempDir()
	writeDocs(t, docs, hybridDocs)
	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
		Identity:        "kbv",
		ApplicationPath: fleettest.FiskDemo(t),
		NATSContext:     fleetContext,
		MCP:             map[string]any{"builtins": []string{"knowledge_search"}},
		Extra:           map[string]any{"knowledge": embeddingsKnowledge(docs, "", s.URL, embedtest.Model, "")},
	})
	gw := startGateway(t, b.home.Env(), cfg)
	c := connectMCP(t, gw.URL, nil)
	hybrid := func(doc string) func(tieredAnswer) bool {
		return func(a tieredAnswer) bool { return !a.Building && a.Tier == tierHybridUSE && a.top() == doc }
	}

	awaitSearch(t, c, settleTimeout, "every section to be embedded", "binaries bin folder", hybrid("install.md"))
	t.Run("hybrid hits", func(t *testing.T) {
		tests := []struct{ query, want string }{
			{"binaries bin folder", "install.md"},
			{"credentials file", "rotate.md"},
			{"JetStream snapshot", "backup.md"},
			// No word of these is in any document: only the vectors find
			// the section.
			{"vegetable gardening", "garden.md"},
		}
		for _, tt := range tests {
			a, text := searchTiered(t, c, tt.query)
			if a.Tier != tierHybridUSE || a.top() != tt.want {
				t.Errorf("search %q: got tier %q and hits %v, want tier %q with %s first: %s", tt.query, a.Tier, a.citedDocs(), tierHybridUSE, tt.want, text)
			}
		}
	})

	fleettest.WriteFile(t, docs, "rotate.md", "# Feeding the aquarium\n\nGive the goldfish flakes twice a day and rinse the tank filter every week.\n")
	awaitSearch(t, c, settleTimeout, "an edit to be embedded", "goldfish aquarium", hybrid("rotate.md"))
	if a, text := searchTiered(t, c, "pet fish care"); a.Tier != tierHybridUSE || a.top() != "rotate.md" {
		t.Errorf("search of the edit by meaning: got tier %q and hits %v, want rotate.md first: %s", a.Tier, a.citedDocs(), text)
	}

	if err := os.Remove(filepath.Join(docs, "backup.md")); err != nil {
		t.Fatal(err)
	}
	awaitSearch(t, c, settleTimeout, "a deleted file to leave the index", "JetStream snapshot", func(a tieredAnswer) bool {
		return a.Tier == tierHybridUSE && len(a.Results) > 0 && !a.cites("backup.md")
	})

	s.Kill()
	t.Run("embedder killed: searches degrade to lexical", func(t *testing.T) {
		for range 3 {
			a, text := searchTiered(t, c, "binaries bin folder")
			if !strings.HasPrefix(a.Tier, tierDegradedTo) {
				t.Errorf("search with the embedder killed: got tier %q, want it to start %q", a.Tier, tierDegradedTo)
			}
			if got := a.citedDocs(); len(got) != 1 || got[0] != "install.md" {
				t.Errorf("search with the embedder killed: got hits %v, want the lexical hit install.md alone: %s", got, text)
			}
		}
	})

	fleettest.WriteFile(t, docs, "stars.md", "# Stargazing\n\nPoint the telescope at Jupiter after midnight; its moons show as bright dots.\n")
	awaitSearch(t, c, settleTimeout, "a file added while the embedder is down to be found by its words", "telescope Jupiter", func(a tieredAnswer) bool {
		lexical := strings.HasPrefix(a.Tier, tierDegradedTo) || strings.HasPrefix(a.Tier, "hybrid (model="+embedtest.Model+", dim=512; ") && strings.HasSuffix(a.Tier, "sections not embedded yet)")
		return lexical && a.top() == "stars.md"
	})
	// The section's vector could not be made: the gateway says so, naming
	// the setting, and tries again.
	gw.WaitOutput(t, "knowledge.embeddings.base_url", settleTimeout)

	// A new embedder where the killed one listened: the gateway's
	// configured base_url reaches it.
	again := embedtest.Start(t, embedtest.WithPort(s.Port()))
	_, took := awaitSearch(t, c, recoverTimeout, "searches to answer hybrid again with every section embedded", "telescope Jupiter", hybrid("stars.md"))
	t.Logf("hybrid again %s after the embedder (pid %d) listened on port %d again", took.Round(time.Millisecond), again.PID, again.Port())
	if a, text := searchTiered(t, c, "astronomy planets at night"); a.Tier != tierHybridUSE || a.top() != "stars.md" {
		t.Errorf("search of the file added meanwhile by meaning: got tier %q and hits %v, want stars.md first: %s", a.Tier, a.citedDocs(), text)
	}
	if gw.Exited() {
		t.Fatalf("the gateway exited (status %d):\n%s", gw.ExitCode(), gw.Output())
	}
}

// randomSecret returns 32 random hex digits.
func randomSecret(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestKnowledgeEmbeddingsKey serves the vector tier from an embedder that
// requires a key: the gateway reads it from the variable api_key_env
// names and sends it (searches answer hybrid), and the key is never in
// its logs, in a tool's result, or in a served command's environment. A
// wrong key degrades searches without showing either key; a variable that
// is not set stops the gateway before it serves, naming the setting.
func TestKnowledgeEmbeddingsKey(t *testing.T) {
	t.Parallel()
	const keyEnv = "FISK_EMBED_KEY"
	secret := "sk-fisk-" + randomSecret(t)
	b := newBus(t)
	s := embedtest.Start(t, embedtest.WithAPIKeyEnv(keyEnv, secret))
	docs := t.TempDir()
	writeDocs(t, docs, hybridDocs)
	agent := func(identity string) string {
		return fleettest.WriteAgentConfig(t, fleettest.Agent{
			Identity:        identity,
			ApplicationPath: fleettest.FiskDemo(t),
			NATSContext:     fleetContext,
			IncludeTools:    []string{"getenv", "echo"},
			MCP:             map[string]any{"builtins": []string{"knowledge_search", "knowledge_enumerate"}},
			Extra:           map[string]any{"knowledge": embeddingsKnowledge(docs, "", s.URL, embedtest.Model, keyEnv)},
		})
	}

	t.Run("the key reaches the server and nothing else", func(t *testing.T) {
		gw := startGateway(t, b.home.Env(keyEnv+"="+secret), agent("kbkey"))
		c := connectMCP(t, gw.URL, nil)
		var results []string
		a, _ := awaitSearch(t, c, settleTimeout, "a hybrid answer through the keyed embedder", "credentials file", func(a tieredAnswer) bool {
			return a.Tier == tierHybridUSE && a.top() == "rotate.md"
		})
		_, text := searchTiered(t, c, "vegetable gardening")
		results = append(results, text, fmt.Sprint(a))
		for _, name := range []string{keyEnv, "PATH"} {
			res := callMCP(t, c, "getenv", map[string]any{"name": name})
			cr := mcpCommandResult(t, "getenv", res)
			results = append(results, mcpText(res))
			switch name {
			case keyEnv:
				if want := keyEnv + " unset\n"; cr.Output != want {
					t.Errorf("getenv %s: got %q, want %q: a served command must not see the key", name, cr.Output, want)
				}
			default:
				// The environment is scrubbed, not emptied.
				if !strings.HasPrefix(cr.Output, name+"=") {
					t.Errorf("getenv %s: got %q, want it set", name, cr.Output)
				}
			}
		}
		results = append(results, mcpText(callMCP(t, c, "knowledge_enumerate", map[string]any{})))
		gw.Signal(t, syscall.SIGTERM)
		gw.Wait(t, fleettest.StopGrace)
		for what, text := range map[string]string{"stdout": gw.Stdout(), "stderr": gw.Stderr(), "tool results": strings.Join(results, "\n")} {
			if strings.Contains(text, secret) {
				t.Errorf("the gateway's %s hold the embeddings key", what)
			}
		}
	})

	t.Run("a wrong key degrades searches", func(t *testing.T) {
		wrong := "sk-wrong-" + randomSecret(t)
		gw := startGateway(t, b.home.Env(keyEnv+"="+wrong), agent("kbwrong"))
		c := connectMCP(t, gw.URL, nil)
		var texts []string
		awaitSearch(t, c, settleTimeout, "a degraded answer naming the refusal", "credentials file", func(a tieredAnswer) bool {
			texts = append(texts, fmt.Sprint(a))
			return strings.HasPrefix(a.Tier, tierDegradedTo) && strings.Contains(a.Tier, "401") && a.top() == "rotate.md"
		})
		gw.WaitOutput(t, "knowledge.embeddings.base_url", settleTimeout)
		for what, text := range map[string]string{"output": gw.Output(), "tool results": strings.Join(texts, "\n")} {
			if strings.Contains(text, wrong) || strings.Contains(text, secret) {
				t.Errorf("the gateway's %s hold a key", what)
			}
		}
	})

	t.Run("api_key_env not set", func(t *testing.T) {
		p := fleettest.Start(t, b.home.Env(), fleettest.MCPGateway(t), "serve", "--config", agent("kbunset"), "--port", "0")
		if code := p.Wait(t, fleettest.ReadyTimeout); code == 0 {
			t.Errorf("serve with %s unset: got exit 0, want a refusal:\n%s", keyEnv, p.Output())
		}
		if out := p.Output(); !strings.Contains(out, "knowledge.embeddings.api_key_env") || !strings.Contains(out, keyEnv) {
			t.Errorf("serve with %s unset: got %q, want a refusal naming knowledge.embeddings.api_key_env and %s", keyEnv, out, keyEnv)
		}
		if addLineRE.MatchString(p.Stdout()) {
			t.Errorf("serve with %s unset: got the claude mcp add line, want no listener", keyEnv)
		}
	})
}

// Lines of the knowledge commands' output.
var (
	embeddedRE   = regexp.MustCompile(`(?m)^embedded (\d+) sections in \S+ \(model=(\S+), dim=(\d+)\)$`)
	statsVectors = regexp.MustCompile(`(?m)^vectors {6}(\d+) \(model=(\S+), dim=(\d+), normalised (true|false)\)(?:; (\d+) sections without one)?$`)
	statsSection = regexp.MustCompile(`(?m)^sections {5}(\d+)$`)
	doctorLine   = regexp.MustCompile(`(?m)^embeddings {3}\S+: model (\S+), dim (\d+), normalised (true|false), (\S+) a request$`)
)

// TestKnowledgeIndexCommandEmbeddings runs the operator's knowledge
// commands against the real embedder: index embeds every section, stats,
// search and doctor report the model; with the embedder stopped, index
// fails naming knowledge.embeddings.base_url, search degrades to lexical
// and says so, doctor fails; a changed model is refused until --reindex.
func TestKnowledgeIndexCommandEmbeddings(t *testing.T) {
	t.Parallel()
	b := newBus(t)
	s := embedtest.Start(t)
	docs := t.TempDir()
	writeDocs(t, docs, hybridDocs)
	store := filepath.Join(t.TempDir(), "store")
	cfgDir := t.TempDir()
	writeConfig := func(baseURL, model string) string {
		t.Helper()
		y, err := fleettest.Agent{
			Identity:        "kbcli",
			ApplicationPath: fleettest.FiskDemo(t),
			NATSContext:     fleetContext,
			MCP:             map[string]any{"builtins": []string{"knowledge_search"}},
			Extra:           map[string]any{"knowledge": embeddingsKnowledge(docs, store, baseURL, model, "")},
		}.YAML()
		if err != nil {
			t.Fatal(err)
		}
		return fleettest.WriteFile(t, cfgDir, "agent.yaml", string(y))
	}
	cfg := writeConfig(s.URL, embedtest.Model)
	cli := func(tb testing.TB, args ...string) fleettest.Result {
		tb.Helper()
		return fleettest.Run(tb, b.home.Env(), fleettest.MCPGateway(tb), append([]string{"knowledge"}, append(args, "--config", cfg)...)...)
	}
	ok := func(tb testing.TB, what string, r fleettest.Result) {
		tb.Helper()
		if r.ExitCode != 0 {
			tb.Fatalf("%s: got exit %d, want 0\nstdout:\n%s\nstderr:\n%s", what, r.ExitCode, r.Stdout, r.Stderr)
		}
	}
	// stats returns what `knowledge stats` prints of the sections and
	// their vectors: how many, how many lack one, and the vectors' model.
	stats := func(tb testing.TB) (sections, vectors, missing int, model string) {
		tb.Helper()
		r := cli(tb, "stats")
		ok(tb, "knowledge stats", r)
		ms, mv := statsSection.FindStringSubmatch(r.Stdout), statsVectors.FindStringSubmatch(r.Stdout)
		if ms == nil || mv == nil {
			tb.Fatalf("knowledge stats: got %q, want a sections line and `vectors      N (model=M, dim=512, normalised B)`", r.Stdout)
		}
		if mv[3] != "512" || mv[4] != "true" {
			tb.Errorf("knowledge stats: got dim %s normalised %s, want 512 true: %q", mv[3], mv[4], r.Stdout)
		}
		sections, _ = strconv.Atoi(ms[1])
		vectors, _ = strconv.Atoi(mv[1])
		if mv[5] != "" {
			missing, _ = strconv.Atoi(mv[5])
		}
		return sections, vectors, missing, mv[2]
	}

	r := cli(t, "index")
	ok(t, "knowledge index", r)
	m := embeddedRE.FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("knowledge index: got %q, want `embedded N sections in D (model=%s, dim=512)`", r.Stdout, embedtest.Model)
	}
	embedded, _ := strconv.Atoi(m[1])
	if m[2] != embedtest.Model || m[3] != "512" {
		t.Errorf("knowledge index: got model %s dim %s, want %s 512", m[2], m[3], embedtest.Model)
	}
	sections, vectors, missing, model := stats(t)
	if embedded != sections || vectors != sections || missing != 0 || model != embedtest.Model || sections < len(hybridDocs) {
		t.Errorf("after knowledge index: got %d embedded, %d sections, %d vectors of %s (%d missing), want every one of at least %d sections embedded with %s",
			embedded, sections, vectors, model, missing, len(hybridDocs), embedtest.Model)
	}
	if r := cli(t, "search", "vegetable", "gardening"); r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "tier: "+tierHybridUSE+"\n") || !strings.Contains(r.Stdout, "1. garden.md#") {
		t.Errorf("knowledge search: got exit %d\n%s%s\nwant exit 0, tier: %s first and garden.md the first hit", r.ExitCode, r.Stdout, r.Stderr, tierHybridUSE)
	}
	r = cli(t, "doctor")
	ok(t, "knowledge doctor", r)
	if d := doctorLine.FindStringSubmatch(r.Stdout); d == nil || d[1] != embedtest.Model || d[2] != "512" {
		t.Errorf("knowledge doctor: got %q, want `embeddings   URL: model %s, dim 512, normalised B, LATENCY a request`", r.Stdout, embedtest.Model)
	} else if _, err := time.ParseDuration(d[4]); err != nil {
		t.Errorf("knowledge doctor: got latency %q, want a duration: %v", d[4], err)
	}

	s.Stop()
	t.Run("embedder stopped", func(t *testing.T) {
		fleettest.WriteFile(t, docs, "stars.md", "# Stargazing\n\nPoint the telescope at Jupiter after midnight; its moons show as bright dots.\n")
		r := cli(t, "index")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "knowledge.embeddings.base_url") {
			t.Errorf("knowledge index of a changed folder with the embedder stopped: got exit %d\nstderr:\n%s\nwant non-zero, naming knowledge.embeddings.base_url", r.ExitCode, r.Stderr)
		}
		r = cli(t, "search", "telescope", "Jupiter")
		if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "tier: "+tierDegradedTo) || !strings.Contains(r.Stdout, "1. stars.md#") {
			t.Errorf("knowledge search with the embedder stopped: got exit %d\n%s%s\nwant exit 0, `tier: %s …` and the new file found by its words", r.ExitCode, r.Stdout, r.Stderr, tierDegradedTo)
		}
		if r := cli(t, "doctor"); r.ExitCode == 0 {
			t.Errorf("knowledge doctor with the embedder stopped: got exit 0, want non-zero\n%s", r.Stdout)
		}
		if sections, vectors, missing, _ := stats(t); vectors != sections-1 || missing != 1 {
			t.Errorf("stats after the failed embedding: got %d vectors of %d sections (%d missing), want all but the new one", vectors, sections, missing)
		}
	})

	// Another embedder, elsewhere: the same model fills in what is missing.
	s2 := embedtest.Start(t)
	cfg = writeConfig(s2.URL, embedtest.Model)
	r = cli(t, "index")
	ok(t, "knowledge index with the embedder back", r)
	if m := embeddedRE.FindStringSubmatch(r.Stdout); m == nil || m[1] != "1" {
		t.Errorf("knowledge index with the embedder back: got %q, want `embedded 1 sections`: the section missing its vector", r.Stdout)
	}

	t.Run("a changed model", func(t *testing.T) {
		const other = "use-lite-512-other"
		cfg = writeConfig(s2.URL, other)
		r := cli(t, "index")
		if r.ExitCode == 0 || !strings.Contains(r.Stderr, "--reindex") || !strings.Contains(r.Stderr, other) {
			t.Errorf("knowledge index with another model: got exit %d\nstderr:\n%s\nwant non-zero, naming --reindex and the model", r.ExitCode, r.Stderr)
		}
		r = cli(t, "index", "--reindex")
		ok(t, "knowledge index --reindex", r)
		if m := embeddedRE.FindStringSubmatch(r.Stdout); m == nil || m[2] != other {
			t.Errorf("knowledge index --reindex: got %q, want the sections embedded with %s", r.Stdout, other)
		}
		sections, vectors, missing, model := stats(t)
		if model != other || vectors != sections || missing != 0 {
			t.Errorf("stats after --reindex: got %d vectors of %d sections made with %s (%d missing), want all made with %s", vectors, sections, model, missing, other)
		}
		if r := cli(t, "search", "vegetable", "gardening"); !strings.HasPrefix(r.Stdout, "tier: hybrid (model="+other+", dim=512)\n") {
			t.Errorf("knowledge search after --reindex: got %q, want the tier naming %s", r.Stdout, other)
		}
	})
}
