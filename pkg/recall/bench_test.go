package recall

import (
	"bytes"
	"math/rand/v2"
	"sort"
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
