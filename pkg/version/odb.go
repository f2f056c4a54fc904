package version

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/oxios/oxios/pkg/durable"
)

// errNotFound is returned inside the package when an object is in no pack
// and not loose; the exported calls wrap it with the id they looked for.
var errNotFound = errors.New("object not found")

// errCorrupt marks an object or pack that cannot be decoded.
var errCorrupt = errors.New("corrupt object")

// odb is the object database of a repository: the packs under
// objects/pack and the loose objects under objects/xx/. It reads both
// kinds, as git may have written them, and writes only packs.
//
// Reads are safe from many goroutines: packs are read with pread
// (os.File.ReadAt), which needs no seek position, and the list of packs is
// replaced, never changed in place, under mu. A reader holds mu shared for
// the whole read, so a pack is closed only when no read uses it.
type odb struct {
	dir string // .git/objects

	mu    sync.RWMutex
	packs []*pack          // recently written first
	known map[string]*pack // by base path
	loose [256]bool        // objects/xx exists
	// mem holds the objects of published commits not yet written (see
	// pending.go).
	mem map[oid]object
}

// hold makes objs readable before they are written.
func (db *odb) hold(objs []object) {
	db.mu.Lock()
	if db.mem == nil {
		db.mem = make(map[oid]object, len(objs))
	}
	for _, o := range objs {
		db.mem[o.id] = o
	}
	db.mu.Unlock()
}

// release forgets held objects once a pack has them.
func (db *odb) release(objs []object) {
	db.mu.Lock()
	for _, o := range objs {
		delete(db.mem, o.id)
	}
	db.mu.Unlock()
}

// pack is one packfile with its index kept in memory.
type pack struct {
	base string // path without the .pack/.idx extension
	f    *os.File
	size int64  // of the .pack file
	idx  []byte // the whole .idx file (version 2)
	n    int    // objects
	keep bool   // a .keep file protects it from being rolled up
}

const (
	idxHeader  = 8
	idxFanout  = idxHeader
	idxNames   = idxFanout + 256*4
	packHeader = 12
	// maxDeltaDepth bounds delta chains so a corrupt pack cannot recurse
	// without end; git's default depth is 50.
	maxDeltaDepth = 1000
)

func openODB(dir string) (*odb, error) {
	db := &odb{dir: dir, known: map[string]*pack{}}
	if err := db.refresh(); err != nil {
		db.close()
		return nil, err
	}
	return db, nil
}

// refresh loads the packs not yet known and notes which loose object
// folders exist. It is called at open and when an object is not found, so
// objects that git wrote behind our back are found too.
func (db *odb) refresh() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	names, err := os.ReadDir(db.dir)
	if err != nil {
		return fmt.Errorf("read objects: %w", err)
	}
	for _, e := range names {
		if n := e.Name(); len(n) == 2 && e.IsDir() {
			if b, err := hex.DecodeString(n); err == nil {
				db.loose[b[0]] = true
			}
		}
	}
	packDir := filepath.Join(db.dir, "pack")
	ents, err := os.ReadDir(packDir)
	if err != nil {
		return fmt.Errorf("read objects/pack: %w", err)
	}
	var found []*pack
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "pack-") || !strings.HasSuffix(n, ".idx") {
			continue
		}
		base := filepath.Join(packDir, strings.TrimSuffix(n, ".idx"))
		if db.known[base] != nil {
			continue
		}
		p, err := loadPack(base)
		if errors.Is(err, fs.ErrNotExist) {
			// An index whose pack is gone (git removes the pack second)
			// or not yet renamed into place (git renames it first):
			// not ours to judge.
			continue
		}
		if err != nil {
			return err
		}
		found = append(found, p)
	}
	for _, p := range found {
		db.known[p.base] = p
	}
	db.packs = append(found, db.packs...)
	return nil
}

// loadPack opens base.pack and reads and checks base.idx.
func loadPack(base string) (*pack, error) {
	idx, err := os.ReadFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	n, err := checkIdx(idx)
	if err != nil {
		return nil, fmt.Errorf("%s.idx: %w", base, err)
	}
	f, err := os.Open(base + ".pack")
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	var sum [sha1.Size]byte
	if st.Size() < packHeader+sha1.Size {
		f.Close()
		return nil, fmt.Errorf("%s.pack: %w: %d bytes", base, errCorrupt, st.Size())
	}
	if _, err := f.ReadAt(sum[:], st.Size()-sha1.Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s.pack: %w", base, err)
	}
	if !bytes.Equal(sum[:], idx[len(idx)-2*sha1.Size:len(idx)-sha1.Size]) {
		f.Close()
		return nil, fmt.Errorf("%s: %w: the index is for another pack", base, errCorrupt)
	}
	_, kerr := os.Stat(base + ".keep")
	return &pack{base: base, f: f, size: st.Size(), idx: idx, n: n, keep: kerr == nil}, nil
}

// checkIdx checks the layout and checksum of a version 2 pack index and
// returns its number of objects.
func checkIdx(b []byte) (int, error) {
	if len(b) < idxNames+2*sha1.Size || !bytes.Equal(b[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return 0, fmt.Errorf("%w: not a version 2 pack index", errCorrupt)
	}
	n := int(binary.BigEndian.Uint32(b[idxFanout+255*4:]))
	prev := uint32(0)
	for i := range 256 {
		v := binary.BigEndian.Uint32(b[idxFanout+4*i:])
		if v < prev {
			return 0, fmt.Errorf("%w: fanout table not monotonic", errCorrupt)
		}
		prev = v
	}
	want := idxNames + n*(sha1.Size+8) + 2*sha1.Size
	if len(b) < want || (len(b)-want)%8 != 0 {
		return 0, fmt.Errorf("%w: %d bytes for %d objects", errCorrupt, len(b), n)
	}
	if sum := sha1.Sum(b[:len(b)-sha1.Size]); !bytes.Equal(sum[:], b[len(b)-sha1.Size:]) {
		return 0, fmt.Errorf("%w: index checksum mismatch", errCorrupt)
	}
	return n, nil
}

func (p *pack) name(i int) []byte {
	o := idxNames + i*sha1.Size
	return p.idx[o : o+sha1.Size]
}

func (p *pack) crc(i int) uint32 {
	return binary.BigEndian.Uint32(p.idx[idxNames+p.n*sha1.Size+4*i:])
}

func (p *pack) offset(i int) int64 {
	o := binary.BigEndian.Uint32(p.idx[idxNames+p.n*(sha1.Size+4)+4*i:])
	if o&0x80000000 == 0 {
		return int64(o)
	}
	large := idxNames + p.n*(sha1.Size+8) + 8*int(o&0x7fffffff)
	return int64(binary.BigEndian.Uint64(p.idx[large:]))
}

// bucket is the range of index positions whose ids start with byte b.
func (p *pack) bucket(b byte) (lo, hi int) {
	if b > 0 {
		lo = int(binary.BigEndian.Uint32(p.idx[idxFanout+4*int(b-1):]))
	}
	hi = int(binary.BigEndian.Uint32(p.idx[idxFanout+4*int(b):]))
	return lo, hi
}

// find returns the index position of id.
func (p *pack) find(id oid) (int, bool) {
	lo, hi := p.bucket(id[0])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch bytes.Compare(p.name(m), id[:]) {
		case 0:
			return m, true
		case -1:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

func (db *odb) close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	var first error
	for _, p := range db.packs {
		if err := p.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	db.packs, db.known = nil, map[string]*pack{}
	return first
}

// has reports whether the object exists. It looks in the known packs and
// in the loose folders known to exist, and does not refresh: an object that
// git wrote loose after open may be written again, which is harmless.
func (db *odb) has(id oid) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if _, ok := db.mem[id]; ok {
		return true
	}
	for _, p := range db.packs {
		if _, ok := p.find(id); ok {
			return true
		}
	}
	if db.loose[id[0]] {
		if _, err := os.Stat(db.loosePath(id)); err == nil {
			return true
		}
	}
	return false
}

func (db *odb) loosePath(id oid) string {
	h := id.String()
	return filepath.Join(db.dir, h[:2], h[2:])
}

// read returns the type and content of an object.
func (db *odb) read(id oid) (objType, []byte, error) {
	for attempt := 0; ; attempt++ {
		db.mu.RLock()
		t, data, err := db.readLocked(id, 0)
		db.mu.RUnlock()
		if !errors.Is(err, errNotFound) || attempt > 0 {
			if err != nil {
				return 0, nil, fmt.Errorf("object %s: %w", id, err)
			}
			return t, data, nil
		}
		if err := db.refresh(); err != nil {
			return 0, nil, err
		}
	}
}

// readType is read for an object that must be of type want.
func (db *odb) readType(id oid, want objType) ([]byte, error) {
	t, data, err := db.read(id)
	if err != nil {
		return nil, err
	}
	if t != want {
		return nil, fmt.Errorf("object %s is a %s, not a %s", id, t, want)
	}
	return data, nil
}

func (db *odb) readLocked(id oid, depth int) (objType, []byte, error) {
	if o, ok := db.mem[id]; ok {
		return o.typ, o.data, nil
	}
	for _, p := range db.packs {
		if i, ok := p.find(id); ok {
			return db.readPacked(p, p.offset(i), depth)
		}
	}
	if db.loose[id[0]] {
		return readLoose(db.loosePath(id))
	}
	return 0, nil, errNotFound
}

// readLoose reads and inflates a loose object file.
func readLoose(path string) (objType, []byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, errNotFound
	}
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %v", errCorrupt, path, err)
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %v", errCorrupt, path, err)
	}
	sp := bytes.IndexByte(raw, ' ')
	nul := bytes.IndexByte(raw, 0)
	if sp < 0 || nul < sp {
		return 0, nil, fmt.Errorf("%w: %s: bad header", errCorrupt, path)
	}
	t, ok := parseObjType(string(raw[:sp]))
	size, err := strconv.Atoi(string(raw[sp+1 : nul]))
	if !ok || err != nil || size != len(raw)-nul-1 {
		return 0, nil, fmt.Errorf("%w: %s: bad header %q", errCorrupt, path, raw[:nul])
	}
	return t, raw[nul+1:], nil
}

// readPacked reads the object at off in p, resolving deltas (packs that
// `git gc` wrote hold them; ours do not).
func (db *odb) readPacked(p *pack, off int64, depth int) (objType, []byte, error) {
	if depth > maxDeltaDepth {
		return 0, nil, fmt.Errorf("%w: delta chain deeper than %d in %s.pack", errCorrupt, maxDeltaDepth, p.base)
	}
	t, size, n, err := p.entryHeader(off)
	if err != nil {
		return 0, nil, err
	}
	switch t {
	case objCommit, objTree, objBlob, objTag:
		data, err := p.inflate(off+int64(n), size)
		return t, data, err
	case objOfsDelta, objRefDelta:
		var hb [32]byte
		m, _ := p.f.ReadAt(hb[:], off+int64(n))
		var bt objType
		var base []byte
		if t == objOfsDelta {
			rel, k := int64(0), 0
			for ; k < m; k++ {
				c := hb[k]
				if k > 0 {
					rel++
				}
				rel = rel<<7 | int64(c&0x7f)
				if c&0x80 == 0 {
					break
				}
			}
			if k == m || rel <= 0 || rel > off {
				return 0, nil, fmt.Errorf("%w: bad delta offset at %d in %s.pack", errCorrupt, off, p.base)
			}
			n += k + 1
			bt, base, err = db.readPacked(p, off-rel, depth+1)
		} else {
			if m < sha1.Size {
				return 0, nil, fmt.Errorf("%w: short delta at %d in %s.pack", errCorrupt, off, p.base)
			}
			var bid oid
			copy(bid[:], hb[:sha1.Size])
			n += sha1.Size
			bt, base, err = db.readLocked(bid, depth+1)
		}
		if err != nil {
			return 0, nil, err
		}
		delta, err := p.inflate(off+int64(n), size)
		if err != nil {
			return 0, nil, err
		}
		data, err := packfile.PatchDelta(base, delta)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: delta at %d in %s.pack: %v", errCorrupt, off, p.base, err)
		}
		return bt, data, nil
	}
	return 0, nil, fmt.Errorf("%w: object type %d at %d in %s.pack", errCorrupt, t, off, p.base)
}

// entryHeader decodes the type and size of the pack entry at off, and the
// length of that header.
func (p *pack) entryHeader(off int64) (objType, int, int, error) {
	var hb [16]byte
	m, _ := p.f.ReadAt(hb[:], off)
	if m == 0 {
		return 0, 0, 0, fmt.Errorf("%w: offset %d past the end of %s.pack", errCorrupt, off, p.base)
	}
	c := hb[0]
	t := objType(c >> 4 & 7)
	size := int(c & 15)
	shift, n := 4, 1
	for c&0x80 != 0 {
		if n == m || shift > 56 {
			return 0, 0, 0, fmt.Errorf("%w: bad entry header at %d in %s.pack", errCorrupt, off, p.base)
		}
		c = hb[n]
		n++
		size |= int(c&0x7f) << shift
		shift += 7
	}
	return t, size, n, nil
}

// inflater is a zlib reader with its buffered source, pooled: a fresh
// flate reader costs tens of KiB.
type inflater struct {
	br *bufio.Reader
	zr io.ReadCloser
}

var inflaters sync.Pool

func (p *pack) inflate(start int64, size int) ([]byte, error) {
	// zlib expands at most about 1032:1, so a larger size is a corrupt
	// header, not a reason to allocate it.
	if size < 0 || int64(size) > (p.size-start)*1032+64 {
		return nil, fmt.Errorf("%w: at %d in %s.pack: size %d", errCorrupt, start, p.base, size)
	}
	src := io.NewSectionReader(p.f, start, p.size-start)
	z, _ := inflaters.Get().(*inflater)
	var err error
	if z == nil {
		z = &inflater{br: bufio.NewReaderSize(src, 4096)}
		z.zr, err = zlib.NewReader(z.br)
	} else {
		z.br.Reset(src)
		err = z.zr.(zlib.Resetter).Reset(z.br, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: at %d in %s.pack: %v", errCorrupt, start, p.base, err)
	}
	defer inflaters.Put(z)
	out := make([]byte, size)
	if _, err := io.ReadFull(z.zr, out); err != nil {
		return nil, fmt.Errorf("%w: at %d in %s.pack: %v", errCorrupt, start, p.base, err)
	}
	// Reading past the end checks the stream's Adler-32.
	var one [1]byte
	if n, err := z.zr.Read(one[:]); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("%w: at %d in %s.pack: object longer than its header says", errCorrupt, start, p.base)
	}
	return out, nil
}

// withPrefix returns the ids of all objects whose hex id starts with
// prefix (at least 2 hex digits, lower case).
func (db *odb) withPrefix(prefix string) ([]oid, error) {
	if err := db.refresh(); err != nil {
		return nil, err
	}
	first, err := hex.DecodeString(prefix[:2])
	if err != nil {
		return nil, err
	}
	seen := map[oid]bool{}
	db.mu.RLock()
	for id := range db.mem {
		if strings.HasPrefix(id.String(), prefix) {
			seen[id] = true
		}
	}
	for _, p := range db.packs {
		lo, hi := p.bucket(first[0])
		for i := lo; i < hi; i++ {
			var id oid
			copy(id[:], p.name(i))
			if strings.HasPrefix(id.String(), prefix) {
				seen[id] = true
			}
		}
	}
	db.mu.RUnlock()
	ents, err := os.ReadDir(filepath.Join(db.dir, prefix[:2]))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		if id, ok := parseID(prefix[:2] + e.Name()); ok && strings.HasPrefix(id.String(), prefix) {
			seen[id] = true
		}
	}
	ids := make([]oid, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b oid) int { return bytes.Compare(a[:], b[:]) })
	return ids, nil
}

// packEntry is one object as laid out in a pack: header and zlib stream.
type packEntry struct {
	id  oid
	raw []byte
	crc uint32
	off int64
}

// appendEntryHeader appends the pack entry header of an object of type t
// and size bytes.
func appendEntryHeader(b []byte, t objType, size int) []byte {
	c := byte(t)<<4 | byte(size&15)
	size >>= 4
	for size > 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(b, c)
}

// deflaters pools zlib writers: a fresh one allocates a large state.
// BestSpeed, because for the small files of agent state it compresses
// almost as well as the default at a third of the time (6 µs against 15 µs
// for 300 bytes on the reference machine).
var deflaters = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return w
}}

// encodeEntry compresses o into a pack entry.
func encodeEntry(o object, buf *bytes.Buffer) packEntry {
	buf.Reset()
	var hb [16]byte
	buf.Write(appendEntryHeader(hb[:0], o.typ, len(o.data)))
	z := deflaters.Get().(*zlib.Writer)
	z.Reset(buf)
	z.Write(o.data) // a bytes.Buffer does not fail
	z.Close()
	deflaters.Put(z)
	raw := bytes.Clone(buf.Bytes())
	return packEntry{id: o.id, raw: raw, crc: crc32.ChecksumIEEE(raw)}
}

// encodeAll compresses objs, on all cores when there are many.
func encodeAll(objs []object) []packEntry {
	es := make([]packEntry, len(objs))
	workers := runtime.GOMAXPROCS(0)
	if len(objs) < 64 || workers < 2 {
		var buf bytes.Buffer
		for i, o := range objs {
			es[i] = encodeEntry(o, &buf)
		}
		return es
	}
	var wg sync.WaitGroup
	chunk := (len(objs) + workers - 1) / workers
	for lo := 0; lo < len(objs); lo += chunk {
		hi := min(lo+chunk, len(objs))
		wg.Go(func() {
			var buf bytes.Buffer
			for i := lo; i < hi; i++ {
				es[i] = encodeEntry(objs[i], &buf)
			}
		})
	}
	wg.Wait()
	return es
}

// packWriter writes one pack and its index durably: temp files in
// objects/pack, fsynced, renamed into place (pack first: git and this
// package find packs by their index), and the folder fsynced. Only then
// does the pack join the list, so an object the list can find is durable.
type packWriter struct {
	dir     string
	f       *os.File
	w       *bufio.Writer
	sum     hash.Hash
	off     int64
	entries []packEntry // id, crc, off; raw dropped once written
}

func (db *odb) newPackWriter(count int) (*packWriter, error) {
	dir := filepath.Join(db.dir, "pack")
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	h := sha1.New()
	pw := &packWriter{dir: dir, f: f, sum: h, w: bufio.NewWriterSize(io.MultiWriter(f, h), 1<<16),
		entries: make([]packEntry, 0, count)}
	var hdr [packHeader]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(count))
	pw.w.Write(hdr[:])
	pw.off = packHeader
	return pw, nil
}

// add appends an encoded entry.
func (pw *packWriter) add(e packEntry) {
	pw.w.Write(e.raw)
	e.off = pw.off
	pw.off += int64(len(e.raw))
	e.raw = nil
	pw.entries = append(pw.entries, e)
}

// copyRaw appends an entry copied verbatim from another pack.
func (pw *packWriter) copyRaw(id oid, crc uint32, src io.Reader, n int64) error {
	if _, err := io.CopyN(pw.w, src, n); err != nil {
		return err
	}
	pw.entries = append(pw.entries, packEntry{id: id, crc: crc, off: pw.off})
	pw.off += n
	return nil
}

func (pw *packWriter) abort() {
	pw.f.Close()
	os.Remove(pw.f.Name())
}

// finish writes the trailer and the index, makes both durable and opens
// the result as a pack.
func (pw *packWriter) finish() (p *pack, err error) {
	defer func() {
		if err != nil {
			pw.abort()
		}
	}()
	if err := pw.w.Flush(); err != nil {
		return nil, fmt.Errorf("write pack: %w", err)
	}
	sum := pw.sum.Sum(nil)
	if _, err := pw.f.Write(sum); err != nil {
		return nil, fmt.Errorf("write pack: %w", err)
	}
	// The pack and its index are fsynced side by side: neither is
	// visible before both are renamed, so their order does not matter,
	// and overlapping fsyncs cost about one.
	packSynced := make(chan error, 1)
	go func() { packSynced <- pw.f.Sync() }()
	idx := buildIdx(pw.entries, sum)
	itmp, err := os.CreateTemp(pw.dir, "tmp_idx_")
	if err == nil {
		_, err = itmp.Write(idx)
		if err == nil {
			err = itmp.Sync()
		}
		if cerr := itmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(itmp.Name())
		}
	}
	if perr := <-packSynced; perr != nil {
		if itmp != nil && err == nil {
			os.Remove(itmp.Name())
		}
		return nil, fmt.Errorf("fsync pack: %w", perr)
	}
	if err != nil {
		return nil, fmt.Errorf("write pack index: %w", err)
	}
	base := filepath.Join(pw.dir, "pack-"+hex.EncodeToString(sum))
	if err := os.Rename(pw.f.Name(), base+".pack"); err != nil {
		os.Remove(itmp.Name())
		return nil, err
	}
	if err := os.Rename(itmp.Name(), base+".idx"); err != nil {
		os.Remove(itmp.Name())
		return nil, err
	}
	if err := durable.SyncDir(pw.dir); err != nil {
		return nil, err
	}
	// The writer's descriptor reads the same file the rename named.
	return &pack{base: base, f: pw.f, size: pw.off + sha1.Size, idx: idx, n: len(pw.entries)}, nil
}

// buildIdx lays out a version 2 pack index for entries (sorted here).
func buildIdx(es []packEntry, packSum []byte) []byte {
	slices.SortFunc(es, func(a, b packEntry) int { return bytes.Compare(a.id[:], b.id[:]) })
	n := len(es)
	var large []int64
	b := make([]byte, 0, idxNames+n*(sha1.Size+8)+2*sha1.Size)
	b = append(b, 0xff, 't', 'O', 'c', 0, 0, 0, 2)
	var fan [256]uint32
	for _, e := range es {
		fan[e.id[0]]++
	}
	total := uint32(0)
	for i := range fan {
		total += fan[i]
		b = binary.BigEndian.AppendUint32(b, total)
	}
	for _, e := range es {
		b = append(b, e.id[:]...)
	}
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, e.crc)
	}
	for _, e := range es {
		if e.off < 0x80000000 {
			b = binary.BigEndian.AppendUint32(b, uint32(e.off))
		} else {
			b = binary.BigEndian.AppendUint32(b, 0x80000000|uint32(len(large)))
			large = append(large, e.off)
		}
	}
	for _, off := range large {
		b = binary.BigEndian.AppendUint64(b, uint64(off))
	}
	b = append(b, packSum...)
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

// writePack writes objs (distinct ids) as one new pack and adds it to the
// list.
func (db *odb) writePack(objs []object) error {
	es := encodeAll(objs)
	pw, err := db.newPackWriter(len(es))
	if err != nil {
		return err
	}
	for _, e := range es {
		pw.add(e)
	}
	p, err := pw.finish()
	if err != nil {
		return err
	}
	db.mu.Lock()
	if old := db.known[p.base]; old != nil {
		// The same objects in the same order: the file was replaced by
		// an identical one.
		p.f.Close()
	} else {
		db.known[p.base] = p
		db.packs = append([]*pack{p}, db.packs...)
	}
	db.mu.Unlock()
	return nil
}

// rollup bounds the number of packs: when there are more than max, the
// smallest packs are merged into one until the sizes (in objects) form a
// geometric progression of factor 2, as `git repack --geometric=2` does.
// Each object is then rewritten O(log n) times over the life of the
// repository, and a commit rarely pays for more than the small packs.
// Packs with a .keep file are left alone.
func (db *odb) rollup(max int) error {
	db.mu.RLock()
	var ps []*pack
	for _, p := range db.packs {
		if !p.keep {
			ps = append(ps, p)
		}
	}
	db.mu.RUnlock()
	if len(ps) <= max {
		return nil
	}
	slices.SortStableFunc(ps, func(a, b *pack) int { return a.n - b.n })
	i := len(ps) - 1
	for ; i > 0; i-- {
		if ps[i].n < 2*ps[i-1].n {
			break
		}
	}
	split := i
	if split > 0 {
		split++
	}
	total := 0
	for _, p := range ps[:split] {
		total += p.n
	}
	for ; split < len(ps) && ps[split].n < 2*total; split++ {
		total += ps[split].n
	}
	if split < 2 {
		return nil
	}
	return db.merge(ps[:split])
}

// merge writes the objects of ps into one new pack, replaces ps by it in
// the list and removes their files. Whole objects are copied as they are
// (no recompression); deltas are resolved and stored whole.
func (db *odb) merge(ps []*pack) error {
	seen := map[oid]bool{}
	type ent struct {
		i   int
		off int64
	}
	plans := make([][]ent, len(ps))
	for k, p := range ps {
		for i := range p.n {
			var id oid
			copy(id[:], p.name(i))
			if !seen[id] {
				seen[id] = true
				plans[k] = append(plans[k], ent{i, p.offset(i)})
			}
		}
	}
	pw, err := db.newPackWriter(len(seen))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for k, p := range ps {
		// The end of an entry is the start of the next one in the pack.
		offs := make([]int64, p.n)
		for i := range p.n {
			offs[i] = p.offset(i)
		}
		slices.Sort(offs)
		for _, e := range plans[k] {
			var id oid
			copy(id[:], p.name(e.i))
			j, _ := slices.BinarySearch(offs, e.off)
			end := p.size - sha1.Size
			if j+1 < len(offs) {
				end = offs[j+1]
			}
			t, _, _, err := p.entryHeader(e.off)
			if err != nil {
				pw.abort()
				return err
			}
			if t >= objCommit && t <= objTag {
				err = pw.copyRaw(id, p.crc(e.i), io.NewSectionReader(p.f, e.off, end-e.off), end-e.off)
			} else {
				db.mu.RLock()
				var data []byte
				t, data, err = db.readPacked(p, e.off, 0)
				db.mu.RUnlock()
				if err == nil {
					pw.add(encodeEntry(object{typ: t, id: id, data: data}, &buf))
				}
			}
			if err != nil {
				pw.abort()
				return fmt.Errorf("merge %s.pack: %w", p.base, err)
			}
		}
	}
	np, err := pw.finish()
	if err != nil {
		return err
	}
	gone := map[*pack]bool{}
	for _, p := range ps {
		gone[p] = true
	}
	db.mu.Lock()
	if db.known[np.base] != nil {
		np.f.Close()
	} else {
		db.known[np.base] = np
		db.packs = append(db.packs, np)
	}
	kept := db.packs[:0:0]
	for _, p := range db.packs {
		if gone[p] && p.base != np.base {
			p.f.Close()
			delete(db.known, p.base)
			continue
		}
		kept = append(kept, p)
	}
	db.packs = kept
	db.mu.Unlock()
	for _, p := range ps {
		if p.base == np.base {
			continue
		}
		// The index first, so no reader finds an index without its pack.
		for _, ext := range []string{".idx", ".pack", ".rev", ".bitmap"} {
			os.Remove(p.base + ext)
		}
	}
	return durable.SyncDir(filepath.Join(db.dir, "pack"))
}
