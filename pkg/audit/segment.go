package audit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	segPrefix = "seg-"
	segSuffix = ".jsonl"
	segDigits = 16
)

// segName is the file name of the segment whose first entry is first.
func segName(first uint64) string {
	return fmt.Sprintf("%s%0*d%s", segPrefix, segDigits, first, segSuffix)
}

// listSegments returns the first seqs of the segments in dir, ascending.
// A file that looks like a segment but is misnamed is an error: it cannot
// be placed in the chain.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) || e.IsDir() {
			continue
		}
		num, ok := strings.CutSuffix(strings.TrimPrefix(name, segPrefix), segSuffix)
		first, err := strconv.ParseUint(num, 10, 64)
		if !ok || err != nil || len(num) != segDigits || first == 0 {
			return nil, fmt.Errorf("%s: not a segment name (want %s)", filepath.Join(dir, name), segName(1))
		}
		segs = append(segs, first)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	return segs, nil
}

var errLineTooLong = fmt.Errorf("a line longer than %d bytes", MaxLineBytes)

// lineReader reads the lines of a file from an offset.
type lineReader struct {
	r   *bufio.Reader
	acc []byte
	off int64 // offset of the next line
}

func newLineReader(r io.Reader, off int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 256<<10), off: off}
}

// next returns the next line without its newline and the offset where it
// starts. At the end of the file, a last line without a newline comes back
// with complete false; after it, next returns io.EOF. A line longer than
// MaxLineBytes is errLineTooLong. The line is valid until the following call.
func (lr *lineReader) next() (line []byte, start int64, complete bool, err error) {
	start = lr.off
	lr.acc = lr.acc[:0]
	for {
		b, err := lr.r.ReadSlice('\n')
		switch err {
		case nil:
			lr.off += int64(len(b))
			if len(lr.acc) > 0 {
				lr.acc = append(lr.acc, b...)
				b = lr.acc
			}
			return b[:len(b)-1], start, true, nil
		case bufio.ErrBufferFull:
			lr.off += int64(len(b))
			lr.acc = append(lr.acc, b...)
			if len(lr.acc) > MaxLineBytes {
				return nil, start, false, errLineTooLong
			}
		case io.EOF:
			lr.off += int64(len(b))
			lr.acc = append(lr.acc, b...)
			if len(lr.acc) == 0 {
				return nil, start, false, io.EOF
			}
			return lr.acc, start, false, nil
		default:
			return nil, start, false, err
		}
	}
}
