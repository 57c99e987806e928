package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/gateway"
	"github.com/fiskfleet/fiskfleet/shared/config"
	"github.com/fiskfleet/fiskfleet/shared/knowledge"
)

// knowledgeCmd groups the operator's commands on the knowledge index.
type knowledgeCmd struct {
	Index   knowledgeIndexCmd   `cmd:"" help:"Build or update the index of knowledge.directory."`
	Search  knowledgeSearchCmd  `cmd:"" help:"Search the index as knowledge_search does."`
	Show    knowledgeShowCmd    `cmd:"" help:"Print one section by its citation (path#ordinal)."`
	Sources knowledgeSourcesCmd `cmd:"" help:"List the indexed documents."`
	Stats   knowledgeStatsCmd   `cmd:"" help:"Print documents, sections, vectors, store size and last update."`
	Doctor  knowledgeDoctorCmd  `cmd:"" help:"Check the store and the embeddings server of knowledge.embeddings."`
}

// knowledgeConfig is the flag every knowledge subcommand takes.
type knowledgeConfig struct {
	Config string `help:"Agent configuration file (agent.yaml)." type:"existingfile" required:"" env:"MCP_GATEWAY_CONFIG"`
}

// open loads the configuration and opens its index; it refuses a file
// without knowledge.directory.
func (k knowledgeConfig) open(log *slog.Logger, e env, rebuild bool) (*config.Config, *knowledge.Index, error) {
	cfg, err := loadConfig(k.Config, config.ModeInfo, log)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Knowledge == nil || cfg.Knowledge.Directory == "" {
		return nil, nil, fmt.Errorf("%s: knowledge is not configured: add knowledge.directory: PATH", cfg.File)
	}
	idx, err := gateway.OpenIndexOf(cfg, rebuild, e.lookupEnv, log)
	return cfg, idx, err
}

type knowledgeIndexCmd struct {
	knowledgeConfig
	Reindex bool `help:"Empty the store and index every document again; replaces a corrupt store or one that is not an index."`
}

func (c *knowledgeIndexCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, idx, err := c.open(log, e, c.Reindex)
	if err != nil {
		return err
	}
	defer idx.Close()
	// Opening read only the header; an update would meet a damaged page
	// part way. --reindex has checked already.
	if !c.Reindex {
		if err := idx.Check(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	progress, done := progressFor(e.stdout)
	ch, err := idx.Update(ctx, progress)
	done()
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "indexed %s in %s: %d added, %d changed, %d removed, %d unchanged\n",
		idx.Dir(), time.Since(start).Round(time.Millisecond), len(ch.Added), len(ch.Changed), len(ch.Removed), ch.Unchanged)
	if ch.Incomplete {
		fmt.Fprintf(e.stdout, "the directory holds more than %d documents: the rest are not indexed\n", knowledge.MaxDocuments)
	}
	if cfg.Knowledge.Embeddings != nil {
		// An index asked to be semantic is never left lexical without
		// saying so: a server that cannot embed fails the command.
		start := time.Now()
		n, err := idx.Embed(ctx, func(done, total int) {
			if done%1000 < cfg.Knowledge.Embeddings.BatchSize() || done == total {
				fmt.Fprintf(e.stdout, "embedded %d of %d sections\n", done, total)
			}
		})
		if err != nil {
			return fmt.Errorf("%s: the full-text index is up to date, but its vectors are not: %w", cfg.File, err)
		}
		id, _ := idx.Identity(ctx)
		fmt.Fprintf(e.stdout, "embedded %d sections in %s (%s)\n", n, time.Since(start).Round(time.Millisecond), id)
	}
	fmt.Fprintf(e.stdout, "store %s\n", idx.Store())
	return nil
}

// progressFor returns the update's progress callback: a bar when w is a
// terminal, a plain line every 1000 documents otherwise (logs and CI keep
// readable output). done finishes the bar.
func progressFor(w io.Writer) (knowledge.Progress, func()) {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		return func(n, total int) {
				if bar == nil {
					bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("indexing"),
						progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
				}
				_ = bar.Set(n)
			}, func() {
				if bar != nil {
					_ = bar.Finish()
				}
			}
	}
	return func(n, total int) {
		if n%1000 == 0 || n == total {
			fmt.Fprintf(w, "examined %d of %d documents\n", n, total)
		}
	}, func() {}
}

type knowledgeSearchCmd struct {
	knowledgeConfig
	TopK    int      `help:"How many sections to print." default:"5" name:"top-k"`
	Ranking string   `help:"Which ranking answers: fused (as knowledge_search does), lexical or vector, to compare the tiers." enum:"fused,lexical,vector" default:"fused"`
	Query   []string `arg:"" help:"Words to look for."`
}

// rankings maps --ranking onto the index's rankings.
var rankings = map[string]knowledge.Ranking{"fused": knowledge.Fused, "lexical": knowledge.LexicalOnly, "vector": knowledge.VectorOnly}

func (c *knowledgeSearchCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	_, idx, err := c.open(log, e, false)
	if err != nil {
		return err
	}
	defer idx.Close()
	res, err := idx.SearchWith(ctx, strings.Join(c.Query, " "), c.TopK, rankings[c.Ranking])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "tier: %s\n", res.Tier)
	if len(res.Hits) == 0 {
		fmt.Fprintln(e.stdout, "no sections match (is the index built? run mcp-gateway knowledge index)")
	}
	for n, h := range res.Hits {
		fmt.Fprintf(e.stdout, "%d. %s  (score %.4g)  %s\n", n+1, h.Citation, h.Score, cmp.Or(h.Heading, h.Title))
		for _, l := range strings.Split(h.Text, "\n") {
			fmt.Fprintf(e.stdout, "   %s\n", l)
		}
		fmt.Fprintln(e.stdout)
	}
	return nil
}

type knowledgeShowCmd struct {
	knowledgeConfig
	Citation string `arg:"" help:"The section's citation, path#ordinal, as search prints it."`
}

func (c *knowledgeShowCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	_, idx, err := c.open(log, e, false)
	if err != nil {
		return err
	}
	defer idx.Close()
	sec, err := idx.Section(ctx, c.Citation)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, sec.Text)
	return nil
}

type knowledgeSourcesCmd struct {
	knowledgeConfig
	Prefix string `help:"Only documents whose path starts with this."`
}

func (c *knowledgeSourcesCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	_, idx, err := c.open(log, e, false)
	if err != nil {
		return err
	}
	defer idx.Close()
	cursor := ""
	for {
		page, err := idx.Enumerate(ctx, c.Prefix, cursor, knowledge.PageSize)
		if err != nil {
			return err
		}
		for _, d := range page.Documents {
			fmt.Fprintf(e.stdout, "%s\t%d sections\t%d bytes\t%s\n", d.Path, d.Sections, d.Bytes, d.Title)
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

type knowledgeStatsCmd struct {
	knowledgeConfig
}

func (c *knowledgeStatsCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	_, idx, err := c.open(log, e, false)
	if err != nil {
		return err
	}
	defer idx.Close()
	s, err := idx.Stats(ctx)
	if err != nil {
		return err
	}
	updated := "never (run mcp-gateway knowledge index)"
	if !s.UpdatedAt.IsZero() {
		updated = s.UpdatedAt.Local().Format(time.RFC3339)
	}
	fmt.Fprintf(e.stdout, "directory    %s\nstore        %s\ndocuments    %d\nsections     %d\nstore size   %d bytes\nlast update  %s\n",
		s.Directory, s.Store, s.Documents, s.Sections, s.StoreBytes, updated)
	if s.Incomplete {
		fmt.Fprintf(e.stdout, "incomplete   more than %d documents: the rest are not indexed\n", knowledge.MaxDocuments)
	}
	fmt.Fprintf(e.stdout, "vectors      %s\n", vectorLine(s.Vectors))
	return nil
}

// vectorLine says what the store holds of the vector tier.
func vectorLine(v knowledge.VectorStats) string {
	if v.Identity == nil {
		return "none (lexical only)"
	}
	line := fmt.Sprintf("%d (%s, normalised %t", v.Vectors, *v.Identity, v.Identity.Normalised)
	if p := v.Identity.QueryPrefix + v.Identity.DocumentPrefix; p != "" {
		line += fmt.Sprintf(", query_prefix %q, document_prefix %q", v.Identity.QueryPrefix, v.Identity.DocumentPrefix)
	}
	line += ")"
	if v.Missing > 0 {
		line += fmt.Sprintf("; %d sections without one", v.Missing)
	}
	return line
}

type knowledgeDoctorCmd struct {
	knowledgeConfig
}

// Run checks the store, then the embeddings server against it. Without
// knowledge.embeddings it checks the store and says the index is lexical:
// a missing tier is a choice, not a fault.
func (c *knowledgeDoctorCmd) Run(ctx context.Context, log *slog.Logger, e env) error {
	cfg, idx, err := c.open(log, e, false)
	if err != nil {
		return err
	}
	defer idx.Close()
	if err := idx.Check(ctx); err != nil {
		return err
	}
	s, err := idx.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "store        %s: sound, %d documents, %d sections\n", s.Store, s.Documents, s.Sections)
	fmt.Fprintf(e.stdout, "vectors      %s\n", vectorLine(s.Vectors))
	if cfg.Knowledge.Embeddings == nil {
		fmt.Fprintln(e.stdout, "embeddings   not configured: searches are lexical (add knowledge.embeddings for the vector tier)")
		return nil
	}
	d, err := idx.Doctor(ctx)
	if err != nil {
		fmt.Fprintf(e.stdout, "embeddings   %s: does not answer as it should\n", d.URL)
		return err
	}
	fmt.Fprintf(e.stdout, "embeddings   %s: model %s, dim %d, normalised %t, %s a request\n",
		d.URL, d.Server.Model, d.Server.Dim, d.Server.Normalised, d.Latency.Round(100*time.Microsecond))
	if d.Problem != "" {
		return fmt.Errorf("%s: %s", cfg.File, d.Problem)
	}
	if s.Vectors.Missing > 0 {
		fmt.Fprintf(e.stdout, "todo         %d sections have no vector yet: a serving gateway embeds them, or run mcp-gateway knowledge index\n", s.Vectors.Missing)
	}
	return nil
}
