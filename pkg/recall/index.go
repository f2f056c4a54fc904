package recall

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"
)

// Doc is one document to index.
type Doc struct {
	// ID names the document; adding an ID again replaces the document.
	ID string
	// Text is analyzed into terms; it is not stored.
	Text string
	// Time is when the document was made; newer wins ties.
	Time time.Time
	// Importance in [0, 1] breaks ties after recency.
	Importance float32
	// Vector is an optional external embedding (for example from an
	// OpenAI-compatible endpoint). When both it and Options.QueryVector are
	// set, it replaces the hashed dense signal for this document.
	Vector []float32
	// Aux is the caller's data about the document (up to 64 KiB), kept
	// with it, saved with the index and given back in Info: for example
	// what filters test, so that the caller needs no map of its own.
	Aux string
}

// Params are the BM25 parameters.
type Params struct {
	K1, B float64
}

// DefaultParams are the usual BM25 parameters.
var DefaultParams = Params{K1: 1.2, B: 0.75}

// ErrEmptyID is returned when a document has no ID.
var ErrEmptyID = errors.New("recall: document has an empty ID")

// ErrTooLong is returned for an ID or an Aux longer than 64 KiB.
var ErrTooLong = errors.New("recall: document ID or aux longer than 64 KiB")

func checkDoc(d *Doc) error {
	if d.ID == "" {
		return ErrEmptyID
	}
	if len(d.ID) > maxIDLen || len(d.Aux) > maxAuxLen {
		return ErrTooLong
	}
	return nil
}

// maxTF caps a term frequency so that it fits a posting.
const maxTF = math.MaxUint16

type termFreq struct {
	term uint32
	tf   uint16
}

// postings holds the documents of one term, sorted by internal number.
type postings struct {
	docs []uint32
	tfs  []uint16
	// maxTF and minLen bound the BM25 score of the term from above; they are
	// only raised (lowered) on Add, so they stay valid bounds after Delete.
	maxTF  uint16
	minLen uint32
	// blk bounds each block of blockSize postings the same way, exactly:
	// topK skips the blocks that cannot lift a document into the top k.
	// (A deleted document still in the list only loosens them: a bound
	// is still a bound.)
	blk []blockMax
	// dead counts the deleted documents still in docs (DeleteMany): the
	// list is filtered once they are half of it.
	dead int32
}

// df is the number of live documents with the term.
func (p *postings) df() int { return len(p.docs) - int(p.dead) }

// blockSize is the number of postings a block bound covers.
const blockSize = 64

type blockMax struct {
	maxTF  uint16
	minLen uint32
}

// add appends document n, of the given length, with term frequency tf.
func (p *postings) add(n uint32, tf uint16, length uint32) {
	if len(p.docs)%blockSize == 0 {
		p.blk = append(p.blk, blockMax{minLen: math.MaxUint32})
	}
	p.docs = append(p.docs, n)
	p.tfs = append(p.tfs, tf)
	p.maxTF = max(p.maxTF, tf)
	p.minLen = min(p.minLen, length)
	b := &p.blk[len(p.blk)-1]
	b.maxTF = max(b.maxTF, tf)
	b.minLen = min(b.minLen, length)
}

// remove takes out posting i and bounds again the blocks from its on.
func (p *postings) remove(i int, docLen []uint32) {
	p.docs = append(p.docs[:i], p.docs[i+1:]...)
	p.tfs = append(p.tfs[:i], p.tfs[i+1:]...)
	p.bound(i/blockSize, docLen)
}

// bound computes the block bounds from block first on.
func (p *postings) bound(first int, docLen []uint32) {
	nb := (len(p.docs) + blockSize - 1) / blockSize
	if cap(p.blk) < nb {
		p.blk = append(p.blk[:cap(p.blk)], make([]blockMax, nb-cap(p.blk))...)
	}
	p.blk = p.blk[:nb]
	for bi := first; bi < len(p.blk); bi++ {
		b := blockMax{minLen: math.MaxUint32}
		for j := bi * blockSize; j < min((bi+1)*blockSize, len(p.docs)); j++ {
			b.maxTF = max(b.maxTF, p.tfs[j])
			b.minLen = min(b.minLen, docLen[p.docs[j]])
		}
		p.blk[bi] = b
	}
}

// Index is an in-memory inverted index with BM25 ranking, safe for
// concurrent use. Documents get internal numbers in the order they are
// added, so posting lists stay sorted with appends only.
type Index struct {
	mu     sync.RWMutex
	params Params

	termIDs  map[string]uint32
	termStr  []string
	post     []postings
	termFeat [][]int32 // hashed dense features of each term, see dense.go

	// The forward index, see store.go.
	docs    []docInfo   // by internal number
	docLen  []uint32    // by internal number, kept apart for cache locality
	chunks  [][]byte    // the documents' records
	records int         // bytes of records in chunks
	garbage int         // bytes of them that are deleted documents'
	vecs    [][]float32 // by internal number, nil until a document has one
	ids     idTable

	live     int
	totalLen int64

	acc accArrays // for accumulate

	tfs []termFreq // addLocked's, reused up to 1024 terms
}

// New returns an empty index with the given BM25 parameters.
func New(p Params) *Index {
	return &Index{params: p, termIDs: map[string]uint32{}, ids: newIDTable(0)}
}

// Len returns the number of documents.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Has reports whether a document with this ID is indexed.
func (ix *Index) Has(id string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.ids.find(ix, id)
	return ok
}

// Add indexes a document, replacing any document with the same ID.
func (ix *Index) Add(d Doc) error {
	if err := checkDoc(&d); err != nil {
		return err
	}
	p := Prepare(d)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.addLocked(&p)
	return nil
}

// AddBatch indexes many documents under one lock.
func (ix *Index) AddBatch(docs []Doc) error {
	ps := make([]Prepared, len(docs))
	for i := range docs {
		if err := checkDoc(&docs[i]); err != nil {
			return fmt.Errorf("document %d of batch: %w", i, err)
		}
		ps[i] = Prepare(docs[i])
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for i := range ps {
		ix.addLocked(&ps[i])
	}
	return nil
}

func (ix *Index) termID(s string) uint32 {
	if id, ok := ix.termIDs[s]; ok {
		return id
	}
	id := uint32(len(ix.termStr))
	ix.termIDs[s] = id
	ix.termStr = append(ix.termStr, s)
	ix.post = append(ix.post, postings{minLen: math.MaxUint32})
	ix.termFeat = append(ix.termFeat, termFeatures(s))
	return id
}

// addLocked adds a prepared document, replacing any with its ID.
func (ix *Index) addLocked(p *Prepared) {
	d := &p.doc
	if n, ok := ix.ids.find(ix, d.ID); ok {
		ix.deleteLocked(n)
	}
	var t int64
	if !d.Time.IsZero() {
		t = d.Time.UnixNano()
	}
	tfs := ix.tfs[:0]
	for i, s := range p.terms {
		tfs = append(tfs, termFreq{ix.termID(s), uint16(min(p.counts[i], maxTF))})
	}
	if cap(tfs) <= 1024 {
		ix.tfs = tfs // a long text's does not stay with the index
	}
	n := uint32(len(ix.docs))
	length := p.length
	for _, tf := range tfs {
		ix.post[tf.term].add(n, tf.tf, length)
	}
	size := len(d.ID) + len(d.Aux) + termsSize(tfs)
	var rec uint64
	var b []byte
	ix.chunks, rec, b = appendRecord(ix.chunks, size)
	b = append(b, d.ID...)
	b = append(b, d.Aux...)
	addRecord(ix.chunks, encodeTerms(b, tfs))
	ix.records += size
	ix.docs = append(ix.docs, docInfo{time: t, rec: rec, importance: d.Importance, idLen: uint16(len(d.ID)), auxLen: uint16(len(d.Aux))})
	ix.docLen = append(ix.docLen, length)
	if d.Vector != nil || ix.vecs != nil {
		for len(ix.vecs) < len(ix.docs) {
			ix.vecs = append(ix.vecs, nil)
		}
		ix.vecs[n] = d.Vector
	}
	ix.ids.insert(ix, d.ID, n)
	ix.live++
	ix.totalLen += int64(length)
}

// Delete removes a document and reports whether it was present.
func (ix *Index) Delete(id string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n, ok := ix.ids.find(ix, id)
	if ok {
		ix.deleteLocked(n)
	}
	return ok
}

// DeleteMany deletes the documents of ids it has, and reports how many.
// Their cost is their own terms, not the lists they are in: each is
// counted dead in its terms' posting lists, where searches skip it
// (offer), and a list is filtered, in one pass, once its dead documents
// are half of it, which the deletions since its last filtering pay for.
// (Deleting documents one by one cost a pass over each list per
// document, quadratic in the documents a term shares: issue 45, 100k
// memories forgotten in 47 s; filtering every list a group touched cost a
// pass over each per group of 512, 173 s for a forget of 1M.)
func (ix *Index) DeleteMany(ids []string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	touched := map[uint32]bool{}
	var nums []uint32
	var buf []termFreq
	for _, id := range ids {
		n, ok := ix.ids.find(ix, id)
		if !ok || ix.dead(n) {
			continue
		}
		nums = append(nums, n)
		buf = ix.terms(n, buf[:0])
		for _, tf := range buf {
			ix.post[tf.term].dead++
			touched[tf.term] = true
		}
		ix.forgetLocked(n) // dead from here: found no more, offered no more
	}
	for term := range touched {
		p := &ix.post[term]
		if 2*int(p.dead) < len(p.docs) {
			continue
		}
		j := 0
		for i, d := range p.docs {
			if !ix.dead(d) {
				p.docs[j], p.tfs[j] = d, p.tfs[i]
				j++
			}
		}
		p.docs, p.tfs, p.dead = p.docs[:j], p.tfs[:j], 0
		p.bound(0, ix.docLen)
	}
	if ix.garbage > ix.records/2 {
		ix.compactLocked()
	}
	return len(nums)
}

// dead reports whether document n was deleted (forgetLocked).
func (ix *Index) dead(n uint32) bool { return ix.docs[n].idLen == 0 }

// forgetLocked is deleteLocked but for the postings: document n's
// number, id, length and record are let go.
func (ix *Index) forgetLocked(n uint32) {
	ix.ids.remove(ix, ix.docID(n))
	ix.totalLen -= int64(ix.docLen[n])
	ix.live--
	ix.garbage += len(ix.record(n))
	ix.docs[n].idLen, ix.docs[n].auxLen = 0, 0
	ix.docLen[n] = 0
	if int(n) < len(ix.vecs) {
		ix.vecs[n] = nil
	}
}

func (ix *Index) deleteLocked(n uint32) {
	for _, tf := range ix.terms(n, nil) {
		p := &ix.post[tf.term]
		i := sort.Search(len(p.docs), func(i int) bool { return p.docs[i] >= n })
		if i < len(p.docs) && p.docs[i] == n {
			p.remove(i, ix.docLen)
		}
	}
	ix.forgetLocked(n)
	if ix.garbage > ix.records/2 {
		ix.compactLocked()
	}
}

// qterm is a query term with its weight.
type qterm struct {
	term   uint32
	weight float64
}

// scored is a document number with a score.
type scored struct {
	doc   uint32
	score float64
	time  int64  // the document's, so ties do not depend on doc numbers
	id    string // the document's, the last tie-break
}

// scoreQuantum is the resolution at which scores are compared. A
// document's BM25 score is a sum whose order follows the pruning, which
// follows the doc numbers; an index rebuilt from the files numbers them
// otherwise, and the sum may differ in its last bits. Compared at this
// resolution, a rebuilt index ranks exactly as the live one did.
const scoreQuantum = 1e-9

func quantize(x float64) float64 { return math.Round(x/scoreQuantum) * scoreQuantum }

func (ix *Index) idf(df int) float64 {
	n := float64(ix.live)
	return math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
}

// queryTerms maps analyzed query words to weighted terms known to the index;
// a repeated word weighs more.
func (ix *Index) queryTerms(words []string) []qterm {
	var out []qterm
	idx := map[uint32]int{}
	for _, w := range words {
		tid, ok := ix.termIDs[w]
		if !ok || ix.post[tid].df() == 0 {
			continue
		}
		if i, ok := idx[tid]; ok {
			out[i].weight++
			continue
		}
		idx[tid] = len(out)
		out = append(out, qterm{tid, 1})
	}
	return out
}

// cursor walks one posting list during top-k retrieval.
type cursor struct {
	docs []uint32
	tfs  []uint16
	blk  []blockMax
	pos  int
	w    float64 // weight * idf * (k1+1)
	ub   float64 // upper bound of the term's contribution
	// The block bound of the block holding pos: its number (-1 before the
	// first), the bound and the block's last document.
	bi   int
	bub  float64
	bend uint32
}

func (c *cursor) doc() uint32 {
	if c.pos < len(c.docs) {
		return c.docs[c.pos]
	}
	return math.MaxUint32
}

// seek moves to the first posting >= d by galloping then binary search.
func (c *cursor) seek(d uint32) {
	lo := c.pos
	if lo >= len(c.docs) || c.docs[lo] >= d {
		return
	}
	// Dense lists are probed for near documents: look at the next first.
	if lo+1 >= len(c.docs) || c.docs[lo+1] >= d {
		c.pos = lo + 1
		return
	}
	step := 1
	hi := lo + 1
	for hi < len(c.docs) && c.docs[hi] < d {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, len(c.docs))
	// docs[lo] < d; find first in (lo, hi] >= d.
	c.pos = lo + 1 + sort.Search(hi-lo-1, func(i int) bool { return c.docs[lo+1+i] >= d })
}

// topK returns the k best documents for weighted terms under BM25, best
// first, using MaxScore dynamic pruning: terms are ordered by their score
// upper bound, and the terms whose bounds together cannot lift a document
// above the current k-th score are only probed, never iterated; and the
// blocks of postings whose bounds cannot lift a document above it are
// skipped. seed, documents already scored for q (see score) and accepted,
// fill the heap first: with k of them the pruning starts from their k-th
// score.
func (ix *Index) topK(q []qterm, k int, accept func(n uint32) bool, seed []scored) []scored {
	return ix.topKBy(q, k, accept, seed, autoWalk)
}

// walk is how topKBy visits the postings.
type walk int

const (
	autoWalk walk = iota // by the rule of topKBy
	docWalk              // document at a time, pruned
	termWalk             // term at a time, every posting (accumulate)
)

// taatShare is the share of the documents the essential lists must hold,
// with the threshold known from the seeds, for topKBy to sum every
// posting term at a time instead: past it, MaxScore scores nearly every
// document of a long list and probes every other list for it, which costs
// several times a sequential pass over all of them (the expanded query of
// a query made of common words; see doc.go for the figures).
const taatShare = 0.25

// topKBy is topK, walking the postings as w says.
func (ix *Index) topKBy(q []qterm, k int, accept func(n uint32) bool, seed []scored, w walk) []scored {
	if k <= 0 || len(q) == 0 || ix.live == 0 {
		return nil
	}
	k1, b := ix.params.K1, ix.params.B
	invAvg := float64(ix.live) / float64(max(ix.totalLen, 1))
	curs := make([]cursor, 0, len(q))
	for _, t := range q {
		p := &ix.post[t.term]
		if p.df() == 0 || t.weight <= 0 {
			continue
		}
		w := t.weight * ix.idf(p.df()) * (k1 + 1)
		tf := float64(p.maxTF)
		ub := w * tf / (tf + k1*(1-b+b*float64(p.minLen)*invAvg))
		curs = append(curs, cursor{docs: p.docs, tfs: p.tfs, blk: p.blk, w: w, ub: ub, bi: -1})
	}
	sort.SliceStable(curs, func(i, j int) bool { return curs[i].ub < curs[j].ub })
	prefix := make([]float64, len(curs))
	sum := 0.0
	for i := range curs {
		sum += curs[i].ub
		prefix[i] = sum
	}
	h := make(minHeap, 0, k)
	threshold := 0.0
	firstEss := 0
	seeded := func(d uint32) bool {
		for _, s := range seed {
			if s.doc == d {
				return true
			}
		}
		return false
	}
	for _, s := range seed {
		if s.score <= 0 {
			continue // holds none of the terms: topK would not find it
		}
		if len(h) < k {
			h.push(s)
		} else if better(s, h[0]) {
			h[0] = s
			h.fix()
		}
	}
	if len(h) == k {
		threshold = h[0].score
		for firstEss < len(curs) && prefix[firstEss] < threshold-scoreQuantum {
			firstEss++
		}
	}
	if w == autoWalk && len(h) == k {
		e := 0
		for i := firstEss; i < len(curs); i++ {
			e += len(curs[i].docs)
		}
		if float64(e) >= taatShare*float64(len(ix.docLen)) {
			w = termWalk
		}
	}
	if w == termWalk {
		return ix.accumulate(curs, h, k, accept, seeded)
	}
	// contrib is a cursor's share of the score of the document it is at,
	// whose length normalization is norm; as in score, to the bit.
	contrib := func(c *cursor, norm float64) float64 {
		tf := float64(c.tfs[c.pos])
		return c.w * tf / (tf + norm)
	}
	for firstEss < len(curs) {
		d := uint32(math.MaxUint32)
		for i := firstEss; i < len(curs); i++ {
			d = min(d, curs[i].doc())
		}
		if d == math.MaxUint32 {
			break
		}
		if len(h) == k {
			// Block-max: until next, where the first block of an essential
			// list at d ends or another essential list has a document, no
			// document scores more than its lists' block bounds and the
			// other lists' bounds. If that cannot beat the threshold, skip.
			bound := 0.0
			if firstEss > 0 {
				bound = prefix[firstEss-1]
			}
			next := uint32(math.MaxUint32)
			for i := firstEss; i < len(curs); i++ {
				c := &curs[i]
				if c.doc() != d {
					next = min(next, c.doc())
					continue
				}
				if bi := c.pos / blockSize; bi != c.bi {
					bm := &c.blk[bi]
					tf := float64(bm.maxTF)
					c.bi, c.bub = bi, c.w*tf/(tf+k1*(1-b+b*float64(bm.minLen)*invAvg))
					c.bend = c.docs[min((bi+1)*blockSize, len(c.docs))-1]
				}
				bound += c.bub
				next = min(next, c.bend+1)
			}
			if bound < threshold-scoreQuantum {
				for i := firstEss; i < len(curs); i++ {
					curs[i].seek(next)
				}
				continue
			}
		}
		norm := k1 * (1 - b + b*float64(ix.docLen[d])*invAvg)
		score := 0.0
		for i := firstEss; i < len(curs); i++ {
			c := &curs[i]
			if c.doc() == d {
				score += contrib(c, norm)
				c.pos++
			}
		}
		for i := firstEss - 1; i >= 0; i-- {
			// Strictly below: a document that only ties the k-th
			// score may still win on time (see better).
			if score+prefix[i] < threshold-scoreQuantum {
				break
			}
			c := &curs[i]
			c.seek(d)
			if c.doc() == d {
				score += contrib(c, norm)
			}
		}
		if len(h) == k && score < threshold-scoreQuantum {
			continue // before quantizing, reading the time and the id
		}
		if !ix.offer(&h, k, d, score, accept, seeded) || len(h) < k {
			continue
		}
		threshold = h[0].score
		// The threshold is quantized, maybe a hair above a raw bound that
		// ties it: a tie may still win on time.
		for firstEss < len(curs) && prefix[firstEss] < threshold-scoreQuantum {
			firstEss++
		}
	}
	return h.sorted()
}

// offer puts document d, of raw score score, into h, which keeps the k
// best, if it is better than h's worst, accepted and not a seed; it
// reports whether h changed. Callers first drop the scores below h's
// worst, which is most of them, without a call.
func (ix *Index) offer(h *minHeap, k int, d uint32, score float64, accept, seeded func(uint32) bool) bool {
	if ix.dead(d) {
		return false // deleted, still in a posting list (DeleteMany)
	}
	qs := quantize(score)
	if len(*h) == k && qs < (*h)[0].score {
		return false
	}
	cand := scored{d, qs, ix.docs[d].time, ix.docID(d)}
	if len(*h) == k && !better(cand, (*h)[0]) {
		return false
	}
	if accept != nil && !accept(d) || seeded(d) {
		return false
	}
	if len(*h) < k {
		h.push(cand)
	} else {
		(*h)[0] = cand
		h.fix()
	}
	return true
}

// score is document n's BM25 score for q, from its terms, quantized like
// topK's.
func (ix *Index) score(q []qterm, n uint32) scored {
	k1, b := ix.params.K1, ix.params.B
	invAvg := float64(ix.live) / float64(max(ix.totalLen, 1))
	norm := k1 * (1 - b + b*float64(ix.docLen[n])*invAvg)
	terms := ix.terms(n, make([]termFreq, 0, 64))
	s := 0.0
	for _, t := range q {
		p := &ix.post[t.term]
		if p.df() == 0 || t.weight <= 0 {
			continue
		}
		for _, tf := range terms {
			if tf.term == t.term {
				f := float64(tf.tf)
				s += t.weight * ix.idf(p.df()) * (k1 + 1) * f / (f + norm)
				break
			}
		}
	}
	return scored{n, quantize(s), ix.docs[n].time, ix.docID(n)}
}

// better orders by score (quantized when scored), then by the newer document:
// by its time, and at equal times by its id (ids grow with time). Neither
// depends on doc numbers, so an index rebuilt from the files, in another
// insertion order than the live one, ranks ties the same.
func better(a, b scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.time != b.time {
		return a.time > b.time
	}
	return a.id > b.id
}

// minHeap keeps the k best scored documents with the worst at the root.
type minHeap []scored

func (h *minHeap) push(s scored) {
	*h = append(*h, s)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !better(a[p], a[i]) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// sorted returns h's documents, best first.
func (h minHeap) sorted() []scored {
	out := []scored(h)
	sort.Slice(out, func(i, j int) bool { return better(out[i], out[j]) })
	return out
}

// fix restores the heap after the root was replaced.
func (h minHeap) fix() {
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			m = r
		}
		if !better(h[i], h[m]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// Prepared is a document analyzed outside the index's lock (see Prepare),
// so that a caller holding up others (the kernel's committer) only pays
// for the insertion.
type Prepared struct {
	doc Doc
	// terms are the document's distinct terms, in the order they first
	// come; counts, how often each comes; length, how many terms it has.
	terms  []string
	counts []uint32
	length uint32
}

// Prepare analyzes d for AddPrepared.
func Prepare(d Doc) Prepared {
	all := Analyze(d.Text)
	p := Prepared{doc: d, length: uint32(len(all)), counts: make([]uint32, 0, len(all))}
	// The distinct terms go in all's own array: the j-th is written once
	// the i-th (i >= j) has been read.
	terms := all[:0]
	if len(all) <= 64 {
		// A short text: an open-addressed table of 128 on the stack, by a
		// hash of a few bytes, is cheaper than a map.
		var slot [128]uint8 // index in terms + 1
	next:
		for _, s := range all {
			h := (uint(len(s))*31 + uint(s[0])*7 + uint(s[len(s)/2])*17 + uint(s[len(s)-1])*131) & 127
			for ; slot[h] != 0; h = (h + 1) & 127 {
				if j := slot[h] - 1; terms[j] == s {
					p.counts[j]++
					continue next
				}
			}
			slot[h] = uint8(len(terms) + 1)
			terms = append(terms, s)
			p.counts = append(p.counts, 1)
		}
	} else {
		seen := make(map[string]int, len(all)/2)
		for _, s := range all {
			if j, ok := seen[s]; ok {
				p.counts[j]++
				continue
			}
			seen[s] = len(terms)
			terms = append(terms, s)
			p.counts = append(p.counts, 1)
		}
	}
	p.terms = terms
	return p
}

// AddPrepared indexes prepared documents under one lock, replacing any
// with the same ID.
func (ix *Index) AddPrepared(ps []*Prepared) error {
	for i := range ps {
		if err := checkDoc(&ps[i].doc); err != nil {
			return fmt.Errorf("document %d of batch: %w", i, err)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, p := range ps {
		ix.addLocked(p)
	}
	return nil
}

// ID is the prepared document's ID.
func (p *Prepared) ID() string { return p.doc.ID }

// accArrays keeps the score arrays of accumulate, one float64 per
// document number, for the next searches: not a sync.Pool, which a
// collection empties, because a fresh array costs its page faults (8 MB
// at a million documents: milliseconds) on top of the search. It keeps
// as many as searches ran at once, up to the cores.
type accArrays struct {
	mu   sync.Mutex
	free [][]float64
}

// get returns a zeroed array of n.
func (a *accArrays) get(n int) []float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.free) > 0 {
		acc := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		if cap(acc) >= n {
			return acc[:n]
		}
		// Too short for an index that has grown: dropped.
	}
	return make([]float64, n)
}

// put takes back an array accumulate has zeroed again.
func (a *accArrays) put(acc []float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.free) < runtime.GOMAXPROCS(0) {
		a.free = append(a.free, acc)
	}
}

// accumulate finishes topKBy term at a time: every posting of every list
// adds its share to its document's score in an array, a sequential pass
// with no branch; then one pass over the array picks the k best into h,
// which holds the seeds, and leaves the array zeroed for the next search.
func (ix *Index) accumulate(curs []cursor, h minHeap, k int, accept func(uint32) bool, seeded func(uint32) bool) []scored {
	n := len(ix.docLen)
	acc := ix.acc.get(n)
	k1, b := ix.params.K1, ix.params.B
	invAvg := float64(ix.live) / float64(max(ix.totalLen, 1))
	na, nb := k1*(1-b), k1*b*invAvg
	docLen := ix.docLen[:n]
	for i := len(curs) - 1; i >= 0; i-- {
		c := &curs[i]
		w := c.w
		tfs := c.tfs[:len(c.docs)]
		for j, d := range c.docs {
			tf := float64(tfs[j])
			acc[d] += w * tf / (tf + na + nb*float64(docLen[d]))
		}
	}
	threshold := 0.0
	if len(h) == k {
		threshold = h[0].score
	}
	for d := range acc {
		score := acc[d]
		if score == 0 {
			continue
		}
		acc[d] = 0
		if len(h) == k && score < threshold-scoreQuantum {
			continue
		}
		if ix.offer(&h, k, uint32(d), score, accept, seeded) && len(h) == k {
			threshold = h[0].score
		}
	}
	ix.acc.put(acc)
	return h.sorted()
}
