package recall

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var benchIndexes sync.Map // docs count -> *benchCorpus

type benchCorpus struct {
	ix    *Index
	words []string
	build time.Duration
}

func benchIndex(b *testing.B, n int) *benchCorpus {
	if v, ok := benchIndexes.Load(n); ok {
		return v.(*benchCorpus)
	}
	docs, words := synthCorpus(n, 20000, 42)
	start := time.Now()
	ix, err := Rebuild(DefaultParams, docs)
	if err != nil {
		b.Fatal(err)
	}
	c := &benchCorpus{ix: ix, words: words, build: time.Since(start)}
	benchIndexes.Store(n, c)
	return c
}

// benchQueries makes 2-3 word queries drawn from the same Zipfian vocabulary.
func benchQueries(words []string, n int) []string {
	rng := rand.New(rand.NewPCG(7, 7))
	zipf := rand.NewZipf(rng, 1.07, 2, uint64(len(words)-1))
	qs := make([]string, n)
	for i := range qs {
		q := words[zipf.Uint64()] + " " + words[zipf.Uint64()]
		if i%2 == 0 {
			q += " " + words[zipf.Uint64()]
		}
		qs[i] = q
	}
	return qs
}

func benchSearch(b *testing.B, n int, opt Options) {
	c := benchIndex(b, n)
	qs := benchQueries(c.words, 1000)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := c.ix.Search(qs[i%len(qs)], opt); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(n)/c.build.Seconds(), "build-docs/s")
}

func BenchmarkSearchBM25_100k(b *testing.B)   { benchSearch(b, 100_000, Options{K: 10, BM25Only: true}) }
func BenchmarkSearchHybrid_100k(b *testing.B) { benchSearch(b, 100_000, Options{K: 10}) }
func BenchmarkSearchBM25_1M(b *testing.B)     { benchSearch(b, 1_000_000, Options{K: 10, BM25Only: true}) }
func BenchmarkSearchHybrid_1M(b *testing.B)   { benchSearch(b, 1_000_000, Options{K: 10}) }

// BenchmarkSaveLoad_1M measures persisting and reloading a million documents.
func BenchmarkSaveLoad_1M(b *testing.B) {
	c := benchIndex(b, 1_000_000)
	var buf bytes.Buffer
	b.ResetTimer()
	var save, load time.Duration
	for i := 0; i < b.N; i++ {
		buf.Reset()
		start := time.Now()
		if err := c.ix.Save(&buf); err != nil {
			b.Fatal(err)
		}
		save += time.Since(start)
		start = time.Now()
		if _, err := Load(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
		load += time.Since(start)
	}
	b.ReportMetric(save.Seconds()/float64(b.N), "save-s")
	b.ReportMetric(load.Seconds()/float64(b.N), "load-s")
	b.ReportMetric(float64(buf.Len())/(1<<20), "MiB")
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIndex1M reports the heap a million documents take, built live
// (as the daemon's bulk load does) and after a Save/Load, the unused
// capacity of the posting lists, and the Save and Load times. Its corpus
// is built within it, so that nothing else is on the heap.
func BenchmarkIndex1M(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		base := heapInUse()
		docs, _ := synthCorpus(n, 20000, 42)
		for i := range docs {
			docs[i].ID = fmt.Sprintf("%026d", i) // the length of a memory id
		}
		ix := New(DefaultParams)
		for j := 0; j < n; j += 5000 {
			if err := ix.AddBatch(docs[j : j+5000]); err != nil {
				b.Fatal(err)
			}
		}
		docs = nil
		built := heapInUse()
		var slack uint64
		for _, p := range ix.post {
			slack += uint64(cap(p.docs)-len(p.docs))*4 + uint64(cap(p.tfs)-len(p.tfs))*2
		}
		var buf bytes.Buffer
		start := time.Now()
		if err := ix.Save(&buf); err != nil {
			b.Fatal(err)
		}
		save := time.Since(start)
		ix = nil
		heapInUse()
		start = time.Now()
		ix2, err := Load(bytes.NewReader(buf.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		load := time.Since(start)
		size := buf.Len()
		buf = bytes.Buffer{}
		loaded := heapInUse()
		b.ReportMetric(float64(built-base)/n, "built-B/doc")
		b.ReportMetric(float64(slack)/n, "slack-B/doc")
		b.ReportMetric(float64(loaded-base)/n, "loaded-B/doc")
		b.ReportMetric(save.Seconds(), "save-s")
		b.ReportMetric(load.Seconds(), "load-s")
		b.ReportMetric(float64(size)/(1<<20), "file-MiB")
		runtime.KeepAlive(ix2)
	}
}

// cisiLines are n lines as the bench's remember row makes them: CISI's
// title and abstract lines, each joined with a later one (synthetic
// text without the collection).
func cisiLines(n int) []string {
	var text []string
	if recs, err := parseCISI(filepath.Join(cisiDir, "CISI.ALL"), "TAWXBKC"); err == nil {
		for _, r := range recs {
			for _, l := range strings.Split(r.fields['T']+r.fields['W'], "\n") {
				if l = strings.TrimSpace(l); l != "" {
					text = append(text, l)
				}
			}
		}
	} else {
		docs, _ := synthCorpus(n, 20000, 42)
		for _, d := range docs {
			text = append(text, d.Text)
		}
	}
	var lines []string
	for pass := 1; len(lines) < n; pass++ {
		for i := 0; i < len(text) && len(lines) < n; i++ {
			lines = append(lines, text[i]+" "+text[(i+pass)%len(text)])
		}
	}
	return lines
}

// BenchmarkPrepare is the analysis of a memory's text, as a remember
// does it before the commit (per line of CISI).
func BenchmarkPrepare(b *testing.B) {
	lines := cisiLines(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Prepare(Doc{ID: "x", Text: lines[i%len(lines)]})
	}
}

// BenchmarkAddPrepared is the insertion of analysed memories into an
// index, as the committer does it, in batches of 1000 (per memory).
func BenchmarkAddPrepared(b *testing.B) {
	lines := cisiLines(100_000)
	ps := make([]*Prepared, len(lines))
	for i, l := range lines {
		p := Prepare(Doc{ID: fmt.Sprintf("%026d", i), Text: l})
		ps[i] = &p
	}
	b.ReportAllocs()
	b.ResetTimer()
	ix := New(DefaultParams)
	for i := 0; i < b.N; i += 1000 {
		if i%len(ps) == 0 {
			ix = New(DefaultParams)
		}
		j := i % len(ps)
		ix.AddPrepared(ps[j:min(j+1000, len(ps))])
	}
}
