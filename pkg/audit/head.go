package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/durable"
)

// The head file records the last durable entry so that a log cut short, or
// rewritten from some entry onwards, no longer matches it.
//
// Why two slots and no fsync: the head is rewritten after every Sync, and an
// fsync there would double the cost of every commit. It does not need one:
//
//   - The head is written only after the fdatasync of the entries it names,
//     so whatever version of it survives a crash names entries that are
//     durable. A head BEHIND the log is normal after a power loss (the write
//     stayed in the page cache); Open and Verify check that the entries past
//     it chain on from it. A log SHORTER than the head, or an entry at the
//     head's seq with another hash, is truncation or rewriting, and is
//     reported.
//   - The file has two fixed-size slots, written alternately with one pwrite
//     each, never the slot holding the newest valid head. A crash can tear
//     only the slot being written; the other still holds the head before it,
//     which the log covers. Each slot carries a checksum of its own bytes, so
//     a torn slot is recognised and ignored, and the newest valid slot wins.
//   - Both slots unreadable, or the file missing while segments exist, cannot
//     come from a crash (the file is created and fsynced with two valid
//     slots before the first segment exists), so it is reported as tampering:
//     without a head, a cut tail could not be told apart from a short log.
//
// A slot is one JSON line, padded with spaces, readable with cat:
//
//	{"seq":7,"hash":"<64 hex>","seg":1,"off":2745,"sum":"<16 hex>"}
//
// seg and off locate the entry (its segment's first seq and the offset just
// past its newline), so Open finds it without reading the log from the start.
// sum is the first 8 bytes of BLAKE3 of the slot's bytes before ,"sum":".
const (
	headName     = "head"
	headSlotSize = 256
	headSlots    = 2
)

// headRec is what one slot says.
type headRec struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	Seg  uint64 `json:"seg"`
	Off  int64  `json:"off"`
}

var (
	errHeadMissing    = errors.New("head file is missing")
	errHeadUnreadable = errors.New("no valid slot in the head file")
)

func emptyHead() headRec { return headRec{Hash: string(zeroHex), Seg: 1} }

// encode renders h as one slot.
func (h headRec) encode() []byte {
	b := make([]byte, 0, headSlotSize)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, h.Seq, 10)
	b = append(b, `,"hash":"`...)
	b = append(b, h.Hash...)
	b = append(b, `","seg":`...)
	b = strconv.AppendUint(b, h.Seg, 10)
	b = append(b, `,"off":`...)
	b = strconv.AppendInt(b, h.Off, 10)
	sum := blake3.Sum256(b)
	b = append(b, `,"sum":"`...)
	b = hex.AppendEncode(b, sum[:8])
	b = append(b, `"}`...)
	for len(b) < headSlotSize-1 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// decodeSlot reads one slot, refusing a torn or altered one.
func decodeSlot(b []byte) (headRec, error) {
	var h headRec
	if len(b) != headSlotSize || b[headSlotSize-1] != '\n' {
		return h, errors.New("slot does not end in a newline (torn write?)")
	}
	i := bytes.Index(b, []byte(`,"sum":"`))
	if i < 0 || len(b) < i+8+16 {
		return h, errors.New("slot has no checksum")
	}
	sum := blake3.Sum256(b[:i])
	if want := hex.EncodeToString(sum[:8]); string(b[i+8:i+8+16]) != want {
		return h, errors.New("slot checksum does not match (torn write?)")
	}
	var raw struct {
		headRec
		Sum string `json:"sum"`
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimRight(b, " \n")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return h, fmt.Errorf("slot is not valid JSON: %v", err)
	}
	h = raw.headRec
	var x [32]byte
	if !decodeHex(&x, []byte(h.Hash)) || h.Seg == 0 || h.Off < 0 || (h.Seq > 0 && h.Seg > h.Seq) {
		return h, errors.New("slot has impossible values")
	}
	return h, nil
}

// headState is what the head file holds.
type headState struct {
	slots [headSlots]headRec
	valid [headSlots]bool
	bad   [headSlots]string // why a slot is invalid
	best  int               // index of the newest valid slot
}

// newest is the head to trust.
func (s *headState) newest() headRec { return s.slots[s.best] }

// note says what was unusual about the file, or "".
func (s *headState) note() string {
	for i := range s.slots {
		if !s.valid[i] {
			return fmt.Sprintf("head slot %d ignored (%s); slot %d used", i, s.bad[i], s.best)
		}
	}
	return ""
}

// readHead reads and decodes the head file of dir.
func readHead(dir string) (*headState, error) {
	b, err := os.ReadFile(dir + "/" + headName)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errHeadMissing
	}
	if err != nil {
		return nil, err
	}
	return parseHead(b)
}

func parseHead(b []byte) (*headState, error) {
	s := &headState{best: -1}
	for i := range s.slots {
		lo := i * headSlotSize
		if len(b) < lo+headSlotSize {
			s.bad[i] = "slot is short"
			continue
		}
		h, err := decodeSlot(b[lo : lo+headSlotSize])
		if err != nil {
			s.bad[i] = err.Error()
			continue
		}
		s.slots[i], s.valid[i] = h, true
		if s.best < 0 || h.Seq > s.slots[s.best].Seq {
			s.best = i
		}
	}
	if s.best < 0 {
		return nil, fmt.Errorf("%w (slot 0: %s; slot 1: %s)", errHeadUnreadable, s.bad[0], s.bad[1])
	}
	return s, nil
}

// createHead writes a new head file with both slots empty and makes it and
// its directory entry durable, before any segment exists.
func createHead(dir string) error {
	one := emptyHead().encode()
	f, err := os.OpenFile(dir+"/"+headName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(one, one...))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.SyncDir(dir)
	}
	return err
}
