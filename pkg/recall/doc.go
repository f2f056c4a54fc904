// Package recall is the retrieval engine behind agent memory: a pure,
// in-memory library that indexes short texts and answers free-text queries
// with a hybrid of lexical and dense signals (issue 5).
//
// Design:
//
//   - Analysis: Unicode letters and digits, lowercased, diacritics folded
//     (Tokenize), a small general English stop list, and a Porter2 stemmer
//     written here (Stem; checked against Snowball's reference pairs).
//   - Lexical: an inverted index with incremental Add and Delete. Documents
//     get internal numbers in insertion order, so posting lists are plain
//     sorted []uint32 with []uint16 term frequencies, appended to on Add and
//     spliced on Delete. A forward index (terms per document) serves Delete,
//     feedback and the dense signal: per document a fixed-size record
//     without pointers and its id, the caller's aux (Doc.Aux) and its
//     varint terms appended to byte chunks, ids found by a pointer-free
//     hash table, so that neither costs an allocation per document or work
//     for the garbage collector (store.go). Ranking is BM25 (k1 1.2, b 0.75 by
//     default, see Params) with MaxScore dynamic pruning over per-term score
//     upper bounds and block-max skipping (exact bounds per 64 postings),
//     so top-k of 2-3 word OR queries touches few postings. The hybrid's
//     first pass takes the 20 best; their scores for the expanded query
//     seed the second pass, which then reads next to nothing, unless the
//     lists it must walk hold a quarter of the documents or more (the
//     expansion of a query of common words): then it sums every posting
//     into an array of scores, term at a time, and picks the best in one
//     pass, which costs a fifth of MaxScore's probes there.
//   - Dense: each stem and its character trigrams are hashed with blake3 into
//     a signed 256-dimensional vector (no model to download); a document's
//     vector is the idf-weighted sum of its terms', built on the fly from the
//     forward index. An external embedding per document (Doc.Vector) and per
//     query (Options.QueryVector) replaces it when given, see Embedder.
//   - Hybrid search: RM3-style pseudo relevance feedback (5 documents, 10
//     terms, original query weight 0.7) expands the query; the BM25 top 20
//     candidates of the expanded query are ranked again by dense cosine and,
//     when the caller can give their text (Options.Text: the index does not
//     keep texts), by how many of the query's word pairs (stems in the
//     query's order, at most one word apart, stop words left out) each
//     holds; the rankings are fused by reciprocal rank fusion (k 60), the
//     score scaled so that first in every ranking is 1; importance and
//     recency only break ties. Dense scoring never scans the whole corpus.
//   - Persistence: Save/Load write the vocabulary and the forward index in a
//     versioned, CRC-32C-checked format whose records Load uses in place;
//     Load rebuilds postings with exact capacities in two passes (count,
//     fill), split among the cores. Rebuild builds an index from the
//     documents, the source of truth.
//
// Measured on CISI (76 judged queries, title+abstract; cisi_test.go):
// BM25 MAP 0.2176, nDCG@10 0.3965; hybrid MAP 0.2472, nDCG@10 0.4399
// (1.11x); without the word pairs MAP 0.2396, nDCG@10 0.4290 (1.08x). The
// pairs' window matters: adjacent words only give 1.08x, three apart 1.09x.
// Tried without gain: random-indexing co-occurrence vectors as the dense
// signal (0.411-0.426), min-max score fusion instead of RRF (0.420-0.426),
// KL or idf-weighted choice of expansion terms (0.419-0.430), feedback
// documents from the fused ranking (0.421), a fourth ranking by the
// original query (0.430), pairs weighted by idf or counted with repeats.
// Tried: RM3 alone over feedback docs 5/10/20, terms 10/20/40, weight
// 0.3/0.5/0.7 (nDCG@10 0.386-0.426; 10/20/0.5 gives 0.415), dense rerank of
// 10-200 candidates (best at 10-20; more candidates let the weak hashed
// signal pull in worse documents), dense fusion without feedback (0.399).
//
// Speed on the synthetic corpus of bench_test.go (~30-word documents,
// Zipfian vocabulary of 20k words, 2-3 word OR queries, top 10, one core of
// an AMD EPYC), before the seeded second pass and block-max: at 100k
// documents BM25 p50 71 µs, p99 0.75 ms; hybrid p50 0.48 ms, p99 4.6 ms;
// build 53k docs/s. At 1M documents: BM25 p50 0.29 ms, p99 4.6 ms; hybrid
// p50 1.9 ms, p99 32 ms; build 40k docs/s. Those two cut the postings a
// hybrid search reads by 40% (63.5M -> 38.1M over 2,000 queries of the
// daemon bench's kind at 100k). The term-at-a-time second pass took the
// hybrid's p99 at 100k from 4.4-4.7 ms to 1.6-2.0 ms (its slowest queries'
// second pass: 5 ms -> 0.7 ms). Through oxiosd (tests/bench, with the
// pairs read from the memory files): p50 0.72-0.83 ms, p99 3.8-4.5 ms at
// 100k right after a bulk load (2.5-2.9 ms once its files are written);
// p50 2.5-3.0 ms at 1M.
//
// Memory and persistence at 1M documents (BenchmarkIndex1M, 26-byte ids
// as memories have; BenchmarkSaveLoad_1M; a shared 2-core VM, where a
// first touch of fresh memory is costly, so times vary 2-3x): the heap
// holds 306 bytes per document built live (29 of them unused posting
// capacity) and 283 after Load, against 560 and 531 with a slice of
// terms, a string and a map entry per document; Save 0.47 s (was 1.5 s),
// Load 0.47-0.9 s (was 1.8-2.5 s), file 58 MiB (was 75).
package recall
