package audit

import (
	"encoding/hex"
	"fmt"
)

// Link is one entry line of a run of consecutive lines that Links checked:
// its seq and its hash (hex).
type Link struct {
	Seq  uint64
	Hash string
}

// Links checks that lines, entry lines as the log holds them (no
// newline), are consecutive entries of one chain, starting anywhere: each
// line's hash is the hash of its bytes and of the hash it names as prev,
// and each names the line before it as prev. It returns the links, or
// the index of the first line that does not hold and why (a changed byte,
// an entry dropped, inserted or reordered). A receipt's entries are
// checked so (package receipt): bound to a head kept elsewhere, they are
// the log's.
func Links(lines [][]byte) ([]Link, int, string) {
	out := make([]Link, 0, len(lines))
	var scratch []byte
	var seq uint64
	var hash [32]byte
	for i, line := range lines {
		if i > 0 {
			var p lineParts
			var why string
			p, hash, why, scratch = follows(line, seq, hash, scratch)
			if why != "" {
				return out, i, why
			}
			seq = p.seq
		} else {
			p, why := splitLine(line)
			if why != "" {
				return out, i, why
			}
			var prev [32]byte
			if !decodeHex(&prev, p.prev) {
				return out, i, fmt.Sprintf("entry %d: prev is not a hash", p.seq)
			}
			var sum [32]byte
			sum, scratch = hashLine(scratch, &prev, p.body)
			var want [hexLen]byte
			hex.Encode(want[:], sum[:])
			if string(want[:]) != string(p.hash) {
				return out, i, fmt.Sprintf("entry %d does not match its hash", p.seq)
			}
			seq, hash = p.seq, sum
		}
		out = append(out, Link{Seq: seq, Hash: hex.EncodeToString(hash[:])})
	}
	return out, -1, ""
}
