package knowledge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of what is indexed. They bound what one update can cost when an
// operator points knowledge.directory somewhere larger than meant.
const (
	// MaxDocumentSize is the largest file indexed; larger files are
	// skipped. A document bigger than this is not a note a model should
	// read, and one update must not pull hundreds of megabytes.
	MaxDocumentSize = 1 << 20
	// MaxDocuments bounds how many files are indexed. A walk that reaches
	// it stops, and the index says it is incomplete.
	MaxDocuments = 10_000
	// maxTitle bounds a document title, in bytes.
	maxTitle = 200
)

// textExtensions are the file name extensions read as documents, besides
// files without an extension (README, NOTES). Content is checked as well:
// a file that is not valid UTF-8 or holds a NUL byte is skipped.
var textExtensions = map[string]bool{
	".md": true, ".markdown": true, ".mdx": true, ".txt": true, ".text": true,
	".rst": true, ".adoc": true, ".asciidoc": true, ".org": true,
	".yaml": true, ".yml": true, ".json": true, ".toml": true, ".ini": true,
	".conf": true, ".cfg": true, ".csv": true, ".tsv": true, ".log": true,
	".html": true, ".htm": true, ".xml": true,
}

// candidate is a file the walk found: a regular file with a text name,
// not hidden, within the size limit.
type candidate struct {
	name  string // slash-separated, relative to the directory
	size  int64
	mtime int64 // unix nanoseconds
}

// walkFiles lists the candidate documents under root in name order. It
// reports whether it stopped at [MaxDocuments]. An unreadable file or
// subdirectory is skipped; only an unreadable root or a done context is an
// error. Symbolic links are neither followed nor listed.
func walkFiles(ctx context.Context, root *os.Root) (out []candidate, truncated bool, err error) {
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			if name == "." {
				return fmt.Errorf("%w: %w", ErrNoDirectory, err)
			}
			return nil // an unreadable subdirectory or entry is skipped
		}
		if name != "." && strings.HasPrefix(d.Name(), ".") {
			// Hidden entries (.git, editor swap files) are not documents.
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		// Only regular files: a symlink (to a file or a directory) is
		// neither followed nor listed, nor is a device or socket.
		if d.IsDir() || !d.Type().IsRegular() || !textName(name) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > MaxDocumentSize {
			return nil
		}
		if len(out) == MaxDocuments {
			truncated = true
			return fs.SkipAll
		}
		out = append(out, candidate{name: name, size: info.Size(), mtime: info.ModTime().UnixNano()})
		return nil
	})
	if err != nil {
		return nil, truncated, err
	}
	return out, truncated, nil
}

// statCandidate is walkFiles for one name: the candidate, or false when
// name is no longer a document (removed, a link, too large, hidden).
func statCandidate(root *os.Root, name string) (candidate, bool) {
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") {
			return candidate{}, false
		}
	}
	if !textName(name) {
		return candidate{}, false
	}
	info, err := root.Lstat(name)
	if err != nil || !info.Mode().IsRegular() || info.Size() > MaxDocumentSize {
		return candidate{}, false
	}
	return candidate{name: name, size: info.Size(), mtime: info.ModTime().UnixNano()}, true
}

// readDocument reads name through root, or reports false for a file that
// is too large, is not text, or cannot be read.
func readDocument(root *os.Root, name string) ([]byte, bool) {
	data, _, ok := readVersion(root, name, time.Now())
	return data, ok
}

// racyWindow is how recently before a read a file may have been modified
// and still have its modification time trusted. A write lands within the
// file system's timestamp granularity (a clock tick, or seconds on some
// file systems) of the previous one, so a file written just before or
// while it was read may hold other bytes than were read under the same
// modification time and size.
const racyWindow = 2 * time.Second

// readVersion is readDocument that also returns the modification time to
// remember for the bytes read: the file's, taken before reading, or 0
// when the file changed while it was read or was modified within
// [racyWindow] of now. 0 matches no file, so the next update reads the
// file again and compares its content hash instead of trusting its time.
func readVersion(root *os.Root, name string, now time.Time) ([]byte, int64, bool) {
	f, err := root.Open(name)
	if err != nil {
		return nil, 0, false
	}
	defer f.Close()
	// The entry may have been replaced since the walk listed it; root keeps
	// any link inside the directory, and this keeps it a regular file.
	before, err := f.Stat()
	if err != nil || !before.Mode().IsRegular() {
		return nil, 0, false
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentSize+1))
	if err != nil || len(data) > MaxDocumentSize || !isText(data) {
		return nil, 0, false
	}
	mtime := before.ModTime().UnixNano()
	after, err := f.Stat()
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) ||
		int64(len(data)) != before.Size() || now.Sub(before.ModTime()) < racyWindow {
		mtime = 0
	}
	return data, mtime, true
}

// textName reports whether name has a text extension or none at all.
func textName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == "" || textExtensions[ext]
}

// isText reports whether data reads as UTF-8 text.
func isText(data []byte) bool {
	return bytes.IndexByte(data, 0) < 0 && utf8.Valid(data)
}

// lines splits data into lines without their "\n" or "\r\n" endings.
func lines(data []byte) []string {
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil
	}
	out := strings.Split(text, "\n")
	for n, l := range out {
		out[n] = strings.TrimSuffix(l, "\r")
	}
	return out
}

// isMarkdown reports whether name is a markdown document.
func isMarkdown(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown", ".mdx":
		return true
	}
	return false
}

// title returns the first ATX heading of a markdown document (after any
// front matter), else the first non-empty line, cut to maxTitle bytes.
func title(name string, data []byte) string {
	ls := lines(data)
	if isMarkdown(name) {
		body := skipFrontMatter(ls)
		for _, l := range body {
			if h, ok := heading(l); ok {
				return cut(h, maxTitle)
			}
		}
		ls = body
	}
	for _, l := range ls {
		if t := strings.TrimSpace(l); t != "" {
			return cut(t, maxTitle)
		}
	}
	return ""
}

// skipFrontMatter drops a leading YAML front matter block ("---" ... "---").
func skipFrontMatter(ls []string) []string {
	if len(ls) == 0 || strings.TrimSpace(ls[0]) != "---" {
		return ls
	}
	for n := 1; n < len(ls); n++ {
		if t := strings.TrimSpace(ls[n]); t == "---" || t == "..." {
			return ls[n+1:]
		}
	}
	return ls
}

// heading returns the text of an ATX heading line ("## Title ##").
func heading(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return "", false // four spaces of indent is a code block
	}
	level := len(t) - len(strings.TrimLeft(t, "#"))
	if level < 1 || level > 6 {
		return "", false
	}
	rest := t[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "#hashtag" is not a heading
	}
	rest = strings.TrimSpace(rest)
	if trimmed := strings.TrimRight(rest, "#"); trimmed == "" || strings.HasSuffix(trimmed, " ") {
		rest = strings.TrimSpace(trimmed)
	}
	return rest, rest != ""
}

// cut shortens s to at most limit bytes on a rune boundary, marking the cut.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	end := limit
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…"
}
