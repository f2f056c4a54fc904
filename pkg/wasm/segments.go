package wasm

import (
	"encoding/binary"
	"errors"
	"sort"
)

// coalesceGap is the longest run of zeros merged into a data segment.
const coalesceGap = 4096

// coalesceData returns bin with its active data segments merged where
// they are apart by at most coalesceGap bytes, the gaps filled with
// zeros (what the memory holds there anyway). Go's linker cuts a
// module's data at every run of zeros, into some 40,000 segments for a
// small tool; instantiating applies each, which cost about 2 ms of every
// call. A module it does not understand (segments that are passive,
// overlapping, or with another offset expression; a data count section)
// is returned as it is.
func coalesceData(bin []byte) []byte {
	if len(bin) < 8 || string(bin[:4]) != "\x00asm" {
		return bin
	}
	var dataStart, dataEnd int
	for i := 8; i < len(bin); {
		id := bin[i]
		n, j, err := uleb(bin, i+1)
		if err != nil || j+int(n) > len(bin) {
			return bin
		}
		switch id {
		case 11:
			dataStart, dataEnd = i, j+int(n)
		case 12: // data count: would have to match
			return bin
		}
		i = j + int(n)
	}
	if dataStart == 0 {
		return bin
	}
	type seg struct {
		off  uint32
		data []byte
	}
	_, p, _ := uleb(bin, dataStart+1)
	count, p, err := uleb(bin, p)
	if err != nil {
		return bin
	}
	segs := make([]seg, 0, count)
	for k := uint64(0); k < count; k++ {
		flags, q, err := uleb(bin, p)
		if err != nil || flags != 0 || q >= dataEnd || bin[q] != 0x41 { // active, memory 0, i32.const
			return bin
		}
		off, q, err := sleb32(bin, q+1)
		if err != nil || q >= dataEnd || bin[q] != 0x0b || off < 0 {
			return bin
		}
		size, q, err := uleb(bin, q+1)
		if err != nil || q+int(size) > dataEnd {
			return bin
		}
		segs = append(segs, seg{off: uint32(off), data: bin[q : q+int(size)]})
		p = q + int(size)
	}
	if p != dataEnd {
		return bin
	}
	// Disjoint segments may be applied in any order: sort them by offset
	// (Go's come in runs), and give up on any that overlap.
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].off < segs[j].off })
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i].off) < uint64(segs[i-1].off)+uint64(len(segs[i-1].data)) {
			return bin
		}
	}
	// Each merged segment's bytes are appended to one buffer: merging
	// in place would copy a segment once per piece added to it.
	var merged []seg
	var buf []byte
	for _, s := range segs {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			end := uint64(last.off) + uint64(len(last.data))
			if gap := uint64(s.off) - end; gap <= coalesceGap {
				start := len(buf) - len(last.data)
				buf = append(buf, make([]byte, gap)...)
				buf = append(buf, s.data...)
				last.data = buf[start:]
				continue
			}
		}
		start := len(buf)
		buf = append(buf, s.data...)
		merged = append(merged, seg{s.off, buf[start:]})
	}
	var body []byte
	body = binary.AppendUvarint(body, uint64(len(merged)))
	for _, s := range merged {
		body = append(body, 0, 0x41)
		body = appendSleb(body, int64(int32(s.off)))
		body = append(body, 0x0b)
		body = binary.AppendUvarint(body, uint64(len(s.data)))
		body = append(body, s.data...)
	}
	out := make([]byte, 0, len(bin))
	out = append(out, bin[:dataStart]...)
	out = append(out, 11)
	out = binary.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	return append(out, bin[dataEnd:]...)
}

var errLEB = errors.New("bad LEB128")

func uleb(b []byte, i int) (uint64, int, error) {
	var v uint64
	for s := uint(0); s < 64; s += 7 {
		if i >= len(b) {
			return 0, i, errLEB
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << s
		if c&0x80 == 0 {
			return v, i, nil
		}
	}
	return 0, i, errLEB
}

func sleb32(b []byte, i int) (int32, int, error) {
	var v int64
	var s uint
	for {
		if i >= len(b) || s > 35 {
			return 0, i, errLEB
		}
		c := b[i]
		i++
		v |= int64(c&0x7f) << s
		s += 7
		if c&0x80 == 0 {
			if s < 64 && c&0x40 != 0 {
				v |= -1 << s
			}
			return int32(v), i, nil
		}
	}
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
