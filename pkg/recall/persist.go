package recall

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
)

// The file format is: magic, version (uint32 little endian), a body, and
// the CRC-32C of everything before it. The body is laid out so that Load
// makes few allocations, none per document:
//
//	params:  k1, b (float64 bits, uvarint)
//	vocab:   nterms, each term's length, the terms' bytes back to back,
//	         the total count of features, each term's count and features
//	docs:    ndocs, bytes of records, then per document: time varint,
//	         importance (float32 bits), length, id length, aux length,
//	         record length; then the records (see store.go) back to back
//	vectors: count, then per vector: document, length, float32 bits
//
// Numbers are varints unless said otherwise. Posting lists are rebuilt on
// Load from the records (count, then fill, each split among the cores),
// which is cheaper than storing them twice. Version 1 files (a record per
// document of varints, no aux) are refused: callers rebuild from the
// documents, their source of truth.
const (
	fileMagic   = "OXRECALL"
	fileVersion = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by Load for a damaged or truncated index file.
var ErrCorrupt = errors.New("recall: index file is corrupt")

type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) uvarint(v uint64) {
	n := binary.PutUvarint(e.buf[:], v)
	e.w.Write(e.buf[:n])
}

func (e *encoder) varint(v int64) {
	n := binary.PutVarint(e.buf[:], v)
	e.w.Write(e.buf[:n])
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.w.WriteString(s)
}

// Save writes the whole index to w. Deleted documents are dropped, so a
// Save/Load cycle also compacts the index.
func (ix *Index) Save(w io.Writer) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	e := &encoder{w: bw}
	bw.WriteString(fileMagic)
	binary.Write(bw, binary.LittleEndian, uint32(fileVersion))
	e.uvarint(math.Float64bits(ix.params.K1))
	e.uvarint(math.Float64bits(ix.params.B))
	e.uvarint(uint64(len(ix.termStr)))
	nfeat := 0
	for i, s := range ix.termStr {
		e.uvarint(uint64(len(s)))
		nfeat += len(ix.termFeat[i])
	}
	for _, s := range ix.termStr {
		bw.WriteString(s)
	}
	e.uvarint(uint64(nfeat))
	for _, feat := range ix.termFeat {
		e.uvarint(uint64(len(feat)))
		for _, f := range feat {
			e.varint(int64(f))
		}
	}
	e.uvarint(uint64(ix.live))
	e.uvarint(uint64(ix.records - ix.garbage))
	nvec := 0
	for n := range ix.docs {
		d := &ix.docs[n]
		if d.idLen == 0 {
			continue
		}
		e.varint(d.time)
		e.uvarint(uint64(math.Float32bits(d.importance)))
		e.uvarint(uint64(ix.docLen[n]))
		e.uvarint(uint64(d.idLen))
		e.uvarint(uint64(d.auxLen))
		e.uvarint(uint64(len(ix.record(uint32(n)))))
		if ix.vec(uint32(n)) != nil {
			nvec++
		}
	}
	if ix.garbage == 0 {
		for _, c := range ix.chunks {
			bw.Write(c)
		}
	} else {
		for n := range ix.docs {
			if ix.docs[n].idLen != 0 {
				bw.Write(ix.record(uint32(n)))
			}
		}
	}
	e.uvarint(uint64(nvec))
	live := 0
	for n := range ix.docs {
		if ix.docs[n].idLen == 0 {
			continue
		}
		if v := ix.vec(uint32(n)); v != nil {
			e.uvarint(uint64(live))
			e.uvarint(uint64(len(v)))
			for _, x := range v {
				e.uvarint(uint64(math.Float32bits(x)))
			}
		}
		live++
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("recall: save index: %w", err)
	}
	if err := binary.Write(w, binary.LittleEndian, crc.Sum32()); err != nil {
		return fmt.Errorf("recall: save index: %w", err)
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrCorrupt)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrCorrupt)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and checks that at least min bytes per item remain,
// so a corrupt length cannot make Load allocate without bound.
func (d *decoder) count(minBytes int) int {
	v := d.uvarint()
	if d.err == nil && v > uint64(len(d.b)/minBytes) {
		d.err = fmt.Errorf("%w: length %d exceeds the data left", ErrCorrupt, v)
		return 0
	}
	return int(v)
}

// bytes returns the next n bytes.
func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = fmt.Errorf("%w: %d bytes wanted, %d left", ErrCorrupt, n, len(d.b))
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// Load reads an index written by Save.
func Load(r io.Reader) (*Index, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("recall: load index: %w", err)
	}
	return LoadBytes(data)
}

// LoadBytes reads an index written by Save from data. The index keeps
// data, which must not be changed after: its records are used in place.
func LoadBytes(data []byte) (*Index, error) {
	if len(data) < len(fileMagic)+8 || string(data[:len(fileMagic)]) != fileMagic {
		return nil, fmt.Errorf("%w: not an index file (bad magic)", ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(body[len(fileMagic):]); v != fileVersion {
		return nil, fmt.Errorf("%w: version %d, want %d (rebuild from documents)", ErrVersion, v, fileVersion)
	}
	d := &decoder{b: body[len(fileMagic)+4:]}
	ix := New(Params{K1: math.Float64frombits(d.uvarint()), B: math.Float64frombits(d.uvarint())})
	ix.loadVocab(d)
	ix.loadDocs(d)
	nvec := d.count(2)
	if nvec > 0 && d.err == nil {
		ix.vecs = make([][]float32, len(ix.docs))
	}
	for i := 0; i < nvec && d.err == nil; i++ {
		n := d.uvarint()
		v := make([]float32, d.count(1))
		for j := range v {
			v[j] = math.Float32frombits(uint32(d.uvarint()))
		}
		if d.err == nil && (n >= uint64(len(ix.docs)) || ix.vecs[n] != nil) {
			d.err = fmt.Errorf("%w: vector of document %d", ErrCorrupt, n)
		}
		if d.err == nil {
			ix.vecs[n] = v
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := ix.loadPostings(); err != nil {
		return nil, err
	}
	return ix, nil
}

// ErrVersion is returned by Load for an index file of another version.
var ErrVersion = errors.New("recall: index file of another version")

// loadVocab reads the terms into one string and their features into one
// slice.
func (ix *Index) loadVocab(d *decoder) {
	nterms := d.count(1)
	if d.err != nil {
		return
	}
	lens := make([]int, nterms)
	total := 0
	for i := range lens {
		lens[i] = d.count(1)
		total += lens[i]
	}
	vocab := string(d.bytes(total))
	feat := make([]int32, d.count(1))
	if d.err != nil {
		return
	}
	ix.termStr = make([]string, nterms)
	ix.termFeat = make([][]int32, nterms)
	ix.post = make([]postings, nterms)
	ix.termIDs = make(map[string]uint32, nterms)
	off, foff := 0, 0
	for i := 0; i < nterms && d.err == nil; i++ {
		ix.termStr[i] = vocab[off : off+lens[i]]
		off += lens[i]
		if _, dup := ix.termIDs[ix.termStr[i]]; dup {
			d.err = fmt.Errorf("%w: duplicate term %q", ErrCorrupt, ix.termStr[i])
		}
		ix.termIDs[ix.termStr[i]] = uint32(i)
		nf := d.count(1)
		if d.err == nil && nf > len(feat)-foff {
			d.err = fmt.Errorf("%w: feature count", ErrCorrupt)
		}
		if d.err != nil {
			return
		}
		f := feat[foff : foff+nf : foff+nf]
		for j := range f {
			x := d.varint()
			if d.err == nil && (x < -DenseDim || x >= DenseDim) {
				d.err = fmt.Errorf("%w: feature %d of term %q", ErrCorrupt, x, ix.termStr[i])
			}
			f[j] = int32(x)
		}
		ix.termFeat[i] = f
		foff += nf
		ix.post[i].minLen = math.MaxUint32
	}
	if d.err == nil && foff != len(feat) {
		d.err = fmt.Errorf("%w: feature count", ErrCorrupt)
	}
}

// loadDocs reads the documents' fixed parts and their records.
func (ix *Index) loadDocs(d *decoder) {
	ndocs := d.count(7)
	recBytes := d.uvarint()
	if d.err == nil && recBytes > offMask {
		d.err = fmt.Errorf("%w: %d bytes of records", ErrCorrupt, recBytes)
	}
	if d.err != nil {
		return
	}
	ix.docs = make([]docInfo, ndocs)
	ix.docLen = make([]uint32, ndocs)
	var rec uint64
	for n := 0; n < ndocs && d.err == nil; n++ {
		doc := &ix.docs[n]
		doc.time = d.varint()
		doc.importance = math.Float32frombits(uint32(d.uvarint()))
		ix.docLen[n] = uint32(d.uvarint())
		idLen, auxLen, recLen := d.uvarint(), d.uvarint(), d.uvarint()
		if d.err == nil && (idLen == 0 || idLen > maxIDLen || auxLen > maxAuxLen || idLen+auxLen > recLen || recLen > recBytes-rec) {
			d.err = fmt.Errorf("%w: document %d record", ErrCorrupt, n)
		}
		doc.rec, doc.idLen, doc.auxLen = rec, uint16(idLen), uint16(auxLen)
		rec += recLen
		ix.totalLen += int64(ix.docLen[n])
	}
	if d.err == nil && rec != recBytes {
		d.err = fmt.Errorf("%w: records of %d bytes, want %d", ErrCorrupt, rec, recBytes)
	}
	if d.err != nil {
		return
	}
	// The records become the first chunk as they are, full: new ones go
	// to chunks of their own (see store.go).
	if recBytes > 0 {
		ix.chunks = [][]byte{slices.Clip(d.bytes(int(recBytes)))}
	}
	ix.records = int(recBytes)
	ix.live = ndocs
}

// loadPostings checks the loaded records, builds the posting lists with
// exact capacities, and the id table, in parallel.
func (ix *Index) loadPostings() error {
	ndocs, nterms := len(ix.docs), uint32(len(ix.termStr))
	workers := max(1, min(runtime.GOMAXPROCS(0), ndocs/20000))
	type part struct {
		lo, hi int
		df     []uint32 // count, then where the part's postings start
		maxTF  []uint16
		minLen []uint32
		err    error
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	var idErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ix.ids = newIDTable(ndocs)
		for n := range ix.docs {
			if id := ix.docID(uint32(n)); !ix.ids.insertNew(ix, id, uint32(n)) {
				idErr = fmt.Errorf("%w: duplicate document %q", ErrCorrupt, id)
				return
			}
		}
	}()
	for w := range parts {
		p := &parts[w]
		p.lo, p.hi = ndocs*w/workers, ndocs*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.df = make([]uint32, nterms)
			p.maxTF = make([]uint16, nterms)
			p.minLen = make([]uint32, nterms)
			for t := range p.minLen {
				p.minLen[t] = math.MaxUint32
			}
			var buf []termFreq
			for n := p.lo; n < p.hi; n++ {
				var ok bool
				buf, ok = appendTerms(buf[:0], ix.termBytes(uint32(n)), nterms)
				if !ok {
					p.err = fmt.Errorf("%w: terms of document %q", ErrCorrupt, ix.docID(uint32(n)))
					return
				}
				l := ix.docLen[n]
				for _, tf := range buf {
					p.df[tf.term]++
					p.maxTF[tf.term] = max(p.maxTF[tf.term], tf.tf)
					p.minLen[tf.term] = min(p.minLen[tf.term], l)
				}
			}
		}()
	}
	wg.Wait()
	if idErr != nil {
		return idErr
	}
	for w := range parts {
		if parts[w].err != nil {
			return parts[w].err
		}
	}
	for t := range ix.post {
		p := &ix.post[t]
		df := uint32(0)
		for w := range parts {
			c := parts[w].df[t]
			parts[w].df[t] = df
			df += c
			p.maxTF = max(p.maxTF, parts[w].maxTF[t])
			p.minLen = min(p.minLen, parts[w].minLen[t])
		}
		if df > 0 {
			p.docs = make([]uint32, df)
			p.tfs = make([]uint16, df)
		}
	}
	for w := range parts {
		p := &parts[w]
		p.maxTF, p.minLen = nil, nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []termFreq
			for n := p.lo; n < p.hi; n++ {
				buf = ix.terms(uint32(n), buf[:0])
				for _, tf := range buf {
					post := &ix.post[tf.term]
					i := p.df[tf.term]
					post.docs[i], post.tfs[i] = uint32(n), tf.tf
					p.df[tf.term] = i + 1
				}
			}
		}()
	}
	wg.Wait()
	// The block bounds, terms split among the workers.
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := w; t < len(ix.post); t += workers {
				ix.post[t].bound(0, ix.docLen)
			}
		}()
	}
	wg.Wait()
	return nil
}

// Rebuild returns a new index of the given documents, for when the saved
// index is missing, stale or corrupt. The documents are the source of truth.
func Rebuild(p Params, docs []Doc) (*Index, error) {
	ix := New(p)
	if err := ix.AddBatch(docs); err != nil {
		return nil, fmt.Errorf("recall: rebuild index: %w", err)
	}
	return ix, nil
}
