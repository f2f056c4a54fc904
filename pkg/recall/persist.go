package recall

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// The file format is: magic, version (uint32 little endian), a body of
// varints, and the CRC-32C of everything before it. The body holds the
// parameters, the vocabulary with each term's hashed features, and the live
// documents with their term frequencies; posting lists are rebuilt on Load
// in two passes (count, then fill), which is cheaper than storing them twice.
const (
	fileMagic   = "OXRECALL"
	fileVersion = 1
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
	for i, s := range ix.termStr {
		e.str(s)
		e.uvarint(uint64(len(ix.termFeat[i])))
		for _, f := range ix.termFeat[i] {
			e.varint(int64(f))
		}
	}
	e.uvarint(uint64(ix.live))
	for n := range ix.docs {
		d := &ix.docs[n]
		if d.id == "" {
			continue
		}
		e.str(d.id)
		e.varint(d.time)
		e.uvarint(uint64(math.Float32bits(d.importance)))
		e.uvarint(uint64(ix.docLen[n]))
		e.uvarint(uint64(len(d.terms)))
		for _, tf := range d.terms {
			e.uvarint(uint64(tf.term))
			e.uvarint(uint64(tf.tf))
		}
		e.uvarint(uint64(len(d.vec)))
		for _, x := range d.vec {
			e.uvarint(uint64(math.Float32bits(x)))
		}
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

func (d *decoder) str() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Load reads an index written by Save.
func Load(r io.Reader) (*Index, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("recall: load index: %w", err)
	}
	if len(data) < len(fileMagic)+8 || string(data[:len(fileMagic)]) != fileMagic {
		return nil, fmt.Errorf("%w: not an index file (bad magic)", ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(body[len(fileMagic):]); v != fileVersion {
		return nil, fmt.Errorf("recall: index file version %d, want %d (rebuild from documents)", v, fileVersion)
	}
	d := &decoder{b: body[len(fileMagic)+4:]}
	ix := New(Params{K1: math.Float64frombits(d.uvarint()), B: math.Float64frombits(d.uvarint())})
	nterms := d.count(2)
	ix.termStr = make([]string, nterms)
	ix.termFeat = make([][]int32, nterms)
	ix.post = make([]postings, nterms)
	for i := 0; i < nterms && d.err == nil; i++ {
		ix.termStr[i] = d.str()
		ix.termIDs[ix.termStr[i]] = uint32(i)
		feat := make([]int32, d.count(1))
		for j := range feat {
			feat[j] = int32(d.varint())
		}
		ix.termFeat[i] = feat
		ix.post[i].minLen = math.MaxUint32
	}
	ndocs := d.count(5)
	ix.docs = make([]docInfo, ndocs)
	ix.docLen = make([]uint32, ndocs)
	df := make([]uint32, nterms)
	for n := 0; n < ndocs && d.err == nil; n++ {
		doc := &ix.docs[n]
		doc.id = d.str()
		doc.time = d.varint()
		doc.importance = math.Float32frombits(uint32(d.uvarint()))
		ix.docLen[n] = uint32(d.uvarint())
		doc.terms = make([]termFreq, d.count(2))
		for j := range doc.terms {
			t, tf := d.uvarint(), d.uvarint()
			if d.err == nil && (t >= uint64(nterms) || tf > maxTF) {
				d.err = fmt.Errorf("%w: document %q has term %d tf %d", ErrCorrupt, doc.id, t, tf)
			}
			if d.err != nil {
				break
			}
			doc.terms[j] = termFreq{uint32(t), uint16(tf)}
			df[t]++
		}
		if nv := d.count(1); nv > 0 {
			doc.vec = make([]float32, nv)
			for j := range doc.vec {
				doc.vec[j] = math.Float32frombits(uint32(d.uvarint()))
			}
		}
		if _, dup := ix.byID[doc.id]; dup && d.err == nil {
			d.err = fmt.Errorf("%w: duplicate document %q", ErrCorrupt, doc.id)
		}
		ix.byID[doc.id] = uint32(n)
		ix.totalLen += int64(ix.docLen[n])
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	for t := range ix.post {
		ix.post[t].docs = make([]uint32, 0, df[t])
		ix.post[t].tfs = make([]uint16, 0, df[t])
		ix.post[t].blk = make([]blockMax, 0, (df[t]+blockSize-1)/blockSize)
	}
	for n := range ix.docs {
		for _, tf := range ix.docs[n].terms {
			ix.post[tf.term].add(uint32(n), tf.tf, ix.docLen[n])
		}
	}
	ix.live = ndocs
	return ix, nil
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
