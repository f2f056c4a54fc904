package recall

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"time"
	"unsafe"
)

// The forward index holds no pointers, so that the garbage collector need
// not look into it, and costs no allocation per document: each document is
// a fixed-size docInfo and a record in a chunk of bytes,
//
//	record: id | aux | terms
//	terms:  per distinct term, in the order of its first occurrence:
//	        uvarint(term<<1 | tf>1), then uvarint(tf) if tf > 1
//
// Records are appended in document order and never span chunks, so a
// record ends where the next document's begins or, if that one is in
// another chunk, where its chunk ends. The order of the terms is kept
// because the dense signal sums float32s in it.
//
// Chunks grow to chunkMax and are never copied to grow (a []byte grown by
// append would be copied at each step, and hold up to a quarter unused);
// Load makes the whole saved arena the first chunk, without a copy.
// Bytes in a chunk are never written over: a deleted document's record
// stays until compaction, which copies the live records to new chunks. So
// ids and auxes handed out as strings aliasing a chunk (see str) stay
// valid and unchanged for as long as they are held. Compaction runs when
// the garbage exceeds half the records (amortized O(1) per delete); Save
// writes only the live records and Load numbers documents afresh.

// docInfo is a document's fixed-size part.
type docInfo struct {
	time       int64
	rec        uint64 // chunk<<chunkShift | offset of its record in the chunk
	importance float32
	idLen      uint16 // 0 for a deleted document (ids are never empty)
	auxLen     uint16
}

const (
	chunkShift = 40
	offMask    = 1<<chunkShift - 1
	chunkMin   = 4 << 10
	chunkMax   = 4 << 20

	// maxIDLen and maxAuxLen bound what a docInfo can describe.
	maxIDLen  = 1<<16 - 1
	maxAuxLen = 1<<16 - 1
)

// str is the string of the n bytes at rec, without a copy; it is sound
// because chunk bytes are never written over (see above).
func (ix *Index) str(rec uint64, n int) string {
	if n == 0 {
		return ""
	}
	return unsafe.String(&ix.chunks[rec>>chunkShift][rec&offMask], n)
}

// docID is the ID of document n, "" if it was deleted.
func (ix *Index) docID(n uint32) string {
	d := &ix.docs[n]
	return ix.str(d.rec, int(d.idLen))
}

func (ix *Index) docAux(n uint32) string {
	d := &ix.docs[n]
	return ix.str(d.rec+uint64(d.idLen), int(d.auxLen))
}

// record is the record of document n, empty if it was deleted and
// compacted since.
func (ix *Index) record(n uint32) []byte {
	rec := ix.docs[n].rec
	c := ix.chunks[rec>>chunkShift]
	end := uint64(len(c))
	if int(n)+1 < len(ix.docs) {
		if next := ix.docs[n+1].rec; next>>chunkShift == rec>>chunkShift {
			end = next & offMask
		}
	}
	return c[rec&offMask : end]
}

// termBytes is the encoded terms of document n.
func (ix *Index) termBytes(n uint32) []byte {
	d := &ix.docs[n]
	return ix.record(n)[int(d.idLen)+int(d.auxLen):]
}

// terms appends the terms of document n to buf, in the order of their
// first occurrence in its text. It is the one reader of a document's terms.
func (ix *Index) terms(n uint32, buf []termFreq) []termFreq {
	buf, _ = appendTerms(buf, ix.termBytes(n), uint32(len(ix.termStr)))
	return buf
}

// vec is document n's external embedding, nil if it has none.
func (ix *Index) vec(n uint32) []float32 {
	if int(n) < len(ix.vecs) {
		return ix.vecs[n]
	}
	return nil
}

// appendRecord appends a record of size bytes to the last chunk, or to a
// new one if it does not fit, and returns the record's place and bytes
// (of length 0, capacity size).
func appendRecord(chunks [][]byte, size int) ([][]byte, uint64, []byte) {
	if len(chunks) > 0 {
		c := chunks[len(chunks)-1]
		if cap(c)-len(c) >= size {
			return chunks, uint64(len(chunks)-1)<<chunkShift | uint64(len(c)), c[len(c):len(c)]
		}
	}
	next := chunkMin
	if len(chunks) > 0 {
		next = min(max(cap(chunks[len(chunks)-1])*2, chunkMin), chunkMax)
	}
	c := make([]byte, 0, max(next, size))
	return append(chunks, c), uint64(len(chunks)) << chunkShift, c
}

// addRecord appends a record (already encoded into b, which has the
// capacity appendRecord gave it) to the last chunk.
func addRecord(chunks [][]byte, b []byte) {
	c := &chunks[len(chunks)-1]
	*c = (*c)[:len(*c)+len(b)]
}

// encodeTerms appends the encoding of tfs to b.
func encodeTerms(b []byte, tfs []termFreq) []byte {
	for _, tf := range tfs {
		if tf.tf > 1 {
			b = binary.AppendUvarint(b, uint64(tf.term)<<1|1)
			b = binary.AppendUvarint(b, uint64(tf.tf))
		} else {
			b = binary.AppendUvarint(b, uint64(tf.term)<<1)
		}
	}
	return b
}

// termsSize is the length of encodeTerms' output.
func termsSize(tfs []termFreq) int {
	n := 0
	for _, tf := range tfs {
		n += uvarintLen(uint64(tf.term) << 1)
		if tf.tf > 1 {
			n += uvarintLen(uint64(tf.tf))
		}
	}
	return n
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// appendTerms decodes encoded terms onto buf and reports whether they were
// well formed: every term below nterms, every tf in [1, maxTF].
func appendTerms(buf []termFreq, b []byte, nterms uint32) ([]termFreq, bool) {
	for len(b) > 0 {
		v, k := binary.Uvarint(b)
		if k <= 0 || v>>1 >= uint64(nterms) {
			return buf, false
		}
		b = b[k:]
		tf := uint64(1)
		if v&1 != 0 {
			tf, k = binary.Uvarint(b)
			if k <= 0 || tf < 2 || tf > maxTF {
				return buf, false
			}
			b = b[k:]
		}
		buf = append(buf, termFreq{uint32(v >> 1), uint16(tf)})
	}
	return buf, true
}

// compactLocked copies the live records to new chunks; a deleted
// document's record becomes empty.
func (ix *Index) compactLocked() {
	var chunks [][]byte
	for n := range ix.docs {
		r := ix.record(uint32(n))
		if ix.docs[n].idLen == 0 {
			r = nil
		}
		var rec uint64
		var b []byte
		chunks, rec, b = appendRecord(chunks, len(r))
		addRecord(chunks, append(b, r...))
		// Set after record(n-1) was read: the records are in order.
		ix.docs[n].rec = rec
	}
	ix.chunks = chunks
	ix.records -= ix.garbage
	ix.garbage = 0
}

// Info describes an indexed document, as filters and lookups see it. Its
// ID and Aux share the index's storage: they never change, but hold a
// chunk of it (up to the whole loaded file) in memory while they are
// held; clone what is kept long.
type Info struct {
	ID string
	// Time is the document's, zero if it had none.
	Time       time.Time
	Importance float32
	// Aux is Doc.Aux as given.
	Aux string
}

func (ix *Index) info(n uint32) Info {
	d := &ix.docs[n]
	in := Info{ID: ix.docID(n), Importance: d.importance, Aux: ix.docAux(n)}
	if d.time != 0 {
		in.Time = time.Unix(0, d.time)
	}
	return in
}

// Lookup returns the document with this ID.
func (ix *Index) Lookup(id string) (Info, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n, ok := ix.ids.find(ix, id)
	if !ok {
		return Info{}, false
	}
	return ix.info(n), true
}

// Each calls fn for every document, in insertion order, until fn returns
// false. The index is read-locked meanwhile: fn must not change it.
func (ix *Index) Each(fn func(Info) bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for n := range ix.docs {
		if ix.docs[n].idLen != 0 && !fn(ix.info(uint32(n))) {
			return
		}
	}
}

// idTable maps ids to document numbers without a pointer or an allocation
// per document (a map[string]uint32 costs both, and its strings): open
// addressing with linear probing and backward-shift deletion. A slot holds
// the top 32 bits of the id's hash (the home slot is their top bits, so it
// can be found again without the id) and the document number + 1 (0 is an
// empty slot); ids are compared in the arena only when the hashes agree.
type idTable struct {
	seed  maphash.Seed
	slots []uint64
	shift uint // 32 - log2(len(slots))
	n     int
}

func newIDTable(n int) idTable {
	t := idTable{seed: maphash.MakeSeed()}
	t.alloc(n)
	return t
}

// alloc makes room for n ids at a load of at most 3/4.
func (t *idTable) alloc(n int) {
	size := 8
	for size*3/4 < n {
		size *= 2
	}
	t.slots = make([]uint64, size)
	t.shift = 32 - uint(bits.TrailingZeros(uint(size)))
	t.n = 0
}

func (t *idTable) hash(id string) uint32 { return uint32(maphash.String(t.seed, id) >> 32) }

func (t *idTable) find(ix *Index, id string) (uint32, bool) {
	h := t.hash(id)
	mask := len(t.slots) - 1
	for i := int(h >> t.shift); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == h && ix.docID(uint32(s)-1) == id {
			return uint32(s) - 1, true
		}
	}
}

// insert adds id, which is not in the table, as document n.
func (t *idTable) insert(ix *Index, id string, n uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.alloc(len(old))
		for _, s := range old {
			if s != 0 {
				t.place(uint32(s>>32), uint32(s)-1)
			}
		}
	}
	t.place(t.hash(id), n)
}

// insertNew adds id as document n unless it is in the table already,
// and reports whether it added it. The table has room for it (see alloc).
func (t *idTable) insertNew(ix *Index, id string, n uint32) bool {
	h := t.hash(id)
	mask := len(t.slots) - 1
	i := int(h >> t.shift)
	for ; t.slots[i] != 0; i = (i + 1) & mask {
		if s := t.slots[i]; uint32(s>>32) == h && ix.docID(uint32(s)-1) == id {
			return false
		}
	}
	t.slots[i] = uint64(h)<<32 | uint64(n+1)
	t.n++
	return true
}

func (t *idTable) place(h, n uint32) {
	mask := len(t.slots) - 1
	i := int(h >> t.shift)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = uint64(h)<<32 | uint64(n+1)
	t.n++
}

// remove deletes id, which is in the table, shifting back the entries of
// its probe run that would no longer be found.
func (t *idTable) remove(ix *Index, id string) {
	h := t.hash(id)
	mask := len(t.slots) - 1
	i := int(h >> t.shift)
	for {
		s := t.slots[i]
		if s == 0 {
			return
		}
		if uint32(s>>32) == h && ix.docID(uint32(s)-1) == id {
			break
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		home := int(uint32(t.slots[j]>>32) >> t.shift)
		// Move j into the hole at i unless its home lies in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}
