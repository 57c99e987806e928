package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Limits checked before a file is decoded. An agent.yaml is a few
// kilobytes; the YAML parser's cost grows faster than linearly with nesting,
// keys per mapping and alias expansion, so without these a 1 MiB file could
// hold a process for minutes or exhaust its memory.
const (
	// MaxFileSize is the largest configuration file read.
	MaxFileSize = 1 << 20
	// maxTokens bounds the YAML tokens (scalars, keys, punctuation,
	// comments) in a file.
	maxTokens = 16_384
	// maxNesting bounds flow nesting ([ and {) and "- - -" chains on one
	// line; block nesting is already bounded by indentation.
	maxNesting = 64
	// maxValues bounds the values a document expands to once every alias is
	// replaced by what its anchor holds.
	maxValues = 100_000
)

// Load reads and parses the configuration file at path; see [Parse].
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrInvalidConfig, path, err)
	}
	return Parse(data, path)
}

// Parse decodes one YAML document strictly and fills in the defaults. file
// names the source in messages and is kept in [Config.File]. Unknown keys,
// values of the wrong type, bad durations, an empty file and a file of more
// than one document are refused with an [*Error] naming the key and line.
// Parse does not validate: call [Config.Validate] for the mode at hand.
func Parse(data []byte, file string) (*Config, error) {
	c, err := decode(data)
	if err != nil {
		if ce, ok := errors.AsType[*Error](err); ok {
			ce.File = file
			return nil, ce
		}
		return nil, &Error{File: file, Msg: "decoding YAML", Err: err}
	}
	c.File = file
	c.withDefaults()
	return c, nil
}

func decode(data []byte) (c *Config, err error) {
	// The YAML library has panicked on odd input found by fuzzing (a tag on
	// an empty value). Its known triggers are refused before decoding; this
	// turns any other into a refusal rather than a crash of the service.
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, &Error{Msg: "the YAML decoder failed on this file: simplify unusual YAML (anchors, merge keys, flow style)", Err: fmt.Errorf("%v", r)}
		}
	}()
	if len(data) > MaxFileSize {
		return nil, &Error{Msg: fmt.Sprintf("the file is larger than %d bytes; an agent.yaml is a few kilobytes: check the path", MaxFileSize)}
	}
	// Editors on some systems start a UTF-8 file with a byte order mark,
	// which would otherwise read as part of the first key.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	tokens := lexer.Tokenize(string(data))
	if err := checkTokens(tokens); err != nil {
		return nil, err
	}
	f, err := parser.Parse(tokens, 0)
	if err != nil {
		return nil, yamlError(err, nil)
	}
	var docs []ast.Node
	for _, d := range f.Docs {
		if d.Body != nil && d.Body.Type() != ast.NullType {
			docs = append(docs, d.Body)
		}
	}
	switch len(docs) {
	case 0:
		return nil, &Error{Key: "identity", Msg: "the file holds no configuration: add identity: NAME and the keys for the mode to run"}
	case 1:
	default:
		return nil, &Error{Line: nodeLine(docs[1]), Msg: fmt.Sprintf("the file holds %d YAML documents, want one: an agent.yaml describes one agent; put each agent in a file of its own", len(docs))}
	}
	body := docs[0]
	if n := expandedSize(body, map[string]int{}); n > maxValues {
		return nil, &Error{Msg: fmt.Sprintf("aliases expand the document to more than %d values: write the values out or use fewer aliases", maxValues)}
	}
	c = &Config{}
	if err := yaml.NodeToValue(body, c, yaml.Strict()); err != nil {
		return nil, yamlError(err, body)
	}
	// Presence of expose.agent.mcp enables MCP, and an operator who writes
	// the key with nothing under it means it to be present, but YAML reads
	// that as null. Likewise for a2a, whose defaults then apply.
	if c.Expose.Agent.MCP == nil && present(body, "expose", "agent", "mcp") {
		c.Expose.Agent.MCP = &MCP{}
	}
	if c.Expose.Agent.A2A == nil && present(body, "expose", "agent", "a2a") {
		c.Expose.Agent.A2A = &A2A{}
	}
	if c.Expose.Agent.Metrics == nil && present(body, "expose", "agent", "metrics") {
		c.Expose.Agent.Metrics = &Metrics{}
	}
	return c, nil
}

// present reports whether the mapping keys in path lead to a value, null
// included, in the document body.
func present(body ast.Node, path ...string) bool {
	node := body
	for _, key := range path {
		m, ok := node.(*ast.MappingNode)
		if !ok {
			return false
		}
		var next ast.Node
		for _, mv := range m.Values {
			if mv.Key != nil && mv.Key.GetToken() != nil && mv.Key.GetToken().Value == key {
				next = mv.Value
			}
		}
		if next == nil {
			return false
		}
		node = next
	}
	return true
}

// checkTokens refuses token streams the parser would take too long on or
// is known to mishandle.
func checkTokens(tokens token.Tokens) error {
	if len(tokens) > maxTokens {
		return &Error{Msg: fmt.Sprintf("the file has more than %d YAML tokens; an agent.yaml is a few kilobytes: check the path", maxTokens)}
	}
	depth, chain, chainLine := 0, 0, 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			depth++
		case token.SequenceEndType, token.MappingEndType:
			depth = max(0, depth-1)
		case token.TagType:
			// agent.yaml has no use for tags, and the library mis-parses
			// some (a tag on an empty value swallows the next keys).
			return &Error{Line: tk.Position.Line, Msg: fmt.Sprintf("YAML tags such as %s are not supported: remove the tag and write the plain value", tk.Value)}
		case token.SequenceEntryType:
			if tk.Position.Line != chainLine {
				chain, chainLine = 0, tk.Position.Line
			}
			chain++
		default:
			continue
		}
		if depth > maxNesting || chain > maxNesting {
			return &Error{Line: tk.Position.Line, Msg: fmt.Sprintf("values are nested more than %d levels deep", maxNesting)}
		}
	}
	return nil
}

// expandedSize counts the values under n as the decoder sees them, with
// each alias counted as the values of its anchor. Counts saturate just past
// maxValues, so they cannot overflow however the aliases multiply.
func expandedSize(n ast.Node, anchors map[string]int) int {
	sum := func(ns ...ast.Node) int {
		total := 1
		for _, c := range ns {
			total = min(total+expandedSize(c, anchors), maxValues+1)
		}
		return total
	}
	switch n := n.(type) {
	case nil:
		return 0
	case *ast.MappingNode:
		total := 1
		for _, v := range n.Values {
			total = min(total+expandedSize(v, anchors), maxValues+1)
		}
		return total
	case *ast.MappingValueNode:
		return sum(n.Key, n.Value)
	case *ast.MappingKeyNode:
		return sum(n.Value)
	case *ast.SequenceNode:
		return sum(n.Values...)
	case *ast.TagNode:
		return sum(n.Value)
	case *ast.AnchorNode:
		size := sum(n.Value)
		if n.Name != nil && n.Name.GetToken() != nil {
			anchors[n.Name.GetToken().Value] = size
		}
		return size
	case *ast.AliasNode:
		if n.Value != nil && n.Value.GetToken() != nil {
			return max(1, anchors[n.Value.GetToken().Value])
		}
		return 1
	}
	return 1
}

// yamlError turns an error of the YAML parser or decoder into an [*Error]
// naming the key path and line. body is the decoded document, nil for a
// parse error.
func yamlError(err error, body ast.Node) error {
	if ce, ok := errors.AsType[*Error](err); ok {
		return ce // a Duration's own refusal already names its key
	}
	ye, ok := errors.AsType[yaml.Error](err)
	if !ok {
		return &Error{Msg: "decoding YAML", Err: err}
	}
	e := &Error{}
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		e.Line = tk.Position.Line
	}
	if body == nil {
		e.Msg, e.Err = "parsing YAML", yamlMessage{ye}
		return e
	}
	node := findNode(body, ye.GetToken())
	if node != nil {
		e.Key = keyPath(node.GetPath())
	}
	subject := e.Key
	if subject == "" {
		subject = "the top level"
	}
	if _, ok := errors.AsType[*yaml.UnknownFieldError](err); ok && e.Key != "" {
		e.Msg = "unknown key " + e.Key + knownKeysHint(e.Key)
		return e
	}
	if te, ok := errors.AsType[*yaml.TypeError](err); ok && te.DstType != nil {
		e.Msg = fmt.Sprintf("%s: want %s, got %s", subject, describeType(te.DstType), describeNode(node))
		if deref(te.DstType).Kind() == reflect.String && node != nil && node.Type() == ast.MappingType {
			// Inside a flow mapping the library reads impact:rw as a
			// one-key mapping; quoting is the fix an operator needs.
			e.Msg += ": quote a value that holds a colon, such as 'impact:rw'"
		}
		return e
	}
	if ne, ok := errors.AsType[*yaml.UnexpectedNodeTypeError](err); ok {
		want := describeNodeType(ne.Expected)
		if e.Key == "" && ne.Expected == ast.MappingType {
			want = "a mapping of keys such as identity: NAME"
		}
		e.Msg = fmt.Sprintf("%s: want %s, got %s", subject, want, describeNodeType(ne.Actual))
		return e
	}
	e.Msg, e.Err = subject, yamlMessage{ye}
	return e
}

// yamlMessage is a YAML error reduced to its message: the library's own
// Error text carries a multi-line source excerpt that does not belong in a
// log line.
type yamlMessage struct{ err yaml.Error }

func (m yamlMessage) Error() string { return m.err.GetMessage() }
func (m yamlMessage) Unwrap() error { return m.err }

// findNode returns the first node under root, in document order, whose
// token is tk.
func findNode(root ast.Node, tk *token.Token) ast.Node {
	if tk == nil {
		return nil
	}
	var found ast.Node
	ast.Walk(visitFunc(func(n ast.Node) bool {
		if found == nil && n.GetToken() == tk {
			found = n
		}
		return found == nil
	}), root)
	return found
}

type visitFunc func(ast.Node) bool

func (f visitFunc) Visit(n ast.Node) ast.Visitor {
	if f(n) {
		return f
	}
	return nil
}

// keyPath turns a YAML path ("$.expose.agent.mcp.port") into the key path
// messages use ("expose.agent.mcp.port"); the document root is "".
func keyPath(p string) string {
	p = strings.TrimPrefix(p, "$")
	return strings.TrimPrefix(p, ".")
}

// nodeLine returns n's 1-based line, or 0.
func nodeLine(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// knownKeysHint suggests the key an operator probably meant at the level of
// the unknown key, and lists that level's keys.
func knownKeysHint(key string) string {
	parent, last := "", key
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		parent, last = key[:i], key[i+1:]
	}
	keys := keysAt(parent)
	if len(keys) == 0 {
		return ": remove it"
	}
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(strings.ToLower(last), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(": did you mean %s? (keys here: %s)", best, strings.Join(keys, ", "))
	}
	return ": remove it or use one of the keys here: " + strings.Join(keys, ", ")
}

// keysAt returns the YAML keys of the mapping at key path p in [Config],
// sorted, or nil when p does not lead to one.
func keysAt(p string) []string {
	t := reflect.TypeFor[Config]()
	if p != "" {
		for _, seg := range strings.Split(p, ".") {
			name, rest, _ := strings.Cut(seg, "[")
			t = field(t, name)
			if t == nil {
				return nil
			}
			for range strings.Count(rest, "]") {
				if t = deref(t); t.Kind() != reflect.Slice {
					return nil
				}
				t = t.Elem()
			}
		}
	}
	if t = deref(t); t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if k := yamlKey(f); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// field returns the type of the field of struct type t whose YAML key is
// name, or nil.
func field(t reflect.Type, name string) reflect.Type {
	if t = deref(t); t.Kind() == reflect.Map {
		// A map's keys are the operator's names (policy roles): any
		// name leads to the element type.
		return t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for f := range t.Fields() {
		if yamlKey(f) == name {
			return f.Type
		}
	}
	return nil
}

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if k == "-" || !f.IsExported() {
		return ""
	}
	return k
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// editDistance is the Levenshtein distance between two short keys.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// describeType names what a Go type wants, in YAML terms.
func describeType(t reflect.Type) string {
	switch deref(t).Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return "a " + t.String()
}

// describeNode names what a YAML node holds.
func describeNode(n ast.Node) string {
	if n == nil {
		return "another type"
	}
	return describeNodeType(n.Type())
}

func describeNodeType(t ast.NodeType) string {
	switch t {
	case ast.NullType:
		return "null"
	case ast.BoolType:
		return "true or false"
	case ast.IntegerType:
		return "a whole number"
	case ast.FloatType, ast.InfinityType, ast.NanType:
		return "a number"
	case ast.StringType, ast.LiteralType:
		return "a string"
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	case ast.SequenceType:
		return "a list"
	}
	return "a " + strings.ToLower(t.String())
}

// LoadFor loads the file at path and validates it for mode: what every
// service command does first. Warnings are returned even when err is not
// nil, so the caller can log them beside the refusal.
func LoadFor(path string, mode Mode) (c *Config, warnings []string, err error) {
	c, err = Load(path)
	if err != nil {
		return nil, nil, err
	}
	warnings, err = c.Validate(mode)
	if err != nil {
		return nil, warnings, err
	}
	return c, warnings, nil
}
