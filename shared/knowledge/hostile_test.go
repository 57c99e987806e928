package knowledge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// churnText is version v of churned document n: long sections (so
// searches cut excerpts) with the searched words once each, every section
// naming the version, so a document indexed from two versions at once
// would show two.
func churnText(n, v int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Churn %d\n\n", n)
	for s := range 3 {
		fmt.Fprintf(&b, "## Part %d of version ver%05d\n\n", s, v)
		for range 40 {
			fmt.Fprintf(&b, "filler words ver%05d without meaning ", v)
		}
		b.WriteString("\nThe rotation lease needs a renewal.\n\n")
	}
	return b.String()
}

// TestTwoGatewaysHammerOneStore runs two indexes on one store, as two
// gateways with their own connection pools would, each updating while
// files change and searching from several goroutines at once: no search
// or update fails (no "database is locked", no "malformed"), both keep
// answering, and the store checks whole afterwards.
func TestTwoGatewaysHammerOneStore(t *testing.T) {
	files := map[string]string{}
	for n := range 40 {
		files[fmt.Sprintf("churn/c%02d.md", n)] = churnText(n, 0)
		files[fmt.Sprintf("still/s%02d.md", n)] = "# Still\n\nrotation notes that do not change, number " + fmt.Sprint(n) + "\n"
	}
	dir := writeDocs(t, files)
	store := filepath.Join(t.TempDir(), "store")
	gws := []*Index{openIndex(t, dir, Options{Store: store}), openIndex(t, dir, Options{Store: store})}
	update(t, gws[0])

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		searches [2]int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	// The files change all the time.
	wg.Go(func() {
		for v := 1; ctx.Err() == nil; v++ {
			for n := range 40 {
				writeFile(t, dir, fmt.Sprintf("churn/c%02d.md", n), churnText(n, v))
			}
		}
	})
	for g, idx := range gws {
		// Each gateway updates: full walks and the watcher's path.
		wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				var err error
				if k%2 == 0 {
					_, err = idx.Update(ctx, nil)
				} else {
					_, err = idx.UpdatePaths(ctx, []string{fmt.Sprintf("churn/c%02d.md", k%40), "churn/gone.md"})
				}
				if err != nil && ctx.Err() == nil {
					fail("gateway %d update: %v", g, err)
				}
			}
		})
		for range 3 {
			wg.Go(func() {
				for ctx.Err() == nil {
					res, err := idx.Search(ctx, "rotation lease renewal", 10)
					if err != nil {
						if ctx.Err() == nil {
							fail("gateway %d search: %v", g, err)
						}
						continue
					}
					if len(res.Hits) == 0 {
						fail("gateway %d search: no hit", g)
					}
					for _, h := range res.Hits {
						if _, err := idx.Section(ctx, h.Citation); err != nil && ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
							fail("gateway %d section %s: %v", g, h.Citation, err)
						}
					}
					mu.Lock()
					searches[g]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("searches answered: %v", searches)
	if searches[0] == 0 || searches[1] == 0 {
		t.Errorf("searches answered per gateway: got %v, want both answering", searches)
	}

	// The final update of either gateway leaves the final files indexed,
	// each from one version: what a fresh index of the directory holds.
	update(t, gws[1])
	checkFinal(t, gws[0], dir, "churn/")
	checkStore(t, dir, store)
}

// verRE matches the version marker of [churnText].
var verRE = regexp.MustCompile(`ver\d{5}`)

// checkFinal checks that idx holds every document under prefix as a
// fresh index of dir does, each from a single version of [churnText].
func checkFinal(t *testing.T, idx *Index, dir, prefix string) {
	t.Helper()
	fresh := openIndex(t, dir, Options{})
	update(t, fresh)
	page, err := fresh.Enumerate(t.Context(), prefix, "", PageSize)
	if err != nil || len(page.Documents) == 0 {
		t.Fatalf("documents under %s: got %v (%v), want some", prefix, page.Documents, err)
	}
	for _, d := range page.Documents {
		_, want, err := fresh.DocumentText(t.Context(), d.Path)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := idx.DocumentText(t.Context(), d.Path)
		if err != nil {
			t.Fatalf("%s: %v", d.Path, err)
		}
		if got != want {
			t.Errorf("%s: got versions %v indexed, want the file's last, %v", d.Path, slices.Compact(verRE.FindAllString(got, -1)), slices.Compact(verRE.FindAllString(want, -1)))
		}
		if v := slices.Compact(verRE.FindAllString(want, -1)); len(v) > 1 {
			t.Errorf("%s: the file holds versions %v, want one", d.Path, v)
		}
	}
}

// checkStore opens the store afresh and runs SQLite's and FTS5's
// integrity checks.
func checkStore(t *testing.T, dir, store string) {
	t.Helper()
	fresh := openIndex(t, dir, Options{Store: store})
	var ok string
	if err := fresh.db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("got integrity %q (%v), want ok", ok, err)
	}
	if _, err := fresh.db.Exec(`INSERT INTO sections_fts(sections_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("got %v from the full-text integrity check, want none", err)
	}
}

func readTestFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFileReplacedWhileIndexing changes one document in every way an
// editor or a sync tool does (a new file renamed over it, truncated and
// rewritten, overwritten in place) while full updates and the watcher's
// single-file updates run: no update fails, and once the changes stop,
// the next update leaves the document indexed from its final content
// alone, as a fresh index of the directory holds it.
func TestFileReplacedWhileIndexing(t *testing.T) {
	files := map[string]string{}
	for n := range 300 {
		files[fmt.Sprintf("bulk/b%03d.md", n)] = churnText(n, 0)
	}
	dir := writeDocs(t, files)
	writeFile(t, dir, "swap/s.md", churnText(1, 0))
	idx := openIndex(t, dir, Options{})
	target := filepath.Join(dir, "swap", "s.md")

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	wg.Go(func() {
		for v := 1; ctx.Err() == nil; v++ {
			text := []byte(churnText(1, v)) // the same length for every v
			var err error
			switch v % 3 {
			case 0: // a new file renamed over it
				tmp := filepath.Join(dir, "swap", ".s.md.tmp")
				if err = os.WriteFile(tmp, text, 0o644); err == nil {
					err = os.Rename(tmp, target)
				}
			case 1: // truncated, then written
				err = os.WriteFile(target, text, 0o644)
			case 2: // overwritten in place, in two writes
				var f *os.File
				if f, err = os.OpenFile(target, os.O_WRONLY, 0); err == nil {
					_, err = f.WriteAt(text[:len(text)/2], 0)
					if err == nil {
						_, err = f.WriteAt(text[len(text)/2:], int64(len(text)/2))
					}
					f.Close()
				}
			}
			if err != nil {
				errs <- err
				return
			}
		}
	})
	for k := 0; ctx.Err() == nil; k++ {
		var err error
		if k%3 == 0 {
			_, err = idx.Update(ctx, nil)
		} else {
			_, err = idx.UpdatePaths(ctx, []string{"swap/s.md"})
		}
		if err != nil && ctx.Err() == nil {
			t.Fatalf("update %d while the file changes: %v", k, err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("changing the file: %v", err)
	}
	if _, err := idx.UpdatePaths(t.Context(), []string{"swap/s.md"}); err != nil {
		t.Fatal(err)
	}
	checkFinal(t, idx, dir, "swap/")
}

// TestRacyModificationTime pins why a file modified just before it was
// read is read again: content that changes within one tick of the file
// system's clock, at the same size, keeps its modification time, and an
// update trusting that time would keep the old text for good.
func TestRacyModificationTime(t *testing.T) {
	dir := writeDocs(t, map[string]string{"a.md": churnText(1, 1)})
	idx := openIndex(t, dir, Options{})
	p := filepath.Join(dir, "a.md")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	update(t, idx) // at once: the file was written within racyWindow
	if err := os.WriteFile(p, []byte(churnText(1, 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same size and, as within one clock tick, the same time.
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	ch := update(t, idx)
	if len(ch.Changed) != 1 {
		t.Fatalf("second update: got %+v, want a.md changed", ch)
	}
	checkFinal(t, idx, dir, "")

	// Once the file is older than the window, its time is trusted and an
	// unchanged file is not read.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	update(t, idx)
	if ch := update(t, idx); ch.Unchanged != 1 || !ch.Empty() {
		t.Fatalf("update of an old unchanged file: got %+v, want it unchanged", ch)
	}
	var mtime int64
	if err := idx.db.QueryRow(`SELECT mtime FROM documents WHERE path = 'a.md'`).Scan(&mtime); err != nil || mtime != old.UnixNano() {
		t.Fatalf("stored time: got %d (%v), want the file's %d", mtime, err, old.UnixNano())
	}
}

// TestDamagedStore overwrites pages in the middle of a store, past the
// header Open reads: Open still opens it (a gateway must not read the
// whole store before it listens), Check refuses it naming knowledge.store
// and the rebuild command, and the operator's rebuild replaces it. (What
// a running index does with it is in health_test.go.)
func TestDamagedStore(t *testing.T) {
	files := map[string]string{}
	for n := range 200 {
		files[fmt.Sprintf("d%03d.md", n)] = churnText(n, 1)
	}
	dir := writeDocs(t, files)
	store := filepath.Join(t.TempDir(), "store")
	idx := openIndex(t, dir, Options{Store: store})
	update(t, idx)
	idx.Close()
	db := filepath.Join(store, StoreFile)
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() < 64<<10 {
		t.Fatalf("store size: got %v (%v), want a store of several pages", fi.Size(), err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 16<<10)), fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	damaged, err := Open(Options{Directory: dir, Store: store})
	if err != nil {
		t.Fatalf("opening the damaged store: got %v, want it opened and refused by Check", err)
	}
	defer damaged.Close()
	if err := damaged.Check(t.Context()); !errors.Is(err, ErrStore) || !strings.Contains(err.Error(), "knowledge.store") || !strings.Contains(err.Error(), RebuildCommand) {
		t.Errorf("Check: got %v, want the corrupt store named with the rebuild command", err)
	}

	rebuilt, err := Open(Options{Directory: dir, Store: store, Rebuild: true})
	if err != nil {
		t.Fatalf("rebuilding: got %v, want a fresh store", err)
	}
	defer rebuilt.Close()
	if ch := update(t, rebuilt); len(ch.Added) != len(files) {
		t.Errorf("after the rebuild: got %d added, want %d", len(ch.Added), len(files))
	}
	if err := rebuilt.Check(t.Context()); err != nil {
		t.Errorf("the rebuilt store: %v", err)
	}
}
