package audit

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/durable"
)

// DefaultSegmentBytes is the size at which a segment is closed.
const DefaultSegmentBytes = 64 << 20

// Options tunes a Log. The zero value is the daemon's configuration.
type Options struct {
	// SegmentBytes is the size at which the current segment is closed and the
	// next begun. A batch is never split across segments, so a single batch
	// larger than this makes a larger segment. Default DefaultSegmentBytes.
	SegmentBytes int64
}

var (
	// ErrTampered is wrapped by Open's error when the end of the log does not
	// match its head (a truncated or rewritten tail, a missing head or
	// segment). Open refuses such a log rather than carry on from it, which
	// would record a new head over the evidence; Verify names the entry.
	ErrTampered = errors.New("audit log does not verify")
	// ErrBroken is returned by every call after a write, fdatasync or head
	// write failed: what reached the disk is unknown, so the Log stops and the
	// daemon must restart (Open then recovers the log).
	ErrBroken = errors.New("audit log stopped after an I/O error")
	// ErrClosed is returned by calls on a closed Log.
	ErrClosed = errors.New("audit log is closed")
)

// Log is an open audit log directory. Its methods are safe for concurrent
// use; Open holds an exclusive lock on the directory until Close.
type Log struct {
	// Recovered says what Open repaired after a crash ("" when nothing):
	// a cut torn tail, entries found past a stale head, an ignored torn
	// head slot. Open logs nothing itself; the daemon logs this.
	Recovered string

	dir      string
	segBytes int64
	headF    *os.File // flock'ed; slots rewritten after each Sync
	nextSlot int      // slot the next head write goes to

	// syncMu serialises Sync and Close; it is held across the fdatasync so
	// that appends (under mu only) go on meanwhile.
	syncMu sync.Mutex

	mu       sync.Mutex
	f        *os.File // current segment, O_APPEND
	segFirst uint64   // first seq of the current segment
	size     int64    // bytes in the current segment
	segs     []uint64 // first seqs of all segments, ascending
	retired  []*os.File
	seq      uint64   // last appended entry
	hash     [32]byte // its hash
	buf      []byte
	scratch  []byte
	err      error   // sticky: ErrBroken or ErrClosed
	dur      headRec // last durable entry, as written to the head file
	pub      uint64  // last entry readers may see: >= dur.Seq (see Publish)
	changed  chan struct{}
}

// Open opens the audit log in dir, creating dir (0700) and an empty log if
// there is none. After a crash it cuts a torn or unsynced tail back to the
// last entry that verifies and says so in l.Recovered; it never drops an
// entry that a Sync made durable. Open checks only the end of the log
// against the head (cheap); a log whose end does not match is refused with
// ErrTampered. The full check is Verify.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTampered, err)
	}
	hpath := filepath.Join(dir, headName)
	hf, err := os.OpenFile(hpath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) && len(segs) == 0 {
		if err = createHead(dir); err == nil {
			hf, err = os.OpenFile(hpath, os.O_RDWR, 0)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: %v but segments exist (run ox-audit verify)", ErrTampered, dir, errHeadMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := flock(hf); err != nil {
		hf.Close()
		return nil, fmt.Errorf("audit: %s is in use by another process: %w", dir, err)
	}
	raw := make([]byte, headSlots*headSlotSize)
	n, err := hf.ReadAt(raw, 0)
	if err != nil && err != io.EOF {
		hf.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	hs, err := parseHead(raw[:n])
	if err != nil {
		hf.Close()
		return nil, fmt.Errorf("%w: %s: %v (run ox-audit verify)", ErrTampered, hpath, err)
	}
	l := &Log{
		dir:      dir,
		segBytes: opts.SegmentBytes,
		headF:    hf,
		nextSlot: 1 - hs.best,
		changed:  make(chan struct{}),
	}
	if err := l.recover(segs, hs); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.pub = l.dur.Seq
	return l, nil
}

func flock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
	}); err != nil {
		return err
	}
	return ferr
}

// fdatasync flushes f's data and the metadata needed to read it (its size).
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// recover finds the head's entry, checks every entry after it, cuts a bad
// tail of the last segment, and makes the result durable.
func (l *Log) recover(segs []uint64, hs *headState) error {
	h := hs.newest()
	tampered := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s (run ox-audit verify)", ErrTampered, l.dir, fmt.Sprintf(format, a...))
	}
	var notes []string
	if n := hs.note(); n != "" {
		notes = append(notes, n)
	}
	if len(segs) == 0 {
		if h.Seq > 0 {
			return tampered("no segment files, but the head records entry %d", h.Seq)
		}
		f, err := os.OpenFile(l.path(1), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			err = f.Close()
		}
		if err == nil {
			err = durable.SyncDir(l.dir)
		}
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		segs = []uint64{1}
	}

	// Find the head's entry: the last 76 bytes before h.Off must be its hash.
	var (
		si   int
		off  int64
		seq  = h.Seq
		hash [32]byte
		at   = h // where the last good entry ends
	)
	if h.Seq == 0 {
		if segs[0] != 1 {
			return tampered("the first segment is %s, want %s", segName(segs[0]), segName(1))
		}
	} else {
		si = sort.Search(len(segs), func(i int) bool { return segs[i] >= h.Seg })
		if si == len(segs) || segs[si] != h.Seg {
			return tampered("%s, which holds the head's entry %d, is missing", segName(h.Seg), h.Seq)
		}
		f, err := os.Open(l.path(h.Seg))
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		line, err := lineEndingAt(f, h.Off)
		f.Close()
		var p lineParts
		var why string
		if err == nil {
			p, why = splitLine(line)
		}
		var prev [32]byte
		ok := err == nil && why == "" && p.seq == h.Seq && string(p.hash) == h.Hash && decodeHex(&prev, p.prev)
		if ok {
			sum, _ := hashLine(nil, &prev, p.body)
			ok = hex.EncodeToString(sum[:]) == h.Hash
		}
		if !ok {
			return tampered("the head records entry %d ending at byte %d of %s, but that entry is not there or does not match its hash: the log was truncated or rewritten", h.Seq, h.Off, segName(h.Seg))
		}
		off = h.Off
		decodeHex(&hash, []byte(h.Hash))
	}

	// Check every entry after the head. Only the last segment may end badly:
	// a segment is fdatasynced before the next one is created.
	var cutAt int64 = -1
	var scratch []byte
	for ; si < len(segs); si++ {
		last := si == len(segs)-1
		name := segName(segs[si])
		if off == 0 && segs[si] != seq+1 {
			return tampered("%s should begin with entry %d", name, seq+1)
		}
		f, err := os.Open(l.path(segs[si]))
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		lr := newLineReader(io.NewSectionReader(f, off, 1<<62), off)
		for {
			line, start, complete, err := lr.next()
			if err == io.EOF {
				break
			}
			var p lineParts
			var why string
			switch {
			case err == errLineTooLong:
				why = err.Error()
			case err != nil:
				f.Close()
				return fmt.Errorf("audit: %s: %w", name, err)
			case !complete:
				why = "a torn line (no newline)"
			default:
				p, hash, why, scratch = follows(line, seq, hash, scratch)
			}
			if why != "" {
				if !last {
					f.Close()
					return tampered("%s at byte %d: %s, in a segment that was complete before the next one began", name, start, why)
				}
				st, err := f.Stat()
				if err != nil {
					f.Close()
					return fmt.Errorf("audit: %w", err)
				}
				cutAt = start
				notes = append(notes, fmt.Sprintf("cut %d bytes from the end of %s after entry %d (from byte %d: %s); they were never synced, so never acknowledged", st.Size()-start, name, seq, start, why))
				break
			}
			seq = p.seq
			at = headRec{Seq: seq, Seg: segs[si], Off: lr.off}
		}
		f.Close()
		off = 0
	}
	if seq > h.Seq {
		notes = append(notes, fmt.Sprintf("the head was at entry %d; %d entries past it (to entry %d) verify and were kept", h.Seq, seq-h.Seq, seq))
	}

	// Seal every segment but the last (a crash may have come between
	// creating a segment and sealing the one before), and go on in the last
	// (unsealing it if the crash came between sealing it and creating the
	// next).
	lastFirst := segs[len(segs)-1]
	for _, s := range segs[:len(segs)-1] {
		if err := sealSegment(l.path(s)); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	lpath := l.path(lastFirst)
	st, err := os.Stat(lpath)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if st.Mode().Perm()&0o200 == 0 {
		if err := os.Chmod(lpath, 0o600); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	f, err := os.OpenFile(lpath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.f, l.segFirst, l.size, l.segs = f, lastFirst, st.Size(), segs
	if cutAt >= 0 {
		if err := f.Truncate(cutAt); err != nil {
			return fmt.Errorf("audit: cut torn tail: %w", err)
		}
		l.size = cutAt
	}
	// Entries past the head may still be only in the page cache (the
	// process was killed, the machine was not): make them durable before
	// the head names them.
	if err := fdatasync(f); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.seq, l.hash = seq, hash
	at.Hash = hex.EncodeToString(hash[:])
	if seq == 0 {
		at = emptyHead()
	}
	l.dur = h
	if at != h {
		if err := l.writeHead(at); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if err := fdatasync(l.headF); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if len(notes) > 0 {
		l.Recovered = joinNotes(notes)
	}
	return nil
}

// lineEndingAt reads the line whose newline is the byte before end.
func lineEndingAt(f *os.File, end int64) ([]byte, error) {
	for size := int64(4 << 10); ; size *= 2 {
		n := min(size, end)
		if n == 0 {
			return nil, io.ErrUnexpectedEOF
		}
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, end-n); err != nil {
			return nil, err
		}
		if buf[n-1] != '\n' {
			return nil, errors.New("no newline")
		}
		if i := bytes.LastIndexByte(buf[:n-1], '\n'); i >= 0 {
			return buf[i+1 : n-1], nil
		}
		if n == end {
			return buf[:n-1], nil // the segment's first line
		}
		if n > MaxLineBytes {
			return nil, errLineTooLong
		}
	}
}

// follows checks that line is the entry after (seq, hash): its shape, seq,
// link and own hash. It returns the line's parts and hash, or why not.
func follows(line []byte, seq uint64, hash [32]byte, scratch []byte) (lineParts, [32]byte, string, []byte) {
	p, why := splitLine(line)
	if why != "" {
		return p, hash, why, scratch
	}
	var want [hexLen]byte
	hex.Encode(want[:], hash[:])
	var prev [32]byte
	if p.seq != seq+1 {
		return p, hash, fmt.Sprintf("seq %d where %d comes next", p.seq, seq+1), scratch
	}
	if string(p.prev) != string(want[:]) || !decodeHex(&prev, p.prev) {
		return p, hash, fmt.Sprintf("entry %d does not link to entry %d", p.seq, seq), scratch
	}
	sum, scratch := hashLine(scratch, &prev, p.body)
	hex.Encode(want[:], sum[:])
	if string(want[:]) != string(p.hash) {
		return p, hash, fmt.Sprintf("entry %d does not match its hash", p.seq), scratch
	}
	return p, sum, "", scratch
}

func sealSegment(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() == 0o400 {
		return err
	}
	return os.Chmod(path, 0o400)
}

func joinNotes(notes []string) string {
	s := ""
	for i, n := range notes {
		if i > 0 {
			s += "; "
		}
		s += n
	}
	return s
}

func (l *Log) path(first uint64) string { return filepath.Join(l.dir, segName(first)) }

// writeHead records h in the slot not holding the newest head and makes it
// the durable head. Called with mu held (or before the Log is shared).
func (l *Log) writeHead(h headRec) error {
	if _, err := l.headF.WriteAt(h.encode(), int64(l.nextSlot*headSlotSize)); err != nil {
		return err
	}
	l.nextSlot = 1 - l.nextSlot
	l.dur = h
	return nil
}

// Append assigns each entry its Seq, Time (now, if zero; always UTC), Prev
// and Hash, and writes their lines to the log in one write. The entries are
// not durable until Sync returns. On error nothing of the batch is in the
// log (a partial write is cut back) and the entries' fields are meaningless.
func (l *Log) Append(entries []*Entry) error {
	if len(entries) == 0 {
		return nil
	}
	now := time.Now().UTC()
	for _, e := range entries {
		if !e.Time.IsZero() {
			if y := e.Time.UTC().Year(); y < 0 || y > 9999 {
				return errTimeRange
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	buf := l.buf[:0]
	seq, prev := l.seq, l.hash
	lastHash := "" // the previous entry's Hash, shared as the next one's Prev
	for _, e := range entries {
		seq++
		e.Type = "audit"
		e.Seq = seq
		if e.Time.IsZero() {
			e.Time = now
		} else {
			e.Time = e.Time.UTC()
		}
		start := len(buf)
		buf = appendBody(buf, e, &prev)
		if lastHash == "" {
			lastHash = string(buf[len(buf)-1-hexLen : len(buf)-1])
		}
		e.Prev = lastHash
		var sum [32]byte
		sum, l.scratch = hashLine(l.scratch, &prev, buf[start:])
		buf = append(buf, hashKey...)
		buf = hex.AppendEncode(buf, sum[:])
		e.Hash = string(buf[len(buf)-hexLen:])
		buf = append(buf, '"', '}', '\n')
		if len(buf)-start > MaxLineBytes {
			return fmt.Errorf("audit: entry %s %q: line of %d bytes, over MaxLineBytes", e.Op, e.Target[:min(len(e.Target), 64)], len(buf)-start)
		}
		prev, lastHash = sum, e.Hash
	}
	if cap(buf) <= 4<<20 {
		l.buf = buf
	} else {
		l.buf = nil
	}
	if l.size > 0 && l.size+int64(len(buf)) > l.segBytes {
		if err := l.rotate(l.seq + 1); err != nil {
			l.err = fmt.Errorf("%w: rotate: %v", ErrBroken, err)
			return l.err
		}
	}
	n, err := l.f.Write(buf)
	if err != nil {
		if n > 0 {
			if terr := l.f.Truncate(l.size); terr != nil {
				l.err = fmt.Errorf("%w: append: %v; cutting the partial write back: %v", ErrBroken, err, terr)
				return l.err
			}
		}
		return fmt.Errorf("audit: append: %w", err)
	}
	l.seq, l.hash = seq, prev
	l.size += int64(n)
	return nil
}

// rotate finishes the current segment (durable, read-only) and begins the
// one whose first entry is first. Called with mu held.
func (l *Log) rotate(first uint64) error {
	if err := fdatasync(l.f); err != nil {
		return err
	}
	if err := l.f.Chmod(0o400); err != nil {
		return err
	}
	nf, err := os.OpenFile(l.path(first), os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := durable.SyncDir(l.dir); err != nil {
		nf.Close()
		return err
	}
	// A Sync may be in fdatasync on the old file right now; it closes the
	// retired files when it is done.
	l.retired = append(l.retired, l.f)
	l.f, l.segFirst, l.size = nf, first, 0
	l.segs = append(l.segs, first)
	return nil
}

// Sync makes every appended entry durable with one fdatasync, then records
// the new head and wakes Changed. Appends may proceed while it waits on the
// disk; they are made durable by the next Sync.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return err
	}
	if l.seq == l.dur.Seq {
		l.mu.Unlock()
		return nil
	}
	f := l.f
	snap := headRec{Seq: l.seq, Hash: hex.EncodeToString(l.hash[:]), Seg: l.segFirst, Off: l.size}
	l.mu.Unlock()

	err := fdatasync(f)

	l.mu.Lock()
	defer l.mu.Unlock()
	return l.synced(snap, err)
}

// synced finishes a Sync whose fdatasync returned err. Called with mu held.
func (l *Log) synced(snap headRec, err error) error {
	for _, r := range l.retired {
		r.Close()
	}
	l.retired = nil
	if err != nil {
		l.err = fmt.Errorf("%w: fdatasync: %v", ErrBroken, err)
		return l.err
	}
	herr := l.writeHead(snap)
	if snap.Seq > l.pub {
		l.pub = snap.Seq
		close(l.changed)
		l.changed = make(chan struct{})
	}
	if herr != nil {
		// The entries are durable; only the head lags. Stop anyway: the disk
		// is failing.
		l.err = fmt.Errorf("%w: head: %v", ErrBroken, herr)
		return l.err
	}
	return nil
}

// Head returns the last durable entry's seq and hash (0 and 64 zeros for an
// empty log): what a commit trailer or an export records.
func (l *Log) Head() (seq uint64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dur.Seq, l.dur.Hash
}

// Last returns the last appended entry's seq and hash, durable here or
// not: what a commit trailer names when the caller either syncs the log
// (Sync) first or, like the kernel, appends only entries that are
// durable elsewhere (see Publish).
func (l *Log) Last() (seq uint64, hash string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, hex.EncodeToString(l.hash[:])
}

// Publish lets Scan see, and Changed announce, the appended entries up to
// seq before a Sync makes them durable here: the caller vouches that they
// are durable by other means (the kernel's journal holds them, and replays
// them into the log after a crash). seq beyond the last appended entry is
// cut to it.
func (l *Log) Publish(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq = min(seq, l.seq)
	if seq <= l.pub {
		return
	}
	l.pub = seq
	close(l.changed)
	l.changed = make(chan struct{})
}

// Published is the last entry that Scan returns: the durable head, or
// further if Publish said so.
func (l *Log) Published() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pub
}

// Changed returns a channel that is closed when a Sync or Publish makes new
// entries visible to Scan. Take the channel, Scan, then wait on it: nothing
// is missed. Close does not close it; tailers also watch their own context.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Scan calls fn for each published entry with Seq >= from (1 if from is 0), in
// order, with the entry and its line (without newline; valid only during
// the call). It reads the segment files and does not verify the chain:
// that is Verify's job. An error from fn stops the scan and is returned.
func (l *Log) Scan(from uint64, fn func(e *Entry, line []byte) error) error {
	return l.scanLines(from, 0, func(line []byte) error {
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("audit: entry %d: %w", parseSeq(line), err)
		}
		return fn(&e, line)
	})
}

// scanLines calls fn with the line of each published entry from..to (to 0:
// up to the published head; see Publish).
func (l *Log) scanLines(from, to uint64, fn func(line []byte) error) error {
	l.mu.Lock()
	if errors.Is(l.err, ErrClosed) {
		l.mu.Unlock()
		return ErrClosed
	}
	if pub := l.pub; to == 0 || to > pub {
		to = pub
	}
	segs := slices.Clone(l.segs)
	l.mu.Unlock()
	if from == 0 {
		from = 1
	}
	if from > to {
		return nil
	}
	i := sort.Search(len(segs), func(i int) bool { return segs[i] > from }) - 1
	for i = max(i, 0); i < len(segs); i++ {
		f, err := os.Open(l.path(segs[i]))
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		lr := newLineReader(f, 0)
		for {
			line, _, complete, err := lr.next()
			if err == io.EOF || (err == nil && !complete) {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("audit: %w", err)
			}
			seq := parseSeq(line)
			if seq < from {
				continue
			}
			if seq > to {
				f.Close()
				return nil
			}
			if err := fn(line); err != nil {
				f.Close()
				return err
			}
			if seq == to {
				f.Close()
				return nil
			}
		}
		f.Close()
	}
	return nil
}

// headLinePrefix begins the last line of an export.
const headLinePrefix = `{"type":"audit_head","seq":`

// appendHeadLine renders the final line of an export.
func appendHeadLine(b []byte, seq uint64, hash string) []byte {
	b = fmt.Appendf(b, `%s%d,"hash":"%s"}`, headLinePrefix, seq, hash)
	return append(b, '\n')
}

// Export writes every durable entry's line, then a head line
// {"type":"audit_head","seq":N,"hash":"..."}: a self-contained copy that
// VerifyFile checks without the log. Keep exports (or their head lines)
// away from this machine: they are what a rewritten log is held against.
func (l *Log) Export(w io.Writer) error {
	seq, hash := l.Head()
	bw := bufio.NewWriterSize(w, 1<<20)
	n := uint64(0)
	if seq > 0 {
		err := l.scanLines(1, seq, func(line []byte) error {
			n++
			bw.Write(line)
			return bw.WriteByte('\n')
		})
		if err != nil {
			return err
		}
	}
	if n != seq {
		return fmt.Errorf("%w: export found %d entries, the head is at %d (run ox-audit verify)", ErrTampered, n, seq)
	}
	bw.Write(appendHeadLine(nil, seq, hash))
	return bw.Flush()
}

// Verify checks the whole chain up to the durable head while the log is
// in use, against the head held in memory (entries being appended past it
// are not looked at).
func (l *Log) Verify() (Report, error) {
	l.mu.Lock()
	if errors.Is(l.err, ErrClosed) {
		l.mu.Unlock()
		return Report{}, ErrClosed
	}
	dur := l.dur
	l.mu.Unlock()
	return verifyDir(l.dir, &dur)
}

// Close makes any appended entries durable, records the head and releases
// the directory. Calling it again does nothing.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.err, ErrClosed) {
		return nil
	}
	var err error
	if l.err == nil && l.seq != l.dur.Seq {
		snap := headRec{Seq: l.seq, Hash: hex.EncodeToString(l.hash[:]), Seg: l.segFirst, Off: l.size}
		err = l.synced(snap, fdatasync(l.f))
	}
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	l.err = ErrClosed
	return err
}

func (l *Log) closeFiles() error {
	var err error
	for _, r := range l.retired {
		r.Close()
	}
	l.retired = nil
	if l.f != nil {
		err = l.f.Close()
	}
	if l.headF != nil {
		if cerr := l.headF.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// ScanLines is Scan without decoding: fn gets each published entry's line
// (valid only during the call). Peek reads its fields cheaply.
func (l *Log) ScanLines(from uint64, fn func(line []byte) error) error {
	return l.scanLines(from, 0, fn)
}
