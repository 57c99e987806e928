package knowledge

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// Chunk sizes. A section is what a search returns and a model reads, so it
// is bounded: a heading followed by pages of text is split at paragraph
// boundaries into parts that keep the heading path.
const (
	// MaxSectionBytes is the largest section stored, in bytes.
	MaxSectionBytes = 4096
	// plainChunkBytes is how much text of a plain document is grouped
	// into one section: paragraphs are joined up to it so a file of
	// one-line paragraphs is not a thousand tiny sections.
	plainChunkBytes = 1024
	// headingSeparator joins the headings of a heading path.
	headingSeparator = " > "
)

// chunk is one section of a document before it is stored.
type chunk struct {
	// heading is the heading path ("Install > From source"); empty for
	// text before the first heading and for plain documents.
	heading string
	// text is the section as written, heading line included, so showing
	// it gives the operator's own words.
	text string
	// body is text without the heading line: what body search weighs.
	body string
}

// markdown is the parser: CommonMark, no extensions, since only block
// structure (where headings are) matters here.
var markdown = goldmark.New()

// chunkDocument splits a document into sections: markdown by headings,
// anything else by paragraphs; both bounded by [MaxSectionBytes].
func chunkDocument(name string, data []byte) []chunk {
	var out []chunk
	if isMarkdown(name) {
		out = chunkMarkdown(data)
	} else {
		out = chunkPlain(string(data))
	}
	var bounded []chunk
	for _, c := range out {
		bounded = append(bounded, split(c)...)
	}
	return bounded
}

// chunkMarkdown cuts the source at every top-level heading. A heading
// inside a list or quote belongs to the text around it. Front matter is
// not a section.
func chunkMarkdown(data []byte) []chunk {
	src := data
	offset := frontMatterEnd(src)
	src = src[offset:]
	doc := markdown.Parser().Parse(text.NewReader(src))

	type cut struct {
		start, bodyStart int
		level            int
		title            string
	}
	var cuts []cut
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		h, ok := n.(*ast.Heading)
		if !ok || h.Lines().Len() == 0 {
			continue
		}
		first, last := h.Lines().At(0), h.Lines().At(h.Lines().Len()-1)
		var title strings.Builder
		for i := 0; i < h.Lines().Len(); i++ {
			seg := h.Lines().At(i)
			if i > 0 {
				title.WriteByte(' ')
			}
			title.Write(bytes.TrimSpace(seg.Value(src)))
		}
		start := lineStart(src, first.Start)
		bodyStart := lineEnd(src, last.Stop)
		if h.Level > 0 && isSetextUnderline(src, bodyStart) {
			bodyStart = lineEnd(src, bodyStart)
		}
		cuts = append(cuts, cut{start: start, bodyStart: bodyStart, level: h.Level, title: cleanHeading(title.String())})
	}

	var out []chunk
	if len(cuts) == 0 || cuts[0].start > 0 {
		end := len(src)
		if len(cuts) > 0 {
			end = cuts[0].start
		}
		if pre := string(src[:end]); strings.TrimSpace(pre) != "" {
			out = append(out, chunk{text: trimBlank(pre), body: trimBlank(pre)})
		}
	}
	var path []cut
	for i, c := range cuts {
		for len(path) > 0 && path[len(path)-1].level >= c.level {
			path = path[:len(path)-1]
		}
		path = append(path, c)
		end := len(src)
		if i+1 < len(cuts) {
			end = cuts[i+1].start
		}
		names := make([]string, len(path))
		for j, p := range path {
			names[j] = p.title
		}
		body := ""
		if c.bodyStart < end {
			body = string(src[c.bodyStart:end])
		}
		out = append(out, chunk{
			heading: strings.Join(names, headingSeparator),
			text:    trimBlank(string(src[c.start:end])),
			body:    trimBlank(body),
		})
	}
	return out
}

// chunkPlain groups paragraphs (runs of lines between blank lines) into
// sections of about [plainChunkBytes].
func chunkPlain(s string) []chunk {
	var out []chunk
	var cur strings.Builder
	flush := func() {
		if t := trimBlank(cur.String()); t != "" {
			out = append(out, chunk{text: t, body: t})
		}
		cur.Reset()
	}
	for _, p := range paragraphs(s) {
		if cur.Len() > 0 && cur.Len()+len(p) > plainChunkBytes {
			flush()
		}
		if cur.Len() > 0 {
			cur.WriteString("\n\n")
		}
		cur.WriteString(p)
	}
	flush()
	return out
}

// paragraphs splits s at blank lines, dropping empty paragraphs.
func paragraphs(s string) []string {
	var out []string
	var cur []string
	for _, l := range lines([]byte(s)) {
		if strings.TrimSpace(l) == "" {
			if len(cur) > 0 {
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			continue
		}
		cur = append(cur, l)
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, "\n"))
	}
	return out
}

// split bounds a chunk to [MaxSectionBytes]: its paragraphs are regrouped
// into parts, each keeping the heading path, and a single paragraph larger
// than the bound is cut on a rune boundary. The heading line stays with
// the first part only.
func split(c chunk) []chunk {
	if len(c.text) <= MaxSectionBytes {
		return []chunk{c}
	}
	head := strings.TrimSuffix(c.text, c.body)
	var parts []string
	cur := head
	for _, p := range paragraphs(c.body) {
		for len(p) > MaxSectionBytes {
			if cur != "" {
				parts, cur = append(parts, cur), ""
			}
			n := MaxSectionBytes
			for n > 0 && !utf8.RuneStart(p[n]) {
				n--
			}
			parts, p = append(parts, p[:n]), p[n:]
		}
		if cur != "" && len(cur)+2+len(p) > MaxSectionBytes {
			parts, cur = append(parts, cur), ""
		}
		if cur != "" && !strings.HasSuffix(cur, "\n\n") {
			cur += "\n\n"
		}
		cur += p
	}
	if strings.TrimSpace(cur) != "" {
		parts = append(parts, cur)
	}
	out := make([]chunk, 0, len(parts))
	for i, p := range parts {
		p = trimBlank(p)
		body := p
		if i == 0 && head != "" {
			body = trimBlank(strings.TrimPrefix(p, trimBlank(head)))
		}
		out = append(out, chunk{heading: c.heading, text: p, body: body})
	}
	return out
}

// frontMatterEnd returns the offset just past a leading YAML front matter
// block ("---" ... "---" or "..."), or 0 when there is none.
func frontMatterEnd(src []byte) int {
	first := lineEnd(src, 0)
	if strings.TrimSpace(string(src[:first])) != "---" {
		return 0
	}
	for at := first; at < len(src); {
		end := lineEnd(src, at)
		if t := strings.TrimSpace(string(src[at:end])); t == "---" || t == "..." {
			return end
		}
		at = end
	}
	return 0
}

// lineStart returns the offset of the start of the line holding at.
func lineStart(src []byte, at int) int {
	return bytes.LastIndexByte(src[:at], '\n') + 1
}

// lineEnd returns the offset just past the newline ending the line that
// holds at (or len(src)).
func lineEnd(src []byte, at int) int {
	if at >= len(src) {
		return len(src)
	}
	if i := bytes.IndexByte(src[at:], '\n'); i >= 0 {
		return at + i + 1
	}
	return len(src)
}

// isSetextUnderline reports whether the line at offset is a setext
// heading's underline ("===" or "---").
func isSetextUnderline(src []byte, at int) bool {
	l := strings.TrimSpace(string(src[at:lineEnd(src, at)]))
	return l != "" && (strings.Trim(l, "=") == "" || strings.Trim(l, "-") == "")
}

// cleanHeading drops a closing "##" sequence goldmark leaves in a heading
// and bounds it like a title.
func cleanHeading(h string) string {
	if t := strings.TrimRight(h, "#"); t != h && (t == "" || strings.HasSuffix(t, " ")) {
		h = t
	}
	return cut(strings.TrimSpace(h), maxTitle)
}

// trimBlank drops leading blank lines and trailing white space, keeping a
// first line's indentation.
func trimBlank(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || strings.TrimSpace(s[:i]) != "" {
			return s
		}
		s = s[i+1:]
	}
}
