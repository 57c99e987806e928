// Package toolslist serves the gateway's tools/list answers from bytes
// kept per tool set, not built per request: mcp-go (v1.2.1) builds and
// encodes the list per request, which with a fleet's hundreds of remote
// tools costs milliseconds and most of a megabyte of garbage, for an
// answer that changes only when the tool set does. Retire it when mcp-go
// caches encoded lists per tool filter result.
//
// # What is kept
//
// A [listSnapshot] is taken of the registration each time
// the MCP server's SetTools changes what a client could see (a tool added,
// removed or changed, locally or by a remote refresh). For each distinct
// grant of the policy (one when there is no policy) and each protocol era
// that asks, it keeps a [listView]: the visible tools cut into pages, each
// page's JSON-RPC result encoded once, exactly as mcp-go would have
// encoded it after the gateway's hooks (policy narrowing, the tasks
// annotation of the session-based eras, the 2026-07-28 result fields).
// Views are built on first use and dropped with their snapshot, so
// nothing is built for a grant or an era no caller uses.
//
// A request is answered by writing the JSON-RPC head, the request's own
// id, and the kept page: [Cache.Respond], which allocates nothing.
// The checks that decide whether a request may be answered this way
// (see [Cache.Serve]) run first; anything they do not accept
// goes to mcp-go as before, which answers it (an error, in every case
// the checks refuse).
//
// # Cursors
//
// With a page size, each page but the last carries a nextCursor: an
// opaque token of the list it belongs to (a digest of the snapshot and
// the caller's grant), the offset of the next page and the page size. A
// cursor is honoured only for the list it was issued for: after the tool
// set changes, or from another caller's list, or forged, it is refused
// with JSON-RPC -32602 saying which, and the client lists again from the
// start (a notifications/tools/list_changed has told it so already when
// it listens). A client therefore never gets a page of a different list
// than its first one, and paging through sees every tool exactly once.
// The digest depends only on the tools and the grant, so gateways of one
// fleet serving the same tools accept one another's cursors.
package toolslist

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/call"
	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/policy"
)

// DefaultToolsListTTL is the ttlMs a 2026-07-28 tools/list answer
// carries when the server's ToolsListTTL is not set: the default remote
// refresh interval, the time the gateway itself may take to notice a
// remote tool change, so a client that caches the list for that long
// sees a change at most one refresh later than the gateway does.
const DefaultToolsListTTL = 30_000 // milliseconds

// maxListViews caps the views one snapshot keeps: a pathological policy
// (one role set per caller) could otherwise keep a list per caller. A
// view beyond the cap is built for its request and not kept.
const maxListViews = 256

// maxRetired is how many digests of earlier lists are remembered, to tell
// a stale cursor from a forged one.
const maxRetired = 64

// DigestLen is the bytes of a list digest a cursor carries.
const DigestLen = 15

// cursorVersion is the first byte of every cursor, so that the format can
// change without an old cursor being read as a new one.
const cursorVersion = 1

// CursorLen is a decoded cursor: version, digest, offset, page size.
const CursorLen = 1 + DigestLen + 4 + 4

// Cache keeps the tools/list answers of the current tool set. It is
// safe for concurrent use.
type Cache struct {
	pageSize int
	ttlMs    int64
	scope    mcp.CacheScope
	impl     mcp.Implementation

	cur atomic.Pointer[listSnapshot]
}

// listSnapshot is one tool set as tools/list shows it: the served tools,
// sorted by name as mcp-go lists them, and the views built of them.
type listSnapshot struct {
	tools []listedTool
	// unreachable are the remote tools each role nats context may not
	// reach (the call core's Unreachable).
	unreachable call.Unreachable
	// hash identifies the tool set: its definitions and what the policy
	// decides on (tags, remote or not, which contexts reach it).
	hash [sha256.Size]byte
	// retired are the digests of earlier snapshots' views, newest last.
	retired [][DigestLen]byte

	// views maps a grant and an era to its view. It is replaced whole,
	// never modified, so a request reads it without a lock.
	views atomic.Pointer[map[viewKey]*listView]
	mu    sync.Mutex // serialises the building of views
}

// listedTool is a served tool with what the policy needs to decide on it.
type listedTool struct {
	def    mcp.Tool
	tags   []string
	remote bool
}

// viewKey names a view: the grant's key and the era.
type viewKey struct {
	grant  string
	modern bool
}

// listView is the list one grant sees in one era, paged and encoded.
type listView struct {
	digest [DigestLen]byte
	tools  int
	// pages hold, for each page, what follows the request id in the
	// response: `,"result":{...}}`, without a trailing newline.
	pages [][]byte
}

// Fixed pieces of every answer.
var (
	rpcHead  = []byte(`{"jsonrpc":"2.0","id":`)
	sseHead  = []byte("event: message\ndata: ")
	jsonTail = []byte("\n")
	sseTail  = []byte("\n\n")
	// contentJSON is the Content-Type of a JSON answer, shared rather
	// than allocated per answer.
	contentJSON = []string{"application/json"}
	contentSSE  = []string{"text/event-stream"}
	noCache     = []string{"no-cache"}
)

func New(pageSize int, ttlMs int64, scope mcp.CacheScope, impl mcp.Implementation) *Cache {
	l := &Cache{pageSize: pageSize, ttlMs: ttlMs, scope: scope, impl: impl}
	_ = l.Set(nil, nil)
	return l
}

// Tool is a served tool as tools/list shows it, with what the policy
// decides on.
type Tool struct {
	Def    mcp.Tool
	Tags   []string
	Remote bool
}

// Set replaces the snapshot with one of tools (in registration order),
// unless it would list exactly what the current one lists: then the
// kept lists and every cursor issued stay valid. The caller serialises
// calls.
func (l *Cache) Set(served []Tool, unreachable call.Unreachable) error {
	tools := make([]listedTool, len(served))
	for i, t := range served {
		tools[i] = listedTool{def: t.Def, tags: t.Tags, remote: t.Remote}
	}
	sortTools(tools)
	h := sha256.New()
	for _, t := range tools {
		b, err := json.Marshal(t.def)
		if err != nil {
			return fmt.Errorf("encoding the definition of %s: %w", t.def.Name, err)
		}
		h.Write(b)
		h.Write([]byte{0})
		h.Write([]byte(strings.Join(t.tags, ",")))
		h.Write([]byte{0, boolByte(t.remote)})
	}
	for _, c := range slices.Sorted(maps.Keys(unreachable)) {
		h.Write([]byte("\x00unreachable\x00" + c))
		for _, name := range slices.Sorted(maps.Keys(unreachable[c])) {
			h.Write([]byte("\x00" + name))
		}
	}
	next := &listSnapshot{tools: tools, unreachable: unreachable}
	h.Sum(next.hash[:0])
	prev := l.cur.Load()
	if prev != nil && prev.hash == next.hash {
		// A refresh that found the same tools: the kept lists stay.
		return nil
	}
	if prev != nil {
		next.retired = append(next.retired, prev.retired...)
		for _, v := range *prev.views.Load() {
			next.retired = append(next.retired, v.digest)
		}
		if n := len(next.retired); n > maxRetired {
			next.retired = next.retired[n-maxRetired:]
		}
	}
	empty := map[viewKey]*listView{}
	next.views.Store(&empty)
	l.cur.Store(next)
	return nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// sortTools orders tools by name, as mcp-go's tools/list does.
func sortTools(tools []listedTool) {
	slices.SortFunc(tools, func(a, b listedTool) int { return strings.Compare(a.def.Name, b.def.Name) })
}

// view returns the view of grant g in the era, building it on first use.
func (sn *listSnapshot) view(l *Cache, g *policy.Grant, modern bool) (*listView, error) {
	key := viewKey{grant: g.Key, modern: modern}
	if v := (*sn.views.Load())[key]; v != nil {
		return v, nil
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	views := *sn.views.Load()
	if v := views[key]; v != nil {
		return v, nil
	}
	v, err := sn.build(l, g, modern)
	if err != nil {
		return nil, err
	}
	if len(views) < maxListViews {
		next := make(map[viewKey]*listView, len(views)+1)
		for k, w := range views {
			next[k] = w
		}
		next[key] = v
		sn.views.Store(&next)
	}
	return v, nil
}

// build encodes the pages of what g sees in the era: the tools its grant
// allows (mcp-go's tool filter decides the same), with the tasks
// annotation of the session-based eras (taskHooks) or the result fields
// of 2026-07-28, as mcp-go's decoration adds them.
func (sn *listSnapshot) build(l *Cache, g *policy.Grant, modern bool) (*listView, error) {
	tools := make([]mcp.Tool, 0, len(sn.tools))
	for _, t := range sn.tools {
		if !g.Allows(t.def.Name, t.tags, t.remote) || t.remote && sn.unreachable.Refuses(g, t.def.Name) {
			continue
		}
		def := t.def
		if !modern {
			def.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		}
		tools = append(tools, def)
	}
	v := &listView{tools: len(tools), digest: sn.digest(g)}
	size := l.pageSize
	if size <= 0 || size > len(tools) {
		size = max(len(tools), 1)
	}
	for start := 0; start == 0 || start < len(tools); start += size {
		end := min(start+size, len(tools))
		res := mcp.ListToolsResult{Tools: tools[start:end]}
		if end < len(tools) {
			res.NextCursor = mcp.Cursor(EncodeCursor(v.digest, end, size))
		}
		if modern {
			res.SetResultType(mcp.ResultTypeComplete)
			res.EnsureResultMeta().SetServerInfo(l.impl)
			res.SetCacheHints(l.ttlMs, l.scope)
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("encoding tools/list: %w", err)
		}
		page := make([]byte, 0, len(`,"result":`)+len(b)+1)
		page = append(page, `,"result":`...)
		page = append(page, b...)
		page = append(page, '}')
		v.pages = append(v.pages, page)
	}
	return v, nil
}

// digest identifies the list grant g sees in this snapshot.
func (sn *listSnapshot) digest(g *policy.Grant) [DigestLen]byte {
	h := sha256.New()
	h.Write(sn.hash[:])
	h.Write([]byte{0})
	h.Write([]byte(g.Key))
	if g.Everything() {
		h.Write([]byte{0, 1})
	}
	var sum [sha256.Size]byte
	var d [DigestLen]byte
	copy(d[:], h.Sum(sum[:0]))
	return d
}

// encodeCursor is the cursor of the page at offset of the list digest,
// paged by size.
func EncodeCursor(digest [DigestLen]byte, offset, size int) string {
	var b [CursorLen]byte
	b[0] = cursorVersion
	copy(b[1:], digest[:])
	binary.BigEndian.PutUint32(b[1+DigestLen:], uint32(offset))
	binary.BigEndian.PutUint32(b[1+DigestLen+4:], uint32(size))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// cursorError is a cursor refused, with the reason the client is told.
type cursorError int

const (
	cursorOK cursorError = iota
	cursorMalformed
	cursorStale
	cursorForeign
	cursorUnknown
	cursorPageSize
	cursorOffset
)

// message is the JSON-RPC error message of a refused cursor. Every one
// tells the client what to do: list again without a cursor.
func (e cursorError) message(l *Cache) string {
	const again = "; send tools/list again without a cursor to list from the start"
	switch e {
	case cursorStale:
		return "stale cursor: the tool list changed since it was issued" + again
	case cursorForeign:
		return "invalid cursor: it was issued for another caller's tool list" + again
	case cursorUnknown:
		return "invalid cursor: it belongs to no tool list this gateway serves (forged, from a gateway serving other tools, or older than the gateway remembers)" + again
	case cursorPageSize:
		return fmt.Sprintf("stale cursor: it was issued for another page size than this gateway's %d (expose.agent.mcp.tools_page_size)", l.pageSize) + again
	case cursorOffset:
		return "invalid cursor: it does not point at a page of the tool list" + again
	default:
		return "invalid cursor: not a tools/list cursor of this gateway" + again
	}
}

// page returns the index of the page cursor points at in v, or why it
// cannot be honoured. An empty cursor is the first page.
func (sn *listSnapshot) page(l *Cache, v *listView, cursor []byte) (int, cursorError) {
	if len(cursor) == 0 {
		return 0, cursorOK
	}
	var b [CursorLen]byte
	if base64.RawURLEncoding.DecodedLen(len(cursor)) != CursorLen {
		return 0, cursorMalformed
	}
	if n, err := base64.RawURLEncoding.Decode(b[:], cursor); err != nil || n != CursorLen || b[0] != cursorVersion {
		return 0, cursorMalformed
	}
	var d [DigestLen]byte
	copy(d[:], b[1:])
	if d != v.digest {
		return 0, sn.otherList(d)
	}
	offset := int(binary.BigEndian.Uint32(b[1+DigestLen:]))
	size := int(binary.BigEndian.Uint32(b[1+DigestLen+4:]))
	if size != l.pageSize || size <= 0 {
		return 0, cursorPageSize
	}
	if offset <= 0 || offset >= v.tools || offset%size != 0 {
		return 0, cursorOffset
	}
	return offset / size, cursorOK
}

// otherList tells why digest d, not the caller's list's, is refused.
func (sn *listSnapshot) otherList(d [DigestLen]byte) cursorError {
	for _, r := range sn.retired {
		if r == d {
			return cursorStale
		}
	}
	for _, v := range *sn.views.Load() {
		if v.digest == d {
			return cursorForeign
		}
	}
	return cursorUnknown
}

// Query is what [Cache.Respond] needs of a tools/list request.
type Query struct {
	// ID is the request's JSON-RPC id as it arrived: a JSON string or
	// number.
	ID []byte
	// Cursor is params.cursor, unescaped; empty for the first page.
	Cursor []byte
	Grant  *policy.Grant
	Modern bool
	// SSE frames the answer as one event of an event stream.
	SSE bool
}

// respond writes the answer to q on w: the page of the caller's list, or
// the JSON-RPC error refusing its cursor. It returns the HTTP status the
// answer goes with, which the caller has to write before the body, and
// the answer's length: respond computes them before it writes.
//
// This is the cached tools/list path, the part of a request whose cost
// grows with the tool set: finding the caller's list, checking the cursor
// and writing the kept bytes. Once the caller's view is built (the first
// request of its grant and era after a change), it allocates nothing,
// whatever the number of tools; [TestToolsListRespondAllocs] holds it to
// that. Reading and checking the request before it, and the HTTP
// server's own work, are not part of it.
func (l *Cache) Respond(w io.Writer, q Query, header func(status, length int)) error {
	sn := l.cur.Load()
	v, err := sn.view(l, q.Grant, q.Modern)
	if err != nil {
		return err
	}
	i, cerr := sn.page(l, v, q.Cursor)
	if cerr != cursorOK {
		return l.refuse(w, q, cerr, header)
	}
	head, tail := rpcHead, jsonTail
	n := 0
	if q.SSE {
		tail = sseTail
		n = len(sseHead)
	}
	n += len(head) + len(q.ID) + len(v.pages[i]) + len(tail)
	header(http.StatusOK, n)
	if q.SSE {
		if _, err := w.Write(sseHead); err != nil {
			return err
		}
	}
	for _, b := range [...][]byte{head, q.ID, v.pages[i], tail} {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// refuse answers q with the JSON-RPC -32602 error of its cursor. A
// 2026-07-28 error goes with HTTP 400, as that revision maps it (and as
// mcp-go answers its own -32602); earlier eras' with 200.
func (l *Cache) refuse(w io.Writer, q Query, cerr cursorError, header func(status, length int)) error {
	msg, err := json.Marshal(cerr.message(l))
	if err != nil {
		return err
	}
	body := make([]byte, 0, 128+len(q.ID)+len(msg))
	if q.SSE {
		body = append(body, sseHead...)
	}
	body = append(body, rpcHead...)
	body = append(body, q.ID...)
	body = append(body, `,"error":{"code":`...)
	body = strconv.AppendInt(body, mcp.INVALID_PARAMS, 10)
	body = append(body, `,"message":`...)
	body = append(body, msg...)
	body = append(body, "}}"...)
	if q.SSE {
		body = append(body, sseTail...)
	} else {
		body = append(body, jsonTail...)
	}
	status := http.StatusOK
	if q.Modern {
		status = http.StatusBadRequest
	}
	header(status, len(body))
	_, err = w.Write(body)
	return err
}

// listRequest is what [Cache.Serve] reads of a POSTed message.
type listRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// listParams are the params of tools/list, decoded as mcp-go decodes
// them: a cursor that is not a string is an error, null is none.
type listParams struct {
	Cursor string    `json:"cursor"`
	Meta   *mcp.Meta `json:"_meta"`
}

// Serve answers a tools/list request from the kept lists and
// reports true, or reports false, having written nothing, for any other
// request and for a tools/list that mcp-go is to answer: every one whose
// message, headers or protocol version mcp-go would refuse, so that its
// error stays mcp-go's own. The session rules have passed by then
// (the gateway's router); grant gives the caller's grant, asked only for
// a request answered here; supported reports whether mcp-go serves a
// protocol version.
//
// The answer is JSON unless the client accepts only an event stream: a
// list is one response and no notification follows it, so the event
// stream mcp-go would open for a session that was sent a notification
// earlier adds nothing (notifications still queued for the session reach
// its next request or its standing stream).
func (l *Cache) Serve(w http.ResponseWriter, r *http.Request, body []byte, grant func() *policy.Grant, supported func(version string) bool, log *slog.Logger) bool {
	if r.Method != http.MethodPost || !bytes.Contains(body, []byte(mcp.MethodToolsList)) {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	var req listRequest
	if json.Unmarshal(body, &req) != nil || req.Method != string(mcp.MethodToolsList) || req.JSONRPC != mcp.JSONRPC_VERSION || !scalarID(req.ID) {
		return false
	}
	var params listParams
	if len(req.Params) > 0 && json.Unmarshal(req.Params, &params) != nil {
		return false
	}
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	meta := params.Meta.ProtocolVersion()
	modern := mcp.IsModernProtocol(header) || mcp.IsModernProtocol(meta)
	if modern {
		// What mcp-go's transport and message handler check of a
		// 2026-07-28 request before they answer it.
		if r.Header.Get(mcp.HeaderLastEventID) != "" || header == "" || header != meta ||
			!supported(meta) || !mcp.IsValidProtocolVersion(meta) ||
			params.Meta.ClientCapabilities() == nil ||
			mcp.ValidateStandardHeaders(r.Header.Get, meta, mcp.MethodToolsList, req.Params) != nil {
			return false
		}
	} else if header != "" && !mcp.IsValidProtocolVersion(header) {
		return false
	}
	q := Query{ID: req.ID, Cursor: []byte(params.Cursor), Grant: grant(), Modern: modern, SSE: onlyEventStream(r.Header)}
	err := l.Respond(w, q, func(status, length int) {
		h := w.Header()
		if q.SSE {
			h["Content-Type"] = contentSSE
			h["Cache-Control"] = noCache
		} else {
			h["Content-Type"] = contentJSON
		}
		h.Set("Content-Length", strconv.Itoa(length))
		w.WriteHeader(status)
	})
	if err != nil {
		log.Debug("answering tools/list", "error", err)
	}
	return true
}

// scalarID reports whether id is a JSON-RPC request id the cached path
// echoes: a string or a number. A missing or null id is a notification;
// anything else goes to mcp-go.
func scalarID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return false
}

// onlyEventStream reports whether the request's Accept header takes an
// event stream and not JSON. The transport asks clients to accept both;
// a client that does gets JSON.
func onlyEventStream(h http.Header) bool {
	accept := h.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	json, sse := false, false
	for _, line := range accept {
		for part := range strings.SplitSeq(line, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*", "*/*":
				json = true
			case "text/event-stream":
				sse = true
			}
		}
	}
	return sse && !json
}

// Digest is the digest of the list g sees in the era, which the cursors
// of its pages carry ([EncodeCursor]).
func (l *Cache) Digest(g *policy.Grant, modern bool) ([DigestLen]byte, error) {
	v, err := l.cur.Load().view(l, g, modern)
	if err != nil {
		return [DigestLen]byte{}, err
	}
	return v.digest, nil
}

// Impl is the server's implementation info, which 2026-07-28 answers
// carry in their _meta.
func (l *Cache) Impl() mcp.Implementation { return l.impl }
