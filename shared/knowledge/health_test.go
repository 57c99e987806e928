package knowledge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// healthDocs is the directory the store-damage tests index: enough
// documents for a store of many pages.
func healthDocs(tb testing.TB) (string, int) {
	tb.Helper()
	files := map[string]string{}
	for n := range 60 {
		files[fmt.Sprintf("d%03d.md", n)] = churnText(n, 1)
	}
	return writeDocs(tb, files), len(files)
}

// builtStore indexes dir into a fresh store, closes it, and returns the
// store folder and the citations of healthQuery, the answer a sound index
// gives.
func builtStore(tb testing.TB, dir string) (string, []string) {
	tb.Helper()
	store := filepath.Join(tb.TempDir(), "store")
	idx := openIndex(tb, dir, Options{Store: store})
	update(tb, idx)
	want := citations(tb, idx, healthQuery, 10)
	if len(want) == 0 {
		tb.Fatalf("search of the sound index: got no hits for %q", healthQuery)
	}
	if err := idx.Close(); err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(store, StoreFile+"-wal")); err == nil {
		tb.Fatalf("a closed store still has its write-ahead log: damage would not reach the file")
	}
	return store, want
}

const healthQuery = "rotation lease renewal ver00001"

// sqliteWords are SQLite's own error texts: never shown to a searcher.
var sqliteWords = []string{"malformed", "not a database", "SQLITE", "(11)", "(26)", "disk image", "no such table", "integrity check"}

// checkPlain fails tb unless err is ErrUnavailable in plain words naming
// knowledge.store.
func checkPlain(tb testing.TB, what string, err error) {
	tb.Helper()
	if !errors.Is(err, ErrUnavailable) {
		tb.Errorf("%s: got %v, want ErrUnavailable", what, err)
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, "knowledge.store") {
		tb.Errorf("%s: got %q, want it to name knowledge.store", what, msg)
	}
	for _, w := range sqliteWords {
		if strings.Contains(msg, w) {
			tb.Errorf("%s: got %q, want no SQLite error text (%q)", what, msg, w)
		}
	}
}

// damageAt overwrites the file at off (negative: from the end) with data.
func damageAt(tb testing.TB, file string, off int64, data []byte) {
	tb.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		fi, err := f.Stat()
		if err != nil {
			tb.Fatal(err)
		}
		off += fi.Size()
	}
	if _, err := f.WriteAt(data, off); err != nil {
		tb.Fatal(err)
	}
}

// garbage returns n random bytes.
func garbage(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

// runIndex runs idx in the background until the test ends, logging to
// the returned buffer.
func runIndex(tb testing.TB, idx *Index) *fisktest.Buffer {
	tb.Helper()
	logs := &fisktest.Buffer{}
	idx.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- idx.Run(ctx, nil) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		if tb.Failed() {
			tb.Logf("index log:\n%s", logs)
		}
	})
	return logs
}

// TestRebuildDamagedStore damages a closed store in the ways disks, crashes
// and people damage files, then opens and runs it as a gateway does: Open
// opens it (never refusing a store it can rebuild), a search before the
// rebuild answers from the damaged store or says plainly the store is
// damaged, Run logs the rebuild's start (naming the file and SQLite's
// error) and end (with counts and duration), and the rebuilt store passes
// the integrity check and answers as a sound one.
func TestRebuildDamagedStore(t *testing.T) {
	t.Parallel()
	dir, docs := healthDocs(t)
	tests := []struct {
		name   string
		damage func(tb testing.TB, file string)
	}{
		{"truncated to half", func(tb testing.TB, file string) {
			fi, err := os.Stat(file)
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.Truncate(file, fi.Size()/2); err != nil {
				tb.Fatal(err)
			}
		}},
		{"truncated inside the header", func(tb testing.TB, file string) {
			if err := os.Truncate(file, 60); err != nil {
				tb.Fatal(err)
			}
		}},
		{"garbage over pages", func(tb testing.TB, file string) {
			fi, err := os.Stat(file)
			if err != nil {
				tb.Fatal(err)
			}
			damageAt(tb, file, fi.Size()/3, garbage(3*4096))
		}},
		{"garbage over the last page", func(tb testing.TB, file string) { damageAt(tb, file, -4096, garbage(4096)) }},
		{"header overwritten", func(tb testing.TB, file string) { damageAt(tb, file, 0, garbage(100)) }},
		{"first page zeroed", func(tb testing.TB, file string) { damageAt(tb, file, 0, make([]byte, 4096)) }},
		{"not a database", func(tb testing.TB, file string) {
			if err := os.WriteFile(file, []byte(strings.Repeat("a text file copied over the index\n", 500)), 0o600); err != nil {
				tb.Fatal(err)
			}
		}},
		{"write-ahead log of another store", func(tb testing.TB, file string) {
			// A store copied back from a backup beside the log of the
			// store it replaced: SQLite reads the foreign log's pages.
			other := writeDocs(tb, map[string]string{"x.md": strings.Repeat("# X\n\nunrelated words here\n\n", 40)})
			oidx := openIndex(tb, other, Options{})
			update(tb, oidx)
			for n := range 10 {
				writeFile(tb, other, fmt.Sprintf("y%02d.md", n), strings.Repeat("# Y\n\nmore unrelated words\n\n", 20))
			}
			if _, err := oidx.UpdatePaths(tb.Context(), func() []string {
				var names []string
				for n := range 10 {
					names = append(names, fmt.Sprintf("y%02d.md", n))
				}
				return names
			}()); err != nil {
				tb.Fatal(err)
			}
			wal, err := os.ReadFile(filepath.Join(oidx.Store(), StoreFile+"-wal"))
			if err != nil || len(wal) == 0 {
				tb.Fatalf("the other store's write-ahead log: %v (%d bytes), want one to copy", err, len(wal))
			}
			if err := os.WriteFile(file+"-wal", wal, 0o600); err != nil {
				tb.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, want := builtStore(t, dir)
			file := filepath.Join(store, StoreFile)
			tt.damage(t, file)

			idx, err := Open(Options{Directory: dir, Store: store, CheckInterval: -1})
			if err != nil {
				t.Fatalf("Open: got %v, want the damaged store opened for a rebuild", err)
			}
			t.Cleanup(func() { idx.Close() })
			// Before Run: an answer from what is readable, or the plain
			// message an operator's CLI gets.
			if _, err := idx.Search(t.Context(), healthQuery, 10); err != nil {
				checkPlain(t, "search before the rebuild", err)
				if !strings.Contains(err.Error(), RebuildCommand) {
					t.Errorf("search before the rebuild, with no gateway running: got %q, want the rebuild command", err)
				}
			}

			logs := runIndex(t, idx)
			fisktest.WaitFor(t, 60*time.Second, "the index to finish its first build or rebuild", func() bool {
				out := logs.String()
				return strings.Contains(out, "knowledge index ready") || strings.Contains(out, "knowledge store rebuilt") || strings.Contains(out, "failed")
			})
			if idx.Damaged() {
				t.Fatalf("after Run's first build: store still damaged\n%s", logs)
			}
			out := logs.String()
			started := strings.Contains(out, "rebuilding the damaged knowledge store") && strings.Contains(out, "store="+file)
			finished := strings.Contains(out, "knowledge store rebuilt") && strings.Contains(out, fmt.Sprintf("documents=%d", docs)) && strings.Contains(out, "duration=")
			switch {
			case started && finished:
				t.Logf("rebuilt: %s", logLine(out, "knowledge store rebuilt"))
			case !started && !finished && strings.Contains(out, "knowledge index ready"):
				// Damage SQLite does not see (a foreign log it discards)
				// needs no rebuild: the check is what decides.
				t.Logf("no rebuild: the check found the store sound")
			default:
				t.Errorf("log: got start %v, end %v, want both lines of a rebuild (or neither and a sound store)", started, finished)
			}
			if err := idx.Check(t.Context()); err != nil {
				t.Errorf("Check after Run: %v", err)
			}
			if got := citations(t, idx, healthQuery, 10); !slices.Equal(got, want) {
				t.Errorf("search after Run: got %v, want %v", got, want)
			}
			if s, err := idx.Stats(t.Context()); err != nil || s.Documents != docs {
				t.Errorf("stats after Run: got %d documents (%v), want %d", s.Documents, err, docs)
			}
			if tmps, _ := filepath.Glob(file + rebuildSuffix + "*"); len(tmps) > 0 {
				t.Errorf("rebuild files left behind: %v", tmps)
			}
		})
	}
}

// logLine returns the first log line holding s.
func logLine(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestRebuildWhileSearching damages a running index's store under
// searches from several goroutines (run with -race): the periodic check
// finds it, the rebuild runs while searches go on, every search answers
// or says plainly that the index is being rebuilt, and once rebuilt the
// answers are a sound index's.
func TestRebuildWhileSearching(t *testing.T) {
	t.Parallel()
	dir, docs := healthDocs(t)
	// Pages a search may not read, found by the check; a header every
	// search reads, found by the searches.
	for _, kind := range []string{"pages", "header"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			rebuildWhileSearching(t, dir, docs, kind)
		})
	}
}

func rebuildWhileSearching(t *testing.T, dir string, docs int, kind string) {
	store, want := builtStore(t, dir)
	file := filepath.Join(store, StoreFile)
	idx, err := Open(Options{Directory: dir, Store: store, CheckInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	logs := runIndex(t, idx)
	fisktest.WaitFor(t, 30*time.Second, "the first build", func() bool { return strings.Contains(logs.String(), "knowledge index ready") })

	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg                       sync.WaitGroup
		mu                       sync.Mutex
		answers, told, rebuiltOK int
		failures                 []string
	)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := idx.Search(ctx, healthQuery, 10)
				mu.Lock()
				switch {
				case ctx.Err() != nil:
				case err != nil:
					told++
					if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "being rebuilt") || slices.ContainsFunc(sqliteWords, func(w string) bool { return strings.Contains(err.Error(), w) }) {
						if len(failures) < 5 {
							failures = append(failures, err.Error())
						}
					}
				default:
					answers++
					_ = res
				}
				mu.Unlock()
				// A searcher's pace, not a spin: the rebuild needs the CPU.
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // searches under way before the damage
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if kind == "header" {
		damageAt(t, file, 0, garbage(100))
	} else {
		damageAt(t, file, fi.Size()/3, garbage(4*4096))
	}
	fisktest.WaitFor(t, 60*time.Second, "the damage to be found and the rebuild to finish", func() bool {
		return strings.Contains(logs.String(), "knowledge store rebuilt")
	})
	// Searches go on a little after the rebuild: they must be sound.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := citations(t, idx, healthQuery, 10); slices.Equal(got, want) {
			rebuiltOK++
		} else {
			t.Fatalf("search after the rebuild: got %v, want %v", got, want)
		}
	}
	cancel()
	wg.Wait()
	for _, f := range failures {
		t.Errorf("search during the rebuild: got %q, want an answer or ErrUnavailable saying the index is being rebuilt, in plain words", f)
	}
	t.Logf("searches: %d answered, %d told the index is rebuilding; %d sound after; %s", answers, told, rebuiltOK, logLine(logs.String(), "knowledge store rebuilt"))
	if !strings.Contains(logs.String(), "found damaged") {
		t.Errorf("log: want the damage logged when found")
	}
	if err := idx.Check(t.Context()); err != nil {
		t.Errorf("Check after the rebuild: %v", err)
	}
	if s, err := idx.Stats(t.Context()); err != nil || s.Documents != docs {
		t.Errorf("stats after the rebuild: got %d documents (%v), want %d", s.Documents, err, docs)
	}
}

// TestRebuildFails runs a damaged store whose directory has gone: the
// failed rebuild is logged, searches say so plainly naming
// knowledge.directory, and once the directory is back the next check
// rebuilds it.
func TestRebuildFails(t *testing.T) {
	t.Parallel()
	dir, docs := healthDocs(t)
	store, want := builtStore(t, dir)
	file := filepath.Join(store, StoreFile)
	damageAt(t, file, 0, garbage(100))
	away := dir + ".away"
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	// Open needs the directory; it goes once the index is open.
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	idx, err := Open(Options{Directory: dir, Store: store, CheckInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	logs := runIndex(t, idx)
	fisktest.WaitFor(t, 30*time.Second, "the rebuild to fail", func() bool {
		return strings.Contains(logs.String(), "rebuilding the knowledge store failed")
	})
	_, err = idx.Search(t.Context(), healthQuery, 10)
	checkPlain(t, "search after a failed rebuild", err)
	if err != nil && (!strings.Contains(err.Error(), "knowledge.directory") || !strings.Contains(err.Error(), "failed")) {
		t.Errorf("search after a failed rebuild: got %q, want it to say the rebuild from knowledge.directory failed", err)
	}
	t.Logf("searcher sees: %v", err)
	if b, err := os.ReadFile(file); err != nil || len(b) == 0 {
		t.Errorf("the damaged store after a failed rebuild: %v, want it left as it was", err)
	}

	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	fisktest.WaitFor(t, 30*time.Second, "a later check to rebuild the store", func() bool { return !idx.Damaged() })
	if got := citations(t, idx, healthQuery, 10); !slices.Equal(got, want) {
		t.Errorf("search after the retried rebuild: got %v, want %v", got, want)
	}
	if s, err := idx.Stats(t.Context()); err != nil || s.Documents != docs {
		t.Errorf("stats after the retried rebuild: got %d documents (%v), want %d", s.Documents, err, docs)
	}
}

// TestRebuildInterrupted stops a rebuild part way, as a crash would: the
// damaged store is left byte for byte as it was (the rebuild wrote only
// its own file), and a leftover of a rebuild that died long ago is
// removed by the next Open.
func TestRebuildInterrupted(t *testing.T) {
	t.Parallel()
	dir, _ := healthDocs(t)
	store, want := builtStore(t, dir)
	file := filepath.Join(store, StoreFile)
	damageAt(t, file, -8192, garbage(4096))
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Open(Options{Directory: dir, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	// Cancelled as the rebuild reads its first documents.
	idx.health.damage = errors.New("test damage")
	go func() {
		for !idx.Rebuilding() {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := idx.rebuild(ctx); err == nil {
		t.Fatalf("rebuild: got no error, want the cancellation")
	}
	idx.Close()
	after, err := os.ReadFile(file)
	if err != nil || string(after) != string(before) {
		t.Errorf("the damaged store after an interrupted rebuild: changed (%v), want it as it was", err)
	}
	if tmps, _ := filepath.Glob(file + rebuildSuffix + "*"); len(tmps) > 0 {
		t.Errorf("an interrupted rebuild left %v, want its file removed", tmps)
	}

	// A process killed mid-rebuild leaves its file: removed once stale.
	leftover := file + rebuildSuffix + "12345"
	if err := os.WriteFile(leftover, garbage(8192), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleRebuild)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	fresh := file + rebuildSuffix + "67890"
	if err := os.WriteFile(fresh, garbage(8192), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Open(Options{Directory: dir, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if _, err := os.Stat(leftover); err == nil {
		t.Errorf("a stale rebuild file survived Open, want it removed")
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a rebuild file being written (by another process) was removed by Open: %v", err)
	}
	// With a fresh rebuild file there, a searcher is told another
	// process is rebuilding.
	if _, err := again.Search(t.Context(), healthQuery, 10); err != nil {
		checkPlain(t, "search while another process rebuilds", err)
	}
	os.Remove(fresh)
	again.health.damage = errors.New("test damage")
	if _, err := again.rebuild(t.Context()); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if got := citations(t, again, healthQuery, 10); !slices.Equal(got, want) {
		t.Errorf("search after the rebuild: got %v, want %v", got, want)
	}
}
