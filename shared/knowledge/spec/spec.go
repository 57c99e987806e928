// Package spec holds what configuration must know of the knowledge
// built-ins, their names and limits, apart from the index itself. The index
// links SQLite, goldmark and fsnotify; every binary that reads agent.yaml
// (the A2A agent too, which serves no built-in) would otherwise link them
// all, and carry them in its memory, to check two names and a number.
package spec

import "time"

// Names of the knowledge built-ins, as listed in expose.agent.mcp.builtins.
const (
	SearchTool    = "knowledge_search"
	EnumerateTool = "knowledge_enumerate"
)

// ToolNames returns the names of every knowledge built-in, sorted. It is the
// one list config validates the builtins allowlist against, so a name is
// never spelled in two places. The slice is fresh on every call.
func ToolNames() []string { return []string{EnumerateTool, SearchTool} }

const (
	// DefaultMaxResultBytes caps one knowledge_search answer when
	// knowledge.max_result_bytes is not set: a few sections, small beside a
	// model's context.
	DefaultMaxResultBytes = 16 << 10
	// MinMaxResultBytes is the smallest knowledge.max_result_bytes accepted:
	// below it not even one excerpt fits.
	MinMaxResultBytes = 1024
)

const (
	// DefaultCheckInterval is how often a serving gateway reads its whole
	// knowledge store for damage when knowledge.check_interval is not set.
	// A check reads every page (about a second for a store of a hundred
	// thousand sections), so it is not run often; damage a search meets is
	// acted on at once whatever the interval.
	DefaultCheckInterval = 10 * time.Minute
	// MinCheckInterval is the shortest knowledge.check_interval accepted:
	// a check of a large store takes seconds, and a shorter interval would
	// spend the machine on checking.
	MinCheckInterval = time.Second
)

const (
	// DefaultEmbeddingsTimeout bounds one request to the embeddings server
	// when knowledge.embeddings.timeout is not set: long enough for a
	// batch on a CPU-only local server, short enough that a search whose
	// query cannot be embedded degrades to lexical within it.
	DefaultEmbeddingsTimeout = 30 * time.Second
	// DefaultEmbeddingsBatch is how many sections one request embeds when
	// knowledge.embeddings.batch is not set. Local servers run a batch as
	// one pass of the model; 32 keeps a request well under the timeout on
	// a CPU.
	DefaultEmbeddingsBatch = 32
	// MaxEmbeddingsBatch is the largest knowledge.embeddings.batch
	// accepted: OpenAI-compatible servers refuse larger batches (2048 is
	// OpenAI's own limit), and an answer's size grows with it.
	MaxEmbeddingsBatch = 2048
)
