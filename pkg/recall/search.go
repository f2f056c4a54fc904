package recall

import (
	"errors"
	"sort"
	"strings"
	"time"
)

// The hybrid pipeline has few knobs on purpose; the values were chosen on
// CISI's own queries (see cisi_test.go and the package comment).
const (
	feedbackDocs   = 5   // pseudo-relevant documents for query expansion
	feedbackTerms  = 10  // expansion terms taken from them
	originalWeight = 0.7 // share of the original query in the expanded one
	candidates     = 20  // BM25 candidates reranked by the dense signal
	rrfK           = 60  // reciprocal rank fusion constant

	// MaxFusedScore is the best hybrid score: first in both rankings.
	MaxFusedScore = 2.0 / (rrfK + 1)
)

// ErrEmptyQuery is returned for a query with no searchable word.
var ErrEmptyQuery = errors.New("recall: query has no searchable words")

// Options tune one search.
type Options struct {
	// K is how many hits to return; 0 means 10.
	K int
	// Filter, when set, keeps only the documents it accepts. It runs
	// under the index's read lock: it must not call the index.
	Filter func(Info) bool
	// QueryVector, when set, is compared with Doc.Vector instead of the
	// hashed dense signal (documents without a vector fall back to it).
	QueryVector []float32
	// BM25Only disables query expansion and dense fusion.
	BM25Only bool
}

// Hit is one search result.
type Hit struct {
	ID string
	// Score orders the hits: the BM25 score for BM25Only searches, else the
	// reciprocal rank fusion of the BM25 and dense ranks.
	Score float64
	// BM25 is the score of the (expanded) query; Dense the cosine similarity.
	BM25, Dense float64
	Time        time.Time
	Importance  float32
}

// Search returns the best documents for a free-text query in which any
// word may match. The hybrid search expands the query with RM3-style
// pseudo relevance feedback, takes the BM25 top candidates of the expanded
// query, scores them with the dense signal, and fuses both rankings by
// reciprocal rank fusion; importance and then recency break ties.
func (ix *Index) Search(query string, opt Options) ([]Hit, error) {
	words := Analyze(query)
	if len(words) == 0 {
		return nil, ErrEmptyQuery
	}
	k := opt.K
	if k <= 0 {
		k = 10
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var accept func(uint32) bool
	if opt.Filter != nil {
		accept = func(n uint32) bool { return opt.Filter(ix.info(n)) }
	}
	q := ix.queryTerms(words)
	if opt.BM25Only {
		return ix.hits(ix.topK(q, k, accept), nil), nil
	}
	if len(q) == 0 {
		return nil, nil
	}
	fb := ix.topK(q, feedbackDocs, accept)
	eq := ix.expand(q, fb)
	cand := ix.topK(eq, max(candidates, k), accept)
	return ix.fuse(eq, cand, opt.QueryVector, k), nil
}

func (ix *Index) hits(s []scored, dense []float64) []Hit {
	out := make([]Hit, len(s))
	for i, x := range s {
		d := &ix.docs[x.doc]
		out[i] = Hit{ID: strings.Clone(ix.docID(x.doc)), Score: x.score, BM25: x.score, Importance: d.importance}
		if d.time != 0 {
			out[i].Time = time.Unix(0, d.time)
		}
		if dense != nil {
			out[i].Dense = dense[i]
		}
	}
	return out
}

// expand builds the RM3 query: the original term weights and the feedback
// model P(t|R) = sum over feedback docs of P(d) * tf(t,d)/|d|, each
// normalized to sum 1, mixed with originalWeight.
func (ix *Index) expand(q []qterm, fb []scored) []qterm {
	if len(fb) == 0 {
		return q
	}
	var total float64
	for _, s := range fb {
		total += s.score
	}
	model := map[uint32]float64{}
	for _, s := range fb {
		l := float64(ix.docLen[s.doc])
		for _, tf := range ix.terms(s.doc, nil) {
			model[tf.term] += s.score / total * float64(tf.tf) / l
		}
	}
	type tw struct {
		term uint32
		w    float64
	}
	top := make([]tw, 0, len(model))
	for t, w := range model {
		top = append(top, tw{t, w})
	}
	sort.Slice(top, func(i, j int) bool {
		if top[i].w != top[j].w {
			return top[i].w > top[j].w
		}
		return ix.termStr[top[i].term] < ix.termStr[top[j].term]
	})
	top = top[:min(len(top), feedbackTerms)]
	var fbSum, qSum float64
	for _, t := range top {
		fbSum += t.w
	}
	for _, t := range q {
		qSum += t.weight
	}
	weights := map[uint32]float64{}
	for _, t := range q {
		weights[t.term] += originalWeight * t.weight / qSum
	}
	for _, t := range top {
		weights[t.term] += (1 - originalWeight) * t.w / fbSum
	}
	out := make([]qterm, 0, len(weights))
	for t, w := range weights {
		out = append(out, qterm{t, w})
	}
	// By the term itself, not its number: a rebuilt index numbers terms
	// otherwise, and the order of the terms is the order of the sums.
	sort.Slice(out, func(i, j int) bool { return ix.termStr[out[i].term] < ix.termStr[out[j].term] })
	return out
}

// fuse reranks BM25 candidates by reciprocal rank fusion with the dense
// similarity to the query.
func (ix *Index) fuse(q []qterm, cand []scored, qvec []float32, k int) []Hit {
	qw := make(map[uint32]float64, len(q))
	qterms := make([]termFreq, len(q))
	for i, t := range q {
		qw[t.term] = t.weight
		qterms[i] = termFreq{t.term, 1}
	}
	qhash := make([]float32, DenseDim)
	ix.denseOf(qhash, qterms, qw)
	dvec := make([]float32, DenseDim)
	dense := make([]float64, len(cand))
	var terms []termFreq
	for i, c := range cand {
		if v := ix.vec(c.doc); qvec != nil && v != nil {
			dense[i] = cosine(qvec, v)
			continue
		}
		terms = ix.terms(c.doc, terms[:0])
		ix.denseOf(dvec, terms, nil)
		dense[i] = cosine(qhash, dvec)
	}
	order := make([]int, len(cand))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return dense[order[a]] > dense[order[b]] })
	fused := make([]float64, len(cand))
	for r, i := range order {
		fused[i] += 1 / float64(rrfK+r+1)
	}
	for r := range cand {
		fused[r] += 1 / float64(rrfK+r+1)
	}
	idx := make([]int, len(cand))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		x, y := idx[a], idx[b]
		if fused[x] != fused[y] {
			return fused[x] > fused[y]
		}
		dx, dy := &ix.docs[cand[x].doc], &ix.docs[cand[y].doc]
		if dx.importance != dy.importance {
			return dx.importance > dy.importance
		}
		if dx.time != dy.time {
			return dx.time > dy.time
		}
		return ix.docID(cand[x].doc) > ix.docID(cand[y].doc)
	})
	idx = idx[:min(len(idx), k)]
	out := make([]scored, len(idx))
	ds := make([]float64, len(idx))
	for i, j := range idx {
		out[i] = cand[j]
		ds[i] = dense[j]
	}
	hits := ix.hits(out, ds)
	for i, j := range idx {
		hits[i].Score = fused[j]
	}
	return hits
}
