package knowledge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/knowledge/embed"
)

// Tiers an answer names (Results.Tier).
const (
	// TierLexical is the full-text ranking alone: no knowledge.embeddings.
	TierLexical = "lexical"
	// tierHybrid prefixes the answers of the fused ranking.
	tierHybrid = "hybrid"
	// tierDegraded prefixes the answers of a hybrid index answered
	// lexically, with the reason.
	tierDegraded = "hybrid -> degraded to lexical"
)

// Fusion. Each ranking gives a section 1/(k + rank), and the fused score
// is the lexical part plus the vector part times a weight chosen per
// query by how well its words were found: the share of the query's
// weight (each word weighing its inverse document frequency) that the
// best lexical section holds. A question in the documents' own words
// finds a section holding most of them; one in other words finds
// sections holding a few common ones. On the quality benchmark's
// labelled questions (package quality) the share parts the two sets
// cleanly: at least 0.59 for every question in the documents' words
// (0.76 for nine in ten), at most 0.49 for every paraphrase. Above
// wordsFound the lexical ranking leads and the vectors only break its
// near ties; below it the vectors lead and the words break theirs. A
// plain RRF (k 60, equal weights) fell below lexical on the first set
// (top-3 0.89 against 0.96) and gained nothing on the second; this one
// keeps the first set's scores and answers the second as well as the
// vectors alone do (docs/knowledge.md has the figures). The constants sit
// inside a plateau of the benchmark's grid (k 1 to 5, the lesser weight
// 0 to 0.3, the greater 5 and up all score the same), not on a peak.
const (
	// fuseK is RRF's k: small, so that the leading ranking's order
	// holds and the other's weight moves a section by a place or two.
	fuseK = 3
	// fuseDepth is how deep each ranking is read for the fusion.
	fuseDepth = 30
	// wordsFound is the share of the query's weight the best lexical
	// section must hold for the query to count as asked in the
	// documents' words.
	wordsFound = 0.5
	// vectorWeightWords and vectorWeightOther weigh the vector ranking
	// for a query asked in the documents' words and for any other.
	vectorWeightWords = 0.1
	vectorWeightOther = 5
)

// fuse merges the lexical and vector rankings into the topK best.
func fuse(lexical, vector []scored, wv float64, topK int) []scored {
	score := map[int64]float64{}
	for r, s := range lexical {
		score[s.id] += 1 / float64(fuseK+r+1)
	}
	for r, s := range vector {
		score[s.id] += wv / float64(fuseK+r+1)
	}
	out := make([]scored, 0, len(score))
	for id, sc := range score {
		// In hundredths: a first place in one ranking scores about 1.6.
		out = append(out, scored{id: id, score: 100 * sc})
	}
	slices.SortFunc(out, bestFirst)
	return out[:min(topK, len(out))]
}

// vectorWeight is the weight of the vector ranking for a query whose best
// lexical section holds share of its words' weight.
func vectorWeight(share float64) float64 {
	if share >= wordsFound {
		return vectorWeightWords
	}
	return vectorWeightOther
}

// wordShare returns the share of the query's weight that section id
// holds: the inverse document frequencies of the terms it matches over
// those of all terms.
func (s *snapshot) wordShare(terms []string, id int64) (float64, error) {
	var all, held float64
	for _, t := range terms {
		w, err := s.weight(t)
		if err != nil {
			return 0, err
		}
		all += w
		var n int
		if err := s.queryRow(`SELECT count(*) FROM sections_fts WHERE sections_fts MATCH ?1 AND rowid = ?2`, t, id).Scan(&n); err != nil {
			return 0, s.i.storeErr("searching the index", err)
		}
		if n > 0 {
			held += w
		}
	}
	if all == 0 {
		return 0, nil
	}
	return held / all, nil
}

// hybridRank is the fused ranking of a search with knowledge.embeddings:
// the lexical ranking (fuseDepth deep) fused with the vector ranking of
// the query's vector. It returns the tier line too.
func (s *snapshot) hybridRank(terms []string, lexical []scored, q []float32, topK int) ([]scored, string, error) {
	id, ok := s.i.identityIn(s)
	if !ok {
		return lexical[:min(topK, len(lexical))], tierDegraded + " (no section embedded yet)", nil
	}
	if len(q) != id.Dim {
		return lexical[:min(topK, len(lexical))], fmt.Sprintf("%s (the query's vector has %d numbers, the store's %d)", tierDegraded, len(q), id.Dim), nil
	}
	vector, err := s.vectorRank(q, fuseDepth)
	if err != nil {
		return nil, "", err
	}
	share := 0.0
	if len(lexical) > 0 {
		if share, err = s.wordShare(terms, lexical[0].id); err != nil {
			return nil, "", err
		}
	}
	tier := fmt.Sprintf("%s (%s)", tierHybrid, id)
	x := &s.i.vec
	x.mu.Lock()
	missing, err := x.coverage(s)
	x.mu.Unlock()
	if err != nil {
		return nil, "", err
	}
	if missing > 0 {
		tier = fmt.Sprintf("%s (%s; %d sections not embedded yet)", tierHybrid, id, missing)
	}
	return fuse(lexical, vector, vectorWeight(share), topK), tier, nil
}

// identityIn reads the pinned vector identity in the snapshot.
func (i *Index) identityIn(s *snapshot) (VectorIdentity, bool) {
	var raw string
	if s.queryRow(`SELECT value FROM meta WHERE key = ?1`, identityKey).Scan(&raw) != nil {
		return VectorIdentity{}, false
	}
	return parseIdentity(raw)
}

// outage is the embeddings server as searches met it: after a query it
// could not embed, searches answer lexically without asking it for a
// pause that doubles from outageMin to outageMax, so a server that hangs
// costs one search its timeout, not every search.
type outage struct {
	mu     sync.Mutex
	until  time.Time
	pause  time.Duration
	reason string
}

const (
	outageMin = 2 * time.Second
	outageMax = time.Minute
)

// queryVector embeds the query for a search, or says why it was not.
func (i *Index) queryVector(ctx context.Context, query string) ([]float32, string) {
	e := i.opts.Embeddings
	o := &i.outage
	o.mu.Lock()
	if time.Now().Before(o.until) {
		reason := o.reason
		o.mu.Unlock()
		return nil, reason
	}
	o.mu.Unlock()
	vecs, err := e.Client.Embed(ctx, []string{e.QueryPrefix + query}, 0)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return nil, "the search was cancelled"
		}
		o.pause = min(max(2*o.pause, outageMin), outageMax)
		o.until = time.Now().Add(o.pause)
		o.reason = "embeddings unreachable: " + strings.TrimPrefix(err.Error(), embed.ErrUnreachable.Error()+": ")
		i.log.Warn("knowledge search answered lexically: the query could not be embedded", "error", err, "next_try_in", o.pause)
		return nil, o.reason
	}
	if o.pause > 0 {
		i.log.Info("knowledge embeddings server answers again", "url", e.Client.URL())
		// The sections left without vectors need not wait for the
		// embedding loop's own next try.
		if kick := i.kickEmbed.Load(); kick != nil {
			(*kick)()
		}
	}
	o.pause, o.until, o.reason = 0, time.Time{}, ""
	return embed.Unit(vecs[0]), ""
}

// degradedTier is the tier line of a hybrid index answered lexically.
func degradedTier(reason string) string { return tierDegraded + " (" + reason + ")" }

// vectorOnly is [Index.SearchWith] with [VectorOnly] or, exact,
// [VectorExact]. The caller holds i.mu.
func (i *Index) vectorOnly(ctx context.Context, query string, topK int, exact bool, out Results) (Results, error) {
	if i.opts.Embeddings == nil {
		out.Tier = "vector: none (knowledge.embeddings is not set)"
		return out, nil
	}
	q, reason := i.queryVector(ctx, query)
	if reason != "" {
		out.Tier = "vector: none (" + reason + ")"
		return out, nil
	}
	snap, err := i.snapshot(ctx)
	if err != nil {
		return out, err
	}
	defer snap.close()
	id, ok := i.identityIn(snap)
	if !ok || id.Dim != len(q) {
		out.Tier = "vector: none (no section embedded with this model yet)"
		return out, nil
	}
	rank := snap.vectorRank
	if exact {
		rank = snap.exactVectorRank
	}
	best, err := rank(q, topK)
	if err != nil {
		return out, err
	}
	out.Tier = fmt.Sprintf("vector (%s)", id)
	match, _ := Query(query)
	return snap.render(out, best, match, nil)
}
