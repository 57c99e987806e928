// Package linescan keeps the line scan knowledge_search ran before the
// full-text index replaced it (shared/knowledge/knowledge.go at commit
// c4ec499): the baseline the benchmarks measure the index against. Every
// call walks the directory and reads every file. It is a test helper:
// only _test.go files may import it.
package linescan

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"
)

// DefaultLimit is the number of lines a search returned when it asked
// for none.
const DefaultLimit = 20

// The scan's limits, as they were.
const (
	maxDocumentSize = 1 << 20
	maxDocuments    = 10_000
	maxLimit        = 100
	maxLineText     = 400
)

var textExtensions = map[string]bool{
	".md": true, ".markdown": true, ".mdx": true, ".txt": true, ".text": true,
	".rst": true, ".adoc": true, ".asciidoc": true, ".org": true,
	".yaml": true, ".yml": true, ".json": true, ".toml": true, ".ini": true,
	".conf": true, ".cfg": true, ".csv": true, ".tsv": true, ".log": true,
	".html": true, ".htm": true, ".xml": true,
}

type index struct {
	dir string
}

// Match is one line that contains the query.
type Match struct {
	Document string `json:"document"`
	Line     int    `json:"line"`
	Text     string `json:"text"`
}

// Results are a search's lines; Truncated when the limit or the
// document cap cut it short.
type Results struct {
	Matches   []Match `json:"matches"`
	Truncated bool    `json:"truncated,omitempty"`
}

// Search returns up to limit lines of the text files under dir that
// contain query, compared case-insensitively, walking the directory and
// reading every file, as knowledge_search did before the index.
func Search(ctx context.Context, dir, query string, limit int) (Results, error) {
	i := &index{dir: dir}
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > maxLimit:
		limit = maxLimit
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

func (i *index) walk(ctx context.Context, fn func(name string, data []byte) bool) (truncated bool, err error) {
	root, err := os.OpenRoot(i.dir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	candidates := 0
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			if name == "." {
				return err
			}
			return nil
		}
		if name != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || !textName(name) {
			return nil
		}
		if candidates == maxDocuments {
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

func readDocument(root *os.Root, name string, d fs.DirEntry) ([]byte, bool) {
	if info, err := d.Info(); err != nil || info.Size() > maxDocumentSize {
		return nil, false
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDocumentSize+1))
	if err != nil || len(data) > maxDocumentSize || !(bytes.IndexByte(data, 0) < 0 && utf8.Valid(data)) {
		return nil, false
	}
	return data, true
}

func textName(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == "" || textExtensions[ext]
}

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

func excerpt(line string, at, n int) string {
	if len(line) <= maxLineText {
		return line
	}
	start := 0
	if at >= 0 {
		start = at - maxLineText/4
		if at+n > start+maxLineText {
			start = min(at, at+n-maxLineText)
		}
		start = max(0, min(start, len(line)-maxLineText))
	}
	end := start + maxLineText
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
