package audit

import (
	"bytes"
	"strings"
	"testing"
)

// TestLinks: consecutive lines from the middle of the log link; a
// changed byte, a dropped or a swapped line do not, and the first line
// that does not hold is named.
func TestLinks(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, Options{})
	appendSync(t, l, 10, 3)
	var lines [][]byte
	if err := l.ScanLines(4, func(line []byte) error { lines = append(lines, bytes.Clone(line)); return nil }); err != nil {
		t.Fatal(err)
	}
	l.Close()
	links, bad, why := Links(lines)
	if bad >= 0 || len(links) != 7 || links[0].Seq != 4 || links[6].Seq != 10 {
		t.Fatalf("intact: %v %d %s", links, bad, why)
	}
	seq, hash := l.Head()
	if links[6].Seq != seq || links[6].Hash != hash {
		t.Errorf("last link %v, head %d %s", links[6], seq, hash)
	}
	changed := append([][]byte(nil), lines...)
	changed[3] = []byte(strings.Replace(string(lines[3]), `"result":"ok"`, `"result":"no"`, 1))
	dropped := append(append([][]byte(nil), lines[:3]...), lines[4:]...)
	swapped := append([][]byte(nil), lines...)
	swapped[2], swapped[3] = swapped[3], swapped[2]
	for name, c := range map[string]struct {
		lines [][]byte
		bad   int
	}{"changed": {changed, 3}, "dropped": {dropped, 3}, "swapped": {swapped, 2}} {
		if _, bad, why := Links(c.lines); bad != c.bad || why == "" {
			t.Errorf("%s: first bad %d (%s), want %d", name, bad, why, c.bad)
		}
	}
}
