package knowledge

import (
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// The vector search, in two steps over what is held in memory, so a
// search needs no graph to build or keep in step with every edit, and an
// edit costs one entry:
//
//  1. Each vector has a code of one bit a dimension, the sign of its
//     difference from the mean of the vectors (64 bytes for 512
//     dimensions). The query's code is compared with all of them by
//     Hamming distance (a popcount a word: about a millisecond for 112
//     thousand sections), keeping the nearest [candidates].
//  2. Those are ranked by their cosine with the query, from each
//     vector's difference from the mean held as bytes (dim bytes a
//     vector, each with its scale).
//
// Memory is dim+20 bytes a section, with the map from section to
// entry: some 60 MiB for the 112 thousand sections of the benchmark
// corpus at 512 dimensions, 2 MiB for a few thousand. The float32
// vectors stay in the store (read when the index loads). Recall against
// comparing every vector exactly is measured by the benchmarks (make
// bench: knowledge_vector_recall_at10). A finer estimate between the
// two steps (the query against the signs, through a table a byte) was
// tried and dropped: at 112 thousand sections it kept fewer of the true
// nearest than the Hamming distance does.
const (
	// candidates is how many codes nearest the query's are ranked by
	// their bytes: at the benchmark's 112 thousand sections, 4,096 keep
	// recall@10 above 0.95 (1,024 gave 0.88) for some 5 ms a search.
	candidates = 4096
	// minCentred is how many vectors the index needs before it centres
	// the codes on their mean: with fewer, a mean says little, and exact
	// search of so few costs nothing anyway.
	minCentred = 256
)

// vectorIndex is the memory side of the vector search, kept in step with
// the store's vectors table: vectors stored since the last search are
// loaded by seq, and vectors of removed sections are forgotten, by the
// writer that removed them or by the search that no longer finds them.
type vectorIndex struct {
	mu    sync.Mutex
	dim   int
	words int       // uint64s a code
	mean  []float32 // what codes are centred on; nil: not centred
	ids   []int64   // section id of each code; -1: forgotten
	codes []uint64  // len(ids)*words
	// fine holds each vector's numbers as bytes (len(ids)*dim), each
	// times fineScale of its vector: the candidates' cosines are ranked
	// from them, well within the gaps that order them.
	fine      []int8
	fineScale []float32
	at        map[int64]int
	seq       int64 // highest seq loaded
	dead      int

	// sections counts the store's sections at version countedVer.
	sections   int
	countedVer string
}

// reset empties the index, to be loaded again from the store: after a
// rebuild replaced the store's content, the codes describe nothing in it.
func (x *vectorIndex) reset() {
	x.dim, x.words, x.mean, x.ids, x.codes, x.at, x.seq, x.dead = 0, 0, nil, nil, nil, nil, 0, 0
	x.fine, x.fineScale = nil, nil
}

// forget drops the codes of removed sections.
func (x *vectorIndex) forget(ids []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		if n, ok := x.at[id]; ok {
			x.ids[n] = -1
			delete(x.at, id)
			x.dead++
		}
	}
}

// sync loads the vectors stored since the last sync, reloading all of
// them when the store has given fewer than were loaded (emptied or
// rebuilt by another process), when a third of the codes are of
// removed sections, or when the index has grown enough that a mean is
// worth centring on. The caller holds x.mu.
func (x *vectorIndex) sync(s *snapshot) error {
	// The highest seq given, not the highest stored: removing the newest
	// vectors (an edit of the last document embedded) lowers the one and
	// not the other, and is no reason to reload everything.
	var top int64
	if err := s.queryRow(`SELECT max(coalesce((SELECT max(seq) FROM vectors), 0), coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1), 0))`, seqKey).Scan(&top); err != nil {
		return s.i.storeErr("searching the index", err)
	}
	live := len(x.ids) - x.dead
	switch {
	case top < x.seq, x.dead > 0 && x.dead*3 > len(x.ids),
		x.mean == nil && live < minCentred && live+int(top-x.seq) >= minCentred:
		x.reset()
	case top == x.seq:
		return nil
	}
	if x.ids == nil {
		if err := x.loadMean(s); err != nil {
			return err
		}
	}
	rows, err := s.query(`SELECT id, seq, v FROM vectors WHERE seq > ?1 ORDER BY seq`, x.seq)
	if err != nil {
		return s.i.storeErr("searching the index", err)
	}
	defer rows.Close()
	var v []float32
	for rows.Next() {
		var id, seq int64
		var blob []byte
		if err := rows.Scan(&id, &seq, &blob); err != nil {
			return s.i.storeErr("searching the index", err)
		}
		x.seq = seq
		if x.dim == 0 {
			x.dim, x.words = len(blob)/4, (len(blob)/4+63)/64
			x.at = map[int64]int{}
		}
		if v == nil {
			v = make([]float32, x.dim)
		}
		if !decodeVector(blob, v) {
			continue // not of the pinned dimension: never compared
		}
		if n, ok := x.at[id]; ok {
			x.ids[n] = -1
			x.dead++
		}
		x.at[id] = len(x.ids)
		x.ids = append(x.ids, id)
		x.codes = x.code(x.codes, v)
		x.fine, x.fineScale = appendFine(x.fine, x.fineScale, v, x.mean)
	}
	if err := rows.Err(); err != nil {
		return s.i.storeErr("searching the index", err)
	}
	return nil
}

// loadMean computes the mean of the stored vectors, when there are
// enough of them, for the codes to be centred on.
func (x *vectorIndex) loadMean(s *snapshot) error {
	var n int
	if err := s.queryRow(`SELECT count(*) FROM vectors`).Scan(&n); err != nil {
		return s.i.storeErr("searching the index", err)
	}
	x.mean = nil
	if n < minCentred {
		return nil
	}
	rows, err := s.query(`SELECT v FROM vectors`)
	if err != nil {
		return s.i.storeErr("searching the index", err)
	}
	defer rows.Close()
	var sum []float64
	var v []float32
	count := 0
	for rows.Next() {
		var blob []byte
		if err := rows.Scan(&blob); err != nil {
			return s.i.storeErr("searching the index", err)
		}
		if sum == nil {
			sum, v = make([]float64, len(blob)/4), make([]float32, len(blob)/4)
		}
		if !decodeVector(blob, v) {
			continue
		}
		for k, f := range v {
			sum[k] += float64(f)
		}
		count++
	}
	if err := rows.Err(); err != nil {
		return s.i.storeErr("searching the index", err)
	}
	if count == 0 {
		return nil
	}
	x.mean = make([]float32, len(sum))
	for k := range sum {
		x.mean[k] = float32(sum[k] / float64(count))
	}
	return nil
}

// code appends the code of v to codes.
func (x *vectorIndex) code(codes []uint64, v []float32) []uint64 {
	start := len(codes)
	codes = append(codes, make([]uint64, x.words)...)
	for k, f := range v {
		if x.mean != nil {
			f -= x.mean[k]
		}
		if f > 0 {
			codes[start+k/64] |= 1 << (k % 64)
		}
	}
	return codes
}

// nearest returns the positions of the limit codes nearest q's by
// Hamming distance (ties in position order). The caller holds x.mu.
func (x *vectorIndex) nearest(q []float32, limit int) []int {
	if len(x.ids) == 0 || len(q) != x.dim {
		return nil
	}
	qc := x.code(nil, q)
	dist := make([]uint16, len(x.ids))
	hist := make([]int, x.dim+1)
	for n, id := range x.ids {
		if id < 0 {
			dist[n] = 0xffff
			continue
		}
		d := 0
		c := x.codes[n*x.words : (n+1)*x.words]
		for w := range c {
			d += bits.OnesCount64(c[w] ^ qc[w])
		}
		dist[n] = uint16(d)
		hist[d]++
	}
	// The distance within which limit codes lie.
	bound, seen := 0, 0
	for bound < len(hist) && seen+hist[bound] < limit {
		seen += hist[bound]
		bound++
	}
	out := make([]int, 0, min(limit, len(x.ids)))
	for n, d := range dist {
		if int(d) < bound {
			out = append(out, n)
		}
	}
	for n, d := range dist {
		if len(out) == limit {
			break
		}
		if int(d) == bound {
			out = append(out, n)
		}
	}
	return out
}

// appendFine appends the numbers of v-mean as bytes, and their scale.
// Centred, they span a fraction of what v's do when the vectors share a
// direction (as embeddings do: most pairs have a cosine well above 0), so
// the bytes keep the differences that rank them; q·mean, the rest of the
// cosine, is the same for every vector of a query.
func appendFine(fine []int8, scales []float32, v, mean []float32) ([]int8, []float32) {
	var top float32
	for k, f := range v {
		if mean != nil {
			f -= mean[k]
		}
		top = max(top, f, -f)
	}
	scale := top / 127
	if scale == 0 {
		scale = 1
	}
	for k, f := range v {
		if mean != nil {
			f -= mean[k]
		}
		fine = append(fine, int8(math.Round(float64(f/scale))))
	}
	return fine, append(scales, scale)
}

// rescore ranks the codes at positions by q's cosine with their bytes,
// and returns the best limit, best first. The caller holds x.mu.
func (x *vectorIndex) rescore(q []float32, positions []int, limit int) []scored {
	var base float64 // q·mean
	for k := range x.mean {
		base += float64(q[k] * x.mean[k])
	}
	out := make([]scored, 0, len(positions))
	for _, n := range positions {
		b := x.fine[n*x.dim : (n+1)*x.dim]
		var sum float32
		for k, f := range q {
			sum += f * float32(b[k])
		}
		out = append(out, scored{id: x.ids[n], score: base + float64(sum*x.fineScale[n])})
	}
	slices.SortFunc(out, bestFirst)
	return out[:min(limit, len(out))]
}

// vectorRank returns the topK sections nearest q (a unit vector) by
// cosine, best first: the codes nominate, the stored vectors decide.
func (s *snapshot) vectorRank(q []float32, topK int) ([]scored, error) {
	x := &s.i.vec
	x.mu.Lock()
	if err := x.sync(s); err != nil {
		x.mu.Unlock()
		return nil, err
	}
	// Twice what is asked for, so that sections another process removed
	// since the codes were loaded can be left out.
	best := x.rescore(q, x.nearest(q, max(candidates, topK)), 2*topK)
	x.mu.Unlock()
	if len(best) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(best))
	for n, b := range best {
		ids[n] = b.id
	}
	list, _ := json.Marshal(ids)
	rows, err := s.query(`SELECT id FROM vectors WHERE id IN (SELECT value FROM json_each(?1))`, string(list))
	if err != nil {
		return nil, s.i.storeErr("searching the index", err)
	}
	defer rows.Close()
	found := make(map[int64]bool, len(best))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, s.i.storeErr("searching the index", err)
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, s.i.storeErr("searching the index", err)
	}
	out := best[:0]
	var gone []int64
	for _, b := range best {
		if found[b.id] {
			out = append(out, b)
		} else {
			gone = append(gone, b.id)
		}
	}
	if len(gone) > 0 {
		// Sections another process removed: their codes go too.
		x.forget(gone)
	}
	return out[:min(topK, len(out))], nil
}

// exactVectorRank is vectorRank without the codes: every stored vector
// compared with q. The benchmarks measure the codes' recall against it.
func (s *snapshot) exactVectorRank(q []float32, topK int) ([]scored, error) {
	rows, err := s.query(`SELECT id, v FROM vectors`)
	if err != nil {
		return nil, s.i.storeErr("searching the index", err)
	}
	defer rows.Close()
	var out []scored
	v := make([]float32, len(q))
	for rows.Next() {
		var id int64
		var blob []byte
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, s.i.storeErr("searching the index", err)
		}
		if decodeVector(blob, v) {
			out = append(out, scored{id: id, score: dot(q, v)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.i.storeErr("searching the index", err)
	}
	slices.SortFunc(out, bestFirst)
	return out[:min(topK, len(out))], nil
}

// dot is the inner product of two vectors of one length: their cosine,
// for unit vectors.
func dot(a, b []float32) float64 {
	var s float32
	for k := range a {
		s += a[k] * b[k]
	}
	return float64(s)
}

// coverage returns how many sections of the snapshot lack a vector in
// the index, counting the sections once per version of the store. The
// caller holds x.mu, after a sync.
func (x *vectorIndex) coverage(s *snapshot) (missing int, err error) {
	ver, err := s.version()
	if err != nil {
		return 0, err
	}
	if ver != x.countedVer {
		if err := s.queryRow(`SELECT count(*) FROM sections`).Scan(&x.sections); err != nil {
			return 0, s.i.storeErr("searching the index", err)
		}
		x.countedVer = ver
	}
	return max(0, x.sections-(len(x.ids)-x.dead)), nil
}
