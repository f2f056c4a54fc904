package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The journal is the durability point of the store. A batch of changes is
// appended as records and made durable with one fdatasync; only then are the
// changes visible and acknowledged. The files of the work tree are written
// afterwards by the applier and are made durable together by a checkpoint
// (syncfs), after which the journal is emptied.
//
// Record: len u32 | crc32c(payload) u32 | payload
// Payload: kind u8 | ver u64 | mod unix-nanos i64 | agent (u16 len) | key (u16 len) | value (u32 len)
//
// A torn tail (a crash in the middle of a write) fails its length or CRC;
// replay stops there and cuts it off. Records before it were written by
// earlier batches whose fdatasync completed, so nothing acknowledged is cut.

const (
	recSave   = 1
	recDelete = 2

	recHeader = 8
	// payloadFixed is the payload size without the variable parts.
	payloadFixed = 1 + 8 + 8 + 2 + 2 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type record struct {
	kind  byte
	ver   uint64
	mod   time.Time
	agent string
	key   string
	value []byte
}

type journal struct {
	f    *os.File
	w    *bufio.Writer
	size int64 // bytes durable or being written
	hdr  []byte
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &journal{f: f, w: bufio.NewWriterSize(f, 256<<10), size: fi.Size()}, nil
}

// appendRecord writes r into the journal's buffer; flush writes it out.
func (j *journal) appendRecord(r *record) error {
	n := payloadFixed + len(r.agent) + len(r.key) + len(r.value)
	h := j.hdr[:0]
	h = binary.LittleEndian.AppendUint32(h, uint32(n))
	h = binary.LittleEndian.AppendUint32(h, 0) // crc, filled below
	h = append(h, r.kind)
	h = binary.LittleEndian.AppendUint64(h, r.ver)
	h = binary.LittleEndian.AppendUint64(h, uint64(r.mod.UnixNano()))
	h = binary.LittleEndian.AppendUint16(h, uint16(len(r.agent)))
	h = append(h, r.agent...)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(r.key)))
	h = append(h, r.key...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(r.value)))
	crc := crc32.Update(crc32.Checksum(h[recHeader:], castagnoli), castagnoli, r.value)
	binary.LittleEndian.PutUint32(h[4:], crc)
	j.hdr = h
	if _, err := j.w.Write(h); err != nil {
		return err
	}
	if _, err := j.w.Write(r.value); err != nil {
		return err
	}
	j.size += int64(len(h) + len(r.value))
	return nil
}

func (j *journal) flush() error { return j.w.Flush() }

func (j *journal) sync() error { return unix.Fdatasync(int(j.f.Fd())) }

// truncate cuts the journal back to size (0 after a checkpoint, or the
// start of a batch that failed) and makes the cut durable.
func (j *journal) truncate(size int64) error {
	j.w.Reset(j.f)
	if err := j.f.Truncate(size); err != nil {
		return err
	}
	j.size = size
	return j.sync()
}

func (j *journal) close() error { return j.f.Close() }

// replay reads every intact record in order. It returns the offset of the
// end of the last intact record; anything after it is a torn tail.
func (j *journal) replay(fn func(*record) error) (good int64, err error) {
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(j.f, 1<<20)
	var hdr [recHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return good, nil // clean end or torn header
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n < payloadFixed || n > 1<<31 {
			return good, nil
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return good, nil
		}
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return good, nil
		}
		rec, derr := decodeRecord(p)
		if derr != nil {
			return good, nil
		}
		if err := fn(rec); err != nil {
			return good, err
		}
		good += int64(recHeader) + int64(n)
	}
}

var errShortRecord = errors.New("journal: short record")

func decodeRecord(p []byte) (*record, error) {
	rec := &record{kind: p[0], ver: binary.LittleEndian.Uint64(p[1:]),
		mod: time.Unix(0, int64(binary.LittleEndian.Uint64(p[9:]))).UTC()}
	if rec.kind != recSave && rec.kind != recDelete {
		return nil, fmt.Errorf("journal: unknown record kind %d", rec.kind)
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
	if !ok1 || !ok2 || !ok3 || len(p) != 0 {
		return nil, errShortRecord
	}
	rec.agent, rec.key, rec.value = string(agent), string(key), value
	return rec, nil
}
