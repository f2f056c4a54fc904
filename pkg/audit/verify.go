package audit

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
)

// Report is the outcome of a verification.
type Report struct {
	// Entries is how many entries verified, from seq 1 up to HeadSeq.
	Entries uint64 `json:"entries"`
	// HeadSeq and HeadHash are the last entry up to which the chain links:
	// the end of the log when OK, the entry before FirstBad when the chain
	// breaks, the end of the chain when only its end disagrees with a head.
	HeadSeq  uint64 `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	OK       bool   `json:"ok"`
	// FirstBad is the position (seq) of the first entry that does not match:
	// the entry there was changed, or another entry (or none) is where it
	// should be. 0 when OK, or when the problem is not one entry's (a head
	// file missing or unreadable).
	FirstBad uint64 `json:"first_bad,omitempty"`
	// Problem names what does not match and where (file and line).
	Problem string `json:"problem,omitempty"`
	// Note says what is fine but worth knowing: a torn last line that Open
	// will cut, a head behind the log, an ignored torn head slot.
	Note string `json:"note,omitempty"`
}

// Record is the report as the audit_verify record that ox-audit prints;
// source names what was verified.
func (r Report) Record(source string) proto.AuditVerify {
	return proto.AuditVerify{
		Type: proto.RecordAuditVerify, Source: source, OK: r.OK, Entries: r.Entries,
		HeadSeq: r.HeadSeq, HeadHash: r.HeadHash, FirstBad: r.FirstBad, Problem: r.Problem, Note: r.Note,
	}
}

// Verify recomputes the whole chain of the log in dir, offline, and checks
// its end against the head file. It names the first entry that does not
// match for a changed byte, a deleted, reordered or inserted entry, a seq
// gap, a removed or renamed segment, and a tail cut off after the head.
//
// What no check of dir alone can find: an attacker who rewrites an entry and
// re-hashes every entry after it produces a chain that links; only a head
// recorded before the rewrite shows it. The head file is that record against
// anyone who cannot also rewrite it; heads kept elsewhere (exports, commit
// trailers) hold against anyone. An incomplete last line (no newline) is
// not an error: it was never acknowledged, and Open cuts it.
//
// The error is for failures to read; tampering is reported in the Report.
func Verify(dir string) (Report, error) {
	return verifyDir(dir, nil)
}

// VerifyFile verifies an export: entries from seq 1, each linked to the one
// before, then a head line naming the last entry. A missing head line means
// the export was cut short.
func VerifyFile(r io.Reader) (Report, error) {
	v := &verifier{stream: true}
	src := source{name: "line", open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }, last: true}
	return v.run([]source{src})
}

// verifyDir verifies dir against its head file, or, when limit is set,
// against that head only and no further (a live log).
func verifyDir(dir string, limit *headRec) (Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Report{}, err
	}
	if !st.IsDir() {
		return Report{}, fmt.Errorf("%s: not a directory", dir)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return Report{Problem: err.Error()}, nil
	}
	v := &verifier{}
	var hs *headState
	if limit != nil {
		if limit.Seq == 0 {
			return Report{OK: true, HeadHash: string(zeroHex)}, nil
		}
		v.limit = limit.Seq
		v.wants = []uint64{limit.Seq}
	} else {
		var herr error
		hs, herr = readHead(dir)
		switch {
		case errors.Is(herr, errHeadMissing) && len(segs) == 0:
			return Report{OK: true, HeadHash: string(zeroHex), Note: "no audit log in " + dir}, nil
		case errors.Is(herr, errHeadMissing), errors.Is(herr, errHeadUnreadable):
			// Verify the chain anyway, to say as much as can be said.
			v.headErr = fmt.Errorf("%s: %v: a cut tail cannot be told from a short log", filepath.Join(dir, headName), herr)
		case herr != nil:
			return Report{}, herr
		default:
			for i, h := range hs.slots {
				if hs.valid[i] && h.Seq > 0 {
					v.wants = append(v.wants, h.Seq)
				}
			}
		}
	}
	srcs := make([]source, len(segs))
	for i, first := range segs {
		path := filepath.Join(dir, segName(first))
		srcs[i] = source{
			name:  segName(first),
			first: first,
			open:  func() (io.ReadCloser, error) { return os.Open(path) },
			last:  i == len(segs)-1,
		}
	}
	rep, err := v.run(srcs)
	if err != nil || !rep.OK {
		return rep, err
	}
	// The end of the log against the head.
	switch {
	case limit != nil:
		if rep.HeadSeq < limit.Seq {
			return failAfter(rep, rep.HeadSeq+1, "the log ends at entry %d, but its head is entry %d: entries were cut off", rep.HeadSeq, limit.Seq), nil
		}
		if got := v.found[limit.Seq]; got.hash != limit.Hash {
			return failAfter(rep, limit.Seq, "%s: entry %d has hash %s, but its head says %s: the log was rewritten", got.where, limit.Seq, got.hash, limit.Hash), nil
		}
		rep.Entries, rep.HeadSeq, rep.HeadHash = limit.Seq, limit.Seq, limit.Hash
	case v.headErr != nil:
		return failAfter(rep, 0, "%v", v.headErr), nil
	default:
		for i, h := range hs.slots {
			if !hs.valid[i] {
				continue
			}
			if h.Seq > rep.HeadSeq {
				return failAfter(rep, rep.HeadSeq+1, "the log ends at entry %d, but the head (slot %d) records entry %d: entries %d..%d were cut off", rep.HeadSeq, i, h.Seq, rep.HeadSeq+1, h.Seq), nil
			}
			if h.Seq == 0 {
				continue
			}
			if got := v.found[h.Seq]; got.hash != h.Hash {
				return failAfter(rep, h.Seq, "%s: entry %d has hash %s, but the head (slot %d) records %s: the log up to entry %d was rewritten and re-hashed, or the head was altered", got.where, h.Seq, got.hash, i, h.Hash, h.Seq), nil
			}
		}
		if n := hs.note(); n != "" {
			rep.Note = joinNotes(append(notesOf(rep.Note), n))
		}
		if h := hs.newest(); h.Seq < rep.HeadSeq {
			why := "normal after a crash"
			if inUse(dir) {
				// A daemon's log runs ahead of its head between syncs:
				// nothing crashed (issue 47).
				why = "a daemon runs on it and writes the head after the log; ox-audit verify checks the live log against its head"
			}
			rep.Note = joinNotes(append(notesOf(rep.Note), fmt.Sprintf("the head file is at entry %d, behind the log (%s; entries past it chain on)", h.Seq, why)))
		}
	}
	return rep, nil
}

func notesOf(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// failAfter turns a verified chain into a failed report: the chain was fine,
// its end was not.
func failAfter(rep Report, firstBad uint64, format string, a ...any) Report {
	rep.OK = false
	rep.FirstBad = firstBad
	rep.Problem = fmt.Sprintf(format, a...)
	return rep
}

// The engine. One goroutine reads the sources in blocks of whole lines,
// GOMAXPROCS workers hash the lines of a block and check the links inside
// it, and the caller's goroutine takes the blocks in order and checks the
// links between them. Memory stays at a few blocks however long the log.

// blockSize is how much a worker checks at a time (a variable so that tests
// can make blocks small and their boundaries many).
var blockSize = 4 << 20

type source struct {
	name  string // for messages: a segment's file name, or "line" for an export
	first uint64 // the seq a segment's name promises (0 for an export)
	open  func() (io.ReadCloser, error)
	last  bool
}

type foundHash struct {
	hash  string
	where string
}

type verifier struct {
	stream  bool     // an export: ends with a head line; no segment names
	limit   uint64   // stop after this entry (a live log); 0: read all
	wants   []uint64 // seqs whose hashes to note (the heads')
	found   map[uint64]foundHash
	headErr error

	ioErr error // set by the reader
}

type block struct {
	src   int
	data  []byte // whole lines
	buf   []byte // to return to the pool
	first bool   // first block of its source
	eof   bool   // last block of its source
	tail  int    // eof: bytes of a last line without newline, left out
	// tooLong: the source has a line over MaxLineBytes; reading stopped.
	tooLong bool
	res     blockResult
	done    chan struct{}
}

// Kinds of problem a line can have, in the order they are checked.
const (
	badMalformed = iota + 1
	badSeq
	badLink
	badHash
	badAfterHead
)

type blockResult struct {
	lines    int // lines looked at (all of them, or up to and including the bad one)
	n        int // entries that verified, before the bad line if any
	hasFirst bool
	firstSeq uint64
	first    [hexLen]byte // the first entry's prev
	lastSeq  uint64       // the last entry that verified (before the bad line)
	last     [hexLen]byte // its hash

	bad     int // a bad* kind, 0 if none
	badLine int // index of the bad line in the block
	badSeq  uint64
	badWhy  string

	head     bool // an export's head line was seen at line headLine
	headLine int
	headSeq  uint64
	headHash string

	found []noted
}

// noted is the hash of a wanted entry, and its line in the block.
type noted struct {
	seq  uint64
	line int
	hash string
}

func (v *verifier) run(srcs []source) (Report, error) {
	workers := runtime.GOMAXPROCS(0)
	nbuf := 2*workers + 2
	pool := make(chan []byte, nbuf)
	for range nbuf {
		pool <- nil
	}
	work := make(chan *block, nbuf)
	order := make(chan *block, nbuf)
	stop := make(chan struct{})

	go v.read(srcs, pool, work, order, stop)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for b := range work {
				scratch = v.check(b, scratch)
				close(b.done)
			}
		}()
	}
	rep := v.stitch(srcs, order, pool, stop)
	wg.Wait()
	if v.ioErr != nil {
		return Report{}, v.ioErr
	}
	return rep, nil
}

// read fills blocks with whole lines from each source in turn.
func (v *verifier) read(srcs []source, pool chan []byte, work, order chan<- *block, stop <-chan struct{}) {
	defer close(order)
	defer close(work)
	var rem []byte // a line begun at the end of the previous block
	for si, src := range srcs {
		rc, err := src.open()
		if err != nil {
			v.ioErr = err
			return
		}
		rem = rem[:0]
		first := true
		for {
			var buf []byte
			select {
			case buf = <-pool:
			case <-stop:
				rc.Close()
				return
			}
			if want := max(blockSize, 2*len(rem)); cap(buf) < want {
				buf = make([]byte, want)
			}
			buf = buf[:cap(buf)]
			n := copy(buf, rem)
			m, err := io.ReadFull(rc, buf[n:])
			n += m
			eof := err == io.EOF || err == io.ErrUnexpectedEOF
			if err != nil && !eof {
				rc.Close()
				v.ioErr = fmt.Errorf("%s: %w", src.name, err)
				return
			}
			data := buf[:n]
			cut := bytes.LastIndexByte(data, '\n') + 1
			if !eof && cut == 0 && n > MaxLineBytes {
				b := &block{src: si, first: first, tooLong: true, done: make(chan struct{})}
				close(b.done)
				select {
				case order <- b:
				case <-stop:
				}
				rc.Close()
				return
			}
			if !eof && cut == 0 {
				// One line fills the whole block: read on with a bigger one.
				rem = append(rem[:0], data...)
				pool <- buf
				continue
			}
			b := &block{src: si, buf: buf, first: first, eof: eof, done: make(chan struct{})}
			rem = append(rem[:0], data[cut:]...)
			if eof && v.stream && len(rem) > 0 {
				// An export's last line without newline is still read as a
				// line: if it is cut short, it will not parse.
				data = append(data, '\n')
				cut = len(data)
				rem = rem[:0]
			}
			b.data = data[:cut]
			if eof {
				b.tail = len(rem)
			}
			first = false
			select {
			case order <- b:
			case <-stop:
				rc.Close()
				return
			}
			work <- b
			if eof {
				break
			}
		}
		rc.Close()
	}
}

// check verifies the lines of one block by themselves: shape, hash, and the
// links between neighbours inside the block.
func (v *verifier) check(b *block, scratch []byte) []byte {
	r := &b.res
	data := b.data
	var (
		prevRaw [32]byte
		sum     [32]byte
		hexSum  [hexLen]byte
	)
	bad := func(kind int, seq uint64, why string) []byte {
		r.bad, r.badLine, r.badSeq, r.badWhy = kind, r.lines, seq, why
		r.lines++
		return scratch
	}
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		line := data[:nl]
		data = data[nl+1:]
		if r.head {
			return bad(badAfterHead, 0, "")
		}
		if v.stream && bytes.HasPrefix(line, []byte(headLinePrefix)) {
			seq, hash, ok := parseHeadLine(line)
			if !ok {
				return bad(badMalformed, 0, "not a well-formed head line")
			}
			r.head, r.headLine, r.headSeq, r.headHash = true, r.lines, seq, hash
			r.lines++
			continue
		}
		p, why := splitLine(line)
		if why != "" {
			return bad(badMalformed, 0, why)
		}
		if !decodeHex(&prevRaw, p.prev) {
			return bad(badMalformed, p.seq, "prev is not 64 lowercase hex digits")
		}
		if r.n == 0 {
			r.hasFirst = r.lines == 0
			r.firstSeq = p.seq
			copy(r.first[:], p.prev)
		} else {
			if p.seq != r.lastSeq+1 {
				return bad(badSeq, p.seq, "")
			}
			if !bytes.Equal(p.prev, r.last[:]) {
				return bad(badLink, p.seq, "")
			}
		}
		sum, scratch = hashLine(scratch, &prevRaw, p.body)
		hex.Encode(hexSum[:], sum[:])
		if !bytes.Equal(hexSum[:], p.hash) {
			return bad(badHash, p.seq, "")
		}
		for _, w := range v.wants {
			if w == p.seq {
				r.found = append(r.found, noted{p.seq, r.lines, string(hexSum[:])})
			}
		}
		r.lastSeq, r.last = p.seq, hexSum
		r.n++
		r.lines++
	}
	return scratch
}

// parseHeadLine reads {"type":"audit_head","seq":N,"hash":"<64 hex>"}.
func parseHeadLine(line []byte) (uint64, string, bool) {
	rest := line[len(headLinePrefix):]
	i := bytes.IndexByte(rest, ',')
	if i < 1 || (rest[0] == '0' && i > 1) {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	rest = rest[i:]
	const k = `,"hash":"`
	if len(rest) != len(k)+hexLen+2 || string(rest[:len(k)]) != k || string(rest[len(rest)-2:]) != `"}` {
		return 0, "", false
	}
	var x [32]byte
	hash := rest[len(k) : len(k)+hexLen]
	if !decodeHex(&x, hash) {
		return 0, "", false
	}
	return seq, string(hash), true
}

// stitch takes the checked blocks in order and links them: each block's
// first entry must follow the previous block's last.
func (v *verifier) stitch(srcs []source, order <-chan *block, pool chan<- []byte, stop chan struct{}) Report {
	var (
		rep      Report
		carry    uint64 // last verified entry
		carryH   = [hexLen]byte(zeroHex)
		lines    int // lines of the current source before this block
		entries  int // entries of the current source so far
		done     bool
		headSeen *blockResult
		headAt   string
		notes    []string
	)
	v.found = make(map[uint64]foundHash)
	where := func(src source, line int) string {
		if v.stream {
			return fmt.Sprintf("line %d", lines+line+1)
		}
		return fmt.Sprintf("%s:%d", src.name, lines+line+1)
	}
	finish := func() {
		if !done {
			done = true
			close(stop)
		}
	}
	fail := func(firstBad uint64, format string, a ...any) {
		rep.FirstBad, rep.Problem = firstBad, fmt.Sprintf(format, a...)
		finish()
	}
	for b := range order {
		<-b.done
		if done {
			pool <- b.buf
			continue
		}
		src := srcs[b.src]
		r := &b.res
		if b.first {
			lines, entries = 0, 0
			switch {
			case v.stream || src.first == carry+1:
			case src.first > carry+1:
				fail(carry+1, "%s: entries %d..%d are missing: no segment holds them (a segment file was removed?)", src.name, carry+1, src.first-1)
			default:
				fail(carry+1, "%s: the segment's name says it begins with entry %d, but entry %d is next", src.name, src.first, carry+1)
			}
		}
		switch {
		case done:
		case b.tooLong:
			fail(carry+1, "%s: a line longer than %d bytes", where(src, 0), MaxLineBytes)
		case headSeen != nil && r.lines > 0:
			fail(carry+1, "%s: a line after the head line (%s)", where(src, 0), headAt)
		case r.hasFirst && r.firstSeq != carry+1:
			// The block's first entry against the previous block's last.
			fail(carry+1, "%s: entry %d is expected, entry %d is here (an entry was deleted, reordered or inserted)", where(src, 0), carry+1, r.firstSeq)
		case r.hasFirst && r.first != carryH:
			fail(carry+1, "%s: entry %d: prev does not match the hash of entry %d (an entry was removed, reordered or forged)", where(src, 0), r.firstSeq, carry)
		}
		if !done && r.n > 0 {
			carry, carryH = r.lastSeq, r.last
			entries += r.n
			for _, f := range r.found {
				v.found[f.seq] = foundHash{hash: f.hash, where: where(src, f.line)}
			}
		}
		if !done && r.bad != 0 {
			pos := carry + 1
			at := where(src, r.badLine)
			switch {
			case v.limit > 0 && pos > v.limit:
				finish()
			case r.bad == badMalformed:
				fail(pos, "%s: entry %d: %s", at, pos, r.badWhy)
			case r.bad == badSeq:
				fail(pos, "%s: entry %d is expected, entry %d is here (an entry was deleted, reordered or inserted)", at, pos, r.badSeq)
			case r.bad == badLink:
				fail(pos, "%s: entry %d: prev does not match the hash of entry %d (an entry was removed, reordered or forged)", at, r.badSeq, pos-1)
			case r.bad == badHash:
				fail(pos, "%s: entry %d: the hash does not match the entry's bytes (the line was changed)", at, r.badSeq)
			default:
				fail(pos, "%s: a line after the head line", at)
			}
		}
		if !done {
			if r.head {
				headSeen = r
				headAt = where(src, r.headLine)
			}
			lines += r.lines
			if b.eof {
				switch {
				case b.tail > 0 && src.last:
					notes = append(notes, fmt.Sprintf("%s: an incomplete last line (%d bytes) was not checked: a write in progress, or a torn tail that Open will cut", where(src, 0), b.tail))
				case b.tail > 0:
					fail(carry+1, "%s: the segment ends in an incomplete line, but the next segment has begun", where(src, 0))
				case entries == 0 && !src.last && !v.stream:
					fail(src.first, "%s: the segment is empty, but the next segment has begun", src.name)
				}
			}
			if v.limit > 0 && carry >= v.limit {
				finish()
			}
		}
		pool <- b.buf
	}
	// carry is the last entry up to which the chain links.
	rep.OK = rep.Problem == ""
	rep.Entries, rep.HeadSeq, rep.HeadHash = carry, carry, string(carryH[:])
	if rep.OK && v.stream {
		switch {
		case headSeen == nil:
			rep.FirstBad, rep.Problem = carry+1, fmt.Sprintf("no head line after entry %d: the export was cut short", carry)
		case headSeen.headSeq > carry:
			rep.FirstBad, rep.Problem = carry+1, fmt.Sprintf("%s: the head line records entry %d, but the export ends at entry %d: entries were cut off", headAt, headSeen.headSeq, carry)
		case headSeen.headSeq < carry:
			rep.FirstBad, rep.Problem = headSeen.headSeq+1, fmt.Sprintf("%s: the head line records entry %d, but entries run to %d", headAt, headSeen.headSeq, carry)
		case headSeen.headHash != string(carryH[:]):
			rep.FirstBad, rep.Problem = carry, fmt.Sprintf("%s: the head line records hash %s for entry %d, the entry has %s: the export was rewritten and re-hashed, or its head line altered", headAt, headSeen.headHash, carry, carryH[:])
		}
		rep.OK = rep.Problem == ""
	}
	rep.Note = joinNotes(notes)
	return rep
}

// inUse reports whether a Log holds dir open: its head file is flock'ed.
func inUse(dir string) bool {
	f, err := os.Open(filepath.Join(dir, headName))
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}
