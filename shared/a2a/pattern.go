package a2a

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compilePattern is the schemas' regexp engine. Every identity, tool name,
// message id and protocol id of every message is checked against a pattern
// of one shape, ^literal[class]{min,max}$, and regexp's general machinery
// costs more than the rest of those checks together; a pattern of that
// shape gets a matcher of its own, built from regexp/syntax's parse of the
// pattern so the class is exactly regexp's. Any other pattern is compiled
// by regexp as before.
func compilePattern(pattern string) (jsonschema.Regexp, error) {
	if m, ok := newClassPattern(pattern); ok {
		return m, nil
	}
	return regexp.Compile(pattern)
}

// classPattern matches ^prefix[class]{min,max}$ as regexp does: the input
// is read rune by rune, an invalid UTF-8 byte as one U+FFFD.
type classPattern struct {
	pattern string
	prefix  string
	// class holds the runes matched, as inclusive lo, hi pairs in order.
	class []rune
	min   int
	// max is -1 for no upper bound.
	max int
}

// newClassPattern returns the matcher of pattern, or false when pattern
// has another shape. It parses pattern as regexp.Compile does (Perl
// syntax, ^ and $ at the ends of the text).
func newClassPattern(pattern string) (*classPattern, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat {
		return nil, false
	}
	subs := re.Sub
	if len(subs) < 3 || subs[0].Op != syntax.OpBeginText || subs[len(subs)-1].Op != syntax.OpEndText {
		return nil, false
	}
	subs = subs[1 : len(subs)-1]
	m := &classPattern{pattern: pattern}
	if len(subs) == 2 {
		lit := subs[0]
		if lit.Op != syntax.OpLiteral || lit.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, r := range lit.Rune {
			// A literal U+FFFD would match an invalid byte in regexp, which
			// a byte prefix cannot; keep to ASCII.
			if r >= utf8.RuneSelf {
				return nil, false
			}
		}
		m.prefix = string(lit.Rune)
		subs = subs[1:]
	}
	if len(subs) != 1 {
		return nil, false
	}
	rep := subs[0]
	switch rep.Op {
	case syntax.OpPlus:
		m.min, m.max = 1, -1
	case syntax.OpStar:
		m.min, m.max = 0, -1
	case syntax.OpRepeat:
		m.min, m.max = rep.Min, rep.Max
	default:
		return nil, false
	}
	if len(rep.Sub) != 1 || rep.Sub[0].Op != syntax.OpCharClass {
		return nil, false
	}
	m.class = rep.Sub[0].Rune
	return m, true
}

// MatchString reports whether s matches the pattern.
func (m *classPattern) MatchString(s string) bool {
	rest, ok := strings.CutPrefix(s, m.prefix)
	if !ok {
		return false
	}
	n := 0
	for i := 0; i < len(rest); {
		r, size := rune(rest[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(rest[i:])
		}
		if !m.inClass(r) {
			return false
		}
		n++
		if m.max >= 0 && n > m.max {
			return false
		}
		i += size
	}
	return n >= m.min
}

func (m *classPattern) inClass(r rune) bool {
	for i := 0; i+1 < len(m.class); i += 2 {
		if r < m.class[i] {
			return false
		}
		if r <= m.class[i+1] {
			return true
		}
	}
	return false
}

// String returns the pattern, as regexp.Regexp does.
func (m *classPattern) String() string { return m.pattern }
