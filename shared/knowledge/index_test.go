package knowledge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// openIndex opens an index of dir with a store in a fresh temporary folder
// and closes it when the test ends.
func openIndex(tb testing.TB, dir string, opts Options) *Index {
	tb.Helper()
	opts.Directory = dir
	if opts.Store == "" {
		opts.Store = filepath.Join(tb.TempDir(), "store")
	}
	idx, err := Open(opts)
	if err != nil {
		tb.Fatalf("opening the index of %s: %v", dir, err)
	}
	tb.Cleanup(func() { idx.Close() })
	return idx
}

// update runs a full update and fails the test on error.
func update(tb testing.TB, idx *Index) Changes {
	tb.Helper()
	ch, err := idx.Update(tb.Context(), nil)
	if err != nil {
		tb.Fatalf("updating the index: %v", err)
	}
	return ch
}

// writeDocs writes files (slash paths relative to a fresh directory) and
// returns the directory.
func writeDocs(tb testing.TB, sets ...map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for _, files := range sets {
		for name, text := range files {
			writeFile(tb, dir, name, text)
		}
	}
	return dir
}

func writeFile(tb testing.TB, dir, name, text string) {
	tb.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// citations returns the citations of a search, best first.
func citations(tb testing.TB, idx *Index, query string, k int) []string {
	tb.Helper()
	res, err := idx.Search(tb.Context(), query, k)
	if err != nil {
		tb.Fatalf("searching %q: %v", query, err)
	}
	out := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.Citation
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRankingCorpus runs labelled questions against testdata/corpus (22
// documents on overlapping operations topics): the labelled section must
// be in the top 3 for at least 90 % of them.
func TestRankingCorpus(t *testing.T) {
	idx := openIndex(t, "testdata/corpus", Options{})
	if ch := update(t, idx); len(ch.Added) != 22 {
		t.Fatalf("got %d documents added, want 22", len(ch.Added))
	}
	labelled := []struct{ query, want string }{
		{"build from source with go", "install.md#2"},
		{"install deb package apt", "install.md#3"},
		{"verify checksum signature", "install.md#4"},
		{"lame duck mode before stopping", "restart.md#2"},
		{"restart one member at a time", "restart.md#3"},
		{"confirm clients reconnected after restart", "restart.md#4"},
		{"create a stream with file storage", "streams.md#2"},
		{"work queue retention", "streams.md#3"},
		{"purge messages by subject", "streams.md#4"},
		{"durable consumer position", "consumers.md#2"},
		{"ack wait redelivery", "consumers.md#3"},
		{"pull consumers fetching batches", "consumers.md#4"},
		{"subject alternative names hostname", "tls.md#2"},
		{"client certificates mutual tls", "tls.md#3"},
		{"rotate certificates reload", "tls.md#4"},
		{"bcrypt password hashes", "auth.md#2"},
		{"exports and imports between accounts", "auth.md#3"},
		{"operator signs account jwt resolver", "auth.md#4"},
		{"varz connz monitoring endpoints", "monitoring.md#2"},
		{"prometheus metrics scraping", "monitoring.md#3"},
		{"alert when the meta leader is lost", "monitoring.md#4"},
		{"snapshot a stream to a tarball", "backup.md#2"},
		{"restoring an archive", "backup.md#3"},
		{"nightly backup cron object storage", "backup.md#4"},
		{"raft leader election", "cluster.md#3"},
		{"placement tags availability zone", "cluster.md#4"},
		{"leaf node connects to the hub", "leafnodes.md#2"},
		{"interest only mode", "gateways.md#3"},
		{"queue groups across clusters", "gateways.md#4"},
		{"max payload size", "limits.md#3"},
		{"rotate log file by size", "logging.md#3"},
		{"send logs to syslog", "logging.md#4"},
		{"downgrade to an older version", "upgrade.md#4"},
		{"watching key updates", "kv.md#3"},
		{"optimistic concurrency revision", "kv.md#4"},
		{"store files larger than max payload", "objectstore.md#2"},
		{"slow consumer dropped", "troubleshooting.md#2"},
		{"no responders error", "troubleshooting.md#3"},
		{"write deadline slow links", "performance.md#3"},
		{"helm chart values", "kubernetes.md#2"},
		{"mirror streams into another region for disaster recovery", "mirrors.md#4"},
		{"micro service endpoints queue group", "microservices.md#2"},
		{"switch between saved contexts", "cli.md#2"},
	}
	hits := 0
	for _, l := range labelled {
		top := citations(t, idx, l.query, 3)
		if contains(top, l.want) {
			hits++
		} else {
			t.Logf("query %q: got top 3 %v, want %s among them", l.query, top, l.want)
		}
	}
	rate := float64(hits) / float64(len(labelled))
	t.Logf("labelled section in the top 3 for %d of %d queries (%.0f %%)", hits, len(labelled), rate*100)
	if rate < 0.9 {
		t.Errorf("got %.0f %% of labelled sections in the top 3, want at least 90 %%", rate*100)
	}
}

// fillers are documents without the words the ranking tests ask for, so
// those words are rare enough for BM25 to weigh them.
var fillers = map[string]string{
	"f1.md": "# Alpha\n\nUnrelated prose about gardens.\n",
	"f2.md": "# Beta\n\nUnrelated prose about boats.\n",
	"f3.md": "# Gamma\n\nUnrelated prose about bread.\n",
	"f4.md": "# Delta\n\nUnrelated prose about kites.\n",
}

// TestStemmingChangesRanking pins what Porter stemming does: "serving"
// finds the section that says "served" only with it.
func TestStemmingChangesRanking(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"a.md": "# Cache\n\nThe cache served every request from memory.\n",
		"b.md": "# Log\n\nEvery request is logged.\n",
	}, fillers)
	tests := []struct {
		name      string
		tokenizer string
		want      string
	}{
		{"porter", "", "a.md#1"},
		{"no stemming", "unicode61", "b.md#1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := openIndex(t, dir, Options{tokenizer: tt.tokenizer})
			update(t, idx)
			got := citations(t, idx, "serving request", 1)
			if len(got) == 0 || got[0] != tt.want {
				t.Errorf("got top hit %v, want %s", got, tt.want)
			}
		})
	}
}

// TestHeadingBoostChangesRanking pins what the heading weight does: a
// section titled with the word beats a body that repeats it.
func TestHeadingBoostChangesRanking(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"compaction.md": "# Compaction\n\nRun it weekly on quiet hours so readers are not slowed down by the rewrite of old segment files on disk.\n",
		"notes.md":      "# Notes\n\nCompaction notes: compaction runs after compaction is queued.\n",
	}, fillers)
	tests := []struct {
		name   string
		weight float64
		want   string
	}{
		{"headings weighted", defaultHeadingWeight, "compaction.md#1"},
		{"headings like body", 1, "notes.md#1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := openIndex(t, dir, Options{headingWeight: tt.weight})
			update(t, idx)
			got := citations(t, idx, "compaction", 1)
			if len(got) == 0 || got[0] != tt.want {
				t.Errorf("got top hit %v, want %s", got, tt.want)
			}
		})
	}
}

func TestChunking(t *testing.T) {
	long := strings.Repeat("word ", 300) // 1500 bytes a paragraph
	tests := []struct {
		name         string
		file, text   string
		wantHeadings []string
	}{
		{"heading paths", "a.md", "# Install\n\nintro\n\n## From source\n\nbuild\n\n### On Linux\n\nmake\n\n## Package\n\napt\n",
			[]string{"Install", "Install > From source", "Install > From source > On Linux", "Install > Package"}},
		{"preamble and front matter", "b.md", "---\ntitle: x\n---\nbefore\n\n# Title\n\nbody\n", []string{"", "Title"}},
		{"setext and closing hashes", "c.md", "Title\n=====\n\ntext\n\n## Part ##\n\nmore\n", []string{"Title", "Title > Part"}},
		{"heading inside a list is text", "d.md", "# Top\n\n- item\n\n  # not a section\n", []string{"Top"}},
		{"code fence with a hash line", "e.md", "# Top\n\n```\n# comment\n```\n", []string{"Top"}},
		{"long section split, heading kept", "f.md", "# Big\n\n" + strings.Repeat(long+"\n\n", 6), []string{"Big", "Big", "Big"}},
		{"plain text by paragraphs", "g.txt", strings.Repeat(long+"\n\n", 3), []string{"", "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := chunkDocument(tt.file, []byte(tt.text))
			var got []string
			for _, c := range chunks {
				got = append(got, c.heading)
				if len(c.text) > MaxSectionBytes {
					t.Errorf("got a section of %d bytes, want at most %d", len(c.text), MaxSectionBytes)
				}
				if !strings.HasSuffix(c.text, c.body) {
					t.Errorf("got body %q not at the end of text %q", c.body, c.text)
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.wantHeadings, "|") {
				t.Errorf("got headings %q, want %q", got, tt.wantHeadings)
			}
		})
	}
}

func TestIncrementalUpdate(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"keep.md":   "# Keep\n\nunchanged text\n",
		"edit.md":   "# Edit\n\nold wording\n",
		"delete.md": "# Delete\n\ngoing away\n",
	})
	idx := openIndex(t, dir, Options{})
	if ch := update(t, idx); len(ch.Added) != 3 {
		t.Fatalf("got %v added, want 3 documents", ch.Added)
	}
	writeFile(t, dir, "edit.md", "# Edit\n\nfresh phrasing\n")
	writeFile(t, dir, "new.md", "# New\n\nbrand new\n")
	if err := os.Remove(filepath.Join(dir, "delete.md")); err != nil {
		t.Fatal(err)
	}
	ch := update(t, idx)
	if got, want := strings.Join(ch.Added, ","), "new.md"; got != want {
		t.Errorf("got added %q, want %q", got, want)
	}
	if got, want := strings.Join(ch.Changed, ","), "edit.md"; got != want {
		t.Errorf("got changed %q, want %q", got, want)
	}
	if got, want := strings.Join(ch.Removed, ","), "delete.md"; got != want {
		t.Errorf("got removed %q, want %q", got, want)
	}
	if got, want := ch.Unchanged, 1; got != want {
		t.Errorf("got %d unchanged, want %d", got, want)
	}
	if got := citations(t, idx, "old wording", 5); len(got) != 0 {
		t.Errorf("got %v for the replaced text, want nothing", got)
	}
	if got := citations(t, idx, "fresh phrasing", 5); !contains(got, "edit.md#1") {
		t.Errorf("got %v, want edit.md#1", got)
	}
	if got := citations(t, idx, "going away", 5); len(got) != 0 {
		t.Errorf("got %v for a deleted file, want nothing", got)
	}
	// Touching a file without changing it keeps it unchanged.
	writeFile(t, dir, "keep.md", "# Keep\n\nunchanged text\n")
	if ch := update(t, idx); !ch.Empty() {
		t.Errorf("got %+v after touching a file, want no change", ch)
	}
	// One file through UpdatePaths.
	writeFile(t, dir, "keep.md", "# Keep\n\nnow different\n")
	ch, err := idx.UpdatePaths(t.Context(), []string{"keep.md", "missing.md"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ch.Changed, ","), "keep.md"; got != want {
		t.Errorf("got changed %q, want %q", got, want)
	}
}

func TestHostileQueries(t *testing.T) {
	dir := writeDocs(t, map[string]string{
		"a.md": "# Near the end\n\nThe drain is near.\n",
		"b.md": "# Other\n\nNothing to see.\n",
	})
	idx := openIndex(t, dir, Options{})
	update(t, idx)
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"a quote", `"`, nil},
		{"a star", `*`, nil},
		{"a minus", `-`, nil},
		{"NEAR(", `NEAR(`, []string{"a.md#1"}},
		{"AND alone", `AND`, nil},
		{"column filter", `body:drain`, []string{"a.md#1"}},
		{"unbalanced quotes and operators", `"drain OR -nothing* AND (`, []string{"a.md#1", "b.md#1"}},
		{"caret and braces", `^{near} + :`, []string{"a.md#1"}},
		{"one MiB", strings.Repeat("drain ", 1<<20/6), []string{"a.md#1"}},
		{"one MiB of quotes", strings.Repeat(`"`, 1<<20), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := citations(t, idx, tt.query, 10)
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSkippedFiles(t *testing.T) {
	outside := writeDocs(t, map[string]string{"secret.md": "# Secret\n\npassword hunter2\n"})
	dir := writeDocs(t, map[string]string{
		"ok.md":        "# Fine\n\nvisible words\n",
		".hidden.md":   "# Hidden\n\nhunter2\n",
		"huge.md":      strings.Repeat("x", MaxDocumentSize+1),
		"image.png":    "hunter2",
		"notes.txt":    "binary\x00hunter2",
		"latin1.txt":   "caf\xe9 hunter2",
		".git/HEAD.md": "hunter2",
	})
	for name, target := range map[string]string{
		"link.md":  filepath.Join(outside, "secret.md"),
		"linkdir":  outside,
		"inner.md": filepath.Join(dir, "ok.md"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	idx := openIndex(t, dir, Options{})
	ch := update(t, idx)
	if got, want := strings.Join(ch.Added, ","), "ok.md"; got != want {
		t.Errorf("got indexed %q, want only %q", got, want)
	}
	if got := citations(t, idx, "hunter2", 10); len(got) != 0 {
		t.Errorf("got %v, want nothing from skipped files", got)
	}
	// A symlink named directly (as a watcher event would) is still refused.
	ch, err := idx.UpdatePaths(t.Context(), []string{"link.md", "linkdir/secret.md"})
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Empty() {
		t.Errorf("got %+v for links, want no change", ch)
	}
}

func TestStoreRefusals(t *testing.T) {
	dir := writeDocs(t, map[string]string{"a.md": "# A\n\ntext\n"})
	tests := []struct {
		name  string
		setup func(t *testing.T, store string)
		want  string
	}{
		{"foreign database", func(t *testing.T, store string) {
			other, err := Open(Options{Directory: dir, Store: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.db.Exec(`PRAGMA application_id = 42`); err != nil {
				t.Fatal(err)
			}
			other.Close()
			data, err := os.ReadFile(filepath.Join(other.Store(), StoreFile))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, store, StoreFile, string(data))
		}, "not a fiskfleet knowledge index"},
		{"inside the directory", nil, "is inside knowledge.directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			if tt.setup == nil {
				store = filepath.Join(dir, "index")
			} else {
				tt.setup(t, store)
			}
			_, err := Open(Options{Directory: dir, Store: store})
			if !errors.Is(err, ErrStore) {
				t.Fatalf("got %v, want an error wrapping ErrStore", err)
			}
			for _, want := range []string{"knowledge.store", tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got %q, want it to contain %q", err, want)
				}
			}
			if tt.setup == nil {
				return
			}
			if !strings.Contains(err.Error(), RebuildCommand) {
				t.Errorf("got %q, want it to name %q", err, RebuildCommand)
			}
			// The rebuild path replaces the store.
			idx, err := Open(Options{Directory: dir, Store: store, Rebuild: true})
			if err != nil {
				t.Fatalf("rebuilding: got %v, want a fresh store", err)
			}
			defer idx.Close()
			if ch := update(t, idx); len(ch.Added) != 1 {
				t.Errorf("got %+v after the rebuild, want one document added", ch)
			}
		})
	}
}

func TestStorePermissions(t *testing.T) {
	dir := writeDocs(t, map[string]string{"a.md": "# A\n\ntext\n"})
	store := filepath.Join(t.TempDir(), "nested", "store")
	idx := openIndex(t, dir, Options{Store: store})
	update(t, idx)
	for path, want := range map[string]os.FileMode{store: 0o700, filepath.Join(store, StoreFile): 0o600, filepath.Join(store, StoreFile) + "-wal": 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("got %s mode %o, want %o", path, got, want)
		}
	}
}

// TestTwoWritersOneStore runs two indexes (as two gateways would) on one
// store, updating and searching at once: neither fails and the store stays
// whole.
func TestTwoWritersOneStore(t *testing.T) {
	files := map[string]string{}
	for n := range 60 {
		files[filepath.ToSlash(filepath.Join("d", strings.Repeat("x", n%5+1)+string(rune('a'+n%26))+".md"))] = "# Doc\n\nshared words number " + strings.Repeat("z", n) + "\n"
	}
	dir := writeDocs(t, files)
	store := filepath.Join(t.TempDir(), "store")
	a := openIndex(t, dir, Options{Store: store})
	b := openIndex(t, dir, Options{Store: store})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, 4)
	for _, idx := range []*Index{a, b} {
		go func() {
			for range 5 {
				writeFile(t, dir, "d/churn.md", "# Churn\n\n"+strings.Repeat("churn ", 50))
				if _, err := idx.Update(ctx, nil); err != nil {
					errs <- err
					return
				}
				if _, err := idx.Search(ctx, "shared words", 5); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("got %v, want both gateways to update and search", err)
		}
	}
	a.Close()
	b.Close()
	fresh := openIndex(t, dir, Options{Store: store})
	var ok string
	if err := fresh.db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("got integrity %q (%v), want ok", ok, err)
	}
	if _, err := fresh.db.Exec(`INSERT INTO sections_fts(sections_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("got %v from the full-text integrity check, want none", err)
	}
	a = fresh
	st, err := a.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Documents, len(files)+1; got != want {
		t.Errorf("got %d documents, want %d", got, want)
	}
}

func TestResultCapAndExcerpts(t *testing.T) {
	big := "# Big\n\n" + strings.Repeat("filler text here. ", 150) + "needle in the middle. " + strings.Repeat("more filler. ", 100)
	files := map[string]string{"big.md": big}
	for n := range 8 {
		files[string(rune('a'+n))+".md"] = "# Doc\n\nneedle " + strings.Repeat("padding words ", 60)
	}
	idx := openIndex(t, writeDocs(t, files), Options{MaxResultBytes: MinMaxResultBytes * 2})
	update(t, idx)
	res, err := idx.Search(t.Context(), "needle", MaxTopK)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated {
		t.Errorf("got not truncated, want hits cut to max_result_bytes")
	}
	total := len(res.Notice)
	for _, h := range res.Hits {
		total += len(h.Text)
		if h.Document == "big.md" && (!h.Excerpt || !strings.Contains(h.Text, HighlightStart+"needle"+HighlightEnd)) {
			t.Errorf("got %q for the long section, want a highlighted excerpt", h.Text)
		}
	}
	if total > MinMaxResultBytes*2 {
		t.Errorf("got %d bytes of text, want at most %d", total, MinMaxResultBytes*2)
	}
}

func TestEnumeratePages(t *testing.T) {
	files := map[string]string{}
	for n := range PageSize + 30 {
		files[filepath.ToSlash(filepath.Join("runbooks", strings.Repeat("r", 1+n/26)+string(rune('a'+n%26))+".md"))] = "# R\n\ntext\n"
	}
	files["other/x.md"] = "# X\n\ntext\n"
	idx := openIndex(t, writeDocs(t, files), Options{})
	update(t, idx)
	var got []string
	cursor := ""
	pages := 0
	for {
		page, err := idx.Enumerate(t.Context(), "runbooks/", cursor, PageSize)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range page.Documents {
			got = append(got, d.Path)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(got) != PageSize+30 || pages != 2 {
		t.Errorf("got %d documents in %d pages, want %d in 2", len(got), pages, PageSize+30)
	}
	if _, err := idx.Enumerate(t.Context(), "", "!!", PageSize); !errors.Is(err, ErrBadCursor) {
		t.Errorf("got %v for a bad cursor, want ErrBadCursor", err)
	}
}

func TestCitationsRoundTrip(t *testing.T) {
	idx := openIndex(t, "testdata/corpus", Options{})
	update(t, idx)
	res, err := idx.Search(t.Context(), "restart stream cluster", MaxTopK)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hits {
		sec, err := idx.Section(t.Context(), h.Citation)
		if err != nil {
			t.Fatalf("opening %s: %v", h.Citation, err)
		}
		if !h.Excerpt && sec.Text != h.Text {
			t.Errorf("got %q from %s, want the search text %q", sec.Text, h.Citation, h.Text)
		}
	}
	for _, bad := range []string{"nope.md#1", "install.md#99"} {
		if _, err := idx.Section(t.Context(), bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("got %v for %s, want ErrNotFound", err, bad)
		}
	}
	for _, bad := range []string{"install.md", "install.md#0", "#1", "install.md#x"} {
		if _, err := idx.Section(t.Context(), bad); !errors.Is(err, ErrBadCitation) {
			t.Errorf("got %v for %s, want ErrBadCitation", err, bad)
		}
	}
}
