package recall

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// synthCorpus makes n documents of about 30 words drawn from a Zipfian
// vocabulary of vocab words, deterministically.
func synthCorpus(n, vocab int, seed uint64) ([]Doc, []string) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	words := make([]string, vocab)
	for i := range words {
		// Letters only, so that stemming leaves distinct words mostly apart.
		var sb strings.Builder
		x := i + 1
		for x > 0 {
			sb.WriteByte(byte('a' + x%26))
			x /= 26
		}
		words[i] = "w" + sb.String() + "q"
	}
	zipf := rand.NewZipf(rng, 1.07, 2, uint64(vocab-1))
	docs := make([]Doc, n)
	var sb strings.Builder
	for i := range docs {
		sb.Reset()
		for j := 0; j < 25+rng.IntN(11); j++ {
			sb.WriteString(words[zipf.Uint64()])
			sb.WriteByte(' ')
		}
		docs[i] = Doc{ID: fmt.Sprint("d", i), Text: sb.String()}
	}
	return docs, words
}

// bruteBM25 scores every document, for checking the pruned search.
func bruteBM25(ix *Index, query string) []scored {
	q := ix.queryTerms(Analyze(query))
	k1, b := ix.params.K1, ix.params.B
	avg := float64(ix.totalLen) / float64(ix.live)
	scores := map[uint32]float64{}
	for _, t := range q {
		p := &ix.post[t.term]
		idf := ix.idf(len(p.docs))
		for i, d := range p.docs {
			tf := float64(p.tfs[i])
			scores[d] += t.weight * idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(ix.docLen[d])/avg))
		}
	}
	var out []scored
	for d, s := range scores {
		out = append(out, scored{d, quantize(s), ix.docs[d].time, ix.docID(d)})
	}
	sort.Slice(out, func(i, j int) bool { return better(out[i], out[j]) })
	return out
}

func TestTopKMatchesBruteForce(t *testing.T) {
	docs, words := synthCorpus(5000, 2000, 1)
	ix := New(DefaultParams)
	if err := ix.AddBatch(docs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i += 3 {
		ix.Delete(fmt.Sprint("d", i*7))
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for i := 0; i < 200; i++ {
		query := fmt.Sprint(words[rng.IntN(50)], " ", words[rng.IntN(2000)], " ", words[rng.IntN(500)])
		hits, err := ix.Search(query, Options{K: 10, BM25Only: true})
		if err != nil {
			t.Fatal(err)
		}
		want := bruteBM25(ix, query)
		want = want[:min(10, len(want))]
		if len(hits) != len(want) {
			t.Fatalf("%q: %d hits, want %d", query, len(hits), len(want))
		}
		for j := range want {
			if math.Abs(hits[j].Score-want[j].score) > 1e-9 {
				t.Fatalf("%q: hit %d score %v, want %v", query, j, hits[j].Score, want[j].score)
			}
		}
	}
}

func TestAddDeleteSearch(t *testing.T) {
	ix := New(DefaultParams)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ix.Add(Doc{ID: "a", Text: "The disk is full on the web server"}))
	must(ix.Add(Doc{ID: "b", Text: "nginx restarted after the certificate renewal"}))
	must(ix.Add(Doc{ID: "c", Text: "Disks filling up: rotate logs"}))
	if err := ix.Add(Doc{Text: "x"}); !errors.Is(err, ErrEmptyID) {
		t.Fatalf("empty ID: err %v", err)
	}
	if _, err := ix.Search("the of", Options{}); !errors.Is(err, ErrEmptyQuery) {
		t.Fatalf("stop-word query: err %v", err)
	}
	hits, err := ix.Search("disk full", Options{K: 2})
	must(err)
	if len(hits) != 2 || hits[0].ID != "a" || hits[1].ID != "c" {
		t.Fatalf("hits %+v", hits)
	}
	if !ix.Delete("a") || ix.Delete("a") || ix.Len() != 2 {
		t.Fatal("delete")
	}
	must(ix.Add(Doc{ID: "c", Text: "nginx certificate"})) // replaces
	hits, err = ix.Search("disk", Options{})
	must(err)
	if len(hits) != 0 {
		t.Fatalf("deleted docs still found: %+v", hits)
	}
	hits, err = ix.Search("nginx", Options{Filter: func(d Info) bool { return d.ID != "b" }})
	must(err)
	if len(hits) != 1 || hits[0].ID != "c" {
		t.Fatalf("filtered hits %+v", hits)
	}
}

func TestSaveLoad(t *testing.T) {
	docs, words := synthCorpus(2000, 500, 4)
	docs[0].Vector = []float32{1, 0, 0.5}
	ix, err := Rebuild(DefaultParams, docs)
	if err != nil {
		t.Fatal(err)
	}
	ix.Delete("d5")
	var buf bytes.Buffer
	if err := ix.Save(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	ix2, err := Load(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if ix2.Len() != ix.Len() || ix2.Has("d5") || !ix2.Has("d6") {
		t.Fatalf("loaded %d docs, want %d", ix2.Len(), ix.Len())
	}
	for i := 0; i < 50; i++ {
		q := words[i] + " " + words[i*7%500]
		a, _ := ix.Search(q, Options{})
		b, _ := ix2.Search(q, Options{})
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%q: before %v\nafter %v", q, a, b)
		}
	}
	for _, bad := range [][]byte{nil, data[:len(data)/2], append([]byte("XX"), data[2:]...)} {
		if _, err := Load(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load of %d bad bytes: err %v, want ErrCorrupt", len(bad), err)
		}
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 1
	if _, err := Load(bytes.NewReader(flipped)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a flipped bit: err %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	docs, words := synthCorpus(1000, 300, 5)
	ix := New(DefaultParams)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(docs); i += 4 {
				if w%2 == 0 {
					ix.Add(docs[i])
				} else {
					ix.Search(words[i%300], Options{})
					ix.Delete(docs[i-1].ID)
				}
			}
		}()
	}
	wg.Wait()
	var buf bytes.Buffer
	if err := ix.Save(&buf); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildRanksTheSame: an index built from the same documents in
// another order (as a rebuild from the files is) numbers documents and
// terms otherwise, and must still rank every query exactly the same,
// ties included (many documents here share a time and differ by a word).
func TestRebuildRanksTheSame(t *testing.T) {
	docs, words := synthCorpus(3000, 300, 7)
	at := time.Unix(1700000000, 0)
	for i := range docs {
		docs[i].ID = fmt.Sprintf("m%05d", i)
		docs[i].Time = at.Add(time.Duration(i/100) * time.Second) // batches of 100 share a time
	}
	live := New(DefaultParams)
	for _, d := range docs {
		if err := live.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	shuffled := append([]Doc(nil), docs...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	rebuilt := New(DefaultParams)
	if err := rebuilt.AddBatch(shuffled); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		q := words[i%len(words)] + " " + words[(i*7+3)%len(words)] + " " + words[(i*13+5)%40]
		for _, opt := range []Options{{K: 20}, {K: 20, BM25Only: true}} {
			a, err := live.Search(q, opt)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := rebuilt.Search(q, opt)
			if len(a) == 0 || len(a) != len(b) {
				t.Fatalf("%q: %d and %d hits", q, len(a), len(b))
			}
			for j := range a {
				if a[j].ID != b[j].ID {
					t.Fatalf("%q (bm25 only %v): hit %d is %s live, %s rebuilt", q, opt.BM25Only, j, a[j].ID, b[j].ID)
				}
			}
		}
	}
}

// TestTopKTiesWinOnTime: many documents tie on score; the pruned search
// must still return the newest of them, as a full scoring does, even
// where a tied document's score bound equals the k-th score exactly.
func TestTopKTiesWinOnTime(t *testing.T) {
	ix := New(DefaultParams)
	at := time.Unix(1700000000, 0)
	var docs []Doc
	for i := 0; i < 300; i++ {
		text := "alpha"
		if i%2 == 1 {
			text = "alpha beta"
		}
		docs = append(docs, Doc{ID: fmt.Sprintf("m%04d", i), Text: text, Time: at.Add(time.Duration(i%7) * time.Second)})
	}
	for i := 0; i < 200; i++ {
		docs = append(docs, Doc{ID: fmt.Sprintf("o%04d", i), Text: "gamma delta"})
	}
	if err := ix.AddBatch(docs); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"alpha", "alpha beta", "beta alpha gamma"} {
		for _, k := range []int{1, 10, 40} {
			hits, err := ix.Search(q, Options{K: k, BM25Only: true})
			if err != nil {
				t.Fatal(err)
			}
			want := bruteBM25(ix, q)
			want = want[:min(k, len(want))]
			if len(hits) != len(want) {
				t.Fatalf("%q k %d: %d hits, want %d", q, k, len(hits), len(want))
			}
			for j := range want {
				if hits[j].ID != ix.docID(want[j].doc) {
					t.Fatalf("%q k %d: hit %d is %s, want %s", q, k, j, hits[j].ID, ix.docID(want[j].doc))
				}
			}
		}
	}
}

// The proximity signal counts the query's distinct word pairs that a text
// holds in order, at most one word apart, on stems, stop words left out.
func TestQueryPairsCount(t *testing.T) {
	ps := queryPairs(Analyze("solar panel"))
	for text, want := range map[string]int{
		"solar panel":               1,
		"solar panels for the roof": 1, // stems
		"solar big panel":           1, // one word between
		"solar big red panel":       0, // two
		"the solar and the panel":   1, // stop words do not count
		"panel solar":               0, // order
		"solar panel, solar panel":  1, // distinct pairs
		"":                          0,
	} {
		got := ps.count([]Hit{{ID: "x"}}, func(string) (string, bool) { return text, true })
		if got[0] != want {
			t.Errorf("%q: %d pairs, want %d", text, got[0], want)
		}
	}
	if got := ps.count([]Hit{{ID: "gone"}}, func(string) (string, bool) { return "", false }); got[0] != 0 {
		t.Errorf("a gone document holds %d pairs", got[0])
	}
	if queryPairs(Analyze("solar")).count([]Hit{{ID: "x"}}, nil) != nil {
		t.Error("a one-word query has pairs")
	}
}

// When the BM25 and dense rankings disagree, the pairs decide; without
// them the tie goes to importance. Scores are scaled so that first in
// every ranking is 1.
func TestFuseWithPairs(t *testing.T) {
	cands := func() []Hit {
		return []Hit{
			{ID: "c0", Dense: 0.5, Importance: 0.9}, // BM25 first, dense second
			{ID: "c1", Dense: 0.9},                  // BM25 second, dense first
			{ID: "c2", Dense: 0.1},
		}
	}
	if got := fuse(cands(), nil, 3); got[0].ID != "c0" || got[0].Score != got[1].Score || got[2].ID != "c2" {
		t.Errorf("without pairs: %+v; want c0 and c1 tied, c0 first on importance", got)
	}
	got := fuse(cands(), []int{0, 1, 0}, 2)
	if len(got) != 2 || got[0].ID != "c1" || got[1].ID != "c0" {
		t.Errorf("with pairs: %+v; want c1, c0", got)
	}
	all := []Hit{{ID: "c0", Dense: 0.9}, {ID: "c1", Dense: 0.1}}
	if got := fuse(all, []int{2, 0}, 2); got[0].Score != 1 || got[1].Score >= 1 {
		t.Errorf("first everywhere: %+v; want score 1, then less", got)
	}
}

// Text is called without the index's lock: it may change the index.
func TestSearchTextWithoutLock(t *testing.T) {
	ix := New(DefaultParams)
	for i := 0; i < 20; i++ {
		if err := ix.Add(Doc{ID: fmt.Sprint("d", i), Text: fmt.Sprint("solar panel number ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []Hit, 1)
	go func() {
		hits, _ := ix.Search("solar panel", Options{K: 3, Text: func(id string) (string, bool) {
			ix.Delete("d0") // takes the write lock
			return "solar panel", true
		}})
		done <- hits
	}()
	select {
	case hits := <-done:
		if len(hits) != 3 {
			t.Fatalf("%d hits, want 3", len(hits))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Search did not return: Text was called under the index's lock")
	}
}

// topK of weighted (expanded) queries, seeded with any live documents
// scored for the query, with and without a filter, finds exactly the
// brute-force top k, walking the postings document at a time or term at
// a time; block bounds stay exact after deletes and re-adds.
func TestTopKSeededMatchesBruteForce(t *testing.T) {
	docs, words := synthCorpus(5000, 2000, 3)
	ix := New(DefaultParams)
	if err := ix.AddBatch(docs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 900; i += 3 {
		ix.Delete(fmt.Sprint("d", i*5))
	}
	if err := ix.AddBatch(docs[:300]); err != nil { // re-added: new numbers
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 5))
	for i := 0; i < 200; i++ {
		q := ix.queryTerms(Analyze(fmt.Sprint(words[rng.IntN(30)], " ", words[rng.IntN(2000)], " ", words[rng.IntN(300)])))
		if len(q) == 0 {
			continue
		}
		eq := ix.expand(q, ix.topK(q, feedbackDocs, nil, nil))
		var seed []scored
		for len(seed) < 1+rng.IntN(40) {
			n := uint32(rng.IntN(len(ix.docs)))
			if ix.docID(uint32(n)) != "" && !slices.ContainsFunc(seed, func(s scored) bool { return s.doc == n }) {
				seed = append(seed, ix.score(eq, n))
			}
		}
		// Brute force: every live document scored from its terms.
		var all []scored
		for n := range ix.docs {
			if ix.docID(uint32(n)) != "" {
				if s := ix.score(eq, uint32(n)); s.score > 0 {
					all = append(all, s)
				}
			}
		}
		sort.Slice(all, func(a, b int) bool { return better(all[a], all[b]) })
		// With no filter, and with one that drops a third of the documents
		// (seeds are accepted documents, as Search gives).
		for fi, accept := range []func(uint32) bool{nil, func(n uint32) bool { return n%3 != 0 }} {
			keep := func(s scored) bool { return accept == nil || accept(s.doc) }
			var want, seedF []scored
			for _, s := range all {
				if keep(s) && len(want) < 20 {
					want = append(want, s)
				}
			}
			for _, s := range seed {
				if keep(s) {
					seedF = append(seedF, s)
				}
			}
			for _, w := range []walk{autoWalk, docWalk, termWalk} {
				for si, sd := range [][]scored{nil, seedF} {
					got := ix.topKBy(eq, 20, accept, sd, w)
					if len(got) != len(want) {
						t.Fatalf("query %d, filter %d, walk %d, seeded %d: %d hits, want %d", i, fi, w, si, len(got), len(want))
					}
					for j := range want {
						if got[j].doc != want[j].doc || math.Abs(got[j].score-want[j].score) > 2*scoreQuantum {
							t.Fatalf("query %d, filter %d, walk %d, seeded %d: hit %d is %+v, want %+v", i, fi, w, si, j, got[j], want[j])
						}
					}
				}
			}
		}
	}
}

// TestDeleteMany: deleting many documents at once leaves the index as
// deleting them one by one does: the same documents, the same hits with
// the same scores, and the block bounds of each posting list exact.
func TestDeleteMany(t *testing.T) {
	docs, words := synthCorpus(3000, 400, 7)
	one, err := Rebuild(DefaultParams, docs)
	if err != nil {
		t.Fatal(err)
	}
	many, err := Rebuild(DefaultParams, docs)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < len(docs); i += 3 {
		ids = append(ids, docs[i].ID)
	}
	ids = append(ids, "no such doc", ids[0]) // unknown and repeated: skipped
	for _, id := range ids {
		one.Delete(id)
	}
	if n := many.DeleteMany(ids); n != 1000 {
		t.Fatalf("DeleteMany deleted %d, want 1000", n)
	}
	if one.Len() != many.Len() || many.Len() != 2000 {
		t.Fatalf("left %d and %d documents, want 2000", one.Len(), many.Len())
	}
	for _, q := range words[:40] {
		a, errA := one.Search(q, Options{K: 20})
		b, errB := many.Search(q, Options{K: 20})
		if (errA == nil) != (errB == nil) || len(a) != len(b) {
			t.Fatalf("%q: %d hits (%v) one by one, %d (%v) at once", q, len(a), errA, len(b), errB)
		}
		for i := range a {
			if a[i].ID != b[i].ID || a[i].Score != b[i].Score {
				t.Fatalf("%q hit %d: %s %v one by one, %s %v at once", q, i, a[i].ID, a[i].Score, b[i].ID, b[i].Score)
			}
		}
	}
	// Deleted documents may stay in a list (counted dead) until they
	// are half of it; a block's bound stays a bound of its live ones.
	for term := range many.post {
		p := &many.post[term]
		dead := 0
		for _, d := range p.docs {
			if many.dead(d) {
				dead++
			}
		}
		if dead != int(p.dead) || 2*dead > len(p.docs) && len(p.docs) > 0 {
			t.Fatalf("term %d: %d of its %d documents are deleted, it counts %d", term, dead, len(p.docs), p.dead)
		}
		for bi, got := range p.blk {
			live := blockMax{minLen: math.MaxUint32}
			for j := bi * blockSize; j < min((bi+1)*blockSize, len(p.docs)); j++ {
				if !many.dead(p.docs[j]) {
					live.maxTF = max(live.maxTF, p.tfs[j])
					live.minLen = min(live.minLen, many.docLen[p.docs[j]])
				}
			}
			if got.maxTF < live.maxTF || got.minLen > live.minLen {
				t.Fatalf("term %d block %d bound %+v does not bound its live documents %+v", term, bi, got, live)
			}
		}
	}
	// Deleting most of them filters the lists: what is left is live.
	var rest []string
	for i := range docs {
		if i%3 != 0 && i%5 != 0 {
			rest = append(rest, docs[i].ID)
		}
	}
	many.DeleteMany(rest)
	for _, q := range words[:40] {
		hits, _ := many.Search(q, Options{K: 100})
		for _, h := range hits {
			if n, _ := strconv.Atoi(strings.TrimPrefix(h.ID, "d")); n%3 == 0 || n%5 != 0 {
				t.Fatalf("%q finds %s, deleted", q, h.ID)
			}
		}
	}
}
