// Package memindex is the metadata of memories in an agent's recall index
// and the file it is saved to: each memory's kind, expiry, file size and
// tags travel in its recall document (Aux), so that adds, deletes and
// filters see them at once with no second map by id; Filter selects by
// them; Write and Decode are the index's file (DATA/index/recall/AGENT),
// checked by a CRC so that a damaged file is rebuilt rather than believed;
// Files is the folder of those files (saved durably, decoded ahead while
// the daemon opens), Rebuild makes an index from the memory files (read
// from the state store: StoreSource); Set
// is every agent's index in memory (lookups, selection, search, the
// memories a forget deletes and those it forgot, the pass over those due
// to expire), applied the memory changes of each durable batch, saved,
// and loaded or caught up at start. The kernel decides when they change (its committer calls
// Apply); this package owns what they hold and how they are kept, and
// the changes and audit entries of a remember and a forget (commit.go),
// which the kernel's group commit (a Group) makes durable together.
package memindex

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/recall"
)

// Aux encodes what recall filters on besides the creation time and
// importance (the document's Time and Importance):
//
//	kind u8 (index into memory.Kinds) | expires varint (unix nanos, 0 =
//	never) | size uvarint (of the file) | tags count uvarint | tags
//	(uvarint length + bytes)
func Aux(m *memory.Memory, size int) string {
	b := make([]byte, 0, 16)
	b = append(b, KindIndex(m.Kind))
	var exp int64
	if !m.Expires.IsZero() {
		exp = m.Expires.UnixNano()
	}
	b = binary.AppendVarint(b, exp)
	b = binary.AppendUvarint(b, uint64(size))
	b = binary.AppendUvarint(b, uint64(len(m.Tags)))
	for _, t := range m.Tags {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	return string(b)
}

// Meta is a memory's metadata, decoded from its aux and Info.
type Meta struct {
	Kind       uint8 // index into memory.Kinds
	Importance float32
	Created    int64  // unix nanos
	Expires    int64  // unix nanos, 0 = never
	Size       uint32 // of the file
	ntags      int
	tags       string // encoded as in Aux
}

// uvarintStr is binary.Uvarint of a string.
func uvarintStr(s string) (uint64, int) {
	var v uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return v | uint64(c)<<(7*i), i + 1
		}
		v |= uint64(c&0x7f) << (7 * i)
	}
	return 0, 0
}

// MetaOf decodes a memory's metadata; ok is false for a damaged aux.
func MetaOf(in recall.Info) (mt Meta, ok bool) {
	a := in.Aux
	if len(a) < 1 || int(a[0]) >= len(memory.Kinds) {
		return mt, false
	}
	mt.Kind, mt.Importance, mt.Created = a[0], in.Importance, in.Time.UnixNano()
	a = a[1:]
	exp, n := uvarintStr(a)
	if n <= 0 {
		return mt, false
	}
	mt.Expires, a = int64(exp>>1)^-int64(exp&1), a[n:]
	size, n := uvarintStr(a)
	if n <= 0 || size > math.MaxUint32 {
		return mt, false
	}
	mt.Size, a = uint32(size), a[n:]
	nt, n := uvarintStr(a)
	if n <= 0 || nt > memory.MaxTags {
		return mt, false
	}
	mt.ntags, mt.tags = int(nt), a[n:]
	// The tags must be all that is left.
	return mt, mt.eachTag(func(string) bool { return true }) == len(mt.tags)
}

// eachTag calls fn with each tag until it returns false, and returns how
// many bytes of tags it read.
func (mt *Meta) eachTag(fn func(string) bool) int {
	a := mt.tags
	off := 0
	for i := 0; i < mt.ntags; i++ {
		l, n := uvarintStr(a[off:])
		if n <= 0 || l > uint64(len(a)-off-n) {
			return -1
		}
		t := a[off+n : off+n+int(l)]
		off += n + int(l)
		if !fn(t) {
			break
		}
	}
	return off
}

func (mt *Meta) HasTag(t string) bool {
	found := false
	mt.eachTag(func(x string) bool {
		found = x == t
		return !found
	})
	return found
}

func (mt *Meta) Tags() []string {
	if mt.ntags == 0 {
		return nil
	}
	out := make([]string, 0, mt.ntags)
	mt.eachTag(func(x string) bool {
		out = append(out, strings.Clone(x))
		return true
	})
	return out
}

func KindIndex(k string) uint8 {
	for i, x := range memory.Kinds {
		if x == k {
			return uint8(i)
		}
	}
	return 0
}

// DocOf is the recall document of a memory whose file is size bytes.
func DocOf(m *memory.Memory, size int, vec []float32) recall.Doc {
	return recall.Doc{ID: m.ID, Text: m.Text, Time: m.Created, Importance: float32(m.Importance), Vector: vec, Aux: Aux(m, size)}
}

// Filter is the test of recall's and list's selectors.
type Filter struct {
	kind  int // -1 any
	tags  []string
	since int64
	until int64 // exclusive, 0 = none
}

func NewFilter(kind string, tags []string, since, until time.Time) (Filter, error) {
	f := Filter{kind: -1, tags: tags}
	if kind != "" {
		if err := memory.CheckKind(kind); err != nil {
			return f, proto.Errorf(proto.EINVAL, "%v", err)
		}
		f.kind = int(KindIndex(kind))
	}
	for _, t := range tags {
		if err := memory.CheckTag(t); err != nil {
			return f, proto.Errorf(proto.EINVAL, "%v", err)
		}
	}
	if !since.IsZero() {
		f.since = since.UnixNano()
	}
	if !until.IsZero() {
		f.until = until.UnixNano()
	}
	return f, nil
}

func (f *Filter) Any() bool { return f.kind >= 0 || len(f.tags) > 0 || f.since != 0 || f.until != 0 }

func (f *Filter) Match(mt *Meta) bool {
	if f.kind >= 0 && int(mt.Kind) != f.kind || mt.Created < f.since || f.until != 0 && mt.Created >= f.until {
		return false
	}
	for _, t := range f.tags {
		if !mt.HasTag(t) {
			return false
		}
	}
	return true
}

// matchInfo is match for a document of the index.
func (f *Filter) MatchInfo(in recall.Info) bool {
	mt, ok := MetaOf(in)
	return ok && f.Match(&mt)
}

const magic = "OXMEMIX2"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Write writes m's file, as of seq, to f from its start, streaming:
// at a million memories the file is ~60 MB, and a buffer of it grown by
// doubling held three times that for a moment at every save. The length
// and the checksum, which covers it, are filled in once the index is
// written; the checksum reads the file back, from the page cache.
func Write(f *os.File, ix *recall.Index, seq uint64) error {
	bw := bufio.NewWriterSize(f, 1<<20)
	bw.WriteString(magic)
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[:8], seq)
	bw.Write(hdr[:])
	cw := &countingWriter{w: bw}
	if err := ix.Save(cw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(hdr[8:], uint64(cw.n))
	if _, err := f.WriteAt(hdr[8:], 16); err != nil {
		return err
	}
	end := int64(len(magic)+len(hdr)) + cw.n
	crc := crc32.New(crcTable)
	if _, err := io.Copy(crc, io.NewSectionReader(f, 0, end)); err != nil {
		return err
	}
	_, err := f.WriteAt(binary.LittleEndian.AppendUint32(nil, crc.Sum32()), end)
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var ErrBad = errors.New("damaged recall index file")

// Decode reads what Write wrote.
func Decode(b []byte) (*recall.Index, uint64, error) {
	if len(b) >= 8 && string(b[:7]) == magic[:7] && string(b[:8]) != magic {
		return nil, 0, fmt.Errorf("%w: version %q, want %q", ErrBad, b[:8], magic)
	}
	if len(b) < 28 || string(b[:8]) != magic {
		return nil, 0, ErrBad
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrBad)
	}
	seq := binary.LittleEndian.Uint64(b[8:16])
	n := binary.LittleEndian.Uint64(b[16:24])
	if n != uint64(len(body)-24) {
		return nil, 0, fmt.Errorf("%w: index of %d bytes in %d", ErrBad, n, len(body)-24)
	}
	// The index keeps b: its records are used in place.
	ix, err := recall.LoadBytes(body[24:])
	if err != nil {
		return nil, 0, err
	}
	bad := ""
	ix.Each(func(in recall.Info) bool {
		if _, ok := MetaOf(in); !ok {
			bad = in.ID
		}
		return bad == ""
	})
	if bad != "" {
		return nil, 0, fmt.Errorf("%w: memory %s: damaged metadata", ErrBad, bad)
	}
	return ix, seq, nil
}
