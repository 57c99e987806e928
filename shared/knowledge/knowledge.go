package knowledge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Names of the knowledge built-ins, as listed in expose.agent.mcp.builtins.
const (
	SearchTool    = "knowledge_search"
	EnumerateTool = "knowledge_enumerate"
)

// ToolNames returns the names of every knowledge built-in, sorted. It is the
// one list config validates the builtins allowlist against, so a name is
// never spelled in two places. The slice is fresh on every call.
func ToolNames() []string { return []string{EnumerateTool, SearchTool} }

// Limits of a walk over the directory. They bound what one call can cost
// when an operator points knowledge.directory somewhere larger than meant.
const (
	// MaxDocumentSize is the largest file read; larger files are skipped.
	// A document bigger than this is not a note a model should page through
	// line by line, and a call must not pull hundreds of megabytes.
	MaxDocumentSize = 1 << 20
	// MaxDocuments bounds how many candidate files one call reads. A walk
	// that reaches it stops and marks its result truncated.
	MaxDocuments = 10_000
	// DefaultLimit is how many matches a search returns when the caller sets
	// no limit: enough to answer most questions, small enough for a model's
	// context.
	DefaultLimit = 20
	// MaxLimit is the largest limit a search accepts.
	MaxLimit = 100
	// MaxLineText is the longest match text returned, in bytes. A minified
	// JSON file is one enormous line; the excerpt is cut around the match.
	MaxLineText = 400
	// maxTitle bounds a document title, in bytes.
	maxTitle = 200
	// maxQuery bounds a search query, in bytes.
	maxQuery = 1000
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

// Index reads the documents of one directory. The zero value is not
// usable; build one with [New]. An Index holds no open files and no
// document contents, so it is safe for concurrent use and needs no Close.
type Index struct {
	dir string
}

// New returns an [Index] over dir, which must exist and be a directory. A
// relative dir is resolved against the working directory now, so a later
// change of working directory does not move the documents.
func New(dir string) (*Index, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: no directory given", ErrNoDirectory)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: resolving %s: %w", ErrNoDirectory, dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	defer root.Close()
	fi, err := root.Stat(".")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNoDirectory, abs)
	}
	return &Index{dir: abs}, nil
}

// Dir returns the absolute directory the index reads.
func (i *Index) Dir() string { return i.dir }

// Document is one entry of [Listing].
type Document struct {
	// Name is the slash-separated path relative to the directory.
	Name string `json:"name"`
	// Bytes is the document's size.
	Bytes int64 `json:"bytes"`
	// Title is the first markdown heading of a markdown document, else its
	// first non-empty line.
	Title string `json:"title"`
}

// Listing is the result of [Index.Enumerate] and the JSON that
// knowledge_enumerate returns.
type Listing struct {
	Documents []Document `json:"documents"`
	// Truncated reports that the walk stopped at [MaxDocuments].
	Truncated bool `json:"truncated,omitempty"`
}

// Match is one line that contains the query.
type Match struct {
	Document string `json:"document"`
	// Line is 1-based.
	Line int `json:"line"`
	// Text is the line, cut to [MaxLineText] bytes around the match.
	Text string `json:"text"`
}

// Results is the result of [Index.Search] and the JSON that
// knowledge_search returns.
type Results struct {
	Matches []Match `json:"matches"`
	// Truncated reports that more lines matched than the limit, or that the
	// walk stopped at [MaxDocuments].
	Truncated bool `json:"truncated,omitempty"`
}

// Enumerate lists the documents in name order.
func (i *Index) Enumerate(ctx context.Context) (Listing, error) {
	out := Listing{Documents: []Document{}}
	truncated, err := i.walk(ctx, func(name string, data []byte) bool {
		out.Documents = append(out.Documents, Document{Name: name, Bytes: int64(len(data)), Title: title(name, data)})
		return true
	})
	out.Truncated = truncated
	return out, err
}

// Search returns the lines that contain query, compared case-insensitively,
// in document name order and then line order, so the same directory gives
// the same answer every time. A limit outside 1..[MaxLimit] is clamped
// ([DefaultLimit] when zero or less); an empty query matches nothing.
func (i *Index) Search(ctx context.Context, query string, limit int) (Results, error) {
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	out := Results{Matches: []Match{}}
	if query == "" {
		return out, nil
	}
	needle := strings.ToLower(query)
	truncated, err := i.walk(ctx, func(name string, data []byte) bool {
		for n, line := range lines(data) {
			lower := strings.ToLower(line)
			at := strings.Index(lower, needle)
			if at < 0 {
				continue
			}
			if len(out.Matches) == limit {
				out.Truncated = true
				return false
			}
			if len(lower) != len(line) {
				at = -1 // case folding moved the bytes; cut from the start
			}
			out.Matches = append(out.Matches, Match{Document: name, Line: n + 1, Text: excerpt(line, at, len(needle))})
		}
		return true
	})
	out.Truncated = out.Truncated || truncated
	return out, err
}

// walk calls fn with each document in name order until fn returns false. It
// reports whether it stopped at [MaxDocuments]. An unreadable file or
// subdirectory is skipped; only an unreadable directory root or a done
// context is an error.
func (i *Index) walk(ctx context.Context, fn func(name string, data []byte) bool) (truncated bool, err error) {
	root, err := os.OpenRoot(i.dir)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrNoDirectory, err)
	}
	defer root.Close()
	candidates := 0
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
		if candidates == MaxDocuments {
			truncated = true
			return fs.SkipAll
		}
		candidates++
		data, ok := readDocument(root, name, d)
		if !ok {
			return nil
		}
		if !fn(name, data) {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return truncated, fmt.Errorf("reading knowledge directory %s: %w", i.dir, err)
	}
	return truncated, nil
}

// readDocument reads name through root, or reports false for a file that
// is too large, is not text, or cannot be read.
func readDocument(root *os.Root, name string, d fs.DirEntry) ([]byte, bool) {
	if info, err := d.Info(); err != nil || info.Size() > MaxDocumentSize {
		return nil, false
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	// The entry may have been replaced since the walk listed it; root keeps
	// any link inside the directory, and this keeps it a regular file.
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDocumentSize+1))
	if err != nil || len(data) > MaxDocumentSize || !isText(data) {
		return nil, false
	}
	return data, true
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

// excerpt cuts line to [MaxLineText] bytes around the match at byte offset
// at of length n; a negative at keeps the start of the line.
func excerpt(line string, at, n int) string {
	if len(line) <= MaxLineText {
		return line
	}
	start := 0
	if at >= 0 {
		// Show some context before the match, then as much of the match
		// as fits.
		start = at - MaxLineText/4
		if at+n > start+MaxLineText {
			start = min(at, at+n-MaxLineText)
		}
		start = max(0, min(start, len(line)-MaxLineText))
	}
	end := start + MaxLineText
	for start > 0 && !utf8.RuneStart(line[start]) {
		start++
	}
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	out := line[start:end]
	if start > 0 {
		out = "…" + out
	}
	if end < len(line) {
		out += "…"
	}
	return out
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
