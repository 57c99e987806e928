package knowledge

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommonWordsRankApart pins the ranking of words found in more than
// commonRows sections, which is not FTS5's BM25 over the whole query (see
// Index.rank): on a corpus where "server" is common, "the" is in most
// sections and "quokka" is rare, each path runs and puts first the
// section BM25 over every matching section would.
func TestCommonWordsRankApart(t *testing.T) {
	var withServer, without strings.Builder
	for n := range commonRows + 100 {
		fmt.Fprintf(&withServer, "## Note %d\n\nThe server keeps entry %d.\n\n", n, n)
	}
	for n := range 4 * commonRows {
		fmt.Fprintf(&without, "## Item %d\n\nThe log keeps line %d.\n\n", n, n)
	}
	dir := writeDocs(t, map[string]string{
		"fill1.md":   "# Fill\n\n" + withServer.String(),
		"fill2.md":   "# Other fill\n\n" + without.String(),
		"quokka.md":  "# Feeding\n\nFeed the quokka twice a day with fresh leaves, water and a little fruit in the evening.\n",
		"servers.md": "# Server rooms\n\nCooling for the racks.\n",
		"upgrade.md": "# Upgrades\n\nRestart the quokka daemon after the server upgrade.\n",
		"zebra.md":   "# Zebra server\n\nThe zebra server answers the wombat queue.\n",
	})
	idx := openIndex(t, dir, Options{})
	update(t, idx)
	snap, err := idx.snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.close()

	for _, tt := range []struct {
		term           string
		common, weight bool
	}{
		{`"the"`, true, false},
		{`"server"`, true, true},
		{`"quokka"`, false, false},
	} {
		w, common, err := snap.weigh(tt.term)
		if err != nil || common != tt.common || (w > minIDF) != tt.weight {
			t.Fatalf("weigh(%s): got weight %v, common %t (%v), want common %t, weighted %t", tt.term, w, common, err, tt.common, tt.weight)
		}
	}

	// want is the top hit, "" for the top of BM25 over every match, "-"
	// for any hit.
	tests := []struct {
		query string
		want  string
	}{
		{"quokka server", "upgrade.md#1"},     // a rare word nominates, the common one re-ranks
		{"server", "servers.md#1"},            // common only: the heading comes first
		{"the server", "servers.md#1"},        // "the" weighs nothing and is left out
		{"zebra wombat server", "zebra.md#1"}, // rare words with a common one
		{"server log", ""},                    // common words only: the AND tier first
		{"the", "-"},                          // a weightless word alone: any section holding it
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := citations(t, idx, tt.query, 3)
			if len(got) == 0 {
				t.Fatalf("got no hit, want one")
			}
			exact, err := snap.bm25(strings.Join(queryTerms(tt.query), " OR "), 1, false)
			if err != nil || len(exact) != 1 {
				t.Fatalf("exact ranking: got %v (%v)", exact, err)
			}
			found, err := snap.sectionsByID(exact)
			if err != nil {
				t.Fatal(err)
			}
			exactTop := Citation(found[0].h.Document, found[0].h.Ordinal)
			if tt.want == "-" {
				return // bounded to the first sections: not BM25's top
			}
			if got[0] != exactTop || (tt.want != "" && got[0] != tt.want) {
				t.Errorf("got top hit %s, want %s, the top of BM25 over every match (%s)", got[0], exactTop, tt.want)
			}
		})
	}
}

// TestBoundedTierReadsOnce pins that a bounded tier, read in one pass in
// row order, ranks exactly the sections and scores the two-pass form did:
// BM25 over the sections up to the commonRows-th match.
func TestBoundedTierReadsOnce(t *testing.T) {
	var b strings.Builder
	for n := range commonRows + 250 {
		// Varying lengths and counts, so scores differ and tie.
		fmt.Fprintf(&b, "## Part %d\n\n%s lantern%s\n\n", n, strings.Repeat("lantern ", n%4), strings.Repeat(" filler", n%7))
	}
	idx := openIndex(t, writeDocs(t, map[string]string{"a.md": "# Lanterns\n\n" + b.String()}), Options{})
	update(t, idx)
	snap, err := idx.snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.close()
	for _, match := range []string{`"lantern"`, `{heading} : ("lantern" OR "part")`, `"lantern" AND "filler"`} {
		got, err := snap.bm25(match, 25, true)
		if err != nil {
			t.Fatal(err)
		}
		last, ok, err := snap.nthMatch(match, commonRows)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			last = math.MaxInt64
		}
		rows, err := idx.db.QueryContext(t.Context(), fmt.Sprintf(`SELECT rowid, -bm25(sections_fts, %g, 1.0) AS score FROM sections_fts
			WHERE sections_fts MATCH ?1 AND rowid <= ?2 ORDER BY score DESC, rowid LIMIT 25`, idx.headingWeight), match, last)
		if err != nil {
			t.Fatal(err)
		}
		var want []scored
		for rows.Next() {
			var s scored
			if err := rows.Scan(&s.id, &s.score); err != nil {
				t.Fatal(err)
			}
			want = append(want, s)
		}
		rows.Close()
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", match, got, want)
		}
	}
}

// TestCountsFollowTheIndex pins that kept term counts are those of the
// index searched: a word rare before an update is common after it, and
// the other way round, without a restart.
func TestCountsFollowTheIndex(t *testing.T) {
	dir := writeDocs(t, map[string]string{"one.md": "# One\n\nThe marten sleeps.\n"})
	idx := openIndex(t, dir, Options{})
	update(t, idx)
	weigh := func() bool {
		t.Helper()
		snap, err := idx.snapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer snap.close()
		_, common, err := snap.weigh(`"marten"`)
		if err != nil {
			t.Fatal(err)
		}
		return common
	}
	if weigh() {
		t.Fatalf("got marten common in one section, want rare")
	}
	var b strings.Builder
	for n := range commonRows + 10 {
		fmt.Fprintf(&b, "## Den %d\n\nA marten den.\n\n", n)
	}
	writeFile(t, dir, "many.md", "# Many\n\n"+b.String())
	update(t, idx)
	if !weigh() {
		t.Fatalf("got marten rare after %d sections with it were added, want common", commonRows+10)
	}
	if err := os.Remove(filepath.Join(dir, "many.md")); err != nil {
		t.Fatal(err)
	}
	update(t, idx)
	if weigh() {
		t.Fatalf("got marten common after those sections were removed, want rare")
	}
}
