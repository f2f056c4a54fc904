package state

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The journal is the durability point of the daemon. A batch of changes
// (state saves and deletes, and the kernel's own records such as audit
// entries) is written as records and made durable with one fdatasync; only
// then are the changes visible and acknowledged. The work tree and the
// audit segments are written afterwards and made durable together by a
// checkpoint, after which the journal starts a new generation.
//
// The file is preallocated and reused: records are written over old ones,
// so an fdatasync flushes data only and need not commit file system
// metadata (a size change costs a metadata journal commit in ext4 and xfs,
// which also waits for every other metadata change in flight, such as the
// applier's file creations: measured 360 us per batch sync against 180 us
// for a plain overwrite here).
//
// Layout: a 4 KiB header, then records.
//
//	header: "OXJOURN2" | generation u64 | salt u64 | crc32c u32
//	        (an older "OXJOURN1" | generation u64 | crc32c u32 is read:
//	        its records' CRCs have no salt)
//	record: len u32 | crc32c(salt, payload) u32 | payload
//	payload: generation u64 | kind u8 | ver u64 | mod unix-nanos i64 |
//	         agent (u16 len) | key (u16 len) | value (u32 len)
//	         [ mode u32 | ctime unix-nanos i64 ]   (kind 4 only)
//
// The first record of a batch has batchStart in its kind. Replay reads
// records until one fails its length or CRC, or carries another
// generation (left over from before the last checkpoint). A torn write
// fails its CRC; batches after it were never written, since a batch is
// synced before the next one is written: an intact batch after a bad
// record means damage, not a torn tail (see replay).

const (
	recSave   = 1
	recDelete = 2
	recAux    = 3 // the kernel's own record: value is opaque to this package
	// recSaveMeta is a save that also sets the key's mode or a time of
	// its own: the payload of recSave then mode u32 | ctime unix-nanos i64.
	recSaveMeta = 4
	metaFixed   = 4 + 8
	// recFork makes the tree key a copy of the tree agent as it is at
	// this point of the journal, less the keys under the prefixes value
	// lists (one a line); see fork.go.
	recFork = 5
	// recForkKeys is a fork that names the keys it copies: value is
	// the list (each a u16 length and the key), and the tree key is a
	// copy of those keys of the tree agent as they are at this point of
	// the journal (see fork.go).
	recForkKeys = 6
	// batchStart, or'ed into the kind of a batch's first record, marks
	// where a batch begins: what tells damage from a torn last batch (see
	// replay).
	batchStart = 0x80

	journalMagic  = "OXJOURN1" // a header without salt: read, never written
	saltedMagic   = "OXJOURN2"
	journalHeader = 4096
	recHeader     = 8
	// payloadFixed is the payload size without the variable parts.
	payloadFixed = 8 + 1 + 8 + 8 + 2 + 2 + 4
	// journalChunk is how much the file grows by when it fills up, on a
	// file system of 256 MiB or more; a smaller one grows it by a
	// sixteenth of its size (at least minJournalChunk), so that a small
	// file system can start at all.
	journalChunk    = 16 << 20
	minJournalChunk = 64 << 10
)

// chunkFor is the journal's growth step on a file system of total bytes.
func chunkFor(total int64) int64 {
	c := total / 16 / minJournalChunk * minJournalChunk
	return min(max(c, minJournalChunk), journalChunk)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type record struct {
	kind  byte
	ver   uint64
	mod   time.Time
	agent string
	key   string
	value []byte
	// Kind recSaveMeta only: the mode (with proto.ModeSet, or 0 to keep
	// the key's) and the change's own time (mod is the value's).
	mode  uint32
	ctime int64
	// Kind recForkKeys, when published as it is made (not replayed):
	// the clone of the origin's index (see AddFork).
	clone *forkClone
}

// ctimeOr is the time of the change itself.
func (r *record) ctimeOr() int64 {
	if r.kind == recSaveMeta {
		return r.ctime
	}
	return r.mod.UnixNano()
}

type journal struct {
	f     *os.File
	path  string
	chunk int64 // growth step (see chunkFor)
	fresh bool  // created by this open
	// scanning: a scan, not a replay, is reading the records.
	scanning bool
	// ino and dev name the file opened (see Store.sameJournal); its
	// number cannot be reused while it is open.
	ino, dev uint64
	gen      uint64
	// salt seeds the records' CRCs (seed: its CRC); 0 in a journal
	// written before it (see sum).
	salt  uint64
	seed  uint32
	pos   int64 // where the next record goes
	alloc int64 // bytes preallocated
	buf   []byte
	// used mirrors pos-journalHeader for readers that do not hold the
	// journal's lock (the applier: see Store.drainNow).
	used atomic.Int64
}

// ErrJournalDamaged means the journal's header is unreadable: the daemon
// cannot know what it held, so it refuses to guess.
var ErrJournalDamaged = errors.New("journal damaged")

func openJournal(path string, chunk int64) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	j := &journal{f: f, path: path, chunk: chunk, pos: journalHeader}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	j.alloc = fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		j.ino, j.dev = st.Ino, uint64(st.Dev)
	}
	if fi.Size() == 0 {
		// New journal: generation 1, space reserved, all durable before use.
		j.gen, j.fresh = 1, true
		if err := j.grow(journalHeader + chunk); err != nil {
			f.Close()
			os.Remove(path) // a later start must not take it for a journal
			return nil, err
		}
		if err := j.writeHeader(); err != nil {
			f.Close()
			return nil, err
		}
		return j, nil
	}
	var h [journalHeader]byte
	if _, err := f.ReadAt(h[:20], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: header unreadable: %v", path, ErrJournalDamaged, err)
	}
	switch {
	case string(h[:8]) == journalMagic && crc32.Checksum(h[:16], castagnoli) == binary.LittleEndian.Uint32(h[16:]):
		// Written before the salt: its records' CRCs are plain.
	case string(h[:8]) == saltedMagic:
		if _, err := f.ReadAt(h[:28], 0); err != nil || crc32.Checksum(h[:24], castagnoli) != binary.LittleEndian.Uint32(h[24:]) {
			f.Close()
			return nil, fmt.Errorf("%s: %w: its header does not check (move it away to start without it, losing unapplied changes)", path, ErrJournalDamaged)
		}
		j.setSalt(binary.LittleEndian.Uint64(h[16:]))
	default:
		f.Close()
		return nil, fmt.Errorf("%s: %w: its header is not a journal's (move it away to start without it, losing unapplied changes)", path, ErrJournalDamaged)
	}
	j.gen = binary.LittleEndian.Uint64(h[8:])
	return j, nil
}

// writeHeader writes the header of the current generation, with a new
// salt (see sum), and makes it durable.
func (j *journal) writeHeader() error {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return err
	}
	salt := binary.LittleEndian.Uint64(r[:]) | 1 // never 0: 0 is no salt
	h := make([]byte, 28)
	copy(h, saltedMagic)
	binary.LittleEndian.PutUint64(h[8:], j.gen)
	binary.LittleEndian.PutUint64(h[16:], salt)
	binary.LittleEndian.PutUint32(h[24:], crc32.Checksum(h[:24], castagnoli))
	if _, err := j.f.WriteAt(h, 0); err != nil {
		return err
	}
	if err := j.sync(); err != nil {
		return err
	}
	j.setSalt(salt)
	return nil
}

// setSalt makes salt the seed of the records' CRCs.
func (j *journal) setSalt(salt uint64) {
	j.salt = salt
	j.seed = crc32.Checksum(binary.LittleEndian.AppendUint64(nil, salt), castagnoli)
}

// sum is the CRC of a record's payload: seeded with the generation's
// salt, a random number in the header, which no one but the daemon
// reads. Replay looks for intact records past a bad one anywhere in the
// file (see nextIntact), values included: a value an agent saved that
// holds a record of its making must not pass for one of the journal's
// (its salvage would replay it).
func (j *journal) sum(p []byte) uint32 {
	if j.salt == 0 {
		return crc32.Checksum(p, castagnoli)
	}
	return crc32.Update(j.seed, castagnoli, p)
}

// grow preallocates the file to at least n bytes by writing zeros, and
// makes that durable. Written zeros, not fallocate: a write into an
// fallocated (unwritten) extent converts it, which is a metadata change
// that every fdatasync then has to commit (measured: it doubled the sync
// time while the applier was creating files).
func (j *journal) grow(n int64) error {
	if n <= j.alloc {
		return nil
	}
	n = (n + j.chunk - 1) / j.chunk * j.chunk
	zeros := make([]byte, 1<<20)
	for off := j.alloc; off < n; off += int64(len(zeros)) {
		if _, err := j.f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return fmt.Errorf("preallocating journal: %w", err)
		}
	}
	if err := unix.Fsync(int(j.f.Fd())); err != nil {
		return fmt.Errorf("preallocating journal: %w", err)
	}
	j.alloc = n
	return nil
}

// appendRecord adds r to the pending write; first: r begins a batch.
func (j *journal) appendRecord(r *record, first bool) {
	n := payloadFixed + len(r.agent) + len(r.key) + len(r.value)
	if r.kind == recSaveMeta {
		n += metaFixed
	}
	h := j.buf
	start := len(h)
	h = binary.LittleEndian.AppendUint32(h, uint32(n))
	h = binary.LittleEndian.AppendUint32(h, 0) // crc, filled below
	h = binary.LittleEndian.AppendUint64(h, j.gen)
	if first {
		h = append(h, r.kind|batchStart)
	} else {
		h = append(h, r.kind)
	}
	h = binary.LittleEndian.AppendUint64(h, r.ver)
	h = binary.LittleEndian.AppendUint64(h, uint64(r.mod.UnixNano()))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(r.agent)))
	h = append(h, r.agent...)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(r.key)))
	h = append(h, r.key...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(r.value)))
	h = append(h, r.value...)
	if r.kind == recSaveMeta {
		h = binary.LittleEndian.AppendUint32(h, r.mode)
		h = binary.LittleEndian.AppendUint64(h, uint64(r.ctime))
	}
	binary.LittleEndian.PutUint32(h[start+4:], j.sum(h[start+recHeader:]))
	j.buf = h
}

// flush writes the pending records at the current position.
func (j *journal) flush() error {
	if len(j.buf) == 0 {
		return nil
	}
	if err := j.grow(j.pos + int64(len(j.buf))); err != nil {
		return err
	}
	if _, err := j.f.WriteAt(j.buf, j.pos); err != nil {
		return err
	}
	j.setPos(j.pos + int64(len(j.buf)))
	if cap(j.buf) > 4<<20 {
		j.buf = nil // do not keep a huge batch's buffer around
	}
	j.buf = j.buf[:0]
	return nil
}

func (j *journal) sync() error { return unix.Fdatasync(int(j.f.Fd())) }

// size is how much of the current generation is in use.
func (j *journal) size() int64 { return j.pos - journalHeader }

// setPos moves where the next record goes.
func (j *journal) setPos(pos int64) {
	j.pos = pos
	j.used.Store(pos - journalHeader)
}

// discard undoes the records written since start: they are zeroed, so a
// later, shorter batch cannot leave them behind as valid records.
func (j *journal) discard(start int64) error {
	j.buf = j.buf[:0]
	if n := j.pos - start; n > 0 {
		if _, err := j.f.WriteAt(make([]byte, n), start); err != nil {
			return err
		}
		if err := j.sync(); err != nil {
			return err
		}
	}
	j.setPos(start)
	return nil
}

// reset starts a new generation: every record so far is obsolete.
func (j *journal) reset() error {
	j.gen++
	if err := j.writeHeader(); err != nil {
		return err
	}
	j.setPos(journalHeader)
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// replay reads the current generation's records in order and leaves the
// write position after the last intact one. A record that fails its
// checks (length, CRC, generation, fields) ends the journal if no intact
// record that begins a batch follows it: a torn write of the last batch,
// never acknowledged (its sync had not returned), or the old records and
// zeros of a reused file. If one follows, the batches from there on were
// written after the bad record's batch was synced: they and it were
// acknowledged, and the bad bytes are damage. Replay then refuses with a
// DamageError naming the damage and what could be salvaged, or, with
// salvage, hands fn every intact record there is and returns the damaged
// spans.
// scan reads the journal's intact records as a salvaging replay does,
// without a word about damage (the replay says it) and without moving
// the write position.
func (j *journal) scan(fn func(*record) error) ([]Damage, error) {
	j.scanning = true
	defer func() { j.scanning = false }()
	return j.replay(fn, true)
}

func (j *journal) replay(fn func(*record) error, salvage bool) ([]Damage, error) {
	pos := int64(journalHeader)
	var dmg *DamageError
	var lost []Damage
	end := int64(-1) // where the records end: the write position
	r := &jreader{f: j.f}
	for {
		rec, size, first, err := j.readRecord(r, pos)
		if err == nil {
			if dmg == nil {
				if err := fn(rec); err != nil {
					return lost, err
				}
			} else {
				dmg.Records++
				if first {
					dmg.Batches++
				}
			}
			pos += size
			continue
		}
		if errors.Is(err, errUnknownKind) {
			// Intact, of this generation, and of a kind this oxiosd does
			// not know: written by a newer one. Stopping here would drop
			// every acknowledged change after it.
			return lost, fmt.Errorf("journal record at offset %d: %w (written by a newer oxiosd?); start that version, or move the data directory aside", pos, err)
		}
		if end < 0 {
			end = pos
		}
		// Bad at pos: is there a batch after it?
		batch, ok := j.nextIntact(pos+1, true)
		if !ok {
			if next, ok := j.nextIntact(pos+1, false); ok && !j.scanning {
				// Intact records of the last batch after a bad one:
				// written out of order by a torn write, or the last
				// batch damaged (the two look the same).
				slog.Warn("state: the journal's last batch is torn: the intact records after its bad one are left out (never acknowledged if the write was torn)",
					"bad_offset", pos, "next_intact_offset", next)
			}
			break
		}
		// Every intact record, those of the damaged batch too, is
		// salvaged (and counted when refused).
		resume, _ := j.nextIntact(pos+1, false)
		resume = min(resume, batch)
		lost = append(lost, Damage{Offset: pos, Len: resume - pos})
		if !salvage && dmg == nil {
			dmg = &DamageError{Path: j.path}
		}
		end = -1
		pos = resume
	}
	if dmg != nil {
		dmg.Damage = lost
		return lost, dmg
	}
	if !j.scanning {
		j.setPos(end)
	}
	return lost, nil
}

// readRecord reads and checks the record at pos: its size in the file
// and whether it begins a batch. An error other than errUnknownKind means
// the bytes at pos are not an intact record of this generation.
func (j *journal) readRecord(r *jreader, pos int64) (*record, int64, bool, error) {
	hdr, err := r.bytes(pos, recHeader)
	if err != nil {
		return nil, 0, false, err
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	sum := binary.LittleEndian.Uint32(hdr[4:])
	if n < payloadFixed || int64(n) > j.alloc-pos-recHeader {
		return nil, 0, false, errShortRecord
	}
	b, err := r.bytes(pos+recHeader, int(n))
	if err != nil {
		return nil, 0, false, err
	}
	if binary.LittleEndian.Uint64(b) != j.gen {
		return nil, 0, false, errOtherGen
	}
	if j.sum(b) != sum {
		return nil, 0, false, errBadCRC
	}
	// The record keeps its value: a copy of its own, not the window.
	rec, _, first, err := decodeRecord(append([]byte(nil), b...))
	if err != nil {
		return nil, 0, false, err
	}
	return rec, recHeader + int64(n), first, nil
}

// jreader reads the journal a window at a time.
type jreader struct {
	f   *os.File
	off int64
	buf []byte
}

// bytes returns the n bytes at pos, valid until the next call.
func (r *jreader) bytes(pos int64, n int) ([]byte, error) {
	if pos >= r.off && pos+int64(n) <= r.off+int64(len(r.buf)) {
		return r.buf[pos-r.off:][:n], nil
	}
	size := max(n, 1<<20)
	if cap(r.buf) < size {
		r.buf = make([]byte, size)
	}
	m, err := r.f.ReadAt(r.buf[:size], pos)
	r.off, r.buf = pos, r.buf[:m]
	if m < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return r.buf[:n], nil
}

// nextIntact finds the first intact record of this generation at or
// after from (with first, the first that begins a batch). It reads the
// file once, a window at a time, and looks only where the window holds
// this generation's number (bytes.Index, with the CPU's vector
// instructions), checking a record's CRC only where its length is
// possible too. Every replay ends with it, past the last record, over
// the rest of the file: zeros and old generations' records. Compared a
// byte at a time, the 64 MiB of a journal took 250 ms at every start,
// and seconds under the race detector.
func (j *journal) nextIntact(from int64, first bool) (int64, bool) {
	scan := &jreader{f: j.f}
	check := &jreader{f: j.f}
	const probe = recHeader + 8 // a record's length, CRC and generation
	var gen [8]byte
	binary.LittleEndian.PutUint64(gen[:], j.gen)
	for base := from; base+recHeader+payloadFixed <= j.alloc; {
		b, err := scan.bytes(base, int(min(1<<20, j.alloc-base)))
		if err != nil || len(b) < probe {
			return 0, false
		}
		// The generation of a record at i is at i+recHeader: each match
		// of it is a candidate.
		for q := recHeader; q+8 <= len(b); {
			h := bytes.Index(b[q:], gen[:])
			if h < 0 {
				break
			}
			i := q + h - recHeader
			q += h + 1
			size := binary.LittleEndian.Uint32(b[i:])
			off := base + int64(i)
			if size < payloadFixed || int64(size) > j.alloc-off-recHeader {
				continue
			}
			if _, _, isFirst, err := j.readRecord(check, off); (err == nil || errors.Is(err, errUnknownKind)) && (isFirst || !first) {
				return off, true
			}
		}
		base += int64(len(b) - probe + 1)
	}
	return 0, false
}

// Damage is a span of the journal that holds no intact record, between
// intact ones.
type Damage struct {
	Offset, Len int64
}

// DamageError is a journal with damage in the middle: intact batches
// follow a bad record, so what it held was acknowledged, and is lost.
type DamageError struct {
	Path   string
	Damage []Damage // the spans that hold no intact record
	// Records and Batches: the intact records after the first damage
	// (and how many batches they begin), which a salvage keeps.
	Records, Batches int
}

func (e *DamageError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v in the middle: ", e.Path, ErrJournalDamaged)
	for i, d := range e.Damage {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "bytes %d to %d (%d) hold no intact record", d.Offset, d.Offset+d.Len, d.Len)
	}
	fmt.Fprintf(&b, "; %d intact records (%d batches) follow, acknowledged, and can be salvaged; what the damaged bytes held (at least one record, acknowledged) cannot", e.Records, e.Batches)
	return b.String()
}

// Is makes a DamageError an ErrJournalDamaged.
func (e *DamageError) Is(target error) bool { return target == ErrJournalDamaged }

var (
	errShortRecord = errors.New("journal: short record")
	errBadCRC      = errors.New("journal: bad CRC")
	errOtherGen    = errors.New("journal: record of another generation")
)

// errUnknownKind is an intact record of a kind this version does not know.
var errUnknownKind = errors.New("journal: unknown record kind")

func decodeRecord(p []byte) (*record, uint64, bool, error) {
	gen := binary.LittleEndian.Uint64(p)
	p = p[8:]
	first := p[0]&batchStart != 0
	rec := &record{kind: p[0] &^ batchStart, ver: binary.LittleEndian.Uint64(p[1:]),
		mod: time.Unix(0, int64(binary.LittleEndian.Uint64(p[9:]))).UTC()}
	if rec.kind != recSave && rec.kind != recDelete && rec.kind != recAux && rec.kind != recSaveMeta && rec.kind != recFork && rec.kind != recForkKeys {
		return nil, gen, first, fmt.Errorf("%w %d", errUnknownKind, rec.kind)
	}
	p = p[17:]
	field := func(lenBytes int) ([]byte, bool) {
		if len(p) < lenBytes {
			return nil, false
		}
		var n int
		if lenBytes == 2 {
			n = int(binary.LittleEndian.Uint16(p))
		} else {
			n = int(binary.LittleEndian.Uint32(p))
		}
		p = p[lenBytes:]
		if len(p) < n {
			return nil, false
		}
		f := p[:n]
		p = p[n:]
		return f, true
	}
	agent, ok1 := field(2)
	key, ok2 := field(2)
	value, ok3 := field(4)
	if ok3 && rec.kind == recSaveMeta {
		if len(p) != metaFixed {
			return nil, gen, first, errShortRecord
		}
		rec.mode = binary.LittleEndian.Uint32(p)
		rec.ctime = int64(binary.LittleEndian.Uint64(p[4:]))
		p = p[metaFixed:]
	}
	if !ok1 || !ok2 || !ok3 || len(p) != 0 {
		return nil, gen, first, errShortRecord
	}
	rec.agent, rec.key, rec.value = string(agent), string(key), value
	return rec, gen, first, nil
}
