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
	// pairWindow is how far apart (in words, stop words left out) two
	// query words may stand in a document and still count as a pair.
	pairWindow = 2
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
	// Text, when set, returns a document's text for the proximity signal:
	// the candidates are ranked a third time by how many of the query's
	// word pairs they hold in the query's order, at most one word apart.
	// It is called for the few candidates only, without the index's lock.
	Text func(id string) (string, bool)
}

// Hit is one search result.
type Hit struct {
	ID string
	// Score orders the hits: the BM25 score for BM25Only searches, else the
	// reciprocal rank fusion of the BM25, dense (and proximity) ranks,
	// scaled to (0, 1]: 1 is first in every ranking.
	Score float64
	// BM25 is the score of the (expanded) query; Dense the cosine similarity.
	BM25, Dense float64
	Time        time.Time
	Importance  float32
}

// Search returns the best documents for a free-text query in which any
// word may match. The hybrid search expands the query with RM3-style
// pseudo relevance feedback, takes the BM25 top candidates of the expanded
// query, ranks them again by the dense signal (and by word pairs, when
// Options.Text is set), and fuses the rankings by reciprocal rank fusion;
// importance and then recency break ties.
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
	var accept func(uint32) bool
	if opt.Filter != nil {
		accept = func(n uint32) bool { return opt.Filter(ix.info(n)) }
	}
	q := ix.queryTerms(words)
	if opt.BM25Only {
		defer ix.mu.RUnlock()
		return ix.hits(ix.topK(q, k, accept, nil), nil), nil
	}
	if len(q) == 0 {
		ix.mu.RUnlock()
		return nil, nil
	}
	// The first pass finds the feedback documents and, among its top
	// candidates, documents to seed the second: the expanded query is 70%
	// the original one, so their scores for it start the second pass with a
	// threshold close to its last, and it reads next to nothing.
	first := ix.topK(q, candidates, accept, nil)
	eq := ix.expand(q, first[:min(len(first), feedbackDocs)])
	for i, s := range first {
		first[i] = ix.score(eq, s.doc)
	}
	cand := ix.topK(eq, max(candidates, k), accept, first)
	hits := ix.hits(cand, ix.dense(eq, cand, opt.QueryVector))
	ix.mu.RUnlock()
	var pairs []int
	if opt.Text != nil {
		// Only the BM25 best are read: past them a pair rarely lifts a
		// document into the first k, and a k of 1000 would read 1000.
		pairs = queryPairs(words).count(hits[:min(len(hits), candidates)], opt.Text)
	}
	return fuse(hits, pairs, k), nil
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

// dense returns the cosine similarity of each candidate to the query.
func (ix *Index) dense(q []qterm, cand []scored, qvec []float32) []float64 {
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
	return dense
}

// fuse orders candidates (in BM25 order, their Dense filled in) by
// reciprocal rank fusion of their BM25 rank, their dense rank and, when
// pairs is not nil, the rank by pairs held of the first len(pairs); ties
// go to importance, then recency. The k best are returned with their fused
// score scaled to (0, 1].
func fuse(cand []Hit, pairs []int, k int) []Hit {
	fused := make([]float64, len(cand))
	// rank adds the reciprocal rank of each of the first n candidates in
	// the order less makes; ties keep the BM25 order (a stable sort).
	rank := func(n int, less func(a, b int) bool) {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return less(order[a], order[b]) })
		for r, i := range order {
			fused[i] += 1 / float64(rrfK+r+1)
		}
	}
	lists := 2.0
	rank(len(cand), func(a, b int) bool { return a < b })
	rank(len(cand), func(a, b int) bool { return cand[a].Dense > cand[b].Dense })
	if pairs != nil {
		// The pairs rank only the candidates they were counted for.
		lists++
		rank(len(pairs), func(a, b int) bool { return pairs[a] > pairs[b] })
	}
	for i := range cand {
		cand[i].Score = fused[i] / (lists / (rrfK + 1))
	}
	sort.SliceStable(cand, func(a, b int) bool {
		x, y := &cand[a], &cand[b]
		if x.Score != y.Score {
			return x.Score > y.Score
		}
		if x.Importance != y.Importance {
			return x.Importance > y.Importance
		}
		if !x.Time.Equal(y.Time) {
			return x.Time.After(y.Time)
		}
		return x.ID > y.ID
	})
	return cand[:min(len(cand), k)]
}

// pairSet holds the query's ordered word pairs at most pairWindow words
// apart, by the numbers of their stems.
type pairSet struct {
	stems map[string]int // the query's stems, numbered
	first [256]bool      // the first bytes of the stems
	pairs map[[2]int]int // pairs of stem numbers, numbered
}

// queryPairs numbers the distinct pairs of the analyzed query words.
func queryPairs(words []string) *pairSet {
	ps := &pairSet{stems: map[string]int{}, pairs: map[[2]int]int{}}
	nums := make([]int, len(words))
	for i, w := range words {
		n, ok := ps.stems[w]
		if !ok {
			n = len(ps.stems)
			ps.stems[w] = n
			ps.first[w[0]] = true
		}
		nums[i] = n
	}
	for i := range nums {
		for j := i + 1; j <= i+pairWindow && j < len(nums); j++ {
			p := [2]int{nums[i], nums[j]}
			if _, ok := ps.pairs[p]; !ok && p[0] != p[1] {
				ps.pairs[p] = len(ps.pairs)
			}
		}
	}
	return ps
}

// count returns, for each hit, how many of the query's pairs its text
// holds; nil when the query has no pair. Only the words that may stem to
// a query word are stemmed: a stem keeps its word's first byte (checked
// on the stemmer's reference vocabulary by the tests).
func (ps *pairSet) count(hits []Hit, text func(id string) (string, bool)) []int {
	if len(ps.pairs) == 0 {
		return nil
	}
	out := make([]int, len(hits))
	seen := make([]int, len(ps.pairs)) // hit index + 1 that last matched the pair
	type at struct{ pos, stem int }
	var found []at
	for i, h := range hits {
		t, ok := text(h.ID)
		if !ok {
			continue
		}
		found = found[:0]
		pos := 0
		forTokens(t, func(w []byte) {
			if _, stop := stopWords[string(w)]; stop {
				return
			}
			pos++
			if !ps.first[w[0]] {
				return
			}
			if n, ok := ps.stems[stemWord(w)]; ok {
				found = append(found, at{pos, n})
			}
		})
		for a := range found {
			for b := a + 1; b < len(found) && found[b].pos-found[a].pos <= pairWindow; b++ {
				if p, ok := ps.pairs[[2]int{found[a].stem, found[b].stem}]; ok && seen[p] != i+1 {
					seen[p] = i + 1
					out[i]++
				}
			}
		}
	}
	return out
}
